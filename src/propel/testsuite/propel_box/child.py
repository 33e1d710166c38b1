"""A graded child process as an in-sandbox runner drives it: a fresh interpreter (never forked from the runner, so
nothing of the runner's memory, tests and expected values included, is in it) answering one request per line.

The child gets its configuration as its first stdin line and answers on a pipe of its own (fd ``config["fd"]``),
one JSON record per line: audit findings (kept as they come), its start record (the Landlock ABI it confined itself
with), then one answer per request, in order. Everything it sends is untrusted: a record that is not a JSON object,
an answer out of order, too much output or a dead process ends the child (``Gone``), and the runner decides what
that costs.
"""

import contextlib
import json
import os
import select
import subprocess
import sys
import time

from propel_box import confine, wait

MAX_LINE = 8 << 20


class Gone(Exception):
    """The graded process died, broke the protocol or closed its answers."""


class Child:
    """One graded process and its pipes."""

    def __init__(self, script, ws, tmp, out_path, config, limits, max_processes=0, env=None, hash_seed=None):
        read_fd, write_fd = os.pipe()
        out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

        def setup():
            os.setsid()
            confine.apply_limits(limits, max_processes)

        # -I (isolated) ignores PYTHONHASHSEED; a fixed seed runs with the same isolation spelt out (no user site, no
        # PYTHON* variable but the seed: the environment below is the whole of it)
        flags = ["-I", "-S", "-B"] if hash_seed is None else ["-s", "-S", "-B"]
        seed = {} if hash_seed is None else {"PYTHONHASHSEED": str(int(hash_seed))}
        self.proc = subprocess.Popen(
            [sys.executable, *flags, os.path.join(os.getcwd(), "propel_box", script)],
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=out,
            pass_fds=(write_fd,),
            preexec_fn=setup,
            cwd=ws,
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", **(env or {}), **seed},
        )
        os.close(write_fd)
        os.close(out)
        self.fd, self.buffer, self.audit, self.landlock = read_fd, b"", [], 0
        self._send({"box": os.getcwd(), "ws": ws, "tmp": tmp, "fd": write_fd, **config})

    def _send(self, record):
        try:
            self.proc.stdin.write((json.dumps(record) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            raise Gone(f"the graded process is gone ({e})") from e

    def read(self, deadline):
        """The next record that is not an audit finding (those are kept), or raise ``Gone``/``TimeoutError``."""
        while True:
            while b"\n" not in self.buffer:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                ready, _, _ = select.select([self.fd], [], [], left)
                if not ready:
                    continue
                chunk = os.read(self.fd, 1 << 16)
                if not chunk:
                    raise Gone(self.ended())
                self.buffer += chunk
                if len(self.buffer) > MAX_LINE:
                    raise Gone("the graded process sent more than the size limit")
            line, _, self.buffer = self.buffer.partition(b"\n")
            try:
                record = json.loads(line)
            except ValueError:
                raise Gone("the graded process broke the protocol") from None
            if not isinstance(record, dict):
                raise Gone("the graded process broke the protocol")
            if "audit" in record:
                self.audit.append([str(x)[:300] for x in record["audit"]][:4])
            elif "start" in record:
                self.landlock = int(record["start"]) if isinstance(record["start"], int) else 0
            else:
                return record

    def call(self, ident, request, deadline):
        """Send ``request`` (a JSON object) as call ``ident`` and read its answer by ``deadline``."""
        self._send({"id": ident, **request})
        record = self.read(deadline)
        if record.get("id") != ident:
            raise Gone("the graded process answered out of order")
        return record

    def ended(self):
        try:
            code = self.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return "the graded process closed its answers"
        if code < 0:
            return f"the graded process was killed by signal {-code}"
        return f"the graded process exited with status {code}"

    def close(self):
        wait.kill_session(self.proc.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=2.0)
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        try:
            self.drain()
        finally:
            os.close(self.fd)

    def drain(self):
        """Audit findings still in the pipe after the child ended."""
        while True:
            ready, _, _ = select.select([self.fd], [], [], 0)
            if not ready:
                break
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                break
            self.buffer += chunk
        for line in self.buffer.split(b"\n"):
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and "audit" in record:
                self.audit.append([str(x)[:300] for x in record["audit"]][:4])
        self.buffer = b""
