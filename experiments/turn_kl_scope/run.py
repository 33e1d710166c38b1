"""Experiment: does turn-targeted KL stay on its turn? Seven arms on scripted conversations that always reach every
turn, compared at matched target-turn success over seeds.

The setting is ``configs/agent/distill_conventions.yaml``: ``ConventionChats`` in ``ScriptedChatEnv``, six short
arithmetic requests per episode whose sequence never depends on the assistant. At one turn t, drawn per episode
(never the first or last), the user asks for "our team's tag", a convention the student cannot infer; the hint
"Our team's tag is [cedar]." carries it. At two other turns (one before t, one after) the user asks for a different
tag by name: the team's tag appearing there is the hint's rule bleeding where it must not. The teacher is the
policy with its adapters off (``teacher: base``, a fixed target) and the hint; the student is the policy without
it. Arms, each trained ``--steps`` steps into ``<out>/<arm>/seed<s>/``:

* ``turn_only``: the hint before turn t, the divergence on turn t's tokens only (``turn_kl.scope: turn``);
* ``t_to_end``: the hint before turn t, the divergence on every assistant token from t to the end (``scope: sequence``);
* ``turn_only_anchor``: ``turn_only`` plus a KL to the start on the episode's other assistant turns, before and after t
  (``turn_kl.anchor_weight: --anchor-weight``);
* ``proximal``: ``turn_only`` with the seed's clipped update on turn t in place of the divergence (``turn_kl.proximal``,
  clip range ``--proximal``);
* ``whole_episode``: the hint before turn 0, the divergence on every assistant token of the episode (the global
  alternative: context distillation of the whole conversation);
* ``unrelated_hint``: the turn-only term with an unrelated hint in place of the real one;
* ``none``: no update (the start, measured with the arm's own sampling seed).

Every arm divides its token sums as ``--normalisation`` says (``turn_kl.normalisation``; ``per_target_token``, the
trainer's default, lets a turn-only arm step harder on turn t than ``t_to_end``; ``per_episode_token`` and ``constant``
give every arm the same weight per token) and trains at ``--lr`` (default: the config's, 1e-4; the first grid ran at
1e-3). The trainer's own drift matrix is off (``drift_episodes: 0``): the held-out set below measures every arm on the
same conversations, and no training episode is set aside.

Measured at step 0 and every ``--every`` steps, on ``--held-out`` fixed conversations (never trained on; the base
model ran each once, the same continuations in every arm and seed):

* target success: the share of ``--samples`` replies at turn t, sampled without the hint after the fixed history,
  that carry the team's tag (at step 0 also with the hint: the teacher's success, the gap the method can close);
* accuracy at off-target turns (plain and conflict, one reply each sampled after the fixed history: the sum right,
  the tag asked for present, the team's tag absent) and bleed (the team's tag at a non-target turn);
* drift: KL(start || now) per token on the off-target turns' fixed continuations (teacher-forced), before t and
  after t separately, and on retention prompts unrelated to the task (``RETENTION``; the start's greedy answers).

Measured at step 0 and every ``--ckpt-every`` steps (the checkpoints the matched comparison interpolates between).

Analysis: per seed, each other arm against ``turn_only`` at matched target success (the smaller of the two arms'
largest success, each arm's metrics interpolated linearly between its checkpoints where its success first reaches
that level), the per-seed paired difference with a 95% t interval over seeds; ``unrelated_hint``, which gains no target
success, at the same (last) step. An arm-seed that finished is read back on a rerun (``result.json``); an interrupted
one trains again from its start; ``settings.json`` refuses a folder made with other settings. ``--report-only`` trains
nothing and reports what the folder holds with the settings it was made with (the first grid's arms, under their
names then -- ``targeted``, ``sequence``, ``whole``, ``control`` -- read as ``turn_only``, ``t_to_end``,
``whole_episode``, ``unrelated_hint``).

    python experiments/turn_kl_scope/run.py                        # 7 arms x 3 seeds (make exp-turn-kl-scope)
    python experiments/turn_kl_scope/run.py --seeds 0 --steps 4    # a pilot
    python experiments/turn_kl_scope/run.py --normalisation per_episode_token --lr 1e-4   # one cell of a grid
    python experiments/turn_kl_scope/run.py --report-only          # the report over the finished arm-seeds alone
    python experiments/turn_kl_scope/run.py --out runs/experiments/turn_kl_scope_gpu -- --trainer.accelerator=gpu \
        --trainer.precision=bf16-mixed --model.init_args.dtype=bfloat16   # on one GPU (the trainer takes both)
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from propel.losses.turn_normalisation import NORMALISATIONS
from propel.metrics.intervals import mean_t_interval as t_interval
from propel.pools.manifest import MANIFEST, check_manifest
from propel.rollouts.hints import Hint, HintSource

CONFIGS = ("configs/grpo/base.yaml", "configs/agent/distill.yaml", "configs/agent/distill_conventions.yaml")
ARMS = {  # arm -> (turn_kl.scope, which hint, where it is spliced in, locality guard)
    "turn_only": ("turn", "real", "target", None),
    "t_to_end": ("sequence", "real", "target", None),
    "turn_only_anchor": ("turn", "real", "target", "anchor"),
    "proximal": ("turn", "real", "target", "proximal"),
    "whole_episode": ("sequence", "real", "start", None),
    "unrelated_hint": ("turn", "control", "target", None),
    "none": (None, None, None, None),
}
REFERENCE = "turn_only"
"""The arm every other is compared with."""
SAME_STEP = ("unrelated_hint",)
"""Arms that gain no target success by design: compared with the reference at the same (last) step."""
LEGACY = {"targeted": "turn_only", "sequence": "t_to_end", "whole": "whole_episode", "control": "unrelated_hint"}
"""The first grid's arm folders (``docs/experiments/turn_kl/grid``), read under today's names."""
CONTROL_HINT = "Take a deep breath and read the task again."
HELD_OUT_SEED = 12345
RETENTION = [
    "What is the capital of France?",
    "Name three colours of the rainbow.",
    "Write one sentence about the sea.",
    "What do bees make?",
    "Give a synonym of happy.",
    "How many days are in a week?",
    "What is water made of?",
    "Say hello in Spanish.",
]
"""General prompts unrelated to the task: their answers must not change (KL to the start on the start's answers)."""
OFF_TARGET = ("drift_before", "drift_after", "acc_plain", "acc_conflict", "bleed", "retention")
"""The side effects compared at matched target success."""


class TurnHint(HintSource):
    """The same hint in every episode, before its target turn (``data["target_turn"]``) or before turn 0."""

    def __init__(self, text: str, at: str = "target") -> None:
        self.text, self.at = text, at

    def hints(self, sample) -> list[Hint]:
        return [Hint(sample.context.data["target_turn"] if self.at == "target" else 0, self.text)]


SETTINGS = ("model", "steps", "ckpt_every", "kl_coefficient", "lr", "normalisation", "normalisation_constant",
            "anchor_weight", "proximal", "episodes", "contexts", "held_out", "samples", "extra")  # fmt: skip


def settings(args: argparse.Namespace) -> dict:
    return {k: getattr(args, k) for k in SETTINGS} | {"configs": list(CONFIGS)}


def arm_flags(args: argparse.Namespace, arm: str) -> list[str]:
    """The ``propel fit`` flags that make ``arm``: its scope, its locality guard, the normalisation every arm uses."""
    scope, _, _, guard = ARMS[arm]
    turn_kl = "--model.init_args.turn_kl"
    flags = [f"{turn_kl}.scope={scope or 'turn'}", f"{turn_kl}.normalisation={args.normalisation}"]
    if args.normalisation == "constant":
        flags.append(f"{turn_kl}.normalisation_constant={args.normalisation_constant}")
    if guard == "anchor":
        flags.append(f"{turn_kl}.anchor_weight={args.anchor_weight}")
    if guard == "proximal":
        flags += [f"{turn_kl}.proximal=true", f"{turn_kl}.proximal_clip={args.proximal}"]
    return flags + ([f"--model.init_args.lr={args.lr}"] if args.lr is not None else [])


def build(args: argparse.Namespace, seed: int, arm: str):
    """The arm's module and datamodule from the configs and flags, and the ``pl.Trainer`` arguments they set
    (accelerator and precision: CPU and fp32 unless ``--trainer.*`` flags after ``--`` say otherwise)."""
    from propel.cli.lightning_cli import PropelCLI

    flags = [f"--seed_everything={seed}", f"--trainer.max_steps={args.steps}", "--trainer.logger=false",
             "--trainer.accelerator=cpu",
             f"--model.init_args.model={args.model}", f"--model.init_args.group_size={args.episodes}",
             *arm_flags(args, arm), "--model.init_args.drift_episodes=0",
             "--model.init_args.turn_kl.teacher=base",
             f"--model.init_args.turn_kl.kl_coefficient={args.kl_coefficient}",
             "--model.init_args.turn_kl.temperature_schedule=[1.0]", "--model.init_args.turn_kl.control_hint=null",
             f"--data.init_args.contexts_per_step={args.contexts}", *args.extra]  # fmt: skip
    cli = PropelCLI(args=[arg for c in CONFIGS for arg in ("-c", c)] + flags, run=False)
    trainer = {k: cli.config["trainer"][k] for k in ("accelerator", "precision")}
    return cli.model, cli.datamodule, trainer


class HeldOut:
    """Fixed held-out conversations: the base model's one episode on each (the fixed continuations), the start's
    logits on them and on the retention answers, and the measurements."""

    def __init__(self, module, data, n: int, samples: int, other_samples: int = 1) -> None:
        from propel.records import Prompt
        from propel.rollouts.conversation import Conversation
        from propel.rollouts.episode_runner import EpisodeRunner
        from propel.rollouts.hints import turn_context

        self.module, self.samples, self.other_samples, self.hint = module, samples, other_samples, data.tasks.hint
        contexts = data.tasks.contexts(n, seed=HELD_OUT_SEED)
        torch.manual_seed(HELD_OUT_SEED)  # the same continuations in every arm and seed (the base model ran them)
        sampling = copy.deepcopy(module.sampling)
        sampling.n = 1
        groups, _ = EpisodeRunner(module.engine, data.make_env, None, concurrency=8, execute_cut_turns=True).run(
            contexts, sampling
        )
        self.episodes = [g[0] for g in groups]
        self.turns = [sum(t.trainable for t in s.all_turns) for s in self.episodes]
        self.rows = []  # (episode, turn, kind, position relative to t, prefix, turn ids)
        for e, (s, c) in enumerate(zip(self.episodes, contexts, strict=True)):
            t = c.data["target_turn"]
            for k in range(self.turns[e]):
                prefix, ids = turn_context(s, k, e)
                where = "target" if k == t else "before" if k < t else "after"
                self.rows.append((e, k, c.data["turns"][k], where, prefix, ids))
        tok = module.tokenizer
        prompts = [Prompt(token_ids=list(Conversation(tok, [{"role": "user", "content": q}], []).ids))
                   for q in RETENTION]  # fmt: skip
        greedy = copy.deepcopy(module.sampling)
        greedy.n, greedy.temperature, greedy.max_new_tokens, greedy.stop = 1, 0.0, 24, []
        with module.eval_mode():
            answers = module.engine.generate(prompts, greedy)
        self.retention = [(p.token_ids + list(a[0].token_ids), len(a[0].token_ids))
                          for p, a in zip(prompts, answers, strict=True) if a[0].token_ids]  # fmt: skip
        self.start_rows, self.start_retention = self._logits(self._kl_rows()), self._logits(self.retention)

    def _kl_rows(self) -> list[tuple[list[int], int]]:
        return [(prefix + ids, len(ids)) for *_, where, prefix, ids in self.rows if where != "target" and ids]

    def _logits(self, rows) -> list[torch.Tensor]:
        out = []
        with self.module.eval_mode(), torch.no_grad():
            for i in range(0, len(rows), 8):
                chunk = rows[i : i + 8]
                ids, lengths = [r for r, _ in chunk], [n for _, n in chunk]
                logits = self.module.turn_term.turn_logits(ids, lengths, "student").cpu()
                out += [logits[b, :n] for b, (_, n) in enumerate(chunk)]
        return out

    def _drift(self, now: list[torch.Tensor], start: list[torch.Tensor]) -> list[float]:
        """Per row: the summed per-token KL(start || now) and the token count."""
        from propel.losses.distillation import DivergenceSpec, token_divergence

        spec = DivergenceSpec("forward_kl")
        return [float(token_divergence(a[None], b[None], spec).sum()) for a, b in zip(now, start, strict=True)]

    def _sample(self, prompts: list[list[int]], n: int) -> list[list[str]]:
        from propel.records import Prompt

        sampling = copy.deepcopy(self.module.sampling)
        sampling.n, sampling.stop = n, []
        with self.module.eval_mode():
            groups = self.module.engine.generate([Prompt(token_ids=p) for p in prompts], sampling)
        return [[o.text for o in g] for g in groups]

    def teacher_success(self) -> float:
        """The hinted start's success at turn t (the teacher's: only at step 0, the teacher does not move)."""
        splice = self.module.turn_term.splicer.splice
        target = [(row, splice(row[4], self.hint)) for row in self.rows if row[3] == "target"]
        replies = self._sample([p for _, p in target], self.samples)
        rule = [row[2]["check"]["require"][0] for row, _ in target]
        return float(np.mean([r in x for r, xs in zip(rule, replies, strict=True) for x in xs]))

    def measure(self) -> dict[str, float]:
        from propel.envs.scripted_chat import check_reply

        out: dict[str, float] = {}
        target = [i for i, row in enumerate(self.rows) if row[3] == "target"]
        other = [i for i, row in enumerate(self.rows) if row[3] != "target"]
        replies = dict(zip(target, self._sample([self.rows[i][4] for i in target], self.samples), strict=True))
        replies |= dict(zip(other, self._sample([self.rows[i][4] for i in other], self.other_samples), strict=True))
        hits: dict[str, list[float]] = {k: [] for k in ("target", "acc_plain", "acc_conflict", "bleed")}
        for i, row in enumerate(self.rows):
            _, _, turn, where, *_ = row
            for x in replies[i]:
                check = check_reply(x, turn["check"])
                if where == "target":
                    hits["target"].append(float(check.get("require", False)))
                    continue
                hits[f"acc_{turn['kind']}"].append(float(check["passed"]))
                hits["bleed"].append(float(not check.get("forbid", True)))
        out["target_success"] = float(np.mean(hits["target"]))
        for k in ("acc_plain", "acc_conflict", "bleed"):
            out[k] = float(np.mean(hits[k])) if hits[k] else float("nan")
        kl_rows = self._kl_rows()
        sums = self._drift(self._logits(kl_rows), self.start_rows)
        wheres = [row[3] for row in self.rows if row[3] != "target" and row[5]]
        for side in ("before", "after"):
            idx = [i for i, w in enumerate(wheres) if w == side]
            out[f"drift_{side}"] = sum(sums[i] for i in idx) / max(1, sum(kl_rows[i][1] for i in idx))
        ret = self._drift(self._logits(self.retention), self.start_retention)
        out["retention"] = sum(ret) / max(1, sum(n for _, n in self.retention))
        return out


def run_arm(args: argparse.Namespace, arm: str, seed: int, root: Path) -> dict:
    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import Callback

    result_path = root / "result.json"
    if result_path.exists():
        return json.loads(result_path.read_text())
    start = time.perf_counter()
    _, which, at, _ = ARMS[arm]
    steps = 0 if arm == "none" else args.steps
    print(f"[exp] {arm} seed {seed}: training {steps} steps into {root}", flush=True)
    pl.seed_everything(seed)
    module, data, placement = build(args, seed, arm)
    module.configure_model()
    probe = HeldOut(module, data, args.held_out, args.samples)
    module.hints = TurnHint(data.tasks.hint if which == "real" else CONTROL_HINT, at or "target")
    torch.manual_seed(seed)
    curve = [{"step": 0, **probe.measure()}]
    teacher = probe.teacher_success()
    print(f"[exp] {arm} seed {seed} step 0 ({time.perf_counter() - start:.0f} s): {curve[-1]} teacher {teacher:.3f}",
          flush=True)  # fmt: skip

    class Measure(Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            step = trainer.global_step
            if step % args.ckpt_every == 0 or step == steps:
                curve.append({"step": step, **probe.measure()})
                print(f"[exp] {arm} seed {seed} step {step} ({time.perf_counter() - start:.0f} s): {curve[-1]}",
                      flush=True)  # fmt: skip

    if steps:
        trainer = pl.Trainer(max_steps=steps, **placement, devices=1, logger=False, enable_checkpointing=False,
                             enable_progress_bar=False, enable_model_summary=False, callbacks=[Measure()],
                             default_root_dir=str(root))  # fmt: skip
        trainer.fit(module, datamodule=data)
    result = {"arm": arm, "seed": seed, "curve": curve, "teacher_success": teacher, "turns": probe.turns,
              "target_turns": [r[1] for r in probe.rows if r[3] == "target"],
              "seconds": time.perf_counter() - start}  # fmt: skip
    root.mkdir(parents=True, exist_ok=True)
    result_path.write_text(json.dumps(result, indent=1))
    return result


def at_success(result: dict, level: float, key: str) -> float:
    """``key`` where the arm's target success first reaches ``level`` (linear between checkpoints)."""
    curve = result["curve"]
    success = [c["target_success"] for c in curve]
    for i in range(len(curve)):
        if success[i] >= level:
            if i == 0:
                return float(curve[0][key])
            lo, hi = success[i - 1], success[i]
            w = 1.0 if hi == lo else float(np.clip((level - lo) / (hi - lo), 0.0, 1.0))
            return float(curve[i - 1][key] + w * (curve[i][key] - curve[i - 1][key]))
    return float("nan")


def matched(results: dict[str, dict[int, dict]], other: str) -> list[dict]:
    """Per seed: the success level both the reference arm and ``other`` reach, and each off-target metric there
    (the reference's under its own name)."""
    rows = []
    for seed in sorted(set(results.get(REFERENCE, {})) & set(results.get(other, {}))):
        t, o = results[REFERENCE][seed], results[other][seed]
        level = min(max(c["target_success"] for c in t["curve"]), max(c["target_success"] for c in o["curve"]))
        start = max(t["curve"][0]["target_success"], o["curve"][0]["target_success"])
        row = {"seed": seed, "level": float(level), "above_start": bool(level > start)}
        for key in OFF_TARGET:
            row[key] = {REFERENCE: at_success(t, level, key), other: at_success(o, level, key)}
        rows.append(row)
    return rows


def at_last_step(results: dict[str, dict[int, dict]], other: str) -> list[dict]:
    """Per seed both arms ran: each off-target metric at the last checkpoint, for arms with no matched level (the
    unrelated-hint control gains no target success: the comparison fixed before its seeds ran is at the same step)."""
    rows = []
    for seed in sorted(set(results.get(REFERENCE, {})) & set(results.get(other, {}))):
        t, o = results[REFERENCE][seed]["curve"][-1], results[other][seed]["curve"][-1]
        rows.append({"seed": seed, "step": o["step"], **{k: {REFERENCE: t[k], other: o[k]} for k in OFF_TARGET}})
    return rows


def analyse(results: dict[str, dict[int, dict]]) -> dict:
    arms = {}
    for arm, runs in results.items():
        last, first = [r["curve"][-1] for r in runs.values()], [r["curve"][0] for r in runs.values()]
        teacher = t_interval([r["teacher_success"] for r in runs.values()])
        arms[arm] = {"seeds": sorted(runs), "teacher_success": teacher}
        arms[arm]["success_start"] = t_interval([c["target_success"] for c in first])
        for key in ("target_success", *OFF_TARGET):
            arms[arm][key] = t_interval([c[key] for c in last])
        arms[arm]["every_turn_reached"] = all(min(r["turns"]) == max(r["turns"]) for r in runs.values())
    comparisons = {}
    for other in ARMS:
        if other in (REFERENCE, "none") or other not in results or REFERENCE not in results:
            continue
        rows = matched(results, other)
        usable = [r for r in rows if r["above_start"]]
        comparisons[other] = {"matched": rows, "difference": {
            key: t_interval([r[key][other] - r[key][REFERENCE] for r in usable]) for key in OFF_TARGET}}  # fmt: skip
    same_step = {}
    for other in SAME_STEP:
        if other not in results or REFERENCE not in results:
            continue
        rows = at_last_step(results, other)
        same_step[other] = {"rows": rows, "difference": {
            key: t_interval([r[key][other] - r[key][REFERENCE] for r in rows]) for key in OFF_TARGET}}  # fmt: skip
    return {"arms": arms, "comparisons": comparisons, "same_step": same_step}


def _fmt(t, sign=""):
    if not np.isfinite(t[0]):
        return "n/a"
    if not np.isfinite(t[1]):
        return f"{t[0]:{sign}.4f}"
    return f"{t[0]:{sign}.4f} [{t[1]:{sign}.4f}, {t[2]:{sign}.4f}]"


def verdict(analysis: dict) -> list[str]:
    out = []
    for other, comp in analysis["comparisons"].items():
        n = sum(r["above_start"] for r in comp["matched"])
        if n == 0:
            out.append(f"{other} vs {REFERENCE}: no seed where both arms raised target success above the start: no "
                       "matched point to compare at (not shown).")  # fmt: skip
            continue
        out += _differences(other, comp["difference"], n)
    for other, comp in analysis.get("same_step", {}).items():
        out += _differences(f"{other} (last step)", comp["difference"], len(comp["rows"]))
    return out


def _differences(other: str, difference: dict, n: int) -> list[str]:
    out = []
    for key in OFF_TARGET:
        mean, low, high = difference[key]
        where = f"{other} - {REFERENCE} = {_fmt((mean, low, high), '+')} over {n} seed(s)"
        if not np.isfinite(low):
            out.append(f"{key}: {where}: one seed, no interval (not shown).")
        elif low > 0:
            out.append(f"{key}: {where}: the interval excludes 0 ({other} higher).")
        elif high < 0:
            out.append(f"{key}: {where}: the interval excludes 0 ({other} lower).")
        else:
            out.append(f"{key}: {where}: includes 0 (not shown).")
    return out


def report(analysis: dict, run: dict, command: str) -> str:
    """The report's text; ``run`` holds the settings the folder was made with (``settings``; the first grid's
    ``every`` and no normalisation key: it ran at ``per_target_token``)."""
    keys = ("target_success", "drift_before", "drift_after", "acc_plain", "acc_conflict", "bleed", "retention")
    every = run.get("ckpt_every", run.get("every"))
    lr = "the config's" if run.get("lr") is None else run["lr"]
    lines = ["# Turn-targeted KL: does the update stay on its turn?", "",
             f"{run['steps']} steps per arm at lr {lr}, normalisation {run.get('normalisation', 'per_target_token')}, "
             f"measured every {every} steps on {run['held_out']} held-out conversations (6 turns each; "
             f"{run['samples']} samples at the target turn, 1 at every other); means at the last step with 95% t "
             "intervals over seeds.", "",
             "| arm | seeds | teacher success (hint) | success at start | " + " | ".join(keys) + " |",
             "|---|---|---|---|" + "---|" * len(keys)]  # fmt: skip
    for arm, a in analysis["arms"].items():
        lines.append(f"| {arm} | {a['seeds']} | {_fmt(a['teacher_success'])} | {_fmt(a['success_start'])} | "
                     + " | ".join(_fmt(a[k]) for k in keys) + " |")  # fmt: skip
    for other, comp in analysis["comparisons"].items():
        lines += ["", f"Matched target success, {other} against {REFERENCE} (per seed):", "",
                  "| seed | level | above start | " + " | ".join(f"{k} (t / {other})" for k in OFF_TARGET) + " |",
                  "|---|---|---|" + "---|" * len(OFF_TARGET)]  # fmt: skip
        for r in comp["matched"]:
            cells = " | ".join(f"{r[k][REFERENCE]:.4f} / {r[k][other]:.4f}" for k in OFF_TARGET)
            lines.append(f"| {r['seed']} | {r['level']:.3f} | {r['above_start']} | {cells} |")
    for other, comp in analysis.get("same_step", {}).items():
        title = f"At the last step, {other} against {REFERENCE} (per seed; {other} minus it, 95% t over seeds):"
        lines += ["", title, "", "| seed | " + " | ".join(f"{k} (t / {other})" for k in OFF_TARGET) + " |",
                  "|---|" + "---|" * len(OFF_TARGET)]  # fmt: skip
        for r in comp["rows"]:
            lines.append(f"| {r['seed']} | " + " | ".join(f"{r[k][REFERENCE]:.4f} / {r[k][other]:.4f}"
                                                          for k in OFF_TARGET) + " |")  # fmt: skip
        lines.append("| difference | " + " | ".join(_fmt(comp["difference"][k], "+") for k in OFF_TARGET) + " |")
    lines += ["", *verdict(analysis), "", f"Command: `{command}`.", ""]
    return "\n".join(lines)


def plot(results: dict[str, dict[int, dict]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    colours = {"turn_only": "tab:blue", "t_to_end": "tab:orange", "turn_only_anchor": "tab:green",
               "proximal": "tab:purple", "whole_episode": "tab:red", "unrelated_hint": "tab:grey",
               "none": "black"}  # fmt: skip
    for arm, runs in results.items():
        for i, r in enumerate(runs.values()):
            x = [c["target_success"] for c in r["curve"]]
            for ax, key in zip(axes, ("drift_before", "drift_after", "bleed"), strict=True):
                ax.plot(x, [c[key] for c in r["curve"]], "o-", color=colours[arm], alpha=0.7,
                        label=arm if i == 0 else None)  # fmt: skip
    for ax, key in zip(axes, ("KL(start||now), off-target turns before t", "... after t", "bleed"), strict=True):
        ax.set_xlabel("target success (no hint)")
        ax.set_ylabel(key)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def finished(out: Path) -> dict[str, dict[int, dict]]:
    """Every arm-seed that finished in ``out`` (its ``result.json``; an arm's first-grid folder under its ``LEGACY``
    name), arms in ``ARMS`` order, seeds ascending."""
    results: dict[str, dict[int, dict]] = {}
    for arm in ARMS:
        folder = next((out / old for old, new in LEGACY.items() if new == arm and (out / old).is_dir()), out / arm)
        runs = [json.loads(p.read_text()) for p in folder.glob("seed*/result.json")]
        if runs:
            results[arm] = {r["seed"]: r for r in sorted(runs, key=lambda r: r["seed"])}
    if not results:
        raise SystemExit(f"no finished arm-seed in {out}: nothing to report")
    return results


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument(
        "--ckpt-every",
        "--every",
        type=int,
        default=2,
        dest="ckpt_every",
        help="measure every this many steps (the checkpoints matched success interpolates between)",
    )
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    p.add_argument("--kl-coefficient", type=float, default=1.0)
    p.add_argument("--lr", type=float, default=None, help="learning rate of every arm (default: the config's, 1e-4)")
    p.add_argument(
        "--normalisation", default="per_target_token", choices=NORMALISATIONS, help="turn_kl.normalisation of every arm"
    )
    p.add_argument(
        "--normalisation-constant",
        type=float,
        default=96.0,
        help="tokens per episode with --normalisation constant (96: 16 tokens x 6 turns, the setting's)",
    )
    p.add_argument("--anchor-weight", type=float, default=1.0, help="turn_kl.anchor_weight of turn_only_anchor")
    p.add_argument(
        "--proximal",
        type=float,
        default=0.2,
        metavar="CLIP",
        help="the proximal arm's clip range (turn_kl.proximal_clip)",
    )
    p.add_argument("--episodes", type=int, default=2, help="episodes per conversation per step (group_size)")
    p.add_argument("--contexts", type=int, default=4, help="conversations per step")
    p.add_argument("--held-out", type=int, default=12, help="held-out conversations")
    p.add_argument("--samples", type=int, default=8, help="samples at each held-out target turn")
    p.add_argument("--out", default="runs/experiments/turn_kl_scope")
    p.add_argument("--report-only", action="store_true", help="report every finished arm-seed in --out; train nothing")
    p.add_argument("extra", nargs="*", help="more `propel fit` flags for every arm (after --)")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    run = settings(args)
    if args.report_only:  # nothing trains: the report says what the folder was made with
        results = finished(out)
        if (out / MANIFEST).exists():
            run = json.loads((out / MANIFEST).read_text())
    else:
        check_manifest(out, run, "experiment folder")  # refuses runs made with other settings
        results = {arm: {} for arm in args.arms}
        for seed in args.seeds:  # seed by seed: an interrupted run leaves whole seeds, every arm of each
            for arm in args.arms:
                results[arm][seed] = run_arm(args, arm, seed, out / arm / f"seed{seed}")
    analysis = analyse(results)
    command = "python experiments/turn_kl_scope/run.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = report(analysis, run, command.strip())
    (out / "summary.json").write_text(json.dumps({"analysis": analysis, "results": results}, indent=1))
    (out / "report.md").write_text(text)
    plot(results, out / "drift_vs_success.png")
    print(text)
    return analysis


if __name__ == "__main__":
    main()
