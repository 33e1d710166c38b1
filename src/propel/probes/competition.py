"""The probe against its rivals, on the same labels and the same held-out folds, by what GRPO uses of a reward.

GRPO compares the tasks of one group with each other, so a task reward is worth what its top pick out of ``k`` adds
over a random pick (``propel.metrics.ranking.best_of_k_lift``, exact over every ``k``-subset). Every ranker is
cross-fitted over the same stratified folds (each row scored by a model that never saw it) and scored on the rows'
utility (a task's exact in-band chance where the pool has the solver's teacher-forced solve probability, else its
0/1 label). Competing with the probe (the selected sweep cell's architecture and balance, refitted per fold):

- ``zero_fit``: the domain's unfitted rule, declared before any data (``Domain.zero_fit_score``);
- ``features``: logistic regression on the domain's cheap task features (``Domain.task_features``);
- ``text``: a TF-IDF + logistic-regression classifier of the task's rendering;
- ``shuffled``: ``shuffles`` probes of the same cell on permuted labels, the null a real probe must clear;
- ``probe+features``: logistic regression on the features and the probe's cross-fitted logit, whose lift over
  ``features`` is the probe's incremental value.

The reward is the ranker with the highest held-out lift among the probe and the rivals (``RivalSpec.reward``
forces one); the report says which won, by how much, with paired bootstrap intervals over the held-out rows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from propel.domains.interface import Domain
from propel.metrics.ranking import best_of_k_lift
from propel.probes.data import LabeledRows
from propel.probes.rivals import RIVALS, feature_matrix, fit_rival
from propel.records import Task

REWARDS = ("best", "probe", *RIVALS)


@dataclass
class RivalSpec:
    """How the probe competes with the rivals, and which ranker becomes the reward."""

    enabled: bool = True
    """False skips the competition: the probe is the reward, as before the rivals existed."""
    k: int = 4
    """Group size of the best-of-k lift: GRPO's ``group_size`` (the pipeline copies it)."""
    n_folds: int = 5
    """Cross-fitting folds (fewer when the pool has fewer positives)."""
    shuffles: int = 20
    """Probes on shuffled labels (each its own permutation): the null distribution."""
    n_resamples: int = 2000
    """Bootstrap resamples of the held-out rows (within folds) for every interval."""
    confidence: float = 0.95
    reward: str = "best"
    """``best`` (the highest held-out lift among the probe and the rivals), ``probe``, or a rival kind."""
    band: tuple[int, int] = (1, 3)
    """The solver's utility band (inclusive solve counts; the pipeline copies the label stage's): a row's utility is
    its exact band utility at the pool's ``exact_p`` where the pool has it."""
    seed: int = 0

    def __post_init__(self) -> None:
        if self.reward not in REWARDS:
            raise ValueError(f"rivals.reward must be one of {REWARDS}, got {self.reward!r}")
        if self.k < 2:
            raise ValueError(f"rivals.k must be >= 2 (a pick out of one task ranks nothing), got {self.k}")
        self.band = (int(self.band[0]), int(self.band[1]))
        if self.n_folds < 3:
            raise ValueError(f"rivals.n_folds must be >= 3 (train, validation, held out), got {self.n_folds}")


def folds_of(labels: np.ndarray, n_folds: int, seed: int) -> np.ndarray:
    """Each row's fold (stratified by label; ``n_folds`` is lowered to the smaller class's count, >= 3)."""
    from sklearn.model_selection import StratifiedKFold

    counts = np.bincount(labels.astype(int), minlength=2)
    n = min(n_folds, int(counts.min()))
    if n < 3:
        raise ValueError(f"the rivals need >= 3 rows of each class to cross-fit, got {counts.tolist()}")
    out = np.empty(len(labels), dtype=np.int64)
    for k, (_, test) in enumerate(StratifiedKFold(n, shuffle=True, random_state=seed).split(labels, labels)):
        out[test] = k
    return out


def fold_lift(scores: np.ndarray, utility: np.ndarray, folds: np.ndarray, k: int, rows=None) -> float:
    """The best-of-k lift within each held-out fold (its scores come from one model), weighted by fold size;
    ``rows`` (indices, with repeats) picks a resample."""
    idx = np.arange(len(scores)) if rows is None else rows
    total, n = 0.0, 0
    for f in np.unique(folds[idx]):
        members = idx[folds[idx] == f]
        if len(members) >= 2:
            total += best_of_k_lift(scores[members], utility[members], k) * len(members)
            n += len(members)
    return total / n if n else float("nan")


def _probe_scores(x, label_sets: Sequence[LabeledRows], folds, config, arch: str, balance: str, seed: int):
    """Out-of-fold logits of the probe cell for each set of labels (fold f held out, the next fold its
    early-stopping validation): every fold of every set is a head of one ``ProbeBank`` fit."""
    from propel.probes.bank import fit_bank
    from propel.probes.sweep_run import head_fit

    n_folds = int(folds.max()) + 1
    runs = []
    for rows in label_sets:
        for f in range(n_folds):
            test, val = np.flatnonzero(folds == f), np.flatnonzero(folds == (f + 1) % n_folds)
            train = np.flatnonzero((folds != f) & (folds != (f + 1) % n_folds))
            runs.append((test, head_fit(x, rows, (train, val, test), config, arch, balance, seed)))
    fit_bank([fit for _, fit in runs])
    out = [np.empty(len(folds)) for _ in label_sets]
    for i, (test, fit) in enumerate(runs):
        with torch.no_grad():
            out[i // n_folds][test] = fit.module(x[torch.as_tensor(test, dtype=torch.long)]).numpy()
    return out


def _rival_scores(kind, domain, tasks, texts, labels, folds, seed, extra=None) -> np.ndarray:
    out = np.empty(len(folds))
    for f in np.unique(folds):
        test, train = np.flatnonzero(folds == f), np.flatnonzero(folds != f)
        if kind == "probe+features":
            x = np.column_stack([feature_matrix(domain, tasks), extra])
            mean, scale = x[train].mean(0), x[train].std(0)
            scale[scale == 0] = 1.0
            from propel.probes.rivals import _logistic

            clf = _logistic((x[train] - mean) / scale, labels[train], seed)
            out[test] = clf.decision_function((x[test] - mean) / scale)
            continue
        ranker = fit_rival(kind, domain, [tasks[i] for i in train], [texts[i] for i in train], labels[train], seed)
        out[test] = ranker.score([tasks[i] for i in test] if ranker.reads == "task" else [texts[i] for i in test])
    return out


def available_rivals(domain: Domain, tasks: Sequence[Task]) -> list[str]:
    """The rivals the domain can field: the zero-fit rule and features only where it declares them."""
    out = []
    if tasks and domain.zero_fit_score(tasks[0]) is not None:
        out.append("zero_fit")
    if tasks and domain.task_features(tasks[0]):
        out.append("features")
    return [*out, "text"]


def compete(
    domain: Domain,
    tasks: Sequence[Task],
    texts: Sequence[str],
    x: torch.Tensor,
    rows: LabeledRows,
    utility: np.ndarray,
    config,
    arch: str,
    balance: str,
    spec: RivalSpec,
) -> dict:
    """Cross-fit every ranker, measure held-out lifts with paired intervals, and name the reward (module docstring).

    ``tasks``, ``texts``, ``x`` (the selected cell's features) and ``utility`` are aligned with ``rows``."""
    threads = torch.get_num_threads()
    if config.num_threads:  # tiny heads train fastest on one thread, as in the sweep
        torch.set_num_threads(config.num_threads)
    try:
        return _compete(domain, tasks, texts, x, rows, utility, config, arch, balance, spec)
    finally:
        torch.set_num_threads(threads)


def _compete(domain, tasks, texts, x, rows, utility, config, arch, balance, spec: RivalSpec) -> dict:
    labels = rows.labels.numpy().astype(int)
    folds = folds_of(labels, spec.n_folds, spec.seed)
    seed = int(config.seeds[0])
    rng = np.random.default_rng(spec.seed)
    shuffled = [
        dataclasses.replace(rows, labels=rows.labels[torch.as_tensor(rng.permutation(len(labels)))])
        for _ in range(spec.shuffles)
    ]
    probe, *null_scores = _probe_scores(x, [rows, *shuffled], folds, config, arch, balance, seed)
    scores = {"probe": probe}
    rivals = available_rivals(domain, tasks)
    for kind in rivals:
        scores[kind] = _rival_scores(kind, domain, tasks, texts, labels, folds, spec.seed)
    if "features" in rivals:
        scores["probe+features"] = _rival_scores(
            "probe+features", domain, tasks, texts, labels, folds, spec.seed, extra=scores["probe"]
        )
    null = [fold_lift(scores, utility, folds, spec.k) for scores in null_scores]
    table = _lift_table(scores, utility, folds, spec)
    candidates = ["probe", *rivals]
    winner = spec.reward if spec.reward != "best" else max(candidates, key=lambda c: table[c]["lift"])
    if winner not in candidates:
        raise ValueError(f"rivals.reward: {winner!r} is not available for {type(domain).__name__} ({candidates})")
    best_rival = max(rivals, key=lambda c: table[c]["lift"])
    probe_lift = table["probe"]["lift"]
    return {
        "k": spec.k,
        "rows": len(labels),
        "positives": int(labels.sum()),
        "folds": int(folds.max()) + 1,
        "utility": "exact band utility" if not np.isin(utility, (0.0, 1.0)).all() else "label",
        "lifts": table,
        "null": {
            "lifts": null,
            "mean": float(np.mean(null)) if null else None,
            "p_value": (1 + sum(v >= probe_lift for v in null)) / (1 + len(null)) if null else None,
        },
        "best_rival": best_rival,
        "probe_minus_best_rival": _paired(scores["probe"], scores[best_rival], utility, folds, spec),
        "incremental_over_features": (
            _paired(scores["probe+features"], scores["features"], utility, folds, spec)
            if "features" in rivals
            else None
        ),
        "reward": winner,
        "forced": spec.reward != "best",
    }


def _resamples(folds: np.ndarray, spec: RivalSpec):
    """Bootstrap row indices, resampled within each fold (each fold's rows keep their model)."""
    rng = np.random.default_rng(spec.seed + 1)
    members = [np.flatnonzero(folds == f) for f in np.unique(folds)]
    for _ in range(spec.n_resamples):
        yield np.concatenate([rng.choice(m, len(m), replace=True) for m in members])


def _interval(values: list[float], spec: RivalSpec) -> tuple[float, float]:
    alpha = (1 - spec.confidence) / 2
    return float(np.quantile(values, alpha)), float(np.quantile(values, 1 - alpha))


def _lift_table(scores: dict, utility, folds, spec: RivalSpec) -> dict:
    boots = {name: [] for name in scores}
    for idx in _resamples(folds, spec):
        for name, s in scores.items():
            boots[name].append(fold_lift(s, utility, folds, spec.k, idx))
    out = {}
    for name, s in scores.items():
        low, high = _interval(boots[name], spec)
        out[name] = {"lift": fold_lift(s, utility, folds, spec.k), "low": low, "high": high}
    return out


def _paired(a: np.ndarray, b: np.ndarray, utility, folds, spec: RivalSpec) -> dict:
    """``lift(a) - lift(b)`` with a paired bootstrap interval (the same resampled rows for both)."""
    diffs = [
        fold_lift(a, utility, folds, spec.k, idx) - fold_lift(b, utility, folds, spec.k, idx)
        for idx in _resamples(folds, spec)
    ]
    low, high = _interval(diffs, spec)
    return {"estimate": fold_lift(a, utility, folds, spec.k) - fold_lift(b, utility, folds, spec.k), "low": low,
            "high": high}  # fmt: skip


def markdown(result: dict) -> str:
    """The competition as a table plus its verdict in words (for the probe stage's and the demo's report)."""
    pct = "95%"
    lines = [
        f"Held-out best-of-{result['k']} lift over a random valid pick ({result['utility']}; {result['rows']} rows, "
        f"{result['positives']} in the band, {result['folds']} cross-fitted folds; {pct} bootstrap intervals):",
        "",
        "| ranker | reads | lift | interval |",
        "|---|---|---|---|",
    ]
    reads = {"probe": "activations", "zero_fit": "nothing (a declared rule)", "features": "cheap task features",
             "text": "the task's text (TF-IDF)", "probe+features": "activations + features"}  # fmt: skip
    for name, row in result["lifts"].items():
        mark = " (reward)" if name == result["reward"] else ""
        lines.append(f"| {name}{mark} | {reads.get(name, '')} | {row['lift']:+.4f} | "
                     f"[{row['low']:+.4f}, {row['high']:+.4f}] |")  # fmt: skip
    null = result["null"]
    if null["lifts"]:
        lines.append(f"| shuffled labels (x{len(null['lifts'])}) | activations | {null['mean']:+.4f} (mean) | "
                     f"max {max(null['lifts']):+.4f} |")  # fmt: skip
    d = result["probe_minus_best_rival"]
    lines += ["", f"- Probe minus the best rival ({result['best_rival']}): {d['estimate']:+.4f} "
              f"[{d['low']:+.4f}, {d['high']:+.4f}]."]  # fmt: skip
    inc = result["incremental_over_features"]
    if inc is not None:
        lines.append(f"- The probe's incremental value over the features (probe+features minus features): "
                     f"{inc['estimate']:+.4f} [{inc['low']:+.4f}, {inc['high']:+.4f}].")  # fmt: skip
    if null["p_value"] is not None:
        lines.append(f"- Against {len(null['lifts'])} probes on shuffled labels: p = {null['p_value']:.3f}.")
    how = "forced by rivals.reward" if result["forced"] else "the highest held-out lift"
    lines.append(f"- Reward: **{result['reward']}** ({how}).")
    return "\n".join(lines) + "\n"
