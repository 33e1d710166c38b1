"""Early-stop activation extraction vs a full ``output_hidden_states=True`` forward, on the bundled SmolLM2-135M.

Run: ``python benchmarks/extraction.py [--batches 2 --batch-size 8 --threads 1]`` (under a minute on an idle 2-core
CPU; pass ``--threads 1`` when other work shares the cores).
Prints one row per (layer, method): mean seconds per batch, speedup, and the max difference of the pooled features.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from propel.models import load_model
from propel.probes.extraction import ActivationExtractor, num_layers, position_ids_from_mask
from propel.probes.pooling import pool

TEMPLATE = (
    "Problem {i}: A baker makes {a} loaves each morning and sells {b} of them before noon. In the afternoon she "
    "bakes {c} more and sells half of what she has left. How many loaves remain at the end of the day?"
)


def texts(n: int) -> list[str]:
    return [TEMPLATE.format(i=i, a=20 + i, b=5 + i % 7, c=3 + i % 5) + " Explain." * (i % 4) for i in range(n)]


def full_forward(model, batch, layer: int, pooling: str) -> torch.Tensor:
    mask = batch["attention_mask"]
    with torch.no_grad():
        out = model(**batch, position_ids=position_ids_from_mask(mask), output_hidden_states=True, use_cache=False)
    return pool(out.hidden_states[layer], mask, pooling)


def timed(fn, repeats: int) -> tuple[float, torch.Tensor]:
    fn()  # warm-up
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--batches", type=int, default=2, help="timed repeats (median reported)")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--pooling", default="mean_last_half")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default; 1 on a busy CPU)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    torch.manual_seed(0)
    model, tok = load_model(args.model)
    depth = num_layers(model)
    layers = [max(1, depth // 10), depth - 3]
    batch_texts = texts(args.batch_size)
    batch = tok(batch_texts, return_tensors="pt", padding=True)
    print(
        f"model {args.model}: {depth} layers; batch {args.batch_size} x {batch['input_ids'].shape[1]} tokens "
        f"({tok.padding_side} padded), pooling {args.pooling}, median of {args.batches}"
    )
    print(f"{'layer':>5}  {'method':<28} {'s/batch':>8}  {'speedup':>7}  {'max |diff|':>10}")
    for layer in layers:
        t_full, ref = timed(lambda layer=layer: full_forward(model, batch, layer, args.pooling), args.batches)
        ex = ActivationExtractor(model, tok, [layer], [args.pooling], batch_size=args.batch_size)
        key = ex.keys[0]
        t_early, got = timed(lambda ex=ex, key=key: ex.encode(batch_texts)[key], args.batches)
        diff = (got - ref).abs().max().item()
        print(f"{layer:>5}  {'full (output_hidden_states)':<28} {t_full:8.3f}  {1.0:7.2f}  {'-':>10}")
        print(f"{layer:>5}  {'early stop (hooks)':<28} {t_early:8.3f}  {t_full / t_early:7.2f}  {diff:10.2e}")


if __name__ == "__main__":
    main()
