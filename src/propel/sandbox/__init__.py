"""Isolated execution of model-written code: local (rlimits + bubblewrap) and Docker backends."""

from propel.sandbox.base import Job, Limits, Outcome, Result, Sandbox

__all__ = ["Job", "Limits", "Outcome", "Result", "Sandbox"]
