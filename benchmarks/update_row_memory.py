"""Peak resident set of one update micro-batch at agent-episode lengths, with and without layer recomputation.

Why the agent demos peaked at 8.7 GB: an agent episode is a long row (tool descriptions, observations, several
turns: about 1,000 tokens), and one micro-batch's forward and backward keep every layer's activations and the
full-vocabulary logits of the trained span alive at once. Each setting runs in its own process (so its peak is its
own ``ru_maxrss``): the bundled model in fp32 with LoRA (r=16), ``rows`` rows of ``tokens`` random tokens, logits
over the last ``span`` positions (``propel.models.span_logits``, as the trainer scores), the mean log-probability's
backward, ``gradient_checkpointing`` off or on (``propel.models.checkpointing``: the same loss and gradients).
``before`` is the process after loading the model; ``peak`` its peak during the micro-batch.

    python benchmarks/update_row_memory.py                                  # 1, 2, 4 rows x off/on: ~25 min on 2 cores
    python benchmarks/update_row_memory.py --rows 1 --tokens 1000 --span 800 --checkpointing on
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def measure(model: str, rows: int, tokens: int, span: int, checkpointing: bool) -> dict:
    """One micro-batch's forward and backward in this process; peak and before-peak resident set in KB."""
    import torch

    from propel.host_memory import release_freed_memory
    from propel.models import apply_lora, load_model
    from propel.models.lora import LoRASpec
    from propel.models.span_logits import span_logits

    torch.manual_seed(0)
    base, tokenizer = load_model(model, dtype="float32")
    policy = apply_lora(base, LoRASpec())
    if checkpointing:
        from propel.models.checkpointing import enable_activation_checkpointing

        enable_activation_checkpointing(policy)
    release_freed_memory()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    ids = torch.randint(0, len(tokenizer) - 1, (rows, tokens))
    start = time.monotonic()
    logits = span_logits(policy, ids, torch.ones_like(ids), torch.full((rows,), tokens - span), span)
    logp = torch.log_softmax(logits.float(), -1).gather(-1, ids[:, tokens - span :, None])
    logp.mean().backward()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"rows": rows, "checkpointing": checkpointing, "before_kb": before, "peak_kb": peak,
            "seconds": time.monotonic() - start}  # fmt: skip


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--tokens", type=int, default=1000)
    parser.add_argument("--span", type=int, default=800)
    parser.add_argument("--checkpointing", nargs="+", choices=["off", "on"], default=["off", "on"])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:  # one setting, in this process
        print(json.dumps(measure(args.model, args.rows[0], args.tokens, args.span, args.checkpointing[0] == "on")))
        return []
    results = []
    print(f"rows x {args.tokens} tokens ({args.span} trained) | recompute | before GB | peak GB | (peak-before)/row GB")
    for checkpointing in args.checkpointing:
        for rows in args.rows:
            cmd = [sys.executable, __file__, "--child", "--model", args.model, "--rows", str(rows), "--tokens",
                   str(args.tokens), "--span", str(args.span), "--checkpointing", checkpointing]  # fmt: skip
            out = subprocess.run(cmd, capture_output=True, text=True, check=True)
            row = json.loads(out.stdout.strip().splitlines()[-1])
            results.append(row)
            before, peak = row["before_kb"] / 1e6, row["peak_kb"] / 1e6
            print(f"{rows} | {checkpointing} | {before:.2f} | {peak:.2f} | {(peak - before) / rows:.2f}")
    return results


if __name__ == "__main__":
    main()
