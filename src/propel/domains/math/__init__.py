"""Math tasks: word problems with executable expressions (CPU demo) and oracle-agreement problems."""

from propel.domains.math.answers import extract_answer, parse_number
from propel.domains.math.expression_domain import MathExpressionDomain
from propel.domains.math.oracle_domain import OracleMathDomain
from propel.domains.math.symbolic import equivalent

__all__ = ["MathExpressionDomain", "OracleMathDomain", "equivalent", "extract_answer", "parse_number"]
