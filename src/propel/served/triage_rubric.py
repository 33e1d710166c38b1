"""propel's six triage rewards as an OpenEnv ``Rubric``: one child rubric per component, the parent their weighted sum.

Each child runs the propel component itself (``propel.rewards.triage``) on the answer text the environment builds
from the action, so a value read through OpenEnv equals the value propel trains with on the same answer. The weights
are propel's (a plain weighted sum, 1 each by default: at most 6), not OpenEnv's ``WeightedSum`` (whose weights must
add up to 1). The ticket's gold data is the rubric's per-episode state (``start``), never part of an observation.
"""

from __future__ import annotations

from typing import Any

from openenv.core.rubrics import Rubric

from propel.records import Context, Prompt, Sample
from propel.rewards.triage import INFO_KEY, TriageReward, triage_rewards


class ComponentRubric(Rubric):
    """One propel triage component; ``details`` holds what it recorded on its last call (``sample.info["triage"]``)."""

    def __init__(self, reward: TriageReward) -> None:
        super().__init__()
        self.reward, self.gold, self.details = reward, {}, {}

    def forward(self, action: Any, observation: Any) -> float:
        sample = Sample(
            prompt="", completion=action.answer_text(), context=Context("ticket", Prompt(messages=[]), data=self.gold)
        )
        value = float(self.reward([sample])[0])
        self.details = dict(sample.info.get(INFO_KEY, {}))
        return value


class TriageRubric(Rubric):
    """The six triage components (children named after them), summed with their propel weights.

    Args:
        rewards: the components; None: ``propel.rewards.triage.triage_rewards()`` (format, resolution, grounding,
            calibration, parsimony, repetition at weight 1, the settings ``configs/triage/grpo.yaml`` trains with).
    """

    def __init__(self, rewards: list[TriageReward] | None = None) -> None:
        super().__init__()
        for reward in rewards or triage_rewards():
            setattr(self, reward.name, ComponentRubric(reward))

    def start(self, gold: dict[str, Any]) -> None:
        """Grade against this ticket's gold data until the next ``start``."""
        for child in self.children():
            child.gold = gold

    def forward(self, action: Any, observation: Any) -> float:
        return sum(child.reward.weight * child(action, observation) for child in self.children())

    def components(self) -> dict[str, float]:
        """Each component's value on the last answer."""
        return {name: float(child.last_score) for name, child in self.named_children()}

    def details(self) -> dict[str, Any]:
        """What the components recorded on the last answer (the parse ``reason``, steps matched, words, ...)."""
        merged: dict[str, Any] = {}
        for child in self.children():
            merged.update(child.details)
        return merged
