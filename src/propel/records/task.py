"""A parsed task: what a domain's ``parse`` makes of a generator completion, and what pools, probes and solvers read."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Task:
    """A parsed task: domain name, JSON-serialisable fields, and ground truth filled in by ``validity``."""

    domain: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Task:
        return cls(**json.loads(text))
