"""spawn_lasting: a process started through it outlives the thread that asked, even with PR_SET_PDEATHSIG set."""

from __future__ import annotations

import ctypes
import signal
import subprocess
import sys
import threading
import time

import pytest

from propel.sandbox.spawner import spawn_lasting


def _die_with_forking_thread() -> None:
    ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG, what bwrap --die-with-parent sets


def _start_sleeper() -> subprocess.Popen:
    return subprocess.Popen(["sleep", "30"], preexec_fn=_die_with_forking_thread)


def _start_in_short_lived_thread(start) -> subprocess.Popen:
    box = []
    thread = threading.Thread(target=lambda: box.append(start()))
    thread.start()
    thread.join()
    time.sleep(0.3)  # the death signal, if any, is sent when the thread exits
    return box[0]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_process_outlives_the_calling_thread():
    direct = _start_in_short_lived_thread(_start_sleeper)
    lasting = _start_in_short_lived_thread(lambda: spawn_lasting(_start_sleeper))
    try:
        assert direct.poll() == -signal.SIGKILL  # the trap: the forking thread ended, so the child was killed
        assert lasting.poll() is None
    finally:
        for proc in (direct, lasting):
            proc.kill()
            proc.wait()


def test_errors_reach_the_caller():
    with pytest.raises(FileNotFoundError):
        spawn_lasting(lambda: subprocess.Popen(["/definitely/not/a/program"]))
