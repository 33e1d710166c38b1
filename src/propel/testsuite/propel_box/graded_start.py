"""The start every graded child (``value_child.py``, ``replay_child.py``) makes before any model-written code runs.

One definition, so the two children cannot drift apart in what they confine, audit or leave on ``sys.path``: the
send function binds ``os.write`` before anything graded is imported; Landlock is applied (the workspace and the
runtime readable, the scratch folder writable) and its ABI reported; the audit hook is installed; the box's own
folder leaves ``sys.path``; the workspace becomes the current folder and the scratch folder ``HOME``/``TMPDIR``.
Nothing here makes the child trusted: graded code shares its process afterwards and may rewrite any of it, so what
the child sends stays data the runner checks.
"""

import contextlib
import json
import os
import sys

from propel_box import audit, confine, no_spawn


def start_graded(config, paths):
    """``(send, graded_dir)`` for a child whose configuration is ``config`` (``box``, ``ws``, ``tmp``, ``fd``);
    ``paths`` go first on ``sys.path`` (where the graded code is imported from)."""
    box, ws, tmp, fd = config["box"], config["ws"], config["tmp"], config["fd"]
    write = os.write

    def send(record):
        with contextlib.suppress(OSError, TypeError, ValueError):
            write(fd, (json.dumps(record) + "\n").encode())

    runtime = confine.runtime_paths()
    abi = confine.restrict(read=runtime + [ws], write=[tmp], read_write_files=[os.devnull])
    if config.get("threads"):  # no new process, threads allowed (else RLIMIT_NPROC as the runner set it)
        no_spawn.apply()
    send({"start": abi})

    def emit(flag, event, where, detail):
        send({"audit": [flag, event, where, detail]})

    graded_dir = ws.rstrip("/") + "/"
    audit.install(emit, lambda f: f.startswith(graded_dir), writable=[tmp], readable=runtime + [ws], graded_root=ws)
    sys.path[:] = list(paths) + [p for p in sys.path[1:] if p != box and not p.startswith(box + "/")]
    os.chdir(ws)
    os.environ.update(HOME=tmp, TMPDIR=tmp)
    return send, graded_dir
