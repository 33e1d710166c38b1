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

Memory, per trainer: "peak RSS" is the process's resident set sampled every 20 ms while that trainer runs (the
larger of it and what the previous trainer left), "peak GPU" is ``torch.cuda.max_memory_allocated`` over the run
(``--device gpu``: bf16 weights and bf16 autocast in both trainers, as ``experiments/grpo_vs_trl/run.py --device gpu``).
``--json PATH`` writes the numbers. Both trainers run on glibc's default allocator; propel returns freed memory to
the system where a phase of its step ends (``propel.host_memory``), TRL does not.

python benchmarks/grpo_step.py --steps 3
.venv-vllm/bin/python benchmarks/grpo_step.py --propel-engines hf vllm vllm-merged --steps 10
.venv-vllm/bin/python benchmarks/grpo_step.py --only propel --propel-engines vllm vllm-async --steps 10
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import threading
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from propel.domains import MathExpressionDomain
from propel.models import LoRASpec

PROMPTS_PER_STEP, GROUP, NEW_TOKENS = 2, 4, 64
DEVICES = {"cpu": {"dtype": "float32", "precision": "32-true"}, "gpu": {"dtype": "bfloat16", "precision": "bf16-mixed"}}
"""Per ``--device``: the weights' dtype and Lightning's precision (TRL: ``bf16`` on when the precision is bf16)."""


def rss_mib() -> float:
    """This process's resident set now, MiB (Linux ``/proc``; 0 where it cannot be read)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


class PeakMemory:
    """Peak resident set (sampled every ``every_s`` on a thread) and peak CUDA memory allocated inside a ``with``."""

    def __init__(self, every_s: float = 0.02) -> None:
        self.every_s, self.rss_mib, self.gpu_mib = every_s, 0.0, None
        self._stop = threading.Event()

    def _sample(self) -> None:
        while not self._stop.wait(self.every_s):
            self.rss_mib = max(self.rss_mib, rss_mib())

    def __enter__(self) -> PeakMemory:
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        self.rss_mib = rss_mib()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.rss_mib = max(self.rss_mib, rss_mib())
        if torch.cuda.is_available():
            self.gpu_mib = torch.cuda.max_memory_allocated() / 2**20

    def stats(self) -> dict:
        return {
            "peak_rss_mib": round(self.rss_mib, 1),
            "peak_gpu_mib": None if self.gpu_mib is None else round(self.gpu_mib, 1),
        }


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


def run_propel(
    model: str,
    steps: int,
    engine: str = "hf",
    device: str = "cpu",
    *,
    prompts_per_step: int = PROMPTS_PER_STEP,
    group: int = GROUP,
    new_tokens: int = NEW_TOKENS,
    gradient_checkpointing: bool = False,
    strategy="auto",
) -> dict:
    """propel's ``GRPOModule``: one warm-up step, then ``steps`` timed; means, per-step times and peak memory."""
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
        group_size=group,
        max_new_tokens=new_tokens,
        stop=[],
        micro_batch_size=prompts_per_step * group,
        gradient_checkpointing=gradient_checkpointing,
        lr=1e-5,
        dtype=DEVICES[device]["dtype"],
        engine=ENGINES[engine][0],
        engine_kwargs=ENGINES[engine][1],
        async_rollouts=ENGINES[engine][2],
        max_staleness=1,
    )
    timing = Timing()
    trainer = pl.Trainer(
        max_steps=steps + 1,
        accelerator=device,
        devices=1,
        strategy=strategy,
        precision=DEVICES[device]["precision"],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[timing],
    )
    data = ContextDataModule(MathExpressionDomain(), contexts_per_step=prompts_per_step)
    with PeakMemory() as memory:
        trainer.fit(module, datamodule=data)
    return {**_stats(timing.rows[1:]), **memory.stats()}


def run_trl(
    model: str,
    steps: int,
    gradient_checkpointing: bool = False,
    device: str = "cpu",
    *,
    prompts_per_step: int = PROMPTS_PER_STEP,
    group: int = GROUP,
    new_tokens: int = NEW_TOKENS,
) -> dict:
    """TRL's ``GRPOTrainer`` on the same settings as ``run_propel``."""
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from propel.models import load_model
    from propel.models.lora import peft_lora_config

    policy, tokenizer = load_model(model, dtype=DEVICES[device]["dtype"])
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
        use_cpu=device == "cpu",
        per_device_train_batch_size=prompts_per_step * group,
        num_generations=group,
        max_completion_length=new_tokens,
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
        bf16=DEVICES[device]["precision"].startswith("bf16"),
        disable_tqdm=True,
    )
    timing = Timing()
    data = Dataset.from_dict({"prompt": prompts(prompts_per_step) * (steps + 1) * 2})
    trainer = GRPOTrainer(
        model=policy,
        reward_funcs=reward,
        args=config,
        train_dataset=data,
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=[timing],
    )
    with PeakMemory() as memory:
        trainer.train()
    lengths = [h["completions/mean_length"] for h in trainer.state.log_history if "completions/mean_length" in h]
    rows = [(s, g, lengths[i] if i < len(lengths) else float("nan"), w) for i, (s, g, _, w) in enumerate(timing.rows)]
    return {**_stats(rows[1:]), **memory.stats()}


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


def ratios(results: dict[str, dict]) -> dict[str, float]:
    """Each propel row's s/step over TRL's (above 1: propel slower); empty without a TRL row."""
    trl = [r["s_per_step"] for name, r in results.items() if name.startswith("TRL")]
    if not trl or not trl[0]:
        return {}
    return {name: r["s_per_step"] / trl[0] for name, r in results.items() if name.startswith("propel")}


def main(argv: list[str] | None = None) -> dict[str, dict]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m-instruct")
    p.add_argument("--steps", type=int, default=3, help="timed steps per trainer (after one warm-up step)")
    p.add_argument("--device", choices=tuple(DEVICES), default="cpu", help="cpu: fp32; gpu: one CUDA GPU, bf16")
    p.add_argument("--prompts", type=int, default=PROMPTS_PER_STEP, help="prompts per step")
    p.add_argument("--group", type=int, default=GROUP, help="completions per prompt (G)")
    p.add_argument("--new-tokens", type=int, default=NEW_TOKENS, help="max new tokens per completion")
    p.add_argument("--gradient-checkpointing", action="store_true", help="propel: activation checkpointing")
    p.add_argument("--trl-gradient-checkpointing", action="store_true")
    p.add_argument("--only", choices=["propel", "trl"], default=None)
    p.add_argument("--propel-engines", nargs="+", default=["hf"], choices=list(ENGINES))
    p.add_argument("--json", type=Path, default=None, help="also write the results here")
    a = p.parse_args(argv)
    if a.device == "gpu" and not torch.cuda.is_available():
        p.error("--device gpu: no CUDA GPU is visible to torch")
    torch.set_num_threads(torch.get_num_threads())
    load_before = os.getloadavg()
    shape = {"prompts_per_step": a.prompts, "group": a.group, "new_tokens": a.new_tokens}
    results = {}
    if a.only in (None, "propel"):
        for engine in a.propel_engines:
            results[f"propel ({engine} engine)"] = run_propel(
                a.model, a.steps, engine, a.device, gradient_checkpointing=a.gradient_checkpointing, **shape
            )
    if a.only in (None, "trl"):
        results[f"TRL GRPOTrainer (grad ckpt {'on' if a.trl_gradient_checkpointing else 'off'})"] = run_trl(
            a.model, a.steps, a.trl_gradient_checkpointing, a.device, **shape
        )
    load_after = os.getloadavg()
    dtype = DEVICES[a.device]["dtype"]
    table = Table(
        title=f"GRPO step, {a.model} {dtype} on {a.device}, LoRA r=16 x 7 proj, {a.prompts} prompts x G={a.group}, "
        f"<= {a.new_tokens} new tokens, {torch.get_num_threads()} threads"
    )
    cols = ("trainer", "timed steps", "s/step", "generation s/step", "waited s/step", "generation share", "mean len")
    for col in (*cols, "peak RSS MiB", "peak GPU MiB", "per step"):
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
            f"{r['peak_rss_mib']:.0f}",
            "-" if r["peak_gpu_mib"] is None else f"{r['peak_gpu_mib']:.0f}",
            str(r["per_step"]),
        )
    by_trl = ratios(results)
    if by_trl:
        table.caption = ", ".join(f"{name} / TRL = {v:.2f}x" for name, v in by_trl.items())
    console = Console(width=200)
    console.print(table)
    console.print(f"load average (1/5/15 min) before: {load_before}, after: {load_after}")
    if a.json is not None:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        payload = {"settings": {**vars(a), "json": str(a.json)}, "results": results, "ratio_to_trl": by_trl}
        a.json.write_text(json.dumps(payload, indent=2))
    return results


if __name__ == "__main__":
    main()
