"""PROPEL vs solver-in-the-loop (SIL, the PROPEL paper's Table 3) and vs the validity gate alone, on one page: the
same GRPO run with the probe reward swapped for real solver trials on every valid task (SIL), or for a constant on
every valid task (the gate alone: does the probe add anything beyond it?), evaluated on the same fresh tasks, with
each arm's signal cost.

Runs on a finished demo workdir (``make demo``): each arm copies the demo's composed GRPO config
(``<workdir>/grpo/config.yaml``: model, LoRA, steps, sampling, seed), replaces its rewards (SIL:
``SolverInLoopReward`` with the label stage's solver, ``n_trials``, band and sampling; gate: ``ValidityReward``),
writes under ``<workdir>/<arm>/``, then evaluates its adapter with the demo's evaluation config. Both stages resume
like the pipeline's (a finished stage is skipped). The table: validity, utility, Distinct-3 and Self-BLEU-3 with 95%
intervals, each change vs base with its interval, RL step time, signal cost per task, solver trials online (during
RL) and offline (labeling); ``<workdir>/ablations.md`` holds it with every change in words and the command.
``--sil-equal-time`` gives SIL PROPEL's summed step time (``trainer.max_time``) instead of its step count: a SIL step
runs solver trials, so at equal time it takes fewer steps; ``--sil-seconds`` sets that budget (PROPEL's step time
remeasured alone, when PROPEL's run shared the machine); ``--sil-alone`` measures it: PROPEL's GRPO stage reruns
unchanged and alone into ``<workdir>/propel_alone/`` (resumable, skipped once done), and SIL gets that run's training
time as Lightning's ``Timer`` counts it (the clock ``max_time`` stops SIL by; kept in the checkpoint, so a resume does
not cut it short), with a check that the rerun's rewards match PROPEL's step by step. A finished arm trained under
another budget is refused: delete its folder to retrain it.

python experiments/propel_vs_sil/run.py --workdir runs/demo                 # both arms with the demo's step budget
python experiments/propel_vs_sil/run.py --workdir runs/demo --max-steps 10  # a smaller, documented budget
python experiments/propel_vs_sil/run.py --workdir runs/demo --arms gate     # only the gate-alone arm
python experiments/propel_vs_sil/run.py --workdir runs/experiments/propel_table --sil-equal-time
python experiments/propel_vs_sil/run.py --workdir runs/experiments/propel_table --sil-seconds 1500
python experiments/propel_vs_sil/run.py --workdir runs/experiments/propel_table --sil-alone
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import sys
import time
from pathlib import Path

import yaml
from rich.console import Console
from rich.table import Table

from propel.cli.lightning_cli import run_lightning
from propel.lit_modules.evaluation import SCORES, SUMMARY
from propel.pipeline.compare import lift
from propel.pipeline.signal_cost import labeling_trials, signal_cost
from propel.pipeline.stages import csv_metrics, latest_adapter

SIL = "propel.rewards.solver_in_loop.SolverInLoopReward"
GATE = "propel.rewards.ValidityReward"
ARMS = {"sil": "SIL", "gate": "validity gate alone"}
"""Arm folder (under the workdir) -> its name in the table."""
NEEDS_PROBE = ("AdversarialProbeMining", "RVPCallback")
"""Callbacks that read the probe reward: not part of the SIL arm."""


def _read(path: Path) -> dict:
    if not path.exists():
        raise SystemExit(f"{path} does not exist: run the demo first (make demo), then this benchmark")
    return yaml.safe_load(path.read_text()) if path.suffix == ".yaml" else json.loads(path.read_text())


def _moved(value, old: str, new: str):
    """Every string under ``value`` with the folder ``old`` replaced by ``new`` (the run's output paths)."""
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, list):
        return [_moved(v, old, new) for v in value]
    if isinstance(value, dict):
        return {k: _moved(v, old, new) for k, v in value.items()}
    return value


def arm_config(
    arm: str, grpo: dict, label: dict, out: Path, old: Path, max_steps: int | None, max_seconds: float | None = None
) -> dict:
    """The demo's GRPO config with the arm's reward (``sil``: the label stage's solver; ``gate``: a constant per
    valid task) and its outputs under ``out``; ``max_seconds`` bounds its training time (``trainer.max_time``)."""
    config = _moved(copy.deepcopy(grpo), str(old), str(out))
    model = config["model"]["init_args"]
    if arm == "sil":
        solver = label["model"]["init_args"]["solver"]
        domain = copy.deepcopy(config["data"]["init_args"]["domain"])
        model["rewards"] = [{"class_path": SIL, "init_args": {"domain": domain, "solver": solver}}]
    elif arm == "gate":
        model["rewards"] = [{"class_path": GATE}]
    else:
        raise SystemExit(f"unknown arm {arm!r}; choose from {sorted(ARMS)}")
    callbacks = config["trainer"].get("callbacks") or []
    config["trainer"]["callbacks"] = [c for c in callbacks if c["class_path"].rsplit(".", 1)[-1] not in NEEDS_PROBE]
    _rename_runs(config, arm)
    if max_steps is not None:
        config["trainer"]["max_steps"] = max_steps
    if max_seconds is not None:
        config["trainer"]["max_time"] = max_time(max_seconds)
    return config


def _rename_runs(config: dict, name: str) -> None:
    """The loggers' run names with ``grpo`` replaced by ``name``: an arm's W&B run is not taken for PROPEL's."""
    for logger in config["trainer"].get("logger") or []:
        if isinstance(logger, dict) and "name" in logger.get("init_args", {}):
            logger["init_args"]["name"] = logger["init_args"]["name"].replace("grpo", name)


def max_time(seconds: float) -> str:
    """``trainer.max_time`` as Lightning's ``DD:HH:MM:SS`` (a dict would be read back as a string)."""
    minutes, secs = divmod(math.ceil(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    return f"{days:02d}:{hours:02d}:{minutes:02d}:{secs:02d}"


STEP_TIMES = ("train/time/generation_s", "train/time/environment_s", "train/time/training_s")
"""A GRPO step's timed parts, as the trainer logs them."""


def step_seconds(metrics: dict) -> float:
    """The RL run's summed step times (rollout generation, environment, training): the time its steps took,
    whatever the process's wall clock did across resumes."""
    return float(sum(sum(v for v in metrics.get(key, []) if v == v) for key in STEP_TIMES))


ALONE = "propel_alone"
"""Folder (under the workdir) of PROPEL's GRPO stage rerun alone, for SIL's time budget."""
NEVER = "99:00:00:00"
"""A ``max_time`` no run reaches: it makes Lightning keep a ``Timer``, whose elapsed training time the checkpoint
holds."""


def timer_seconds(checkpoint: Path) -> tuple[float, int]:
    """The training time Lightning's ``Timer`` had counted at ``checkpoint`` (its own time plus any resumed run's) and
    the checkpoint's step."""
    import torch

    state = torch.load(checkpoint, map_location="cpu", weights_only=False)
    timers = [v for k, v in state.get("callbacks", {}).items() if k.split("{")[0] == "Timer"]
    if not timers:
        raise SystemExit(f"{checkpoint} holds no Timer state: the run was not trained with a max_time")
    return float(timers[0]["time_elapsed"]["train"]), int(state["global_step"])


def run_alone(workdir: Path) -> dict:
    """PROPEL's GRPO stage rerun unchanged and alone (resumed, or skipped once done): its training time by the Timer
    (at the last checkpoint, plus the step times of the steps after it, which no checkpoint holds) and how many steps'
    rewards match PROPEL's."""
    out = workdir / ALONE / "grpo"
    done = out / "summary.json"
    if not done.exists():
        config = _moved(_read(workdir / "grpo" / "config.yaml"), str(workdir / "grpo"), str(out))
        config["trainer"]["max_time"] = NEVER
        _rename_runs(config, ALONE)
        last = out / "checkpoints" / "last.ckpt"
        path = _write(config, out / "config.yaml")
        run_lightning("fit", path, ["--ckpt_path", str(last)] if last.exists() else None)
        metrics = csv_metrics(out)
        seconds, at = timer_seconds(last) if last.exists() else (0.0, 0)  # no checkpoint yet: the step times alone
        tail = {key: values[at:] for key, values in metrics.items()}  # one row per step: the steps after the checkpoint
        ours, theirs = metrics.get("train/reward/mean", []), csv_metrics(workdir / "grpo").get("train/reward/mean", [])
        summary = {
            "train_seconds": seconds + step_seconds(tail),
            "step_seconds": step_seconds(metrics),
            "steps": len(ours),
            "same_rewards": sum(a == b for a, b in zip(ours, theirs, strict=False)),
        }
        done.write_text(json.dumps(summary, indent=1))
    return _read(done)


def _write(config: dict, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def run_arm(arm: str, workdir: Path, max_steps: int | None, max_seconds: float | None = None) -> dict:
    """Train and evaluate one arm (skipping what is finished); its summary with the signal cost."""
    out = workdir / arm
    done = out / "grpo" / "summary.json"
    label = _read(workdir / "label" / "config.yaml")
    grpo = _read(workdir / "grpo" / "config.yaml")
    config = arm_config(arm, grpo, label, out / "grpo", workdir / "grpo", max_steps, max_seconds)
    written = out / "grpo" / "config.yaml"
    if written.exists():  # a finished or interrupted arm: only with the budget it was started with
        budget = {k: config["trainer"].get(k) for k in ("max_steps", "max_time")}
        started = _read(written)["trainer"]
        trained = {k: started.get(k) for k in budget}
        if trained != budget:
            raise SystemExit(f"{out} was trained with {trained}, not {budget}: delete it to train the {arm} arm again")
    if not done.exists():
        start, last = time.monotonic(), out / "grpo" / "checkpoints" / "last.ckpt"
        run_lightning("fit", _write(config, written), ["--ckpt_path", str(last)] if last.exists() else None)
        adapter = latest_adapter(out / "grpo" / "adapters")
        if adapter is None:
            raise SystemExit(f"the {arm} run saved no adapter under {out / 'grpo' / 'adapters'}")
        metrics = csv_metrics(out / "grpo")
        summary = {
            "steps": len(metrics.get("train/reward/mean", [])),
            "seconds": time.monotonic() - start,
            "adapter": adapter,
            "signal_cost": signal_cost(metrics, 0),
        }
        done.write_text(json.dumps(summary, indent=1))
    summary = {**_read(done), "step_seconds": step_seconds(csv_metrics(out / "grpo"))}
    evaluation = out / "evaluate"
    if not (evaluation / SUMMARY).exists():
        config = _moved(
            _read(workdir / "evaluate" / "trained" / "config.yaml"),
            str(workdir / "evaluate" / "trained"),
            str(evaluation),
        )
        config["model"]["init_args"]["adapter"] = summary["adapter"]
        run_lightning("test", _write(config, evaluation / "config.yaml"))
    return summary


METRICS = {"valid_rate": "valid", "utility": "utility", "distinct_3": "Distinct-3", "self_bleu_3": "Self-BLEU-3"}
"""The compared numbers (the PROPEL paper's Table 3 and its diversity columns) -> column name."""


def _rate(summary: dict, key: str) -> str:
    value, bounds = summary.get(key), (summary.get("intervals") or {}).get(key)
    if value is None:
        return "-"
    return f"{value:.3f} [{bounds[0]:.3f}, {bounds[1]:.3f}]" if bounds else f"{value:.3f}"


def _change(c: dict) -> str:
    return f"{c['estimate']:+.3f} [{c['low']:+.3f}, {c['high']:+.3f}]" if "estimate" in c else "-"


AGAINST = {**METRICS, "utility_valid": "utility among valid"}
"""What PROPEL is compared on against each ablation: the table's numbers and the in-band share of valid tasks (does
the probe pick better tasks among the valid ones, beyond making more of them valid?)."""


def _against_propel(evals: dict, scores: dict, arms: list[str]) -> list[str]:
    """PROPEL minus each ablation on the same fresh tasks (the question each arm answers), as Markdown lines."""
    if not arms:
        return []
    columns = ["PROPEL minus", *AGAINST.values()]
    rows, words = [], []
    for name in arms:
        changes = lift(evals[name], evals["PROPEL"], scores[name], scores["PROPEL"])
        rows.append([name, *(_change(changes.get(key, {})) for key in AGAINST)])
        words += [f"- PROPEL vs {name}: {changes[key]['words']}." for key in AGAINST if "words" in changes.get(key, {})]
    return ["PROPEL against each ablation (95% intervals):", "", _markdown(columns, rows), "", *words, ""]


def _markdown(columns: list[str], rows: list[list[str]]) -> str:
    """The table as Markdown (what ``ablations.md`` holds)."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=Path("runs/demo"), help="a finished demo workdir")
    parser.add_argument("--max-steps", type=int, default=None, help="each arm's step budget (default: the demo's)")
    parser.add_argument("--arms", nargs="+", choices=sorted(ARMS), default=sorted(ARMS, reverse=True))
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument(
        "--sil-equal-time", action="store_true", help="SIL trains for PROPEL's summed step time (at most its steps)"
    )
    budget.add_argument(
        "--sil-alone",
        action="store_true",
        help=f"rerun PROPEL's GRPO stage alone (<workdir>/{ALONE}) and give SIL its training time",
    )
    budget.add_argument(
        "--sil-seconds",
        type=float,
        default=None,
        help="SIL's training time budget in seconds (at most PROPEL's steps), e.g. PROPEL's step time remeasured "
        "alone when its own run shared the machine",
    )
    args = parser.parse_args(argv)
    workdir = args.workdir
    grpo, label = _read(workdir / "grpo" / "summary.json"), _read(workdir / "label" / "summary.json")
    propel_seconds = step_seconds(csv_metrics(workdir / "grpo"))
    seconds = {"sil": propel_seconds} if args.sil_equal_time else {}
    if args.sil_seconds is not None:
        if args.sil_seconds <= 0:
            parser.error(f"--sil-seconds must be > 0, got {args.sil_seconds}")
        seconds = {"sil": args.sil_seconds}
    alone = run_alone(workdir) if args.sil_alone and "sil" in args.arms else None
    if alone is not None:
        seconds = {"sil": alone["train_seconds"]}
    runs = {arm: run_arm(arm, workdir, args.max_steps, seconds.get(arm)) for arm in args.arms}
    n_trials = _read(workdir / "label" / "config.yaml")["model"]["init_args"]["solver"]["n_trials"]
    propel_cost = grpo.get("signal_cost") or signal_cost(
        csv_metrics(workdir / "grpo"), labeling_trials(label, n_trials)
    )
    folders = {"base": workdir / "evaluate" / "base", "PROPEL": workdir / "evaluate" / "trained"}
    folders.update({ARMS[arm]: workdir / arm / "evaluate" for arm in runs})
    evals = {name: _read(folder / SUMMARY) for name, folder in folders.items()}
    scores = {name: _read(folder / SCORES) if (folder / SCORES).exists() else {} for name, folder in folders.items()}
    arms = {"base": (None, None), "PROPEL": ({**grpo, "step_seconds": propel_seconds}, propel_cost)}
    arms.update({ARMS[arm]: (run, run["signal_cost"]) for arm, run in runs.items()})

    table = Table(title=f"PROPEL vs its ablations on {evals['base']['tasks']} fresh tasks per policy (95% intervals)")
    columns = ["policy", "RL steps", "RL step time s"]
    for title in METRICS.values():
        columns += [title, "change vs base"]
    columns += ["signal cost per task (s)", "solver trials online", "solver trials offline"]
    for column in columns:
        table.add_column(column, no_wrap=column == "policy")
    words, rows = [], []
    for name, (run, cost) in arms.items():
        e, s = evals[name], scores[name]
        changes = {} if run is None else lift(evals["base"], e, scores["base"], s)
        cells = [name, "-" if run is None else str(run["steps"]), "-" if run is None else f"{run['step_seconds']:.0f}"]
        for key in METRICS:
            cells += [_rate(e, key), "-" if run is None else _change(changes.get(key, {}))]
        cells += [
            "-"
            if cost is None
            else ("n/a" if cost["signal_seconds_per_task"] is None else f"{cost['signal_seconds_per_task']:.3f}"),
            "-" if cost is None else str(cost["solver_trials_online"]),
            "-" if cost is None else str(cost["solver_trials_offline"]),
        ]
        table.add_row(*cells)
        rows.append(cells)
        words += [f"- {name}: {changes[key]['words']}." for key in METRICS if "words" in changes.get(key, {})]
    Console(width=240).print(table)
    against = _against_propel(evals, scores, [ARMS[arm] for arm in runs])
    command = "python experiments/propel_vs_sil/run.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = [f"# {table.title}", "", _markdown(columns, rows), "", "Each change against base:", "", *words, ""]
    if "sil" in seconds:
        text += [
            f"SIL's training time budget: {seconds['sil']:.0f} s (PROPEL's summed step time: {propel_seconds:.0f} s).",
            "",
        ]
    if alone is not None:
        text += [
            f"That budget is PROPEL's GRPO stage rerun alone (`{ALONE}/`): {alone['train_seconds']:.0f} s of training "
            f"by Lightning's Timer ({alone['step_seconds']:.0f} s of it in steps); its rewards matched PROPEL's at "
            f"{alone['same_rewards']} of {alone['steps']} steps.",
            "",
        ]
    text += ["RL step time: the summed generation, environment and training time of the run's steps.", ""]
    text += against
    text += [f"Command: `{command.strip()}`.", ""]
    (workdir / "ablations.md").write_text("\n".join(text))
    return {name: {"valid_rate": evals[name]["valid_rate"], "utility": evals[name]["utility"]} for name in arms}


if __name__ == "__main__":
    main()
