"""The probe's held-out verdict over every outer fold of its k-fold sweep, not one: nested cross-validation in full.

A pipeline's probe stage holds out one outer fold (``sweep.test_fold``, a fifth of the rows with 5 folds) and
compares the exported probe there with chance, logistic regression on the same features, and the input's length
and topic alone. At a few hundred labeled rows that fold is small (48 rows, 7 positives, for a 720-task pool), so
the intervals are wide. This script reruns the probe job once per outer fold (selection, refit and export repeated
inside each, so no fold's rows are ever seen by the probe that predicts them; the activation cache is shared) and
pools every fold's held-out predictions: each labeled row is then predicted exactly once, by a probe that never
saw it, and the comparison (``propel.metrics.held_out``, paired class-stratified bootstrap) runs on all of them.

    python experiments/probe_outer_folds/run.py --workdir runs/experiments/propel_table
    python experiments/probe_outer_folds/run.py --workdir runs/demo --folds 0 1 2   # some folds only

Each fold writes ``<workdir>/probe_folds/fold<k>/`` (a finished fold is reused); the pooled table, the verdict
in words, each fold's row and the command go to ``<workdir>/probe_folds/report.md`` and ``pooled.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import yaml

from propel.durable import write_json
from propel.jobs.probe_job import HELD_OUT_ROWS, SUMMARY
from propel.metrics.held_out import compare_on_held_out
from propel.pipeline.report import markdown_table
from propel.pipeline.summary_report import held_out_table
from propel.pipeline.verdicts import held_out_verdict
from propel.probes.sweep_spec import SweepSpec

KFOLD = ("stratified_kfold", "group_kfold")


def probe_config(workdir: Path) -> dict:
    """The pipeline's probe stage config (what every fold reruns with its own test fold and output folder)."""
    path = workdir / "probe" / "config.yaml"
    if not path.exists():
        raise SystemExit(f"{path} does not exist: run the pipeline's probe stage first")
    config = yaml.safe_load(path.read_text())
    split = (config.get("sweep") or {}).get("split", SweepSpec.split)
    if split not in KFOLD:
        raise SystemExit(f"the probe sweep's split is {split!r}: outer folds need one of {KFOLD}")
    return config


def run_fold(workdir: Path, config: dict, fold: int) -> Path:
    """The probe job with outer fold ``fold`` held out (reused when finished); its folder."""
    from propel.jobs.probe_job import main as probe_main

    out = workdir / "probe_folds" / f"fold{fold}"
    if (out / SUMMARY).exists() and (out / HELD_OUT_ROWS).exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    cache = workdir / "probe" / "cache"
    if cache.is_dir() and not (out / "cache").exists():  # the same reference model and rows: extract once
        (out / "cache").symlink_to(cache.resolve(), target_is_directory=True)
    fold_config = {**config, "output_dir": str(out), "sweep": {**(config.get("sweep") or {}), "test_fold": fold}}
    path = out / "config.yaml"
    path.write_text(yaml.safe_dump(fold_config, sort_keys=False))
    print(f"[folds] outer fold {fold}: probe job into {out}", flush=True)
    probe_main(["-c", str(path)])
    if not (out / HELD_OUT_ROWS).exists():
        raise SystemExit(f"fold {fold}: its held-out rows lack a class, so it has no comparison ({out})")
    return out


def pool(folders: list[Path]) -> tuple[np.ndarray, dict[str, np.ndarray], list[str]]:
    """Labels and each classifier's predictions over all folds' held-out rows (every row once); the classifiers
    that every fold ran (topic-only runs only where the pool has topics)."""
    parts = [json.loads((f / HELD_OUT_ROWS).read_text()) for f in folders]
    ids = [i for p in parts for i in p["ids"]]
    if len(ids) != len(set(ids)):
        raise SystemExit("a row is held out by two folds: the folds were not made by the same split")
    names = [n for n in parts[0] if n not in ("ids", "labels") and all(n in p for p in parts)]
    labels = np.concatenate([np.asarray(p["labels"], dtype=bool) for p in parts])
    predictions = {n: np.concatenate([np.asarray(p[n], dtype=bool) for p in parts]) for n in names}
    return labels, predictions, ids


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, required=True, help="a pipeline workdir whose probe stage finished")
    parser.add_argument("--folds", type=int, nargs="+", default=None, help="outer folds to run (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="the bootstrap's seed")
    args = parser.parse_args(argv)
    config = probe_config(args.workdir)
    n_folds = int((config.get("sweep") or {}).get("n_folds", SweepSpec.n_folds))
    folds = args.folds if args.folds is not None else list(range(n_folds))
    if not folds or any(not 0 <= k < n_folds for k in folds):
        raise SystemExit(f"--folds must lie in 0..{n_folds - 1}, got {folds}")
    folders = [run_fold(args.workdir, config, k) for k in folds]
    labels, predictions, ids = pool(folders)
    held = compare_on_held_out(labels, predictions, subject="probe", seed=args.seed)

    per_fold = []
    for k, folder in zip(folds, folders, strict=True):
        summary = json.loads((folder / SUMMARY).read_text())
        rows = summary["held_out"]["rows"]
        per_fold.append(
            {
                "outer fold": k,
                "selected": summary["selected"].get("key"),
                "arch": summary["selected"].get("arch"),
                "held-out rows": rows["positives"] + rows["negatives"],
                "positives": rows["positives"],
                "probe balanced acc": summary["held_out"]["probe"]["balanced_accuracy"],
                "logistic": summary["held_out"]["logistic"]["balanced_accuracy"],
            }
        )
    verdict = held_out_verdict(held)
    command = "python experiments/probe_outer_folds/run.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = [
        f"# The probe over {len(folds)} outer folds",
        "",
        f"**Verdict:** {verdict}",
        "",
        "Each outer fold reran selection, refit and export without its rows; every labeled row below was predicted "
        "once, by a probe that never saw it.",
        held_out_table(held, rows_are=f"the pooled held-out rows of outer folds {folds}"),
        "",
        "Each fold (the probe selected inside it and its own held-out rows):",
        "",
        markdown_table(per_fold),
        "",
        f"Command: `{command.strip()}`.",
        "",
    ]
    out = args.workdir / "probe_folds"
    (out / "report.md").write_text("\n".join(text))
    write_json(out / "pooled.json", {"folds": folds, "rows": len(ids), "held_out": held, "per_fold": per_fold})
    print("\n".join(text))
    return held


if __name__ == "__main__":
    main()
