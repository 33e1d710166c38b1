"""How many bugs per minute can the SWE validity pipeline check, and how many can be graded out of process? The
validity pipeline alone: no model, no agent.

For each repo, ``--bugs`` procedural candidates (``generate_bugs``, seed 0) are checked by ``BugValidator.check_many``
(static checks, ``git apply`` on a copy, one suite run per bug, batched ``--batch`` bugs per sandbox job, then the
differential replay of what each changed) on each backend, with ``allow_untrusted`` so that the share the replay
cannot grade shows; generation is timed apart. Reports bugs checked per minute, valid bugs per minute, the validity
rate, the share of valid bugs that are ``untrusted`` (no replayed call shows them: invalid by default), and, for each
trusted bug, whether its honest revert is graded ``solved`` (target: all) and a repair that leaves the bug in place
is not (target: none), with the time a repair's grading takes. The repos must be prepared (``python -m
propel.domains.swe.prepare``); Docker needs a running engine and the ``propel-sandbox:py3`` image
(``scripts/docker_engine.sh``).

    .venv/bin/python benchmarks/swe_validity.py --repos parse,inflection --bugs 8 --backends local,docker
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.table import Table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repos", default="parse,inflection,isodate,webcolors,toolz,cachetools,semver,tabulate")
    parser.add_argument("--bugs", type=int, default=8, help="candidates per repo")
    parser.add_argument("--batch", type=int, default=4, help="bugs per sandbox job")
    parser.add_argument("--workers", type=int, default=2, help="sandbox workers (parallel jobs)")
    parser.add_argument("--backends", default="local", help="comma-separated: local, docker")
    parser.add_argument("--repairs", type=int, default=8, help="trusted bugs per repo whose repairs are graded")
    args = parser.parse_args()

    from propel.domains.swe.checkout import checkout
    from propel.domains.swe.diffs import unified_diff
    from propel.domains.swe.mutations import generate_bugs
    from propel.domains.swe.prepare import load_manifest
    from propel.domains.swe.repos import get_repo
    from propel.domains.swe.validity import BugValidator
    from propel.sandbox import make_sandbox

    console = Console(width=150)
    table = Table(title=f"SWE validity pipeline, {args.bugs} procedural candidates per repo, batch {args.batch}")
    columns = ("backend", "repo", "generate s", "check s", "bugs/min", "valid/min", "valid", "untrusted of valid")
    columns += ("reverts solved", "bug kept solved", "repair s", "invalid reasons")
    for col in columns:
        table.add_column(col)
    prepared = {}
    for name in args.repos.split(","):
        profile = get_repo(name)
        root = checkout(profile)
        start = time.perf_counter()
        bugs = generate_bugs(profile, root, args.bugs, seed=0)
        prepared[name] = (profile, root, load_manifest(profile), bugs, time.perf_counter() - start)
    for backend in args.backends.split(","):
        with make_sandbox(backend, max_workers=args.workers) as sandbox:
            sandbox.warm_up()
            total_n = total_valid = total_untrusted = total_trusted = total_reverts = total_kept = 0
            total_s = 0.0
            for profile, root, manifest, bugs, gen_s in prepared.values():
                validator = BugValidator(
                    profile, root, sandbox, manifest=manifest, batch_size=args.batch, allow_untrusted=True
                )
                start = time.perf_counter()
                verdicts = validator.check_many([b.diff for b in bugs])
                took = time.perf_counter() - start
                valid = sum(v.valid for v in verdicts)
                untrusted = sum(v.valid and not v.trusted for v in verdicts)
                reasons = Counter(v.reason for v in verdicts if not v.valid)
                trusted = [v for v in verdicts if v.valid and v.trusted][: args.repairs]
                reverts = kept = 0
                start = time.perf_counter()
                for v in trusted:
                    path = sorted(v.files)[0]
                    buggy, clean = v.files[path].decode(), Path(root, path).read_text()
                    reverts += validator.grade_repair(v, unified_diff(path, buggy, clean)).solved
                    kept += validator.grade_repair(v, unified_diff(path, buggy, buggy + "\n# looked at it\n")).solved
                repair_s = (time.perf_counter() - start) / max(1, 2 * len(trusted))
                total_n, total_valid, total_s = total_n + len(bugs), total_valid + valid, total_s + took
                total_untrusted, total_trusted = total_untrusted + untrusted, total_trusted + len(trusted)
                total_reverts, total_kept = total_reverts + reverts, total_kept + kept
                table.add_row(
                    backend,
                    profile.key,
                    f"{gen_s:.1f}",
                    f"{took:.1f}",
                    f"{60 * len(bugs) / took:.1f}",
                    f"{60 * valid / took:.1f}",
                    f"{valid}/{len(bugs)}",
                    f"{untrusted}/{valid}",
                    f"{reverts}/{len(trusted)}",
                    f"{kept}/{len(trusted)}",
                    f"{repair_s:.2f}",
                    ", ".join(f"{k} {n}" for k, n in reasons.items()) or "-",
                )
            table.add_row(
                backend,
                "all",
                "",
                f"{total_s:.1f}",
                f"{60 * total_n / total_s:.1f}",
                f"{60 * total_valid / total_s:.1f}",
                f"{total_valid}/{total_n}",
                f"{total_untrusted}/{total_valid} ({total_untrusted / max(1, total_valid):.0%})",
                f"{total_reverts}/{total_trusted}",
                f"{total_kept}/{total_trusted}",
                "",
                "",
            )
    console.print(table)


if __name__ == "__main__":
    main()
