"""The local sandbox started by a non-root trainer whose user is in the ``docker`` group:
jobs must not reach the Docker daemon's socket, the user's private files or the checkout, nor stall their worker.

The test creates that user (CI runs as root) and runs a small trainer-side script as it with ``setpriv``.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import textwrap
from pathlib import Path

import pytest

from propel.sandbox.bwrap import bwrap_path
from tests.conftest import missing_dependency

SRC = Path(__file__).resolve().parents[2] / "src"
USER = "propel-sandbox-test"
DOCKER_SOCKET = "/var/run/docker.sock"


def _missing(why: str) -> None:
    missing_dependency(f"the unprivileged sandbox test: {why}")


@pytest.fixture(scope="module")
def docker_group_user():
    """(uid, gid, docker gid) of a throwaway user; created here, deleted afterwards."""
    if os.geteuid() != 0:
        _missing("creating a test user needs root")
    for tool in ("useradd", "userdel", "setpriv"):
        if shutil.which(tool) is None:
            _missing(f"{tool} is not installed")
    if bwrap_path() is None:
        _missing("bubblewrap is not installed")
    try:
        docker_gid = grp.getgrnam("docker").gr_gid
    except KeyError:
        _missing("no docker group (install docker.io)")
    if not _answers(DOCKER_SOCKET):
        _missing(f"no Docker engine answers on {DOCKER_SOCKET} (scripts/docker_engine.sh starts one)")
    created = False
    try:
        pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", USER], check=True)
        created = True
    entry = pwd.getpwnam(USER)
    yield entry.pw_uid, entry.pw_gid, docker_gid
    if created:
        subprocess.run(["userdel", USER], check=False)


def _answers(path: str) -> bool:
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(2)
            s.connect(path)
        return True
    except OSError:
        return False


_TRAINER = textwrap.dedent(
    """
    import json, os, socket, sys, time
    from propel.sandbox import Job, Limits, LocalSandbox

    secret, checkout = sys.argv[1], sys.argv[2]
    report = {"uid": os.getuid(), "groups": os.getgroups()}
    with socket.socket(socket.AF_UNIX) as s:  # the trainer itself can: the test is meaningful
        s.connect("/var/run/docker.sock")
        s.sendall(b"GET /version HTTP/1.0\\r\\n\\r\\n")
        report["trainer_docker"] = s.recv(12).decode()
    probe = '''
    import os, socket
    for path in ("/var/run/docker.sock", "/run/docker.sock"):
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.settimeout(2)
                s.connect(path)
                s.sendall(b"GET /version HTTP/1.0\\\\r\\\\n\\\\r\\\\n")
                print("REACHED", path, s.recv(12))
        except OSError as e:
            print("blocked", path, type(e).__name__)
    for path in SECRETS:
        try:
            print("READ", path, open(path).read()[:20])
        except OSError as e:
            print("blocked", path, type(e).__name__)
    print("root", sorted(os.listdir("/")))
    '''
    probe = f"SECRETS = {[secret, checkout]!r}\\n" + probe
    with LocalSandbox(limits=Limits(timeout_s=2), isolation="bwrap", max_workers=1) as sandbox:
        result = sandbox.run(Job(source=probe))
        report["probe"] = [result.outcome.value, result.stdout, result.stderr]
        start = time.monotonic()
        stop = "import os, signal, time\\nos.kill(os.getppid(), signal.SIGSTOP)\\ntime.sleep(30)"
        sandbox.run(Job(source=stop))
        report["stall_s"] = time.monotonic() - start
        report["after"] = sandbox.run(Job(source="print(6 * 7)")).stdout
    print(json.dumps(report))
    """
)


@pytest.fixture()
def private_dir():
    """A folder outside /tmp (which the sandbox always covers), like the user's home."""
    path = Path(tempfile.mkdtemp(prefix="propel-private-", dir="/var/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_jobs_of_a_docker_group_user_reach_no_socket_nor_private_file(docker_group_user, private_dir):
    uid, gid, docker_gid = docker_group_user
    private = private_dir
    secret = private / "token.txt"
    secret.write_text("trainer-user-secret")
    os.chown(private, uid, gid)
    os.chown(secret, uid, gid)
    secret.chmod(0o600)
    checkout_file = str(SRC / "propel" / "sandbox" / "sandbox.py")
    argv = ["setpriv", f"--reuid={uid}", f"--regid={gid}", f"--groups={docker_gid}", "--inh-caps=-all"]
    argv += ["/usr/bin/python3", "-c", _TRAINER, str(secret), checkout_file]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(SRC), "HOME": str(private), "LANG": "C.UTF-8"}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=str(private), timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["uid"] == uid and docker_gid in report["groups"]
    assert report["trainer_docker"].startswith("HTTP/1."), report  # the user itself controls the daemon
    outcome, stdout, stderr = report["probe"]
    assert outcome == "ok", (stdout, stderr)
    assert "REACHED" not in stdout and "READ" not in stdout, stdout
    root = stdout.splitlines()[-1]
    for hidden in ("'home'", "'root'", "'run'", "'var'", "'work'"):
        assert hidden not in root, root
    assert report["stall_s"] <= 3.0, report
    assert report["after"] == "42\n", report
