"""The in-sandbox runner of real pytest suites (HumanEval-style files or a repository's own suite), hardened.

For each suite in ``payload.json``, one after another: write the code under test into a fresh workspace (a repository's
clean checkout with the variant laid over it, or the model's files) and the pristine tests into a folder of their own,
draw a channel key, fork a child. The child, before anything of the model's runs: moves its output to a capped file,
keeps only the channel's write end (fd 3), confines itself with Landlock (the workspace and the tests readable, only a
scratch folder and the report folder writable, nothing else reachable), snapshots the runner's code (``integrity``),
installs the audit hook and registers the guard plugin; then runs pytest, with no cache
provider and no bytecode written. The runner drains the channel while it waits, kills what is left of the child's
session and anything the child started that outlived it, verifies the channel's records and sends back the child's
account (outcomes, audit findings, rebindings, forged lines), the JUnit XML (to cross-check) and the exit code.

pytest is imported once here, before the first fork; this process is non-dumpable and reads the frame
token from stdin only after the last child is gone.
"""

import base64
import contextlib
import ctypes
import fnmatch
import json
import os
import pkgutil
import secrets
import shutil
import sys
import time

from propel_box import audit, channel, confine, integrity, processes, wait
from propel_box.output import output_tail

ZIP = "propel_testlib.zip"
MAX_REPORT = 2_000_000
UNUSED_PLUGINS = ("cacheprovider", "warnings", "logging", "doctest", "pastebin", "legacypath", "debugging")
UNUSED_PLUGINS += ("faulthandler", "stepwise", "setuponly", "setupplan", "unraisableexception", "threadexception")
"""pytest plugins a suite of split assertions does without (a third of pytest's start-up); a repository's own suite
(``"lean": false``) keeps all but the cache provider (its tests may use ``caplog``, ``recwarn``, doctests)."""


def write_files(root, files):
    """Write base64 files under ``root`` (None deletes the file)."""
    for name, data in files.items():
        path = os.path.join(root, name)
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


def _redirect(dirs, suite, write_fd):
    """Start a session of its own with output to a capped file, the channel as fd 3 and nothing else open, in the
    workspace, importing the code under test first and writing no bytecode."""
    ws, tmp, reports = dirs["ws"], dirs["tmp"], dirs["reports"]
    os.setsid()
    out = os.open(os.path.join(reports, "output.txt"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.dup2(write_fd, 3)
    os.closerange(4, 65536)
    os.chdir(ws)
    sys.path[:0] = [os.path.join(ws, p) for p in suite.get("python_path", ["."])]
    os.environ.update(HOME=tmp, TMPDIR=tmp, PYTHONDONTWRITEBYTECODE="1")
    sys.dont_write_bytecode = True


def _confine(dirs, limits, key):
    """``(send, runtime)``: open the channel, confine the child (Landlock, rlimits) and report the Landlock ABI."""
    send = channel.writer(3, key)
    runtime = confine.runtime_paths() + [dirs["zip"]]
    read = runtime + [dirs["ws"], dirs["tests"]]
    abi = confine.restrict(read=read, write=[dirs["tmp"], dirs["reports"]], read_write_files=[os.devnull])
    confine.apply_limits(limits, int(limits.get("max_processes") or 0))  # threads: a repo suite's own
    send("start", str(abi))
    return send, runtime


def _test_paths(ws, tests, test_globs):
    """``(is_test, graded)``: is a path the test suite's (its folder or a repository's test files), is a file the
    graded code (in the workspace and not a test)?"""

    def is_test(path):
        if path == tests or path.startswith(tests + "/"):
            return True
        rel = os.path.relpath(path, ws)
        return not rel.startswith("..") and any(fnmatch.fnmatchcase(rel, g) for g in test_globs)

    def graded(filename):
        return filename.startswith(ws + "/") and not is_test(filename)

    return is_test, graded


def _make_plugin(guard, send, dirs, suite, runtime, is_test):
    """The guard plugin, its integrity baseline snapshotted now: before pytest's own set-up, whose changes are
    ``integrity.PYTEST_OWN``."""
    ws, tmp, reports = dirs["ws"], dirs["tmp"], dirs["reports"]
    before = integrity.snapshot()

    def hide_tests():
        if suite.get("hide_tests"):
            confine.restrict(read=runtime + [ws], write=[tmp, reports], read_write_files=[os.devnull])

    def test_module(module):
        return is_test(os.path.abspath(getattr(module, "__file__", None) or "/"))

    return guard.make_guard(send, lambda: integrity.changes(before), hide_tests, test_module)


def _pytest_args(suite, dirs):
    """pytest's command line: quiet, the unused plugins off, JUnit XML to the report folder, then the suite's own
    arguments with ``{ws}`` and ``{tests}`` filled in."""
    args = [a.replace("{ws}", dirs["ws"]).replace("{tests}", dirs["tests"]) for a in suite["args"]]
    unused = UNUSED_PLUGINS if suite.get("lean", True) else ("cacheprovider",)
    plugins = [arg for name in unused for arg in ("-p", "no:" + name)]
    return ["-q", *plugins, "--junitxml", os.path.join(dirs["reports"], "junit.xml"), *args]


def _child(dirs, suite, limits, key, write_fd):
    """The forked child: set up before anything of the model's runs (any failure exits 121), then run pytest and
    exit with its code (3 when it raised)."""
    import pytest
    from propel_box import guard

    ws, tests, tmp = dirs["ws"], dirs["tests"], dirs["tmp"]
    try:
        _redirect(dirs, suite, write_fd)
        send, runtime = _confine(dirs, limits, key)
        is_test, graded = _test_paths(ws, tests, suite.get("test_globs", []))
        plugin = _make_plugin(guard, send, dirs, suite, runtime, is_test)
        readable = runtime + [ws, tests, tmp]
        audit.install(lambda *a: send("audit", *a), graded, is_test, [tmp], readable, graded_root=ws)
    except BaseException:
        os._exit(121)
    code = 3
    try:
        code = pytest.main(_pytest_args(suite, dirs), plugins=[plugin])
    except BaseException:
        with contextlib.suppress(BaseException):
            import traceback

            traceback.print_exc()
    with contextlib.suppress(BaseException):
        sys.stdout.flush()
    os._exit(int(code) & 0xFF)


def _run_suite(base, clean, suite, limits):
    root = os.path.join(base, secrets.token_hex(8))
    dirs = {name: os.path.join(root, secrets.token_hex(8)) for name in ("ws", "tests", "tmp", "reports")}
    for folder in dirs.values():
        os.makedirs(folder)
    dirs["zip"] = os.path.abspath(ZIP)  # pytest imports a few modules lazily from the zip
    write_files(dirs["ws"], clean)
    write_files(dirs["ws"], suite.get("files", {}))
    write_files(dirs["tests"], suite.get("tests", {}))
    key = secrets.token_bytes(32)
    read_fd, write_fd = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _child(dirs, suite, limits, key, write_fd)
    os.close(write_fd)
    status, timed_out, drained = wait.wait_child(pid, limits["timeout_s"], drain=[read_fd])
    os.close(read_fd)
    left = _end_leftovers()
    records, forged = channel.read_records(drained.get(read_fd, b""), key)
    from propel_box import guard

    raw = _read(os.path.join(dirs["reports"], "junit.xml"), MAX_REPORT)
    result = {
        "exit_code": os.waitstatus_to_exitcode(status),
        "timed_out": timed_out,
        "wall_s": round(time.monotonic() - start, 4),
        "report_b64": base64.b64encode(raw).decode("ascii") if raw else None,
        "output_tail": output_tail(os.path.join(dirs["reports"], "output.txt")),
        "channel": {
            "tests": guard.outcomes(records),
            "collected": next((fields for kind, fields in records if kind == "collected"), None),
            "audit": [fields for kind, fields in records if kind == "audit"] + left,
            "tampered": [fields for kind, fields in records if kind == "tampered"],
            "end": next((fields for kind, fields in records if kind == "end"), None),
            "landlock": next((int(fields[0]) for kind, fields in records if kind == "start" and fields), 0),
            "forged": forged,
        },
    }
    shutil.rmtree(root, ignore_errors=True)
    return result


def _end_leftovers():
    """Kill whatever the graded child started that outlived it (a process in a session of its own escapes the
    session kill; as subreaper this runner inherits it), before the next suite starts: nothing of one submission
    runs beside the next. Returns the finding when there was any (graded code that leaves processes behind)."""
    left = processes.kill_tree(os.getpid(), reap=True)
    processes.reap_orphans()  # the last round's victims may have died after its reap
    if not left:
        return []
    return [["spawns_processes", "outlived", "", f"{len(left)} process(es) outlived the graded child; killed"]]


def load_files(folder):
    """A folder's files (base64) in memory, the folder deleted: a child cannot change what the next suite starts
    from."""
    files = {}
    if not os.path.isdir(folder):
        return files
    for parent, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(parent, name)
            with open(path, "rb") as f:
                files[os.path.relpath(path, folder)] = base64.b64encode(f.read()).decode("ascii")
    shutil.rmtree(folder)
    return files


def load_pytest():
    """Import pytest from the vendored zip (the sandbox's interpreter has the standard library only), every module
    of its warmed, before any suite runs."""
    work = os.getcwd()
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    sys.dont_write_bytecode = True
    keep = [p for p in sys.path if p not in ("", work) and "-packages" not in p]
    sys.path[:] = [os.path.abspath(ZIP), *keep]
    import _pytest
    import pytest  # noqa: F401

    for package in (_pytest,):  # warm: children start with everything imported
        for mod in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not mod.name.endswith("__main__"):
                with contextlib.suppress(Exception):
                    __import__(mod.name)


def read_payload():
    """The job's payload (the file deleted at once) and the stdin link removed: fd 0 stays open here, and no child
    can open it."""
    with open("payload.json", encoding="utf-8") as f:
        payload = json.load(f)
    os.unlink("payload.json")
    with contextlib.suppress(OSError):
        os.unlink(os.path.join(os.path.dirname(os.getcwd()), "stdin"))
    return payload


def write_results(results):
    """The job's one result line, framed by the token read from stdin (read only now, after the last child)."""
    token = sys.stdin.read().strip()
    sys.stdout.write(token + json.dumps(results) + token + "\n")
    sys.stdout.flush()


def main():
    payload = read_payload()
    load_pytest()
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: /proc/<this pid> is closed to the children
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: a child's orphans come back here
    clean = load_files("repo")
    base = os.path.abspath("runs")
    os.makedirs(base)
    write_results([_run_suite(base, clean, suite, payload["limits"]) for suite in payload["suites"]])
