"""The in-sandbox runner of a repo's suite (``main.py`` of one sandbox job; standard library + the vendored test zip).

The job holds the clean checkout under ``repo/`` (read into memory, then deleted) and, in ``payload.json``, a list
of variants (files to overwrite or delete). For each variant, one after another: write the checkout into a fresh
folder with an unguessable name, apply the variant, fork a child that runs pytest on the profile's test paths with
the JUnit XML report going to a second unguessable folder, wait for it under a wall-clock limit, kill its session,
read the report and delete both folders. pytest is imported once here, before the first fork; the repo's code only
ever runs in a child. This process is made non-dumpable, and reads the frame token from stdin only after the last
child is gone, so the code under test cannot forge the framed result line.
"""

import base64
import contextlib
import ctypes
import json
import os
import pkgutil
import resource
import secrets
import select
import shutil
import signal
import sys
import time

ZIP = "propel_testlib.zip"
MAX_REPORT = 2_000_000
MAX_TAIL = 2_000


def _child(ws, tmp, report, out_path, payload):
    import pytest

    try:
        os.setsid()
        fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.closerange(3, 4096)
        limits = payload["limits"]
        resource.setrlimit(resource.RLIMIT_AS, (limits["memory_mb"] << 20,) * 2)
        cpu = int(limits["timeout_s"]) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
        os.chdir(ws)
        sys.path[:0] = [os.path.join(ws, p) for p in payload["python_path"]]
        os.environ.update(HOME=tmp, TMPDIR=tmp)
    except BaseException:
        os._exit(121)
    code = 3
    try:
        args = ["-q", "-p", "no:cacheprovider", "-o", "addopts=", "--rootdir", ws, "--junitxml", report]
        code = pytest.main([*args, *payload["pytest_args"], *payload["test_paths"]])
    except BaseException:
        pass
    sys.stdout.flush()
    os._exit(int(code) & 0xFF)


def _wait(pid, timeout_s):
    """(status, timed_out) of the child, killed with its session after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    timed_out = False
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
                with contextlib.suppress(OSError):
                    target()
            _, status = os.waitpid(pid, 0)
            break
        if pidfd is not None:
            select.select([pidfd], [], [], left)
        else:
            time.sleep(min(left, 0.005))
    if pidfd is not None:
        os.close(pidfd)
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    return status, timed_out


def _apply(ws, variant):
    for name, data in variant.items():
        path = os.path.join(ws, name)
        if data is None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))


def _read(path, cap):
    try:
        with open(path, "rb") as f:
            return f.read(cap)
    except OSError:
        return None


def _load(folder):
    """The checkout's files in memory (a child cannot change what the next variant starts from); the folder goes."""
    files = {}
    for parent, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(parent, name)
            with open(path, "rb") as f:
                files[os.path.relpath(path, folder)] = f.read()
    shutil.rmtree(folder)
    return files


def _write(ws, files):
    for name, data in files.items():
        path = os.path.join(ws, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)


def _run_one(base, clean, variant, payload):
    root = os.path.join(base, secrets.token_hex(8))
    ws, reports, tmp = (os.path.join(root, secrets.token_hex(8)) for _ in range(3))
    for folder in (ws, reports, tmp):
        os.makedirs(folder)
    _write(ws, clean)
    _apply(ws, variant)
    report, out_path = os.path.join(reports, "junit.xml"), os.path.join(reports, "output.txt")
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _child(ws, tmp, report, out_path, payload)
    status, timed_out = _wait(pid, payload["limits"]["timeout_s"])
    raw = _read(report, MAX_REPORT)
    result = {
        "exit_code": os.waitstatus_to_exitcode(status),
        "timed_out": timed_out,
        "wall_s": round(time.monotonic() - start, 4),
        "report_b64": base64.b64encode(raw).decode("ascii") if raw else None,
        "output_tail": (_read(out_path, 1 << 20) or b"").decode("utf-8", "replace")[-MAX_TAIL:],
    }
    shutil.rmtree(root, ignore_errors=True)
    return result


def main():
    with open("payload.json", encoding="utf-8") as f:
        payload = json.load(f)
    os.unlink("payload.json")
    work = os.getcwd()
    with contextlib.suppress(OSError):
        os.unlink(os.path.join(os.path.dirname(work), "stdin"))
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    sys.dont_write_bytecode = True
    keep = [p for p in sys.path if p not in ("", work) and "-packages" not in p]
    sys.path[:] = [os.path.abspath(ZIP), *keep]
    import _pytest
    import pytest  # noqa: F401

    for mod in pkgutil.walk_packages(_pytest.__path__, "_pytest."):  # warm: children start with pytest imported
        if not mod.name.endswith("__main__"):
            with contextlib.suppress(Exception):
                __import__(mod.name)
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: /proc/<this pid> is closed to the children
    clean = _load("repo")
    base = os.path.abspath("runs")
    os.makedirs(base)
    results = [_run_one(base, clean, variant, payload) for variant in payload["variants"]]
    token = sys.stdin.read().strip()
    sys.stdout.write(token + json.dumps(results) + token + "\n")
    sys.stdout.flush()


main()
