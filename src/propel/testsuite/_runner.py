"""The in-sandbox suite runner (run as ``main.py`` of one sandbox job; standard library + the vendored test zip).

For each submission in ``payload.json``, one after another: write the model's files into a fresh folder and the
pristine tests into another one with an unguessable name, fork a child that runs pytest (under coverage.py) on the
pristine tests only, with the JUnit XML report going to a third unguessable folder; wait for it under a wall-clock
limit, kill what is left of it, read its report back and delete all three folders. pytest and coverage are imported
once here, before the first fork, so a child starts warm.

The child cannot start processes (``RLIMIT_NPROC`` 0: no orphan outlives it to touch the next submission), its
output goes to a size-capped file, never to this job's stdout. This process is made non-dumpable, so a child cannot
read its memory or its file descriptors through /proc; it reads the frame token from stdin only after the last
child is gone and prints one framed JSON line. The report is parsed by the trainer, not here.
"""

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
TRACER = "propel_ctracer.so"
MAX_REPORT = 256_000
MAX_TAIL = 2_000
# pytest plugins a graded run does without (a third of pytest's start-up); fixtures (tmp_path, monkeypatch, capsys)
# stay available.
UNUSED_PLUGINS = ("cacheprovider", "warnings", "logging", "doctest", "pastebin", "legacypath", "debugging")
UNUSED_PLUGINS += ("faulthandler", "stepwise", "setuponly", "setupplan", "unraisableexception", "threadexception")


def _write(root, files):
    for name, text in files.items():
        path = os.path.join(root, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


def _read(path, cap):
    try:
        with open(path, "rb") as f:
            return f.read(cap).decode("utf-8", "replace")
    except OSError:
        return None


def _read_b64(path, cap):
    """The file's first ``cap`` bytes, base64 (the trainer decodes and parses them; no JSON escaping blow-up)."""
    import base64

    try:
        with open(path, "rb") as f:
            return base64.b64encode(f.read(cap)).decode("ascii")
    except OSError:
        return None


def _child(ws, tests, report, cov_path, out_path, limits):
    import coverage
    import pytest

    try:
        os.setsid()
        fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.closerange(3, 4096)
        resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits["max_file_bytes"],) * 2)
        resource.setrlimit(resource.RLIMIT_AS, (limits["memory_mb"] << 20,) * 2)
        cpu = int(limits["timeout_s"]) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
        os.chdir(ws)
        sys.path[:0] = [ws]
        os.environ.update(HOME=ws, TMPDIR=ws)
    except BaseException:
        os._exit(121)
    code = 3
    try:
        import warnings

        warnings.filterwarnings("ignore", category=coverage.exceptions.CoverageWarning)
        cov = coverage.Coverage(data_file=None, include=[os.path.join(ws, "*")], config_file=False)
        cov.start()
        try:
            code = pytest.main(
                [
                    "-q",
                    *[arg for plugin in UNUSED_PLUGINS for arg in ("-p", "no:" + plugin)],
                    "-c",
                    os.path.join(tests, "pytest.ini"),
                    "--rootdir",
                    tests,
                    "--confcutdir",
                    tests,
                    "--junitxml",
                    report,
                    tests,
                ]
            )
        finally:
            cov.stop()
        try:
            import io

            percent = cov.report(file=io.StringIO(), ignore_errors=True)  # the runner's own main.py
        except Exception:
            percent = None
        with open(cov_path, "w") as f:
            json.dump({"percent": percent}, f)
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


def _sweep(work, keep, zip_bytes):
    """Undo what a child may have left in the job's folder: unknown entries go, the test zip is rewritten."""
    for name in os.listdir(work):
        if name not in keep:
            path = os.path.join(work, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(path)
    with open(os.path.join(work, ZIP), "wb") as f:
        f.write(zip_bytes)


def _grade_one(base, sub, limits):
    root = os.path.join(base, secrets.token_hex(8))
    ws, tests, reports = (os.path.join(root, secrets.token_hex(8)) for _ in range(3))
    for folder in (ws, tests, reports):
        os.makedirs(folder)
    _write(ws, sub["files"])
    _write(tests, sub["tests"])
    report, cov_path = os.path.join(reports, "junit.xml"), os.path.join(reports, "coverage.json")
    out_path = os.path.join(reports, "output.txt")
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _child(ws, tests, report, cov_path, out_path, limits)
    status, timed_out = _wait(pid, limits["timeout_s"])
    wall = time.monotonic() - start
    result = {
        "exit_code": os.waitstatus_to_exitcode(status),
        "timed_out": timed_out,
        "wall_s": round(wall, 4),
        "report_b64": _read_b64(report, MAX_REPORT),
        "coverage": _read(cov_path, 1000),
        "output_tail": (_read(out_path, 1 << 20) or "")[-MAX_TAIL:],
    }
    shutil.rmtree(root, ignore_errors=True)
    return result


class _TracerFinder:
    """Serves ``coverage.tracer`` (coverage's C tracer) from its own file: an extension cannot load from the zip."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != "coverage.tracer" or not os.path.exists(TRACER):
            return None
        import importlib.machinery
        import importlib.util

        where = os.path.abspath(TRACER)
        return importlib.util.spec_from_file_location(
            name, where, loader=importlib.machinery.ExtensionFileLoader(name, where)
        )


def main():
    with open("payload.json", encoding="utf-8") as f:
        payload = json.load(f)
    os.unlink("payload.json")
    work = os.getcwd()
    with contextlib.suppress(OSError):
        os.unlink(os.path.join(os.path.dirname(work), "stdin"))  # fd 0 stays open here; no child can open it
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    sys.path[:] = [os.path.abspath(ZIP)] + [p for p in sys.path if p not in ("", work)]
    with open(ZIP, "rb") as f:
        zip_bytes = f.read()
    sys.meta_path.insert(0, _TracerFinder)  # an ABI mismatch fails the import: coverage then traces in Python
    import _pytest
    import coverage
    import pytest  # noqa: F401

    sys.meta_path.remove(_TracerFinder)
    with contextlib.suppress(OSError):
        os.unlink(TRACER)

    for package in (_pytest, coverage):  # warm: children start with everything imported
        for mod in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if mod.name.endswith("__main__"):
                continue
            with contextlib.suppress(Exception):
                __import__(mod.name)
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: /proc/<this pid> is closed to the children
    base = os.path.abspath("runs")
    os.makedirs(base)
    keep = {"main.py", ZIP, "runs"}
    results = []
    for sub in payload["submissions"]:
        results.append(_grade_one(base, sub, payload["limits"]))
        _sweep(work, keep, zip_bytes)
    token = sys.stdin.read().strip()
    sys.stdout.write(token + json.dumps(results) + token + "\n")
    sys.stdout.flush()


main()
