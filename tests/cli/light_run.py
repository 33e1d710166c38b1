"""``propel.cli.main(argv)`` in a fresh interpreter, checked to end with its exit code before any heavy module loads:
what the CLI answers from a config's source alone (typos, missing inputs, ``--help``)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HEAVY = ("torch", "lightning", "transformers", "vllm")


@dataclass
class LightRun:
    stdout: str
    stderr: str
    seconds: float
    """From the call into ``main`` to its exit, inside the child (start-up not counted)."""


def run_light(argv: list[str], cwd: Path, exit_code: int = 2) -> LightRun:
    code = (
        "import sys, time\nfrom propel.cli import main\nstart = time.monotonic()\n"
        f"try:\n    main({list(argv)!r})\n"
        f"except SystemExit as e:\n    assert e.code == {exit_code}, e.code\n"
        "seconds = time.monotonic() - start\n"
        f"heavy = [m for m in {HEAVY!r} if m in sys.modules]\n"
        "assert not heavy, heavy\nprint(seconds)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=cwd)
    assert out.returncode == 0, out.stderr[-2000:]
    cut = out.stdout.rstrip("\n").rfind("\n") + 1  # the child's last line is the time; before it, main's output
    return LightRun(out.stdout[:cut], out.stderr, float(out.stdout[cut:]))
