"""Self-BLEU-3: propel's exact vectorised method vs NLTK's literal sentence_bleu loop.

NLTK is O(N^2 * L): it runs on a subsample of ``--nltk-sample`` hypotheses (each still scored against all N-1
references), and its full time is extrapolated linearly in the number of hypotheses; the table says so.
On the subsample, the two scores are compared sample by sample.

    python benchmarks/self_bleu.py --sizes 1000 10000 --nltk-sample 20
"""

from __future__ import annotations

import argparse
import random
import time

import numpy as np
from rich.console import Console
from rich.table import Table

from propel.metrics.diversity import self_bleu_scores, tokenize


def synthetic_texts(num: int, seed: int = 0, vocab: int = 2000) -> list[str]:
    """Zipf-ish word draws with some near-duplicates, 20-80 words each (task-generator-like lengths)."""
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(vocab)]
    weights = [1 / (i + 1) for i in range(vocab)]
    texts: list[str] = []
    for _ in range(num):
        if texts and rng.random() < 0.2:
            base = rng.choice(texts).split()
            base[rng.randrange(len(base))] = rng.choice(words)
            texts.append(" ".join(base))
        else:
            texts.append(" ".join(rng.choices(words, weights, k=rng.randint(20, 80))))
    return texts


def nltk_scores_for(docs: list[list[str]], indices: list[int], n: int) -> np.ndarray:
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    smooth, weights = SmoothingFunction().method1, (1.0 / n,) * n
    return np.array(
        [sentence_bleu(docs[:i] + docs[i + 1 :], docs[i], weights=weights, smoothing_function=smooth) for i in indices]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--nltk-sample", type=int, default=20, help="hypotheses NLTK scores per size")
    parser.add_argument("--n", type=int, default=3)
    args = parser.parse_args()

    table = Table(title=f"Self-BLEU-{args.n}: propel (exact, all samples) vs NLTK (subsample, extrapolated)")
    for col in (
        "N",
        "propel s",
        "propel Self-BLEU",
        "NLTK s (measured / sample)",
        "NLTK s (extrapolated to N)",
        "speed-up",
        "max |diff| on sample",
    ):
        table.add_column(col, justify="right")
    for size in args.sizes:
        texts = synthetic_texts(size)
        start = time.perf_counter()
        ours = self_bleu_scores(texts, args.n)
        ours_s = time.perf_counter() - start
        docs = tokenize(texts)
        indices = random.Random(1).sample(range(size), min(args.nltk_sample, size))
        start = time.perf_counter()
        ref = nltk_scores_for(docs, indices, args.n)
        nltk_s = time.perf_counter() - start
        nltk_full = nltk_s / len(indices) * size
        table.add_row(
            str(size),
            f"{ours_s:.2f}",
            f"{ours.mean():.4f}",
            f"{nltk_s:.1f} / {len(indices)}",
            f"{nltk_full:,.0f}",
            f"{nltk_full / ours_s:,.0f}x",
            f"{np.abs(ours[indices] - ref).max():.1e}",
        )
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
