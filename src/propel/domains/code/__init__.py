"""AZR code tasks: function + literal inputs + message; induction and deduction modes."""

from propel.domains.code.domain import CodeDomain
from propel.domains.code.safety import ALLOWED_MODULES, check_source

__all__ = ["ALLOWED_MODULES", "CodeDomain", "check_source"]
