"""Is there a triage setting where content can move for the bundled model? A pilot of the base policy (issue 50,
item 2: resolution above 0 on at least 5% of base samples, or a style-vs-content race is one side standing still).

Each variant changes the prompt only, never the graders: ``distractors`` (the wrong runbooks retrieved beside the
gold one; 3 by default, 0 leaves the gold runbook alone) and the answer's forced opening (``json``: the default
``submit_resolution {"resolution": "``; ``list``: the same followed by ``1. ``, the numbering of the runbook the
model reads, so that copying its steps is the natural continuation). The bundled model answers held-out tickets
(the eval split, drawn with replacement, seeded) at the training temperature (1.0); every answer is graded by
``TriageResolution`` and ``TriageFormat`` as in training. The table gives, per variant, the share of answers with
resolution above 0 (Wilson 95% interval), the mean resolution and the parse rate.

    python experiments/triage_content/pilot.py --out docs/experiments/triage_content_pilot   # ~10 min on 2 cores
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from propel.engines.engine import SamplingSpec
from propel.engines.factory import make_engine
from propel.metrics.intervals import wilson
from propel.rewards.reward import Sample
from propel.rewards.triage import TriageFormat, TriageResolution
from propel.tasks.triage import TriageTickets

JSON_OPENING = 'submit_resolution {"resolution": "'
OPENINGS = {"json": JSON_OPENING, "list": JSON_OPENING + "1. "}
VARIANTS = {  # name: (distractors, opening)
    "default": (3, "json"),
    "list": (3, "list"),
    "gold_only": (0, "json"),
    "gold_only_list": (0, "list"),
}
TARGET = 0.05  # the bar: resolution above 0 on at least 5% of base samples


def grade(samples: list[Sample]) -> tuple[np.ndarray, np.ndarray]:
    """Each answer's resolution and format values, as training pays them (prefix + completion, per ticket; every
    component reads the same samples, as in ``CombinedReward``)."""
    return TriageResolution()(samples).numpy(), TriageFormat()(samples).numpy()


def run_variant(engine, name: str, args) -> dict:
    distractors, opening = VARIANTS[name]
    tasks = TriageTickets(split="eval", distractors=distractors, answer_prefix=OPENINGS[opening])
    contexts = tasks.contexts(args.tickets, seed=args.seed)
    spec = SamplingSpec(n=args.samples, max_new_tokens=args.max_new_tokens, temperature=1.0)
    start = time.monotonic()
    outs = engine.generate([c.prompt for c in contexts], spec)
    samples = [
        Sample(prompt="", completion=c.text, context=ctx) for ctx, out in zip(contexts, outs, strict=True) for c in out
    ]
    resolution, fmt = grade(samples)
    positive = int((resolution > 0).sum())
    ci = wilson(positive, len(samples))
    return {
        "variant": name,
        "distractors": distractors,
        "opening": OPENINGS[opening],
        "answers": len(samples),
        "resolution_above_0": positive,
        "share": ci.estimate,
        "share_95": [ci.low, ci.high],
        "mean_resolution": float(resolution.mean()),
        "parsed": float((fmt > 0).mean()),
        "seconds": round(time.monotonic() - start, 1),
        "examples": [
            {"ticket": s.context.id, "resolution": float(r), "answer": s.completion[:400]}
            for s, r in sorted(zip(samples, resolution, strict=True), key=lambda x: -x[1])[:3]
        ],
    }


def report(rows: list[dict], args) -> str:
    lines = [
        "# Triage content pilot: how often does the base model's resolution score above 0?",
        "",
        f"`python experiments/triage_content/pilot.py --tickets {args.tickets} --samples {args.samples} "
        f"--max-new-tokens {args.max_new_tokens} --seed {args.seed}`: the bundled model, eval-split tickets, "
        f"temperature 1.0; the bar is {TARGET:.0%} of answers (Wilson 95% interval).",
        "",
        "| variant | distractors | opening | answers | resolution > 0 | share [95%] | mean resolution | parsed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lo, hi = r["share_95"]
        lines.append(
            f"| {r['variant']} | {r['distractors']} | `{r['opening']}` | {r['answers']} | {r['resolution_above_0']} "
            f"| {r['share']:.3f} [{lo:.3f}, {hi:.3f}] | {r['mean_resolution']:.3f} | {r['parsed']:.2f} |"
        )
    above = [r["variant"] for r in rows if r["share_95"][0] >= TARGET]
    reach = [r["variant"] for r in rows if r["share"] >= TARGET]
    lines += [
        "",
        f"Variants whose whole interval clears {TARGET:.0%}: {', '.join(above) or 'none'}; whose estimate does: "
        f"{', '.join(reach) or 'none'}.",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--tickets", type=int, default=12, help="held-out ticket draws per variant")
    ap.add_argument("--samples", type=int, default=4, help="answers per ticket")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    import torch

    engine = make_engine("hf", args.model)
    rows = []
    for name in args.variants:
        torch.manual_seed(args.seed)
        rows.append(run_variant(engine, name, args))
        r = rows[-1]
        print(
            f"{name}: {r['resolution_above_0']}/{r['answers']} above 0, mean {r['mean_resolution']:.3f}, "
            f"parsed {r['parsed']:.2f} ({r['seconds']} s)",
            flush=True,
        )
    text = report(rows, args)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "pilot.json").write_text(
            json.dumps({"settings": vars(args) | {"out": str(args.out)}, "rows": rows}, indent=1)
        )
        (args.out / "report.md").write_text(text)
    return rows


if __name__ == "__main__":
    main()
