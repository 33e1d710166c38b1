"""One generator or solver input: the prompt, a stable id (the resume key), a group (for grouped splits) and the gold
data a reward may read. Task sources and domains make them; rollouts, rewards, pools and environments read them."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from propel.records.prompt import Prompt


@dataclass
class Context:
    """One generator input: a stable id (resume key), the prompt, a group (for grouped splits) and gold data."""

    id: str
    prompt: Prompt
    group: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    """Gold data a reward or grader may read (a reference answer, a ticket's gold articles); empty for generators."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)
