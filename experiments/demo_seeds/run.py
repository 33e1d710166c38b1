"""Does the half-size demo's answer hold across seeds? ``make demo`` (``configs/demo.yaml``) end to end at several
seeds, each with its own warm start, labels, probe fits and selection, GRPO arm and gate-continued arm, so that the
interval covers the whole pipeline's variance and not one run's evaluation noise (issue 74, item 5).

Pre-registration (written 2026-12-07, before any seed ran; the committed demo runs of 2026-12-07, seed 0, are not
counted: one on each of two CPUs, whose float order trains different warm starts from the same seed)

- Unit: one seed k of ``propel pipeline -c configs/demo.yaml seed=k``: warm start (12 gate-only steps), 96 labeled
  tasks, the probe stage (sweep, selection, rivals; it picks the reward), 6 GRPO steps against the chosen reward
  (``grpo``) and 6 against the gate alone (``gate_arm``), both continuing the warm start, and 32 evaluation tasks per
  policy.
- Seeds: 1, 2, 3, 4, 5 (five; seed 0 is the README's run). All five run; no stopping rule but the end.
- Primary endpoint: trained minus gate arm in strict yield (the evaluation's ``lift_vs_gate_arm.exact_utility``), one
  number per seed; reported as the mean with a 95% t interval over the seeds.
- Secondary: trained minus warm start, gate arm minus warm start, trained minus base (strict yield); the reward the
  probe stage chose at each seed (the probe or which rival); each seed's own evaluation interval.
- Decision: "shows a gain" if the interval's lower bound is above 0, "shows a loss" if its upper bound is below 0,
  otherwise "no difference shown", stated with the interval.
- Power: the two seed-0 runs gave -0.012 and -0.009 with per-run evaluation intervals about +-0.05 to +-0.10 wide; at
  a between-seed SD of 0.04, five seeds resolve a mean difference of about 2.78 x 0.04 / sqrt(5) = 0.05.
- Cost: about 17 min a seed on 2 idle CPU cores; resumable (a finished stage is skipped; a committed seed is read
  back from ``--out``, not rerun).

    python experiments/demo_seeds/run.py --out experiments/demo_seeds/results [--max-seeds N]
    python experiments/demo_seeds/run.py --from-out experiments/demo_seeds/results
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SEEDS = [1, 2, 3, 4, 5]
STAGES = ["warm_start", "label", "probe", "grpo", "gate_arm", "evaluate"]
CONTRASTS = {  # name -> the evaluation summary's strict-yield change (its estimate and the seed's own interval)
    "trained - gate arm (primary)": "lift_vs_gate_arm",
    "trained - warm start": "lift_vs_warm_start",
    "trained - base": "lift",
}
DIFFERENCES = {"gate arm - warm start": ("gate_arm", "warm_start")}  # the evaluation compares these two nowhere
POLICIES = ("base", "warm_start", "gate_arm", "trained")


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seeds", type=int, nargs="+", default=SEEDS)
    p.add_argument("--config", default="configs/demo.yaml")
    p.add_argument("--workdir", default="runs/experiments/demo_seeds")
    p.add_argument("--out", default=None, help="the committed results: each finished seed's stage summaries")
    p.add_argument("--max-seeds", type=int, default=None, help="run at most this many new seeds (a session's budget)")
    p.add_argument("--from-out", default=None, help="recompute the report from a results folder; runs nothing")
    p.add_argument("overrides", nargs="*", help="dotted pipeline overrides for every seed (smoke runs only)")
    return p.parse_args(argv)


def run_seed(args, seed: int) -> Path:
    """The pipeline at ``seed`` in its own work folder (a finished stage is skipped, one cut short resumes)."""
    from propel.pipeline.run import run_pipeline
    from propel.pipeline.stage_configs import load_pipeline_config

    work = Path(args.workdir) / f"seed{seed}"
    run_pipeline(load_pipeline_config(args.config, [f"workdir={work}", f"seed={seed}", *args.overrides]))
    return work


def keep(work: Path, dest: Path) -> None:
    """Each stage's summary.json as ``<stage>_summary.json`` in ``dest`` (small; the rest stays in the work folder)."""
    dest.mkdir(parents=True, exist_ok=True)
    for stage in STAGES:
        shutil.copy(work / stage / "summary.json", dest / f"{stage}_summary.json")


def seed_row(folder: Path) -> dict:
    """One seed's numbers from its kept summaries."""
    ev = json.loads((folder / "evaluate_summary.json").read_text())
    probe = json.loads((folder / "probe_summary.json").read_text())
    row = {"seed": int(folder.name.removeprefix("seed")), "reward": probe.get("reward")}
    for name, key in CONTRASTS.items():
        c = ev[key]["exact_utility"]
        row[name] = {"estimate": c["estimate"], "low": c["low"], "high": c["high"]}
    for name, (a, b) in DIFFERENCES.items():  # a point estimate only
        row[name] = {"estimate": ev[a]["exact_utility"] - ev[b]["exact_utility"], "low": None, "high": None}
    for policy in POLICIES:
        row[policy] = {k: ev[policy][k] for k in ("exact_utility", "valid_rate", "valid_rate_lenient")}
    return row


def analyse(rows: list[dict]) -> dict:
    """Each contrast over the seeds: mean, 95% t interval, the decision of the pre-registration."""
    from propel.metrics.intervals import t_interval

    out = {}
    for name in [*CONTRASTS, *DIFFERENCES]:
        values = [r[name]["estimate"] for r in rows]
        ci = t_interval(values) if len(values) >= 2 else None
        decision = "too few seeds"
        if ci is not None:
            decision = "shows a gain" if ci.low > 0 else "shows a loss" if ci.high < 0 else "no difference shown"
        out[name] = {
            "seeds": len(values),
            "per_seed": values,
            "mean": sum(values) / len(values) if values else None,
            "t95": [ci.low, ci.high] if ci else None,
            "decision": decision,
        }
    return out


def results(out: Path) -> dict:
    """The kept seeds' rows and their analysis: what summary.json holds beside its date and commit."""
    rows = [seed_row(f) for f in sorted(out.glob("seed*")) if (f / "evaluate_summary.json").exists()]
    return {"rows": rows, "analysis": analyse(rows)}


def report(summary: dict, planned: int) -> str:
    a, rows = summary["analysis"], summary["rows"]
    primary = a["trained - gate arm (primary)"]
    ci = primary["t95"]
    where = f"{primary['mean']:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "(fewer than 2 seeds)"
    partial = "" if len(rows) >= planned else f" - PARTIAL, {len(rows)} of {planned} seeds"
    lines = [
        f"# The half-size demo over seeds: trained minus gate arm {where}, {primary['decision']}{partial}",
        "",
        f"Measured {summary['date']} at commit {summary['commit']}; design and pre-registration: "
        "`experiments/demo_seeds/run.py`'s header. Strict yield on 32 tasks per policy per seed.",
        "",
        "| seed | reward chosen | base | warm start | gate arm | trained | trained - gate arm [seed's 95%] |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        c = r["trained - gate arm (primary)"]
        ys = " | ".join(f"{r[p]['exact_utility']:.3f}" for p in POLICIES)
        lines.append(
            f"| {r['seed']} | {r['reward']} | {ys} | {c['estimate']:+.3f} [{c['low']:+.3f}, {c['high']:+.3f}] |"
        )
    lines += ["", "| contrast | seeds | mean | 95% t over seeds | decision |", "|---|---|---|---|---|"]
    for name, c in a.items():
        t95 = f"[{c['t95'][0]:+.3f}, {c['t95'][1]:+.3f}]" if c["t95"] else "-"
        mean = f"{c['mean']:+.3f}" if c["mean"] is not None else "-"
        lines.append(f"| {name} | {c['seeds']} | {mean} | {t95} | {c['decision']} |")
    return "\n".join(lines) + "\n"


def save(out: Path, planned: int) -> dict:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    summary = {"date": time.strftime("%Y-%m-%d"), "commit": commit.stdout.strip(), **results(out)}
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    (out / "report.md").write_text(report(summary, planned))
    return summary


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.from_out:
        out = Path(args.from_out)
        kept = json.loads((out / "summary.json").read_text())
        if json.loads(json.dumps({**kept, **results(out)})) != kept:
            raise SystemExit(f"{out}: the kept summaries do not reproduce summary.json")
        print(f"{out}: every number of summary.json reproduced")
        return kept
    out = Path(args.out or Path(args.workdir) / "results")
    ran = 0
    for seed in args.seeds:
        if (out / f"seed{seed}" / "evaluate_summary.json").exists():
            continue  # committed: read back, not rerun
        if args.max_seeds is not None and ran >= args.max_seeds:
            break
        keep(run_seed(args, seed), out / f"seed{seed}")
        ran += 1
        save(out, len(args.seeds))  # after every seed: a stopped session loses at most the seed in progress
    summary = save(out, len(args.seeds))
    print(report(summary, len(args.seeds)))
    return summary


if __name__ == "__main__":
    main()
