"""Experiment: does turn-targeted KL stay on its turn? The targeted term against the same divergence over the whole
sequence, with an unrelated-hint control, over several seeds.

The setting is ``configs/agent/distill.yaml``: the bundled model runs ``ShellTasks`` (``create_file``, no solved
example) in ``ToolEnv`` for two assistant turns, and at turn 0 it mostly writes prose instead of a tool call. The
hint (the config's ``hints.yaml`` text: answer with exactly one tool call, with an example) is spliced in before
turn 0 of every episode; the teacher is the policy with its adapters off (``teacher: base``, a fixed target) and
the student the policy without the hint. Three arms per seed, each trained ``--steps`` steps into
``<out>/<arm>/seed<s>/``:

* ``targeted``: the divergence on turn 0's tokens only (``turn_kl.scope: turn``);
* ``sequence``: the same divergence on every assistant token from turn 0 on (``turn_kl.scope: sequence``);
* ``control``: the targeted term with an unrelated hint in place of the real one.

Every ``--every`` steps, on held-out episodes the base model ran on tasks never trained on:

* the target gap: KL(teacher with the hint || student) on turn 0, and the gain (its fall since step 0);
* the drift: KL(step 0 || now) per token on turn 1 (off-target: the targeted arm never trains it) and on turn 0;
* at the start and the end, the behaviour the hint teaches: the share of first-turn samples without the hint that
  are a valid tool call (Wilson intervals).

At equal target gain: for each seed, the gain both arms reach (the smaller of their largest gains) and each arm's
off-target drift at that gain (linear interpolation along its checkpoints); the claim holds if the sequence arm's
drift minus the targeted arm's has a 95% t interval over seeds above 0. An arm-seed that finished is read back on a
rerun (``result.json``); one that was interrupted trains again from its start; ``settings.json`` refuses a folder
made with other settings.

    python benchmarks/exp_turn_kl_scope.py                        # 3 seeds x 3 arms (make exp-turn-kl-scope)
    python benchmarks/exp_turn_kl_scope.py --seeds 0 --steps 4    # a quick look
    python benchmarks/exp_turn_kl_scope.py --out runs/experiments/turn_kl_scope_gpu -- --trainer.accelerator=gpu \
        --trainer.precision=bf16-mixed --model.init_args.dtype=bfloat16   # on one GPU (the trainer takes both)
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

import numpy as np
import torch
from scipy import stats

from propel.metrics.intervals import wilson
from propel.pools.manifest import check_manifest
from propel.rollouts.hints import Hint, HintSource

CONFIGS = ("configs/grpo/base.yaml", "configs/agent/distill.yaml")
ARMS = {"targeted": ("turn", "real"), "sequence": ("sequence", "real"), "control": ("turn", "control")}
CONTROL_HINT = "Take a deep breath and read the task again."
HELD_OUT_SEED = 12345


class FirstTurnHint(HintSource):
    """The same hint before turn 0 of every episode (the experiment's fixed target turn)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def hints(self, sample) -> list[Hint]:
        return [Hint(0, self.text)]


def settings(args: argparse.Namespace) -> dict:
    keys = ("model", "steps", "every", "kl_coefficient", "lr", "episodes", "contexts", "held_out", "samples", "extra")
    return {k: getattr(args, k) for k in keys} | {"configs": list(CONFIGS)}


def build(args: argparse.Namespace, seed: int, scope: str):
    """The arm's module and datamodule from the configs and flags, and the ``pl.Trainer`` arguments they set
    (accelerator and precision: CPU and fp32 unless ``--trainer.*`` flags after ``--`` say otherwise)."""
    from propel.cli.lightning_cli import PropelCLI

    flags = [f"--seed_everything={seed}", f"--trainer.max_steps={args.steps}", "--trainer.logger=false",
             "--trainer.accelerator=cpu",
             f"--model.init_args.model={args.model}", f"--model.init_args.group_size={args.episodes}",
             f"--model.init_args.lr={args.lr}", f"--model.init_args.turn_kl.scope={scope}",
             "--model.init_args.turn_kl.teacher=base",
             f"--model.init_args.turn_kl.kl_coefficient={args.kl_coefficient}",
             "--model.init_args.turn_kl.temperature_schedule=[1.0]", "--model.init_args.turn_kl.control_hint=null",
             f"--data.init_args.contexts_per_step={args.contexts}", *args.extra]  # fmt: skip
    cli = PropelCLI(args=[arg for c in CONFIGS for arg in ("-c", c)] + flags, run=False)
    trainer = {k: cli.config["trainer"][k] for k in ("accelerator", "precision")}
    return cli.model, cli.datamodule, trainer


def first_turn_rate(module, contexts, n: int) -> tuple[int, int]:
    """Valid tool calls among ``n`` first-turn samples per held-out task, without the hint."""
    from propel.engines.engine import Prompt
    from propel.engines.tool_calls import CLOSE, ToolCall, check_arguments, parse_tool_call
    from propel.envs import ToolEnv
    from propel.rollouts.conversation import Conversation

    env = ToolEnv()
    sampling = copy.deepcopy(module.sampling)
    sampling.n, sampling.stop = n, [CLOSE]
    prompts = []
    for c in contexts:
        conv = Conversation(module.tokenizer, [{"role": "system", "content": env.system_prompt}, *c.prompt.messages],
                            env.tools)  # fmt: skip
        prompts.append(Prompt(token_ids=list(conv.ids)))
    with module.eval_mode():
        groups = module.engine.generate(prompts, sampling)
    ok = sum(
        isinstance(call := parse_tool_call(out.text), ToolCall) and check_arguments(call, env.tools) is None
        for group in groups
        for out in group
    )
    return int(ok), n * len(contexts)


class HeldOut:
    """The held-out episodes' turn 0 and turn 1 (token ids and lengths), and the fixed teacher's turn-0 logits."""

    def __init__(self, module, episodes, hint: str) -> None:
        from propel.rollouts.hints import turn_context

        self.module, self.rows = module, {}
        for k in (0, 1):
            rows = [turn_context(s, k) for s in episodes if sum(t.trainable for t in s.all_turns) > k]
            self.rows[k] = [(prefix + ids, len(ids)) for prefix, ids in rows if ids]
        turn0 = self.rows[0]
        spliced = [module.splicer.splice(ids[:-n], hint) + ids[-n:] for ids, n in turn0]
        with module.eval_mode(), torch.no_grad():
            self.teacher = module._turn_logits(spliced, [n for _, n in turn0], "teacher").cpu()
        self.start = self.logits()

    def logits(self) -> dict[int, torch.Tensor]:
        out = {}
        with self.module.eval_mode(), torch.no_grad():
            for k, rows in self.rows.items():
                if rows:
                    out[k] = self.module._turn_logits([ids for ids, _ in rows], [n for _, n in rows], "student").cpu()
        return out

    def measure(self) -> dict[str, float]:
        from propel.losses.distillation import DivergenceSpec, masked_mean, token_divergence

        now, spec, out = self.logits(), self.module.turn_kl.divergence, {}
        mask = {k: self.module._mask([n for _, n in rows]).cpu() for k, rows in self.rows.items() if rows}
        out["target_gap"] = float(masked_mean(token_divergence(now[0], self.teacher, spec), mask[0]))
        for k in now:
            drift = token_divergence(now[k], self.start[k], DivergenceSpec("forward_kl"))  # KL(start || now)
            out[f"drift_turn{k}"] = float(masked_mean(drift, mask[k]))
        return out


def run_arm(args: argparse.Namespace, arm: str, seed: int, root: Path) -> dict:
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import Callback

    from propel.rollouts.episode_runner import EpisodeRunner
    from propel.sandbox import LocalSandbox
    from propel.tasks.shell import ShellTasks

    result_path = root / "result.json"
    if result_path.exists():
        return json.loads(result_path.read_text())
    print(f"[exp] {arm} seed {seed}: training {args.steps} steps into {root}", flush=True)
    scope, which = ARMS[arm]
    pl.seed_everything(seed)
    module, data, placement = build(args, seed, scope)
    module.configure_model()
    real = module.hints.tool_error  # the config's hint text (hints.yaml)
    module.hints = FirstTurnHint(real if which == "real" else CONTROL_HINT)
    held_out = ShellTasks(["create_file"], demonstration=False).contexts(args.held_out, seed=HELD_OUT_SEED)
    torch.manual_seed(HELD_OUT_SEED)  # the same held-out episodes in every arm and seed (the base model ran them)
    with LocalSandbox(max_workers=1) as box:
        runner = EpisodeRunner(module.engine, data.make_env, box, concurrency=8)
        sampling = copy.deepcopy(module.sampling)
        sampling.n = 2
        groups, _ = runner.run(held_out, sampling)
    probe = HeldOut(module, [s for g in groups for s in g], real)
    torch.manual_seed(seed)
    behaviour = {"before": first_turn_rate(module, held_out, args.samples)}
    curve = [{"step": 0, **probe.measure()}]

    class Measure(Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            step = trainer.global_step
            if step % args.every == 0 or step == args.steps:
                curve.append({"step": step, **probe.measure()})
                print(f"[exp] {arm} seed {seed} step {step}: {curve[-1]}", flush=True)

    trainer = pl.Trainer(max_steps=args.steps, **placement, devices=1, logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, callbacks=[Measure()])  # fmt: skip
    trainer.fit(module, datamodule=data)
    torch.manual_seed(seed)
    behaviour["after"] = first_turn_rate(module, held_out, args.samples)
    result = {"arm": arm, "seed": seed, "curve": curve, "behaviour": behaviour, "held_out_turns": {
        k: len(rows) for k, rows in probe.rows.items()}}  # fmt: skip
    root.mkdir(parents=True, exist_ok=True)
    result_path.write_text(json.dumps(result, indent=1))
    return result


def t_interval(values: list[float]) -> tuple[float, float, float]:
    """Mean and 95% t interval over seeds (NaN bounds with one seed)."""
    a = np.asarray(values, dtype=float)
    mean = float(a.mean())
    if len(a) < 2:
        return mean, float("nan"), float("nan")
    half = float(stats.t.ppf(0.975, len(a) - 1) * a.std(ddof=1) / np.sqrt(len(a)))
    return mean, mean - half, mean + half


def gains(result: dict) -> tuple[np.ndarray, np.ndarray]:
    """Along an arm's checkpoints: its target gain (the gap's fall since step 0) and its off-target drift."""
    curve = result["curve"]
    gain = np.array([curve[0]["target_gap"] - c["target_gap"] for c in curve])
    drift = np.array([c.get("drift_turn1", float("nan")) for c in curve])
    return gain, drift


def drift_at(result: dict, level: float) -> float:
    """The off-target drift where the arm's gain first reaches ``level`` (linear between checkpoints)."""
    gain, drift = gains(result)
    for i in range(1, len(gain)):
        if gain[i] >= level:
            lo, hi = gain[i - 1], gain[i]
            w = 1.0 if hi == lo else float(np.clip((level - lo) / (hi - lo), 0.0, 1.0))
            return float(drift[i - 1] + w * (drift[i] - drift[i - 1]))
    return float("nan")


def analyse(results: dict[str, dict[int, dict]]) -> dict:
    seeds = sorted(set(results["targeted"]) & set(results["sequence"]))
    matched = []
    for seed in seeds:
        t, s = results["targeted"][seed], results["sequence"][seed]
        level = min(gains(t)[0].max(), gains(s)[0].max())
        if level <= 0:
            matched.append({"seed": seed, "gain": level, "targeted": float("nan"), "sequence": float("nan")})
            continue
        matched.append({"seed": seed, "gain": float(level), "targeted": drift_at(t, level),
                        "sequence": drift_at(s, level)})  # fmt: skip
    usable = [m for m in matched if np.isfinite(m["targeted"]) and np.isfinite(m["sequence"])]
    arms = {}
    for arm, runs in results.items():
        last = [r["curve"][-1] for r in runs.values()]
        first = [r["curve"][0] for r in runs.values()]
        before = [r["behaviour"]["before"] for r in runs.values()]
        after = [r["behaviour"]["after"] for r in runs.values()]
        arms[arm] = {
            "gap_before": t_interval([c["target_gap"] for c in first]),
            "gap_after": t_interval([c["target_gap"] for c in last]),
            "gain": t_interval([a["target_gap"] - b["target_gap"] for a, b in zip(first, last, strict=True)]),
            "drift_turn0": t_interval([c.get("drift_turn0", float("nan")) for c in last]),
            "drift_turn1": t_interval([c.get("drift_turn1", float("nan")) for c in last]),
            "valid_before": [sum(k for k, _ in before), sum(n for _, n in before)],
            "valid_after": [sum(k for k, _ in after), sum(n for _, n in after)],
        }
    difference = t_interval([m["sequence"] - m["targeted"] for m in usable]) if usable else None
    return {"arms": arms, "matched": matched, "difference": difference, "seeds": seeds}


def verdict(analysis: dict) -> list[str]:
    d, out = analysis["difference"], []
    if d is None:
        return ["No seed reached a positive target gain in both arms: there is no equal-gain point to compare at."]
    mean, low, high = d
    where = f"{mean:+.4f} [{low:+.4f}, {high:+.4f}] over {sum(np.isfinite(m['sequence']) for m in analysis['matched'])}"
    if low > 0:
        out.append(f"At equal target gain the targeted arm drifts less off its turn: sequence - targeted = {where} "
                   "seeds (the interval excludes 0): the claim holds here.")  # fmt: skip
    elif high < 0:
        out.append(f"At equal target gain the targeted arm drifts MORE off its turn: sequence - targeted = {where} "
                   "seeds: the claim does not hold here.")  # fmt: skip
    else:
        out.append(f"At equal target gain the off-target drift difference (sequence - targeted) is {where} seeds: "
                   "not distinguishable from 0, so the claim is not shown here.")  # fmt: skip
    arms = analysis["arms"]
    if "control" in arms and "targeted" in arms:
        c, t = arms["control"]["gain"], arms["targeted"]["gain"]
        out.append(f"Target gain (fall of KL(teacher with hint || student) on turn 0): targeted {t[0]:+.4f} "
                   f"[{t[1]:+.4f}, {t[2]:+.4f}], unrelated-hint control {c[0]:+.4f} "
                   f"[{c[1]:+.4f}, {c[2]:+.4f}].")  # fmt: skip
    return out


def report(analysis: dict, args: argparse.Namespace, command: str) -> str:
    def fmt(t, sign=""):
        return f"{t[0]:{sign}.4f} [{t[1]:{sign}.4f}, {t[2]:{sign}.4f}]"

    def rate(k, n):
        w = wilson(k, n)
        return f"{k}/{n} = {k / n:.2f} [{w.low:.2f}, {w.high:.2f}]" if w else "n/a"

    lines = ["# Turn-targeted KL against whole-sequence KL", "",
             f"Seeds {analysis['seeds']}, {args.steps} steps per arm, measured every {args.every} steps on "
             f"{args.held_out} held-out tasks x 2 episodes; 95% t intervals over seeds; valid-call rates pooled over "
             "seeds with Wilson intervals.", "",
             "| arm | KL(teacher‖student) turn 0, start | end | gain | drift turn 0 | drift turn 1 (off-target) | "
             "valid call before | after |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for arm, a in analysis["arms"].items():
        lines.append(f"| {arm} | {fmt(a['gap_before'])} | {fmt(a['gap_after'])} | {fmt(a['gain'], '+')} | "
                     f"{fmt(a['drift_turn0'])} | {fmt(a['drift_turn1'])} | {rate(*a['valid_before'])} | "
                     f"{rate(*a['valid_after'])} |")  # fmt: skip
    lines += ["", "At equal target gain (per seed: the smaller of the two arms' largest gains):", "",
              "| seed | gain | off-target drift, targeted | sequence |", "|---|---|---|---|"]  # fmt: skip
    for m in analysis["matched"]:
        lines.append(f"| {m['seed']} | {m['gain']:.4f} | {m['targeted']:.4f} | {m['sequence']:.4f} |")
    lines += ["", *verdict(analysis), "", f"Command: `{command}`.", ""]
    return "\n".join(lines)


def plot(results: dict[str, dict[int, dict]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    colours = {"targeted": "tab:blue", "sequence": "tab:orange", "control": "tab:grey"}
    for arm, runs in results.items():
        for i, r in enumerate(runs.values()):
            gain, drift = gains(r)
            ax.plot(gain, drift, "o-", color=colours[arm], alpha=0.7, label=arm if i == 0 else None)
    ax.set_xlabel("target gain: fall of KL(teacher with hint || student), turn 0")
    ax.set_ylabel("off-target drift: KL(start || now), turn 1")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--every", type=int, default=3, help="measure every this many steps")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    p.add_argument("--kl-coefficient", type=float, default=1.0)
    p.add_argument("--lr", type=float, default=2e-4)
    p.add_argument("--episodes", type=int, default=2, help="episodes per task per step (the module's group_size)")
    p.add_argument("--contexts", type=int, default=2, help="tasks per step")
    p.add_argument("--held-out", type=int, default=8, help="held-out tasks (2 episodes each)")
    p.add_argument("--samples", type=int, default=8, help="first-turn samples per held-out task")
    p.add_argument("--out", default="runs/experiments/turn_kl_scope")
    p.add_argument("extra", nargs="*", help="more `propel fit` flags for every arm (after --)")
    args = p.parse_args(argv)
    if not {"targeted", "sequence"} <= set(args.arms):
        raise SystemExit("--arms needs targeted and sequence (the comparison); control is optional")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    check_manifest(out, settings(args), "experiment folder")  # refuses runs made with other settings
    results: dict[str, dict[int, dict]] = {arm: {} for arm in args.arms}
    for seed in args.seeds:  # seed by seed: an interrupted run leaves whole seeds, every arm of each
        for arm in args.arms:
            results[arm][seed] = run_arm(args, arm, seed, out / arm / f"seed{seed}")
    analysis = analyse(results)
    command = "python benchmarks/exp_turn_kl_scope.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = report(analysis, args, command.strip())
    (out / "analysis.json").write_text(json.dumps(analysis, indent=1))
    (out / "report.md").write_text(text)
    plot(results, out / "drift_vs_gain.png")
    print(text)
    return analysis


if __name__ == "__main__":
    main()
