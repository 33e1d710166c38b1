"""Process trees from ``/proc``: who descends from whom, and killing all of it until nothing is left.

Standard library only: the host backend imports it, and the in-sandbox worker carries the same text (inlined into
its source by ``local.worker_source``), so the one way to find and kill what a job left behind exists once.
"""

import contextlib
import os
import signal
import time


def process_table():
    """pid -> (parent pid, state letter) of every process this one can see."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
                table[int(entry)] = (int(fields[1]), fields[0].decode())
            except (OSError, ValueError, IndexError):
                continue
    return table


def live_descendants(root):
    """Every descendant of ``root`` that is not a zombie (whatever session or process group it moved to)."""
    table = process_table()
    found, todo = [], [root]
    while todo:
        parent = todo.pop()
        children = [pid for pid, (ppid, _) in table.items() if ppid == parent]
        found += [pid for pid in children if table[pid][1] != "Z"]
        todo += children
    return found


def reap_orphans():
    """As PID 1 or a subreaper, collect exited orphans (zombies count against the next job's process limit)."""
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return
        except ChildProcessError:
            return


def kill_tree(root, rounds=20, reap=False):
    """SIGKILL every live descendant of ``root``, again until none is left (a fork may race a round); ``root`` itself
    is left to the caller. ``reap``: collect the orphans after each round (PID 1 or a subreaper). Returns the pids it
    signalled."""
    killed = set()
    for _ in range(rounds):
        found = live_descendants(root)
        if not found:
            return killed
        killed.update(found)
        for pid in found:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.002)
        if reap:
            reap_orphans()
    return killed


def kill_uid(uid, rounds=50):
    """SIGKILL every live process whose real uid is ``uid`` (where no PID namespace ends what a command left
    behind), again until none is left."""
    for _ in range(rounds):
        found = False
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/status") as f:
                    fields = dict(line.split(":", 1) for line in f if line.startswith(("State:", "Uid:")))
                if int(fields["Uid"].split()[0]) == uid and fields["State"].split()[0] != "Z":
                    os.kill(int(entry), signal.SIGKILL)
                    found = True
            except (OSError, KeyError, ValueError, IndexError):
                continue
        if not found:
            return
        time.sleep(0.005)
