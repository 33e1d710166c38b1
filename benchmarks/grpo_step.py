"""GRPO step time, propel vs TRL's ``GRPOTrainer``, same model / LoRA / batch, side by side in one process.

Both train the same base (bundled SmolLM2-135M-Instruct, fp32) with LoRA r=16 alpha=32 on all 7 projections,
2 prompts x G=4 completions of up to 64 new tokens per step, the same reward (digit count / 10), loss ``grpo``,
KL beta 0.04 (k3), one PPO iteration, AdamW, no gradient checkpointing. Each runs one warm-up step, then ``--steps``
timed steps; generation time is measured by timing the rollout engine's (TRL: the policy's) ``generate`` calls.
propel runs once per ``--propel-engines`` entry: ``hf`` (generate on the live policy), ``vllm`` (in-process vLLM,
the LoRA adapter hot-loaded before every step) and ``vllm-merged`` (LoRA merged on the trainer side, full weights
reloaded into vLLM before every step); vLLM runs its default dtype (fp32 on CPU) with importance correction on
and needs ``.venv-vllm``. ``vllm-async`` and ``vllm-merged-async`` are the same with ``async_rollouts`` (the next
step's rollouts sampled while this one trains, ``max_staleness: 1``): sync vs async on the same workload. Their
"generation s/step" is the engine's time, mostly hidden behind training; "waited s/step" is what the step waited for.

python benchmarks/grpo_step.py --steps 3
.venv-vllm/bin/python benchmarks/grpo_step.py --propel-engines hf vllm vllm-merged --steps 10
.venv-vllm/bin/python benchmarks/grpo_step.py --only propel --propel-engines vllm vllm-async --steps 10
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from rich.console import Console
from rich.table import Table

from propel.domains import MathExpressionDomain
from propel.models import LoRASpec

PROMPTS_PER_STEP, GROUP, NEW_TOKENS = 2, 4, 64


def digits_reward(text: str) -> float:
    return sum(ch.isdigit() for ch in text) / 10


class GenerateTimer:
    """Wraps a model's ``generate`` (instance attribute) and accumulates its wall time."""

    def __init__(self, model) -> None:
        self.seconds, self._inner = 0.0, model.generate
        model.generate = self

    def __call__(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return self._inner(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start


def prompts(n: int) -> list[str]:
    return [c.prompt.text for c in MathExpressionDomain().contexts(n, seed=7)]


ENGINES = {  # benchmark name -> (engine, engine_kwargs, async_rollouts)
    "hf": ("hf", {}, False),
    "vllm": ("vllm", {}, False),
    "vllm-merged": ("vllm", {"lora_sync": "merged"}, False),
    "vllm-async": ("vllm", {}, True),
    "vllm-merged-async": ("vllm", {"lora_sync": "merged"}, True),
}


def run_propel(model: str, steps: int, engine: str = "hf") -> dict:
    import lightning.pytorch as pl

    from propel.datamodules.contexts import ContextDataModule
    from propel.lit_modules.grpo import GRPOModule
    from propel.losses.policy_gradient import LossSpec
    from propel.rewards import FunctionReward

    class Timing(pl.Callback):
        def __init__(self) -> None:
            self.rows: list[tuple[float, float, float, float]] = []

        def on_train_batch_start(self, trainer, pl_module, *args) -> None:
            if not hasattr(self, "timer"):
                self.timer = GenerateTimer(pl_module.engine)
            self.t0, self.g0 = time.perf_counter(), self.timer.seconds

        def on_train_batch_end(self, trainer, pl_module, *args) -> None:
            metrics = trainer.callback_metrics
            length = float(metrics["train/completion_length"])
            waited = metrics.get("train/time/rollout_wait_s")  # async: what the step waited for; sync: generation
            waited = float(waited) if waited is not None else self.timer.seconds - self.g0
            self.rows.append((time.perf_counter() - self.t0, self.timer.seconds - self.g0, length, waited))

    pl.seed_everything(0)
    module = GRPOModule(
        model=model,
        rewards=[FunctionReward("digits", lambda s: digits_reward(s.completion))],
        lora=LoRASpec(r=16, alpha=32),
        loss=LossSpec(loss_type="grpo", beta=0.04),
        group_size=GROUP,
        max_new_tokens=NEW_TOKENS,
        stop=[],
        micro_batch_size=PROMPTS_PER_STEP * GROUP,
        lr=1e-5,
        engine=ENGINES[engine][0],
        engine_kwargs=ENGINES[engine][1],
        async_rollouts=ENGINES[engine][2],
        max_staleness=1,
    )
    timing = Timing()
    trainer = pl.Trainer(
        max_steps=steps + 1,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[timing],
    )
    trainer.fit(module, datamodule=ContextDataModule(MathExpressionDomain(), contexts_per_step=PROMPTS_PER_STEP))
    return _stats(timing.rows[1:])


def run_trl(model: str, steps: int, gradient_checkpointing: bool) -> dict:
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from propel.models import load_model
    from propel.models.lora import peft_lora_config

    policy, tokenizer = load_model(model)
    peft_config = peft_lora_config(LoRASpec())  # the adapters propel trains

    def reward(completions, **kwargs):
        return [digits_reward(c) for c in completions]

    class Timing(TrainerCallback):
        def __init__(self) -> None:
            self.rows: list[tuple[float, float, float]] = []
            self.timer = None

        def on_step_begin(self, args, state, control, model=None, **kwargs):
            if self.timer is None:
                self.timer = GenerateTimer(model)
            self.t0, self.g0 = time.perf_counter(), self.timer.seconds

        def on_step_end(self, args, state, control, **kwargs):
            generation = self.timer.seconds - self.g0
            self.rows.append((time.perf_counter() - self.t0, generation, float("nan"), generation))

    config = GRPOConfig(
        output_dir="/tmp/propel-bench-trl",
        use_cpu=True,
        per_device_train_batch_size=PROMPTS_PER_STEP * GROUP,
        num_generations=GROUP,
        max_completion_length=NEW_TOKENS,
        max_steps=steps + 1,
        learning_rate=1e-5,
        beta=0.04,
        loss_type="grpo",
        temperature=1.0,
        gradient_checkpointing=gradient_checkpointing,
        logging_steps=1,
        report_to=[],
        save_strategy="no",
        seed=0,
        bf16=False,
        disable_tqdm=True,
    )
    timing = Timing()
    data = Dataset.from_dict({"prompt": prompts(PROMPTS_PER_STEP) * (steps + 1) * 2})
    trainer = GRPOTrainer(
        model=policy,
        reward_funcs=reward,
        args=config,
        train_dataset=data,
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=[timing],
    )
    trainer.train()
    lengths = [h["completions/mean_length"] for h in trainer.state.log_history if "completions/mean_length" in h]
    rows = [(s, g, lengths[i] if i < len(lengths) else float("nan"), w) for i, (s, g, _, w) in enumerate(timing.rows)]
    return _stats(rows[1:])


def _stats(rows: list[tuple[float, float, float, float]]) -> dict:
    """Means over the timed steps of (step s, generation s, completion length, s the step waited for rollouts)."""
    n = max(len(rows), 1)
    return {
        "steps": len(rows),
        "s_per_step": sum(r[0] for r in rows) / n,
        "gen_s_per_step": sum(r[1] for r in rows) / n,
        "mean_len": sum(r[2] for r in rows) / n,
        "waited_s_per_step": sum(r[3] for r in rows) / n,
        "per_step": [round(r[0], 2) for r in rows],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument("--steps", type=int, default=3, help="timed steps per trainer (after one warm-up step)")
    p.add_argument("--trl-gradient-checkpointing", action="store_true")
    p.add_argument("--only", choices=["propel", "trl"], default=None)
    p.add_argument("--propel-engines", nargs="+", default=["hf"], choices=list(ENGINES))
    a = p.parse_args()
    torch.set_num_threads(torch.get_num_threads())
    load_before = os.getloadavg()
    results = {}
    if a.only in (None, "propel"):
        for engine in a.propel_engines:
            results[f"propel ({engine} engine)"] = run_propel(a.model, a.steps, engine)
    if a.only in (None, "trl"):
        results[f"TRL GRPOTrainer (grad ckpt {'on' if a.trl_gradient_checkpointing else 'off'})"] = run_trl(
            a.model, a.steps, a.trl_gradient_checkpointing
        )
    load_after = os.getloadavg()
    table = Table(
        title=f"GRPO step, {a.model} fp32, LoRA r=16 x 7 proj, {PROMPTS_PER_STEP} prompts x G={GROUP}, "
        f"<= {NEW_TOKENS} new tokens, {torch.get_num_threads()} threads"
    )
    cols = ("trainer", "timed steps", "s/step", "generation s/step", "waited s/step", "generation share", "mean len")
    for col in (*cols, "per step"):
        table.add_column(col, justify="right")
    for name, r in results.items():
        share = r["gen_s_per_step"] / r["s_per_step"] if r["s_per_step"] else 0.0
        table.add_row(
            name,
            str(r["steps"]),
            f"{r['s_per_step']:.2f}",
            f"{r['gen_s_per_step']:.2f}",
            f"{r['waited_s_per_step']:.2f}",
            f"{share:.0%}",
            f"{r['mean_len']:.1f}",
            str(r["per_step"]),
        )
    trl = [r["s_per_step"] for name, r in results.items() if name.startswith("TRL")]
    if trl:
        table.caption = ", ".join(
            f"{name} / TRL = {r['s_per_step'] / trl[0]:.2f}x"
            for name, r in results.items()
            if name.startswith("propel")
        )
    console = Console(width=160)
    console.print(table)
    console.print(f"load average (1/5/15 min) before: {load_before}, after: {load_after}")


if __name__ == "__main__":
    main()
