"""Diversity of generated tasks: Self-BLEU-n, Distinct-n and the top-topic rate (collapse indicators).

Self-BLEU scores each sample with NLTK's ``sentence_bleu`` (uniform weights, ``SmoothingFunction().method1``)
against all *other* samples as references and averages. Done literally that is O(N^2 * L); here it is exact in
O(N * L * log(N * L)) with numpy:

* Clipping needs, per n-gram, the largest count in any *other* sample. Keep the top two counts per n-gram over
  the corpus and who holds the top one: a sample's max-reference count is the top count, unless the sample itself
  holds it, then the second (equal to the top when two samples tie).
* The brevity penalty needs the reference length closest to the hypothesis length (ties: the shorter, as NLTK),
  among the other samples: a lookup in the sorted multiset of lengths with the sample's own length removed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

Tokens = Sequence[str]
SMOOTH_EPSILON = 0.1  # NLTK SmoothingFunction(epsilon=0.1).method1


def tokenize(samples: Sequence[str] | Sequence[Tokens], tokenizer: Callable[[str], list[str]] | None = None):
    """Token lists: strings are split on whitespace (or with ``tokenizer``), token lists pass through."""
    split = tokenizer or str.split
    return [split(s) if isinstance(s, str) else list(s) for s in samples]


def _token_ids(docs: list[list[str]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flat token ids, the sample index of each token, and each token's position in its sample."""
    vocab: dict[str, int] = {}
    flat = np.fromiter((vocab.setdefault(t, len(vocab)) for d in docs for t in d), dtype=np.int64)
    lengths = np.fromiter((len(d) for d in docs), dtype=np.int64, count=len(docs))
    owner = np.repeat(np.arange(len(docs), dtype=np.int64), lengths)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]) if len(docs) else np.zeros(0, dtype=np.int64)
    position = np.arange(flat.size, dtype=np.int64) - np.repeat(starts, lengths)
    return flat, owner, position


def _ngram_ids(flat: np.ndarray, owner: np.ndarray, position: np.ndarray, max_n: int):
    """For n = 1..max_n: (dense n-gram id, sample index) of every n-gram, each order built from the previous one."""
    vocab = int(flat.max()) + 1 if flat.size else 1
    ids = flat
    out = [(flat, owner)]
    for n in range(2, max_n + 1):
        valid = position >= n - 1  # an n-gram ends at this token (within its sample)
        j = np.flatnonzero(valid)
        extended = np.full(flat.size, -1, dtype=np.int64)
        # the n-gram ending at j = the (n-1)-gram ending at j-1, then token j
        extended[j] = np.unique(ids[j - 1] * vocab + flat[j], return_inverse=True)[1].reshape(-1)
        ids = extended
        out.append((ids[valid], owner[valid]))
    return out


def _clipped_matches(gram: np.ndarray, sample: np.ndarray, num_samples: int) -> np.ndarray:
    """Per sample: sum over its n-grams of min(count, max count in any other sample)."""
    if gram.size == 0:
        return np.zeros(num_samples, dtype=np.int64)
    num_grams = int(gram.max()) + 1
    pair, count = np.unique(sample * num_grams + gram, return_counts=True)
    p_sample, p_gram = pair // num_grams, pair % num_grams
    order = np.lexsort((-count, p_gram))  # by n-gram, largest count first
    g_sorted, c_sorted, s_sorted = p_gram[order], count[order], p_sample[order]
    first = np.ones(order.size, dtype=bool)
    first[1:] = g_sorted[1:] != g_sorted[:-1]
    starts = np.flatnonzero(first)
    top1 = np.zeros(num_grams, dtype=np.int64)
    top2 = np.zeros(num_grams, dtype=np.int64)
    holder = np.full(num_grams, -1, dtype=np.int64)
    top1[g_sorted[starts]] = c_sorted[starts]
    holder[g_sorted[starts]] = s_sorted[starts]
    second = starts + 1
    has_second = (second < order.size) & ~first[np.minimum(second, order.size - 1)]
    top2[g_sorted[starts[has_second]]] = c_sorted[second[has_second]]
    max_ref = np.where(holder[p_gram] == p_sample, top2[p_gram], top1[p_gram])
    return np.bincount(p_sample, weights=np.minimum(count, max_ref), minlength=num_samples).astype(np.int64)


def _closest_other_length(lengths: np.ndarray) -> np.ndarray:
    """Per sample: the closest length among the *other* samples (ties go to the shorter)."""
    values, counts = np.unique(lengths, return_counts=True)
    idx = np.searchsorted(values, lengths)  # values[idx] == own length
    shared = counts[idx] >= 2  # another sample has exactly this length
    below = np.where(idx > 0, values[np.maximum(idx - 1, 0)], -(10**18))
    above = np.where(idx + 1 < values.size, values[np.minimum(idx + 1, values.size - 1)], 10**18)
    pick_below = (lengths - below) <= (above - lengths)
    return np.where(shared, lengths, np.where(pick_below, below, above))


def self_bleu_scores(
    samples: Sequence[str] | Sequence[Tokens], n: int = 3, tokenizer: Callable[[str], list[str]] | None = None
) -> np.ndarray:
    """Per-sample BLEU-n of each sample against all other samples (NLTK ``sentence_bleu`` + method1), exactly."""
    docs = tokenize(samples, tokenizer)
    if len(docs) < 2:
        raise ValueError(f"Self-BLEU needs at least 2 samples, got {len(docs)}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    num = len(docs)
    lengths = np.fromiter((len(d) for d in docs), dtype=np.int64, count=num)
    flat, owner, position = _token_ids(docs)
    log_p = np.zeros(num)
    unigram_hits = None
    for order, (gram, sample) in enumerate(_ngram_ids(flat, owner, position, n), start=1):
        matches = _clipped_matches(gram, sample, num)
        total = np.maximum(1, lengths - order + 1)
        if order == 1:
            unigram_hits = matches
        p = np.where(matches > 0, matches, SMOOTH_EPSILON) / total
        log_p += np.log(p) / n
    ref_len = _closest_other_length(lengths)
    safe_len = np.maximum(lengths, 1)
    bp = np.where(lengths > ref_len, 1.0, np.where(lengths == 0, 0.0, np.exp(1 - ref_len / safe_len)))
    scores = bp * np.exp(log_p)
    return np.where(unigram_hits > 0, scores, 0.0)


def self_bleu(
    samples: Sequence[str] | Sequence[Tokens], n: int = 3, tokenizer: Callable[[str], list[str]] | None = None
) -> float | None:
    """Mean Self-BLEU-n (higher = less diverse); see ``self_bleu_scores``. None with fewer than 2 samples: there is
    nothing to compare, and 0.0 would read as "maximally diverse"."""
    if len(samples) < 2:
        return None
    return float(self_bleu_scores(samples, n, tokenizer).mean())


def distinct_n(
    samples: Sequence[str] | Sequence[Tokens], n: int = 3, tokenizer: Callable[[str], list[str]] | None = None
) -> float | None:
    """Corpus-level Distinct-n: unique n-grams / all n-grams over all samples (None when there are none)."""
    grams: Counter = Counter()
    for d in tokenize(samples, tokenizer):
        grams.update(_ngram_counts(d, n))
    total = sum(grams.values())
    return len(grams) / total if total else None


def _ngram_counts(doc: Tokens, n: int) -> Counter:
    """Each n-gram of one token list with its count."""
    return Counter(tuple(doc[i : i + n]) for i in range(len(doc) - n + 1))


def distinct_n_leave_one_out(
    samples: Sequence[str] | Sequence[Tokens], n: int = 3, tokenizer: Callable[[str], list[str]] | None = None
) -> np.ndarray:
    """Distinct-n of the corpus without each sample in turn (NaN where nothing is left to count).

    Distinct-n is a corpus ratio, not a mean of per-text scores, and resampling texts with replacement would
    repeat them and lower it; the leave-one-out values give its jackknife standard error instead
    (``propel.metrics.intervals.jackknife``). One pass: a sample's removal loses the n-grams it alone holds and
    its own n-gram count.
    """
    docs = tokenize(samples, tokenizer)
    per_doc = [_ngram_counts(d, n) for d in docs]
    grams: Counter = Counter()
    for c in per_doc:
        grams.update(c)
    unique, total = len(grams), sum(grams.values())
    out = np.full(len(docs), np.nan)
    for i, c in enumerate(per_doc):
        rest = total - sum(c.values())
        if rest:
            out[i] = (unique - sum(1 for g, k in c.items() if grams[g] == k)) / rest
    return out


def top_topic_count(topics: Sequence[str | None]) -> int:
    """How many samples carry the most common topic label (None labels are unknown, not a topic)."""
    known = Counter(t for t in topics if t is not None)
    return known.most_common(1)[0][1] if known else 0


def top_topic_rate(topics: Sequence[str | None]) -> float | None:
    """Share of samples carrying the most common topic label (None labels count as unknown, not a topic); None
    when no sample has a known topic (nothing to concentrate on)."""
    if not any(t is not None for t in topics):
        return None
    return top_topic_count(topics) / len(topics)


def nltk_self_bleu_scores(samples: Sequence[str] | Sequence[Tokens], n: int = 3) -> np.ndarray:
    """The literal O(N^2 * L) NLTK computation: the reference for tests and benchmarks (needs ``nltk``)."""
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    docs = tokenize(samples)
    smooth = SmoothingFunction().method1
    weights = (1.0 / n,) * n
    return np.array(
        [
            sentence_bleu(docs[:i] + docs[i + 1 :], d, weights=weights, smoothing_function=smooth)
            for i, d in enumerate(docs)
        ]
    )
