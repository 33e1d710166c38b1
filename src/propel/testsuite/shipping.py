"""Grading jobs as the sandbox runs them: the in-sandbox ``propel_box`` package shipped as files, one runner as
``main.py``, a payload, and the frame token on stdin.

Both graders (``runner.SuiteRunner`` for pytest suites, ``values.ValueRunner`` for input -> output tests) and the SWE
domain's repository suites build their jobs here, so the in-sandbox code exists once.
"""

from __future__ import annotations

import functools
import json
import secrets
from importlib import resources

from propel.sandbox.base import Job, Limits
from propel.testsuite.vendor import ZIP_NAME, testlib_zip

BOX = "propel_box"


@functools.lru_cache(maxsize=1)
def box_files() -> dict[str, str]:
    """``{"propel_box/<module>.py": source}`` for every module of the in-sandbox package, and the sandbox's own
    ``processes`` (finding and killing a process tree: one definition, which the runners use for what a graded
    child left behind)."""
    folder = resources.files("propel.testsuite").joinpath(BOX)
    files = {
        f"{BOX}/{p.name}": p.read_text()
        for p in sorted(folder.iterdir(), key=lambda p: p.name)
        if p.name.endswith(".py")
    }
    files[f"{BOX}/processes.py"] = resources.files("propel.sandbox").joinpath("processes.py").read_text()
    return files


def job(runner: str, payload: dict, limits: Limits, extra: dict[str, str | bytes] | None = None, pytest: bool = False):
    """``(job, token)``: ``propel_box.<runner>.main()`` over ``payload``; ``pytest`` ships the vendored pytest. The
    token frames the runner's one result line (``framed_records``)."""
    files: dict[str, str | bytes] = {**box_files(), "payload.json": json.dumps(payload), **(extra or {})}
    if pytest:
        files[ZIP_NAME] = testlib_zip()
    token = secrets.token_hex(16)
    source = f"from {BOX}.{runner} import main\n\nmain()\n"
    return Job(source=source, files=files, stdin=token, limits=limits), token


def framed_records(stdout: str, token: str, n: int) -> list[dict] | None:
    """The ``n`` JSON records an in-sandbox runner printed between two ``token`` lines (the frame keeps the graded
    code's own prints out), or None when there is no whole frame (the runner died)."""
    parts = stdout.split(token)
    if len(parts) != 3:
        return None
    try:
        raw = json.loads(parts[1])
    except json.JSONDecodeError:
        return None
    return raw if isinstance(raw, list) and len(raw) == n else None
