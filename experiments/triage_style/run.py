"""Experiment: do the six triage rewards move style before content? GRPO on IT-ticket triage over several seeds.

Each seed trains ``experiments/triage_style/config.yaml`` (an overlay on the triage GRPO config: the answer forced
to open with ``submit_resolution {"resolution": "``, 1 ticket x 4 answers per step, 200 steps) into
``<out>/seed<s>/``; ``RewardCurves`` records every component's mean per step (``reward_curves.json``). A seed that
finished is skipped on a rerun; one that was interrupted resumes from its last checkpoint (``ModelCheckpoint`` every
10 steps, ``last.ckpt``); ``settings.json`` refuses a folder made with other settings. The report (``report.md``)
gives, per component, the mean of the first and of the last ``--window`` steps, averaged over seeds, and the change,
each with a 95% t interval over seeds (each seed's window mean is one value), each seed's own change, and says which
components moved (interval of the change excludes 0), and per seed the change with a 95% Welch interval over the
two windows' steps (whether that run changed; the only interval one seed has): the seed's claim is that the style
components (format, parsimony, repetition, calibration) move while resolution does not. The report states how many
steps each seed recorded: a run ended early by ``--trainer.max_time`` (a time-boxed GPU run) has fewer than
``--steps``, and its windows are its own first and last steps. ``curves.png`` plots every component per seed.
Training windows mix the policy with the tickets each step drew, so every component is also measured on fixed
held-out tickets at checkpoints (``HeldOutRewards`` in the overlay: the eval split, step 0 and every 50 steps); the
report's last table compares step 0 with the last checkpoint over seeds (``held_out.json``). Each seed draws its
own ticket order (``--data.init_args.seed`` = the run seed).

    python experiments/triage_style/run.py                         # 3 seeds x 200 steps (a GPU-sized run)
    python experiments/triage_style/run.py --steps 40 --window 10  # a shorter, documented budget
    python experiments/triage_style/run.py -- --trainer.accelerator=gpu --trainer.precision=bf16-mixed \
        --model.init_args.dtype=bfloat16 --trainer.max_time=00:00:07:30     # on one GPU, time-boxed per seed
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from scipy import stats

from propel.metrics.intervals import mean_t_interval as t_interval
from propel.pools.manifest import check_manifest

CONFIGS = ("configs/grpo/base.yaml", "configs/triage/grpo.yaml", "experiments/triage_style/config.yaml")
STYLE = ("format", "parsimony", "repetition", "calibration")


def settings(args: argparse.Namespace) -> dict:
    return {"model": args.model, "steps": args.steps, "extra": args.extra, "configs": list(CONFIGS), "data_seed": "run"}


def run_seed(args: argparse.Namespace, seed: int, root: Path) -> dict[str, list[float]]:
    """Train (or resume, or skip) one seed; its per-step means per component."""
    import yaml

    from propel.cli.lightning_cli import resolve_lightning_args, run_lightning

    curves = root / "reward_curves.json"
    if not curves.exists():
        print(f"[exp] seed {seed}: training {args.steps} steps into {root}", flush=True)
        extra = ["-c", CONFIGS[1], "-c", CONFIGS[2], f"--seed_everything={seed}", f"--trainer.max_steps={args.steps}"]
        extra += [f"--data.init_args.seed={seed}"]  # each seed draws its own ticket order
        extra += [f"--trainer.default_root_dir={root}", f"--model.init_args.model={args.model}", *args.extra]
        root.mkdir(parents=True, exist_ok=True)  # the run's complete config, every default filled in
        composed = resolve_lightning_args("fit", ["-c", CONFIGS[0], *extra])
        (root / "config.yaml").write_text(yaml.safe_dump(composed, sort_keys=False))
        last = root / "checkpoints" / "last.ckpt"
        run_lightning("fit", Path(CONFIGS[0]), extra + (["--ckpt_path", str(last)] if last.exists() else []))
    history = json.loads(curves.read_text())
    return {name: [v for _, v in points] for name, points in history.items()}


def within_seed(values: list[float], window: int) -> list[float | None]:
    """One seed's change, last window minus first, with a 95% Welch interval that treats each step's mean as one draw
    around its window's level: whether this run changed, not whether another seed would. ``None`` bounds when a
    window has fewer than two steps or neither varies."""
    first, last = np.asarray(values[:window], dtype=float), np.asarray(values[-window:], dtype=float)
    change = float(last.mean() - first.mean())
    if min(len(first), len(last)) < 2 or (first.var() == 0 and last.var() == 0):
        return [change, None, None]
    low, high = stats.ttest_ind(last, first, equal_var=False).confidence_interval(0.95)
    return [change, float(low), float(high)]


def excludes_zero(interval) -> bool:
    """Whether ``(centre, low, high)`` lies wholly on one side of 0 (``None`` or NaN bounds: no)."""
    return interval[1] is not None and (interval[1] > 0 or interval[2] < 0)


def components(runs: dict[int, dict[str, list[float]]]) -> list[str]:
    """Every recorded component, the total first."""
    return sorted({n for r in runs.values() for n in r}, key=lambda n: (n != "total", n))


def analyse(runs: dict[int, dict[str, list[float]]], window: int) -> list[dict]:
    rows = []
    names = components(runs)
    for name in names:
        firsts = [float(np.mean(r[name][:window])) for r in runs.values() if r.get(name)]
        lasts = [float(np.mean(r[name][-window:])) for r in runs.values() if r.get(name)]
        changes = [b - a for a, b in zip(firsts, lasts, strict=True)]
        change = t_interval(changes)
        moved = excludes_zero(change)
        own = [within_seed(r[name], window) for r in runs.values() if r.get(name)]
        rows.append(
            {
                "component": name,
                "first": t_interval(firsts),
                "last": t_interval(lasts),
                "change": change,
                "per_seed_change": changes,
                "moved": moved,
                "within_seed_change": own,
                "moved_within": sum(excludes_zero(c) for c in own),
            }
        )
    return rows


def held_out(root: Path, seeds: list[int]) -> dict[int, dict[str, list[list[float]]]]:
    """Each seed's held-out checkpoints (``HeldOutRewards``' ``held_out_curves.json``): ``{name: [[step, mean]]}``;
    seeds that have none are left out."""
    paths = {seed: root / f"seed{seed}" / "held_out_curves.json" for seed in seeds}
    return {seed: json.loads(p.read_text()) for seed, p in paths.items() if p.exists()}


def analyse_held_out(curves: dict[int, dict[str, list[list[float]]]]) -> list[dict]:
    """Per component: its held-out mean at step 0 and at each seed's last checkpoint, and the change, each a mean
    with a 95% t interval over seeds (a seed's checkpoint mean is one value)."""
    rows = []
    for name in components({seed: dict.fromkeys(c) for seed, c in curves.items()}):
        points = [c[name] for c in curves.values() if c.get(name)]
        measured = [p for p in points if p[0][0] == 0]  # a run resumed without its step 0 has no start
        pairs = [(p[0][1], p[-1][1]) for p in measured if len(p) > 1]
        starts, ends, changes = [p[0][1] for p in measured], [b for _, b in pairs], [b - a for a, b in pairs]
        rows.append({"component": name, "start": t_interval(starts), "end": t_interval(ends),
                     "change": t_interval(changes), "per_seed_change": changes,
                     "last_steps": [p[-1][0] for p in points]})  # fmt: skip
    return rows


def steps_recorded(runs: dict[int, dict[str, list[float]]]) -> dict[int, int]:
    """Steps each seed recorded (its total reward's points): fewer than asked when ``max_time`` ended the run."""
    return {seed: len(r.get("total", [])) for seed, r in runs.items()}


def plot(runs: dict[int, dict[str, list[float]]], path: Path) -> Path:
    """One panel per component: every seed's per-step mean, and its 10-step running mean."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = components(runs)
    cols = (len(names) + 1) // 2
    fig, axes = plt.subplots(2, cols, figsize=(3.2 * cols, 5.6), squeeze=False)
    for ax in axes.flat[len(names) :]:
        ax.axis("off")
    for ax, name in zip(axes.flat, names, strict=False):
        for seed, r in runs.items():
            values = np.asarray(r.get(name, []), dtype=float)
            if not len(values):
                continue
            (line,) = ax.plot(values, alpha=0.25, lw=0.8)
            k = min(10, len(values))
            ax.plot(
                np.arange(k - 1, len(values)),
                np.convolve(values, np.ones(k) / k, "valid"),
                color=line.get_color(),
                lw=1.6,
                label=f"seed {seed}",
            )
        ax.set_title(name)
        ax.set_xlabel("step")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def report(
    rows: list[dict], args: argparse.Namespace, steps: dict[int, int], command: str, held: list[dict] | None = None
) -> str:
    def fmt(t, sign=""):  # one seed: its value, no interval
        if t[1] is None or t[1] != t[1]:
            return f"{t[0]:{sign}.3f}"
        return f"{t[0]:{sign}.3f} [{t[1]:{sign}.3f}, {t[2]:{sign}.3f}]"

    counts = sorted(set(steps.values()))
    if counts == [args.steps]:
        recorded = f"{args.steps} steps each"
    else:
        recorded = (
            f"steps recorded per seed: {', '.join(f'{s}: {n}' for s, n in steps.items())} of the {args.steps} asked "
            "(ended early: --trainer.max_time)"
        )
    lines = [
        "# Triage: style against content (extraction from the retrieved runbook)",
        "",
        f"{len(steps)} seed{'s' * (len(steps) != 1)} ({list(steps)}), {recorded}; windows: the first and the last "
        f"{args.window} steps of each seed; 95% t intervals over seeds (each seed's window mean is one value).",
        "",
        "| component | first window | last window | change | change per seed | moved |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        per_seed = ", ".join(f"{c:+.3f}" for c in r["per_seed_change"])
        lines.append(
            f"| {r['component']} | {fmt(r['first'])} | {fmt(r['last'])} | {fmt(r['change'], '+')} | {per_seed} | "
            f"{'yes' if r['moved'] else 'no'} |"
        )
    lines += [
        "",
        "Within each seed: the change with a 95% Welch interval over its steps (each step's mean over its answers is "
        "one draw around its window's level: whether that run changed, not whether another seed would).",
        "",
        "| component | " + " | ".join(f"seed {s}" for s in steps) + " | seeds whose interval excludes 0 |",
        "|---|" + "---|" * len(steps) + "---|",
    ]
    for r in rows:
        cells = [fmt(c, "+") if c[1] is not None else f"{c[0]:+.3f} (no interval)" for c in r["within_seed_change"]]
        lines.append(f"| {r['component']} | {' | '.join(cells)} | {r['moved_within']} of {len(cells)} |")
    if min(counts) < 2 * args.window:
        lines += ["", f"(a seed recorded fewer than {2 * args.window} steps: its two windows overlap)"]
    by = {r["component"]: r for r in rows}
    style_moved = [n for n in STYLE if n in by and by[n]["moved"]]
    resolution = by.get("resolution")
    if len(steps) > 1:
        lines += ["", f"Style components that moved (over seeds): {', '.join(style_moved) or 'none'}."]
        if resolution is not None:
            lines.append(f"Resolution {'moved' if resolution['moved'] else 'did not move distinguishably from 0'}.")
    else:
        lines += ["", "One seed: no interval over seeds; the within-seed intervals say whether this run changed."]
    within = [n for n in STYLE if n in by and by[n]["moved_within"] == len(steps)]
    lines.append(f"Style components that moved within every seed: {', '.join(within) or 'none'}.")
    others = [r["component"] for r in rows if r["component"] not in (*STYLE, "total", "resolution")]
    others = [n for n in others if by[n]["moved_within"] == len(steps)]
    if others:
        lines.append(f"Other components that moved within every seed: {', '.join(others)}.")
    if resolution is not None:
        lines.append(f"Resolution moved within {resolution['moved_within']} of {len(steps)} seeds.")
    if held:
        lines += ["", "## On fixed held-out tickets (the eval split), step 0 against the last checkpoint", "",
                  "Every component measured by `HeldOutRewards` on the same held-out tickets at each checkpoint (not "
                  "the training windows); 95% t intervals over seeds (each seed's checkpoint mean is one value).", "",
                  "| component | step 0 | last checkpoint | change | change per seed |",
                  "|---|---|---|---|---|"]  # fmt: skip
        for r in held:
            per_seed = ", ".join(f"{c:+.3f}" for c in r["per_seed_change"])
            lines.append(f"| {r['component']} | {fmt(r['start'])} | {fmt(r['end'])} | {fmt(r['change'], '+')} | "
                         f"{per_seed} |")  # fmt: skip
        content = next((r for r in held if r["component"] == "resolution"), None)
        if content is not None and len(content["per_seed_change"]) > 1:  # the endpoint: held-out content's change
            shown = "excludes 0: content moved" if excludes_zero(content["change"]) else "includes 0: not shown"
            n = len(content["per_seed_change"])
            lines += ["", f"Held-out content (resolution), step 0 to the last checkpoint, over {n} seeds: "
                      f"{fmt(content['change'], '+')}; the interval {shown}."]  # fmt: skip
    lines += ["", "![every component per seed](curves.png)", "", f"Command: `{command}`.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--window", type=int, default=20, help="steps in the first and in the last window")
    p.add_argument("--out", default="runs/experiments/triage_style")
    p.add_argument("extra", nargs="*", help="more `propel fit` flags for every seed (after --)")
    args = p.parse_args(argv)
    if args.window * 2 > args.steps:
        raise SystemExit(f"--window {args.window} x 2 exceeds --steps {args.steps}: the windows would overlap")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    check_manifest(out, settings(args), "experiment folder")  # refuses runs made with other settings
    runs = {seed: run_seed(args, seed, out / f"seed{seed}") for seed in args.seeds}
    rows = analyse(runs, args.window)
    steps = steps_recorded(runs)
    plot(runs, out / "curves.png")
    command = "python experiments/triage_style/run.py " + " ".join(
        argv if argv is not None else __import__("sys").argv[1:]
    )
    held = analyse_held_out(held_out(out, args.seeds))
    text = report(rows, args, steps, command.strip(), held)
    (out / "analysis.json").write_text(json.dumps(rows, indent=1))
    (out / "held_out.json").write_text(json.dumps(held, indent=1))
    (out / "report.md").write_text(text)
    print(text)
    return rows


if __name__ == "__main__":
    main()
