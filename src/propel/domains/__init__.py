"""Task domains: generator contexts, parsing, sandboxed validity, solver prompts, grading and topics."""

from propel.domains.code import CodeDomain
from propel.domains.interface import Context, Domain, ParseFailure, Task, Verdict
from propel.domains.math import MathExpressionDomain, OracleMathDomain

__all__ = [
    "CodeDomain",
    "Context",
    "Domain",
    "OracleMathDomain",
    "MathExpressionDomain",
    "ParseFailure",
    "Task",
    "Verdict",
]
