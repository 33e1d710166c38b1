"""The six IT-triage reward components (seed 003), one class each, combined by ``CombinedReward`` with YAML weights:
format, resolution (ROUGE-L), citation grounding, calibration (Brier), parsimony (monotone) and repetition."""

from propel.rewards.triage.base import INFO_KEY, TriageReward, rouge_l, submission
from propel.rewards.triage.calibration import TriageCalibration
from propel.rewards.triage.format import TriageFormat
from propel.rewards.triage.grounding import CitationGrounding
from propel.rewards.triage.parsimony import Parsimony, parsimony
from propel.rewards.triage.repetition import RepetitionPenalty, longest_copy, loop_fraction
from propel.rewards.triage.resolution import TriageResolution


def triage_rewards() -> list[TriageReward]:
    """The six components with their default weights (1 each), in the seed's order."""
    return [
        TriageFormat(),
        TriageResolution(),
        CitationGrounding(),
        TriageCalibration(),
        Parsimony(),
        RepetitionPenalty(),
    ]


__all__ = [
    "INFO_KEY",
    "CitationGrounding",
    "Parsimony",
    "RepetitionPenalty",
    "TriageCalibration",
    "TriageFormat",
    "TriageResolution",
    "TriageReward",
    "longest_copy",
    "loop_fraction",
    "parsimony",
    "rouge_l",
    "submission",
    "triage_rewards",
]
