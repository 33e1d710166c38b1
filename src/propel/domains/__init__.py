"""Task domains: generator contexts, parsing, sandboxed validity, solver prompts, grading and topics."""

from propel.domains.code import CodeDomain
from propel.domains.interface import AnswerText, Domain, ParseFailure, Verdict
from propel.domains.letter_counting import LetterCountingDomain
from propel.domains.math import MathExpressionDomain, OracleMathDomain

__all__ = [
    "AnswerText",
    "CodeDomain",
    "Domain",
    "LetterCountingDomain",
    "OracleMathDomain",
    "MathExpressionDomain",
    "ParseFailure",
    "Verdict",
]
