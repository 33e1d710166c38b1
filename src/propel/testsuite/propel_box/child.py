"""A graded child process as an in-sandbox runner drives it: a fresh interpreter (never forked from the runner, so
nothing of the runner's memory, tests and expected values included, is in it) answering one request per line.

The child is started as a user would start it (``graded_start``: ``python3 -c BOOT`` in its workspace, the job's own
environment and limits, a process group of its own) and gets its loader as its first stdin line. It answers on
stdout, one record per line framed by a nonce (whatever graded code prints around the frames is its output, kept in
the capped output file): audit findings (kept as they come), its start record (the Landlock ABI it confined itself
with), then one answer per request, in order. Everything it sends is untrusted: a record that is not a JSON object,
an answer out of order, too much output or a dead process ends the child (``Gone``), and the runner decides what
that costs. What a child left running when it ends is killed before the next one starts (this runner is their
subreaper).
"""

import contextlib
import ctypes
import json
import os
import secrets
import select
import subprocess
import sys
import time

from propel_box import processes, wait
from propel_box.graded_start import BOOT, loader

MAX_LINE = 8 << 20
MAX_OUTPUT = 1 << 20
"""Bytes of a child's own output kept in its output file (the rest is read and dropped)."""


class Gone(Exception):
    """The graded process died, broke the protocol or closed its answers."""


def _subreaper():
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: a child's orphans come back here


class Child:
    """One graded process and its pipes. The child has its job's own limits, as any program the job starts has (a
    limit of the grader's own would show), so ``limits`` (the runner's time budget) and ``max_processes`` set nothing
    here; ``env`` adds variables (a source layout's ``PYTHONPATH``); ``hash_seed`` fixes the string-hash seed (taken
    out of the child's environment before graded code runs)."""

    def __init__(self, script, ws, tmp, out_path, config, limits, max_processes=None, env=None, hash_seed=None):
        _subreaper()
        self.nonce = secrets.token_hex(16)
        environment = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
        environment.update(env or {}, PWD=ws)  # the job's own environment, in the workspace as a shell's cd leaves it
        if hash_seed is not None:
            environment["PYTHONHASHSEED"] = str(int(hash_seed))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", BOOT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            process_group=0,
            cwd=ws,
            env=environment,
        )
        self.fd, self.buffer, self.audit, self.landlock = self.proc.stdout.fileno(), b"", [], 0
        self.out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.written = 0
        config = {"box": os.getcwd(), "ws": ws, "tmp": tmp, "nonce": self.nonce, **config}
        self._write(loader(os.getcwd(), script.removesuffix(".py"), config))

    def _write(self, text):
        try:
            self.proc.stdin.write(text.encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            raise Gone(f"the graded process is gone ({e})") from e

    def _send(self, record):
        self._write(json.dumps(record) + "\n")

    def _output(self, data):
        """The child's own output (not a frame), into its capped output file."""
        keep = data[: max(0, MAX_OUTPUT - self.written)]
        if keep:
            with contextlib.suppress(OSError):
                os.write(self.out, keep)
            self.written += len(keep)

    def _frame(self):
        """The next framed record in the buffer (its output before it written out), or None when none is whole."""
        mark = self.nonce.encode()
        at = self.buffer.find(mark)
        if at < 0:
            cut = max(0, len(self.buffer) - len(mark))
            self._output(self.buffer[:cut])
            self.buffer = self.buffer[cut:]
            return None
        end = self.buffer.find(b"\n", at)
        if end < 0:
            if len(self.buffer) - at > MAX_LINE:
                raise Gone("the graded process sent more than the size limit")
            self._output(self.buffer[:at].removesuffix(b"\n"))
            self.buffer = self.buffer[at:]
            return None
        self._output(self.buffer[:at].removesuffix(b"\n"))
        line, self.buffer = self.buffer[at + len(mark) : end], self.buffer[end + 1 :]
        try:
            record = json.loads(line)
        except ValueError:
            raise Gone("the graded process broke the protocol") from None
        if not isinstance(record, dict):
            raise Gone("the graded process broke the protocol")
        return record

    def read(self, deadline):
        """The next record that is not an audit finding (those are kept), or raise ``Gone``/``TimeoutError``."""
        while True:
            record = self._frame()
            while record is None:
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
                record = self._frame()
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
        processes.kill_tree(os.getpid(), reap=True)  # what it started in a session of its own, before the next one
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        try:
            self.drain()
        finally:
            self.proc.stdout.close()
            os.close(self.out)

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
        with contextlib.suppress(Gone):
            while (record := self._frame()) is not None:
                if "audit" in record:
                    self.audit.append([str(x)[:300] for x in record["audit"]][:4])
        self._output(self.buffer)
        self.buffer = b""
