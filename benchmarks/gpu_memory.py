"""Written memory estimate of each GPU recipe in ``configs/gpu/``: per-GPU GiB by part, from the models' config numbers
(``propel.models.memory``), no GPU and no download needed. KV cache rows count every token in flight at once (a
whole step's rollouts, a whole labeling batch's solver trials); vLLM caps its cache at ``gpu_memory_utilization``
and queues what does not fit, so a row above that cap means queuing, not a crash.

    python benchmarks/gpu_memory.py                 # Markdown table for every configs/gpu/*.yaml
    python benchmarks/gpu_memory.py --prompt-tokens 256 --checkpointing
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from propel.models.memory import GIB, KNOWN, estimate_grpo_memory, estimate_serving_memory

ROOT = Path(__file__).resolve().parents[1]


def init_args(cfg: dict, key: str) -> dict:
    return (cfg.get(key) or {}).get("init_args") or {}


def grpo_estimate(arch, model: dict, data: dict, prompt_tokens: int, checkpointing: bool, overhead_gib: float = 2.0):
    """The training GPU's ``MemoryEstimate`` for a GRPO recipe's ``model`` and ``data`` init_args (GRPOModule's
    defaults where a key is absent), its prompts ``prompt_tokens`` long. ``gpu_check.py`` compares it with a run."""
    seq = prompt_tokens + model.get("max_new_tokens", 128)
    rollouts = data.get("contexts_per_step", 4) * model.get("group_size", 8)
    lora = model.get("lora") or {}
    engine = model.get("engine", "hf")
    return estimate_grpo_memory(
        arch,
        lora_r=lora.get("r", 16),
        micro_batch=model.get("micro_batch_size", 16),
        seq_len=seq,
        gradient_checkpointing=checkpointing or bool(model.get("gradient_checkpointing", False)),
        engine=engine,
        rollout_tokens=rollouts * seq,
        engine_on_this_gpu=engine != "vllm_server",
        overhead_gib=overhead_gib,
    )


def estimates(path: Path, prompt_tokens: int, checkpointing: bool) -> list[tuple[str, str, object]]:
    """(where, what, MemoryEstimate) rows for one recipe."""
    cfg = yaml.safe_load(path.read_text())
    model, data = init_args(cfg, "model"), init_args(cfg, "data")
    engine_kwargs = model.get("engine_kwargs") or {}
    if "generator" in model:  # labeling: two vLLM engines on one GPU, each holding its weights and a KV cache
        batch, solver = data.get("batch_size", 16), model.get("solver") or {}
        gen_seq = prompt_tokens + model.get("max_new_tokens", 256)
        sol_seq = prompt_tokens + model.get("max_new_tokens", 256) + solver.get("max_new_tokens", 256)
        gen = estimate_serving_memory(KNOWN[model["generator"]], tokens_in_flight=batch * gen_seq)
        sol = estimate_serving_memory(
            KNOWN[solver["model"]], tokens_in_flight=batch * solver.get("n_trials", 8) * sol_seq, overhead_gib=0.0
        )
        return [
            ("GPU 0", f"vLLM generator {model['generator']}", gen),
            ("GPU 0", f"vLLM solver {solver['model']}", sol),
        ]
    arch = KNOWN[model["model"]]
    train = grpo_estimate(arch, model, data, prompt_tokens, checkpointing)
    lora = model.get("lora") or {}
    engine = model.get("engine", "hf")
    servers = engine_kwargs.get("replicas", 1) if engine == "vllm_server" else 0
    seq = prompt_tokens + model.get("max_new_tokens", 128)
    rollouts = data.get("contexts_per_step", 4) * model.get("group_size", 8)
    rows = [("each trainer GPU", f"GRPO {model['model']} LoRA r={lora.get('r', 16)}", train)]
    for i in range(servers):
        serve = estimate_serving_memory(arch, tokens_in_flight=rollouts * seq // servers)
        rows.append((f"vLLM GPU {i + 1}", f"server {i + 1} of {servers}", serve))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="*", default=sorted(str(p) for p in (ROOT / "configs/gpu").glob("*.yaml")))
    parser.add_argument("--prompt-tokens", type=int, default=512, help="prompt length assumed for GRPO contexts")
    parser.add_argument("--checkpointing", action="store_true", help="activations with gradient checkpointing")
    args = parser.parse_args()
    parts = ["weights", "trainable_state", "activations", "logits", "engine_weights", "kv_cache", "overhead"]
    print("| config | where | what | " + " | ".join(parts) + " | total GiB |")
    print("|---" * (len(parts) + 4) + "|")
    for path in args.configs:
        for where, what, est in estimates(Path(path), args.prompt_tokens, args.checkpointing):
            cells = " | ".join(f"{getattr(est, p) / GIB:.1f}" for p in parts)
            print(f"| {Path(path).stem} | {where} | {what} | {cells} | {est.total / GIB:.1f} |")


if __name__ == "__main__":
    main()
