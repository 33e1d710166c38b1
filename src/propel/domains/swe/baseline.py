"""The procedural baseline generator: libcst mutations kept only when the validity pipeline accepts them.

Used to seed and test the bug pool without a model (``SweDomain(procedural=True)`` draws its candidates from the same
``generate_bugs``). Candidates are drawn in chunks (one batched suite job per chunk) until ``n`` valid bugs are found
or ``max_candidates`` were tried; the raw validity rate is reported alongside, so the baseline's cost is visible.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from propel.domains.swe.mutations import TRANSFORMS, Mutation, generate_bugs
from propel.domains.swe.validity import BugValidator, BugVerdict


@dataclass
class BaselineBugs:
    """Valid procedural bugs of one repo, with what it took to find them."""

    bugs: list[tuple[Mutation, BugVerdict]] = field(default_factory=list)
    """Each valid mutation with its verdict (its failing tests are the repair's fail-to-pass set)."""
    tried: int = 0
    """Candidates checked."""
    reasons: Counter = field(default_factory=Counter)
    """Why the rejected candidates were invalid."""

    @property
    def validity_rate(self) -> float:
        return len(self.bugs) / self.tried if self.tried else 0.0


def baseline_bugs(
    validator: BugValidator, n: int, seed: int = 0, max_candidates: int | None = None, transforms=TRANSFORMS
) -> BaselineBugs:
    """Up to ``n`` valid procedural bugs for the validator's repo (deterministic per seed)."""
    limit = max_candidates if max_candidates is not None else 4 * n
    candidates = generate_bugs(validator.profile, validator.root, limit, seed=seed, transforms=transforms)
    out = BaselineBugs()
    cursor = 0
    while cursor < len(candidates) and len(out.bugs) < n:
        size = min(validator.suite.batch_size, n - len(out.bugs))
        batch = candidates[cursor : cursor + size]
        cursor += len(batch)
        for bug, verdict in zip(batch, validator.check_many([b.diff for b in batch]), strict=True):
            out.tried += 1
            if verdict.valid:
                out.bugs.append((bug, verdict))
            else:
                out.reasons[verdict.reason] += 1
    out.bugs = out.bugs[:n]
    return out
