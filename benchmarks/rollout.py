"""Rollout throughput: HF ``generate`` (plain, and propel's shared-prefill engine) vs vLLM in-process vs a vLLM
server, on the bundled SmolLM2-135M-Instruct.

16 chat prompts x 8 samples x up to 128 new tokens at temperature 1.0, one timed run per engine after a short warm-up;
tokens/s counts generated tokens. Each engine's row is written to ``--out`` as soon as it is measured, and a rerun
skips engines already there (``--fresh`` to start over). Needs the vllm environment:

    bash scripts/setup_vllm.sh
    .venv-vllm/bin/python benchmarks/rollout.py
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from propel.engines.engine import SamplingSpec
from propel.records import Prompt

MODEL = "smollm2-135m-instruct"
TOPICS = [
    "the water cycle", "prime numbers", "photosynthesis", "the French revolution", "black holes", "binary search",
    "volcanoes", "the immune system", "compound interest", "plate tectonics", "the Pythagorean theorem",
    "honey bees", "electric circuits", "the moon landing", "recycling", "rainbows",
]  # fmt: skip


def prompts(num: int) -> list[Prompt]:
    """``num`` short chat prompts (varied topics so the samples differ in length)."""
    return [
        Prompt(messages=[{"role": "user", "content": f"Explain {TOPICS[i % len(TOPICS)]} in a few sentences."}])
        for i in range(num)
    ]


def build(kind: str, hf_dtype: str, vllm_dtype: str):
    """The engine under test (the server one is launched on 127.0.0.1 and stopped by ``close``)."""
    from propel.engines.factory import make_engine

    if kind == "hf":
        return make_engine("hf", MODEL, dtype=hf_dtype)
    if kind == "hf_plain":
        return make_engine("hf", MODEL, dtype=hf_dtype, share_prefill=False)
    if kind == "vllm":
        return make_engine("vllm", MODEL, dtype=vllm_dtype)
    return make_engine("vllm_server", MODEL, launch=True, dtype=vllm_dtype)


def measure(kind: str, args: argparse.Namespace, console: Console) -> dict:
    """Load time, generation time and tokens/s for one engine."""
    import torch

    torch.manual_seed(0)
    t0 = time.perf_counter()
    engine = build(kind, args.hf_dtype, args.vllm_dtype)
    load_s = time.perf_counter() - t0
    try:
        engine.generate(prompts(2), SamplingSpec(n=1, max_new_tokens=8))  # warm-up
        spec = SamplingSpec(n=args.n, max_new_tokens=args.max_new_tokens, temperature=1.0, logprobs=True)
        t0 = time.perf_counter()
        out = engine.generate(prompts(args.prompts), spec)
        gen_s = time.perf_counter() - t0
    finally:
        engine.close()
    tokens = sum(len(c.token_ids) for group in out for c in group)
    row = {
        "engine": kind,
        "workload": f"{args.prompts}x{args.n}x{args.max_new_tokens}",
        "dtype": args.hf_dtype if kind.startswith("hf") else args.vllm_dtype,
        "load_s": load_s,
        "gen_s": gen_s,
        "tokens": tokens,
        "tok_per_s": tokens / gen_s,
    }
    console.print(f"{kind}: {tokens} tokens in {gen_s:.1f} s = {tokens / gen_s:.0f} tok/s (load {load_s:.1f} s)")
    return row


def table(rows: list[dict], args: argparse.Namespace) -> Table:
    """One table; speed-ups are relative to the hf rows when present."""
    base = next((r["tok_per_s"] for r in rows if r["engine"] == "hf"), None)
    plain = next((r["tok_per_s"] for r in rows if r["engine"] == "hf_plain"), None)
    out = Table(
        title=f"rollout throughput: {args.prompts} prompts x n={args.n} x <= {args.max_new_tokens} tokens, "
        f"{os.cpu_count()} CPU cores"
    )
    for col in ("engine", "workload", "dtype", "load s", "gen s", "tokens", "tok/s", "vs hf", "vs hf_plain"):
        out.add_column(col, justify="left" if col in ("engine", "workload", "dtype") else "right")
    for r in rows:
        speed = f"{r['tok_per_s'] / base:.1f}x" if base else "-"
        speed_plain = f"{r['tok_per_s'] / plain:.1f}x" if plain else "-"
        out.add_row(
            r["engine"],
            r.get("workload", "?"),
            r["dtype"],
            f"{r['load_s']:.1f}",
            f"{r['gen_s']:.1f}",
            str(r["tokens"]),
            f"{r['tok_per_s']:.0f}",
            speed,
            speed_plain,
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--engines",
        nargs="+",
        default=["hf_plain", "hf", "vllm", "vllm_server"],
        choices=["hf_plain", "hf", "vllm", "vllm_server"],
        help="hf_plain: batched HF generate with every sample prefilling its own prompt (the naive baseline); "
        "hf: propel's HF engine (one prefill per prompt shared by its n samples)",
    )
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--hf-dtype", default="float32", help="HF on CPU is fastest in fp32")
    parser.add_argument("--vllm-dtype", default="float32", help="fp32 measured faster than bf16 on this CPU")
    parser.add_argument("--out", type=Path, default=Path("outputs/benchmarks/rollout.json"))
    parser.add_argument("--fresh", action="store_true", help="ignore rows already in --out")
    args = parser.parse_args()
    console = Console(width=160)
    done = {} if args.fresh or not args.out.exists() else {r["engine"]: r for r in json.loads(args.out.read_text())}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    for kind in args.engines:
        if kind in done:
            console.print(f"{kind}: already measured in {args.out} (use --fresh to redo)")
            continue
        done[kind] = measure(kind, args, console)
        args.out.write_text(json.dumps(list(done.values()), indent=1))
    console.print(table([done[k] for k in args.engines if k in done], args))


if __name__ == "__main__":  # vLLM spawns worker processes that re-import this module
    main()
