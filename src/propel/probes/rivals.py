"""The rivals an activation probe must beat, as rankers that can also be the RL reward.

A probe reads the frozen reference model's activations; the rivals read none: the domain's unfitted rule
(``Domain.zero_fit_score``), logistic regression on the domain's cheap task features (``Domain.task_features``) and
a TF-IDF text classifier on the task's rendering. Each is fitted on the same labeled rows as the probe, and whichever
ranks held-out tasks best becomes the reward (``propel.probes.competition``), with the same gate and floor as a probe:
``ProbeReward`` loads a rival's folder as it loads a probe's (``load_ranker``).

A rival's folder holds ``ranker.json`` only: the domain's class (built with its defaults to compute features, which
must therefore depend on the task alone), the fitted coefficients, and the logit quantiles on the training pool that
the reward's default floor sits below. No pickles: the numbers are the model.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from propel.domains.interface import Domain
from propel.records import Task

RANKER_FILE = "ranker.json"
RIVALS = ("zero_fit", "features", "text")
"""The rival kinds, cheapest first."""


def domain_path(domain: Domain) -> str:
    return f"{type(domain).__module__}.{type(domain).__qualname__}"


def _domain(path: str) -> Domain:
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)()


@dataclass
class RivalRanker:
    """A fitted rival: ``kind`` (``RIVALS``), what it reads (``reads``: ``task`` or ``text``), and its numbers."""

    kind: str
    domain: str
    """The domain's class path (its ``task_features`` / ``zero_fit_score`` are computed by a default instance)."""
    params: dict = field(default_factory=dict)
    logit_quantiles: dict[str, float] | None = None
    """Quantiles of the scores on the training pool (the reward's default floor sits below them)."""
    source: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in RIVALS:
            raise ValueError(f"rival kind must be one of {RIVALS}, got {self.kind!r}")
        self._domain: Domain | None = None

    @property
    def reads(self) -> str:
        """``text`` (the task's rendering, as a probe reads it) or ``task`` (the parsed task)."""
        return "text" if self.kind == "text" else "task"

    def _dom(self) -> Domain:
        if self._domain is None:
            self._domain = _domain(self.domain)
        return self._domain

    def logits(self, items: Sequence) -> torch.Tensor:
        """Scores of tasks (``reads == "task"``) or texts (``"text"``); higher = more likely in the band."""
        return torch.as_tensor(self.score(items), dtype=torch.float32)

    def score(self, items: Sequence) -> np.ndarray:
        if self.reads == "task":  # a reward passes task texts that carry their task (``rewards.probe_reward.TaskText``)
            items = [getattr(i, "task", None) or i for i in items]
        if self.kind == "zero_fit":
            return np.array([_zero_fit(self._dom(), t) for t in items], dtype=np.float64)
        if self.kind == "features":
            return _linear(self.params, feature_matrix(self._dom(), items))
        return _linear(self.params, _tfidf(self.params, items))

    def save(self, folder: str | Path) -> Path:
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        payload = {"kind": self.kind, "domain": self.domain, "params": self.params}
        payload["logit_quantiles"] = self.logit_quantiles
        (out / RANKER_FILE).write_text(json.dumps(payload))
        return out

    @classmethod
    def load(cls, folder: str | Path) -> RivalRanker:
        data = json.loads((Path(folder) / RANKER_FILE).read_text())
        return cls(data["kind"], data["domain"], data["params"], data.get("logit_quantiles"), source=str(folder))


def is_rival(folder: str | Path) -> bool:
    """Whether a reward folder holds a rival (``ranker.json``) rather than a probe."""
    return (Path(folder) / RANKER_FILE).exists()


def _zero_fit(domain: Domain, task: Task) -> float:
    value = domain.zero_fit_score(task)
    if value is None:
        raise ValueError(f"{type(domain).__name__} declares no zero-fit rule (Domain.zero_fit_score)")
    return float(value)


def feature_matrix(domain: Domain, tasks: Sequence[Task]) -> np.ndarray:
    """``[n, d]`` of the domain's task features (keys in the first task's order); refuses a domain without any."""
    rows = [domain.task_features(t) for t in tasks]
    if not rows or not rows[0]:
        raise ValueError(f"{type(domain).__name__} declares no task features (Domain.task_features)")
    keys = list(rows[0])
    return np.array([[float(r[k]) for k in keys] for r in rows], dtype=np.float64)


def _linear(params: dict, x) -> np.ndarray:
    x = np.asarray(x.toarray() if hasattr(x, "toarray") else x, dtype=np.float64)
    if "mean" in params:
        x = (x - np.asarray(params["mean"])) / np.asarray(params["scale"])
    return x @ np.asarray(params["coef"], dtype=np.float64) + float(params["intercept"])


def _vectorizer(vocabulary: dict | None = None):
    from sklearn.feature_extraction.text import TfidfVectorizer

    return TfidfVectorizer(
        token_pattern=r"(?u)\b\w+\b", ngram_range=(1, 2), sublinear_tf=True, min_df=1, vocabulary=vocabulary
    )


def _tfidf(params: dict, texts: Sequence[str]):
    vec = _vectorizer(params["vocabulary"])
    vec.fit([""])  # builds the analyzer; the vocabulary is given
    vec.idf_ = np.asarray(params["idf"], dtype=np.float64)
    return vec.transform(list(texts))


def _logistic(x, y, seed: int):
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=1.0, max_iter=2000, class_weight="balanced", random_state=seed).fit(x, y)


def fit_rival(kind: str, domain: Domain, tasks: Sequence[Task], texts: Sequence[str], labels, seed: int = 0):
    """A ``RivalRanker`` of ``kind`` fitted on these rows (class-balanced logistic regression; the zero-fit rule
    fits nothing)."""
    y = np.asarray(labels).astype(int)
    if kind == "zero_fit":
        return RivalRanker(kind, domain_path(domain))
    if kind == "features":
        x = feature_matrix(domain, tasks)
        mean, scale = x.mean(0), x.std(0)
        scale[scale == 0] = 1.0
        clf = _logistic((x - mean) / scale, y, seed)
        params = {"mean": mean.tolist(), "scale": scale.tolist(), "coef": clf.coef_[0].tolist()}
        return RivalRanker(kind, domain_path(domain), {**params, "intercept": float(clf.intercept_[0])})
    if kind == "text":
        vec = _vectorizer()
        x = vec.fit_transform(list(texts))
        clf = _logistic(x, y, seed)
        params = {
            "vocabulary": {k: int(v) for k, v in vec.vocabulary_.items()},
            "idf": vec.idf_.tolist(),
            "coef": clf.coef_[0].tolist(),
            "intercept": float(clf.intercept_[0]),
        }
        return RivalRanker(kind, domain_path(domain), params)
    raise ValueError(f"rival kind must be one of {RIVALS}, got {kind!r}")


def load_ranker(folder: str | Path):
    """The reward ranker in ``folder``: a ``RivalRanker`` (``ranker.json``) or a ``ProbeArtifact``."""
    if is_rival(folder):
        return RivalRanker.load(folder)
    from propel.probes.artifact import ProbeArtifact

    return ProbeArtifact.load(folder)
