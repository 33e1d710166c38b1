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

from propel.sandbox.job import Job, Limits
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


def graded_limits(child: Limits) -> dict:
    """A graded child's limits as the in-sandbox runners read them (``confine.apply_limits``): its wall-clock and CPU
    budget, address space, largest file, and the processes (threads) it may start (0: none)."""
    return {
        "timeout_s": float(child.timeout_s),
        "memory_mb": int(child.memory_mb),
        "max_file_bytes": int(child.max_file_mb) << 20,
        "max_processes": int(child.max_processes),
    }


def job_limits(child: Limits, items: int, per_item_s: float, output_per_item: int, setup_s: float = 10.0) -> Limits:
    """The sandbox job that runs ``items`` graded children one after another, each under ``child``'s limits: their
    time plus ``per_item_s`` each and ``setup_s`` for the runner, the child's memory plus 512 MiB for the runner,
    ``output_per_item`` bytes of records each, and files of at least 16 MiB (the vendored pytest zip, a repository).
    The one place a grading job's budget is derived from its children's."""
    return Limits(
        timeout_s=setup_s + items * (child.timeout_s + per_item_s),
        memory_mb=child.memory_mb + 512,
        max_processes=64,
        max_output_bytes=items * output_per_item + 65_536,
        max_file_mb=max(child.max_file_mb, 16),
        max_open_files=256,
    )


def job(
    runner: str,
    payload: dict,
    limits: Limits,
    extra: dict[str, str | bytes] | None = None,
    pytest: bool = False,
    hash_seed: int | None = None,
):
    """``(job, token)``: ``propel_box.<runner>.main()`` over ``payload``; ``pytest`` ships the vendored pytest. The
    token frames the runner's one result line (``framed_records``). ``hash_seed``: the job first re-executes itself
    with that string-hash seed (a sandbox worker runs jobs with isolated interpreters, which ignore
    ``PYTHONHASHSEED``): a suite whose parametrised test ids follow a set's order (isodate's) then names the same tests
    in every job."""
    files: dict[str, str | bytes] = {**box_files(), "payload.json": json.dumps(payload), **(extra or {})}
    if pytest:
        files[ZIP_NAME] = testlib_zip()
    token = secrets.token_hex(16)
    source = f"from {BOX}.{runner} import main\n\nmain()\n"
    if hash_seed is not None:
        source = (
            "import os\nimport sys\n\n"
            f"if sys.flags.ignore_environment or os.environ.get('PYTHONHASHSEED') != '{int(hash_seed)}':\n"
            "    # re-run with the fixed string-hash seed\n"
            f"    os.environ['PYTHONHASHSEED'] = '{int(hash_seed)}'\n"
            "    os.execv(sys.executable, [sys.executable, '-s', '-S', 'main.py'])\n" + source
        )
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
