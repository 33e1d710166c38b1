"""The six IT-triage reward components, one class each, combined by ``CombinedReward`` with YAML weights.

Content first (``docs/triage_rewards.md``): resolution is the share of the gold runbook's steps the answer states
as instructions, in the runbook's order (``steps.py``; ``clauses.py`` reads the text as instructions, ``reading.py``
reads each one's register and polarity, ``actions.py`` whether its verb does the step's action, ``retraction.py``
what a later clause takes back, and ``vocabulary.py`` folds spelling variants and synonyms); format (beyond the
parse), parsimony and repetition are style, paid in proportion to that content when the answer follows no wrong step,
none out of order (``gate.py``); grounding (citation F1) and calibration (Brier against "is a right fix") stand on
their own. Text is normalised before
anything is counted (``normalize.py``), the copy check reads it as the content check does (``copying.py``), and a
malformed answer scores 0 everywhere (``parse.py``).

``mode="independent"`` on every component (``mode.py``) pays the seed's six independent components instead (ROUGE-L
resolution, ungated style); both values are logged whatever the mode, and ``integrity.py`` measures what each mode pays
answers with no content.
"""

from propel.rewards.triage.calibration import TriageCalibration
from propel.rewards.triage.clauses import clauses, instruction
from propel.rewards.triage.component import INFO_KEY, TriageReward, content, rouge_l, submission
from propel.rewards.triage.copying import copied_span, copied_words
from propel.rewards.triage.format import TriageFormat
from propel.rewards.triage.gate import StyleReward
from propel.rewards.triage.grounding import CitationGrounding
from propel.rewards.triage.integrity import content_free, honest_answer, integrity
from propel.rewards.triage.mode import CONTENT_FIRST, INDEPENDENT, MODES, check_mode
from propel.rewards.triage.normalize import normalize, word_count
from propel.rewards.triage.parsimony import Parsimony, parsimony
from propel.rewards.triage.repetition import RepetitionPenalty, loop_fraction
from propel.rewards.triage.resolution import TriageResolution
from propel.rewards.triage.steps import StepCheck, check_steps, key_terms


def triage_rewards(mode: str = CONTENT_FIRST) -> list[TriageReward]:
    """The six components with their default weights (1 each): format, resolution, grounding, calibration, parsimony,
    repetition, each in ``mode`` (``content_first``, the default, or ``independent``: ``mode.py``)."""
    check_mode(mode, "triage_rewards")
    return [
        TriageFormat(mode=mode),
        TriageResolution(mode=mode),
        CitationGrounding(mode=mode),
        TriageCalibration(mode=mode),
        Parsimony(mode=mode),
        RepetitionPenalty(mode=mode),
    ]


__all__ = [
    "CONTENT_FIRST",
    "INDEPENDENT",
    "INFO_KEY",
    "MODES",
    "CitationGrounding",
    "Parsimony",
    "RepetitionPenalty",
    "StepCheck",
    "StyleReward",
    "TriageCalibration",
    "TriageFormat",
    "TriageResolution",
    "TriageReward",
    "check_mode",
    "check_steps",
    "clauses",
    "content",
    "content_free",
    "copied_span",
    "copied_words",
    "honest_answer",
    "instruction",
    "integrity",
    "key_terms",
    "loop_fraction",
    "normalize",
    "parsimony",
    "rouge_l",
    "submission",
    "triage_rewards",
    "word_count",
]
