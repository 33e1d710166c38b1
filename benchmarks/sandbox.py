"""Sandbox throughput: jobs/s for a small pure-Python job (a 5-line function on 10 inputs), per backend.

Rows: plain ``python3 -S -I`` subprocesses without isolation (the floor to beat), the same under a fresh bubblewrap
per job, the local backend (warm workers forking per job; bubblewrap and no-isolation modes) and the Docker backend.
Every row runs the same jobs with the same concurrency and checks every job's output; start-up (workers,
containers) is timed separately and not counted in jobs/s.

    python benchmarks/sandbox.py --jobs 200 --workers 2
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.table import Table

from propel.sandbox import Job, Limits, LocalSandbox, Sandbox, SandboxError
from propel.sandbox.bwrap import bwrap_argv, bwrap_path
from propel.sandbox.local import SCRUBBED_ENV, default_python

JOB = """\
def f(x):
    y = x * 3 + 1
    if y % 2:
        return y // 2
    return [y, x]
for x in range(10):
    print(f(x))
"""
EXPECTED = "".join(f"{(x * 3 + 1) // 2 if (x * 3 + 1) % 2 else [x * 3 + 1, x]}\n" for x in range(10))
LIMITS = Limits(timeout_s=10)


def run_plain(wrap: Callable[[list[str], str], list[str]]) -> Callable[[int], str]:
    """One job as a fresh subprocess in a fresh temporary directory (what a naive verifier does)."""
    python = default_python()

    def one(_: int) -> str:
        with tempfile.TemporaryDirectory() as work:
            Path(work, "main.py").write_text(JOB)
            argv = wrap([python, "-S", "-I", "main.py"], work)
            done = subprocess.run(argv, cwd=work, env=SCRUBBED_ENV, capture_output=True, timeout=10, check=False)
            return done.stdout.decode()

    return one


def no_wrap(argv: list[str], work: str) -> list[str]:
    return argv


def bwrap_wrap(argv: list[str], work: str) -> list[str]:
    return bwrap_argv(argv, 64, writable=[work], chdir=work)


def timed(one: Callable[[int], str], jobs: int, workers: int) -> tuple[float, int]:
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        outputs = list(pool.map(one, range(jobs)))
    elapsed = time.perf_counter() - start
    return jobs / elapsed, sum(out != EXPECTED for out in outputs)


def sandbox_runner(make: Callable[[], Sandbox]) -> tuple[Callable[[int], str], Sandbox, float]:
    start = time.perf_counter()
    sandbox = make()
    sandbox.warm_up()
    startup = time.perf_counter() - start
    job = Job(source=JOB, limits=LIMITS)
    return (lambda _: sandbox.run(job).stdout), sandbox, startup


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=200, help="jobs per row")
    parser.add_argument("--workers", type=int, default=2, help="concurrent jobs (threads / sandbox workers)")
    parser.add_argument("--no-docker", action="store_true", help="skip the Docker row")
    args = parser.parse_args()
    console = Console(width=110)
    table = Table(title=f"sandbox throughput: {args.jobs} jobs, {args.workers} at a time")
    for col in ("how", "isolation", "jobs/s", "start-up s", "wrong outputs"):
        table.add_column(col, justify="left" if col in ("how", "isolation") else "right")

    rows: list[tuple[str, str, Callable[[], tuple[Callable[[int], str], Sandbox | None, float]]]] = [
        ("subprocess python3 -S -I", "none (floor)", lambda: (run_plain(no_wrap), None, 0.0)),
    ]
    if bwrap_path():
        rows.append(("subprocess bwrap + python3 -S -I", "bwrap per job", lambda: (run_plain(bwrap_wrap), None, 0.0)))
        rows.append(
            ("LocalSandbox", "bwrap + rlimits", lambda: sandbox_runner(lambda: LocalSandbox(LIMITS, args.workers)))
        )
    rows.append(
        ("LocalSandbox", "rlimits only", lambda: sandbox_runner(lambda: LocalSandbox(LIMITS, args.workers, "none")))
    )
    if not args.no_docker:

        def docker_row():
            from propel.sandbox.docker import DockerSandbox

            return sandbox_runner(lambda: DockerSandbox(LIMITS, args.workers))

        rows.append(("DockerSandbox", "container + rlimits", docker_row))

    for how, isolation, build in rows:
        console.print(f"[dim]running {how} ({isolation})...[/dim]")
        try:
            one, sandbox, startup = build()
        except SandboxError as e:
            table.add_row(how, isolation, "n/a", "", str(e)[:60])
            continue
        try:
            one(0)  # first job outside the clock (imports, page cache)
            rate, wrong = timed(one, args.jobs, args.workers)
        finally:
            if sandbox is not None:
                sandbox.close()
        table.add_row(how, isolation, f"{rate:.1f}", f"{startup:.2f}" if sandbox else "-", str(wrong))
    console.print(table)


if __name__ == "__main__":
    main()
