"""Update time with a group's prompt run once (``share_prompt``) vs. every row's full forward, side by side.

One micro-batch as the demo's GRPO update scores it: the bundled model in fp32 with LoRA (r=16 on 7 projections,
B nonzero), ``rows`` completions of ``completion`` tokens after one ``prompt``-token prompt, logits over the
completion span. Per setting: the forward + backward of the summed logprobs (the policy's loss) and a no-grad forward
(the reference's and the old policy's logprobs), alternated ``--repeats`` times after one warm-up each; mean and a
95% t interval of the per-repeat ratio. The gradients of the two settings are compared as well (max abs difference
relative to the largest entry).

    python benchmarks/prefix_sharing.py                 # the demo's rows: 135 + 64 tokens, 4 rows; ~2 min on 2 cores
    python benchmarks/prefix_sharing.py --rows 8 --prompt 400
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def _timed(fn) -> float:
    began = time.perf_counter()
    fn()
    return time.perf_counter() - began


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--prompt", type=int, default=135, help="prompt tokens (the demo's are 120-150)")
    parser.add_argument("--completion", type=int, default=64, help="completion tokens (the demo's max_new_tokens)")
    parser.add_argument("--rows", type=int, default=4, help="rows sharing the prompt (the demo's micro_batch_size)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", default=None, help="write the numbers here")
    args = parser.parse_args(argv)

    import torch
    from rich.console import Console
    from rich.table import Table
    from scipy import stats

    from propel.losses.logprobs import token_logprobs
    from propel.models import apply_lora, load_model
    from propel.models.prefix_sharing import shared_prefix_span_logits
    from propel.models.span_logits import span_logits

    torch.manual_seed(0)
    base, _ = load_model(args.model, dtype="float32")
    policy = apply_lora(base).eval()
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.normal_(std=0.01)
    vocab = policy.get_input_embeddings().weight.shape[0]
    prompt = torch.randint(100, vocab, (args.prompt,))
    ids = torch.cat([prompt.expand(args.rows, -1), torch.randint(100, vocab, (args.rows, args.completion))], 1)
    attn, starts = torch.ones_like(ids), torch.full((args.rows,), args.prompt)
    settings = {"plain": span_logits, "shared prompt": shared_prefix_span_logits}

    def loss(fn):
        logits = fn(policy, ids, attn, starts, args.completion)
        return token_logprobs(logits, ids[:, args.prompt :])[0].sum()

    def train(fn):
        policy.zero_grad()
        loss(fn).backward()

    def score(fn):
        with torch.no_grad():
            loss(fn)

    grads = {}
    for name, fn in settings.items():
        train(fn)  # warm-up, and the gradients compared below
        grads[name] = torch.cat([p.grad.flatten() for p in policy.parameters() if p.grad is not None])
        score(fn)
    times = {(name, kind): [] for name in settings for kind in ("train", "score")}
    for _ in range(args.repeats):
        for name, fn in settings.items():
            times[name, "train"].append(_timed(lambda fn=fn: train(fn)))
            times[name, "score"].append(_timed(lambda fn=fn: score(fn)))
    grad_diff = float((grads["plain"] - grads["shared prompt"]).abs().max() / grads["plain"].abs().max())

    table = Table(
        title=f"{args.rows} rows x ({args.prompt} prompt + {args.completion} completion tokens), {args.model}"
    )
    for col in ("pass", "plain s", "shared prompt s", "shared / plain [95% CI]"):
        table.add_column(col)
    out = {"args": vars(args), "relative_grad_diff": grad_diff, "repeats": {}}
    for kind, label in (("train", "forward + backward"), ("score", "no-grad forward")):
        plain, shared = times["plain", kind], times["shared prompt", kind]
        ratios = [s / p for s, p in zip(shared, plain, strict=True)]
        mean = statistics.fmean(ratios)
        half = (
            stats.t.ppf(0.975, len(ratios) - 1) * statistics.stdev(ratios) / len(ratios) ** 0.5
            if len(ratios) > 1
            else 0
        )
        table.add_row(
            label,
            f"{statistics.fmean(plain):.3f}",
            f"{statistics.fmean(shared):.3f}",
            f"{mean:.3f} [{mean - half:.3f}, {mean + half:.3f}]",
        )
        out["repeats"][kind] = {"plain_s": plain, "shared_s": shared, "ratio_mean": mean, "ratio_ci95": half}
    console = Console()
    console.print(table)
    console.print(f"gradients: max |shared - plain| = {grad_diff:.1e} of the largest entry")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return out


if __name__ == "__main__":
    main()
