"""The records every floor passes around, on the ground floor so that no room owns them: ``Prompt``, ``Context``,
``Task``, the rollout record (``Sample``, ``Turn``) and the ``TaskSource`` protocol that domains and task sources
both implement."""

from propel.records.context import Context
from propel.records.prompt import Prompt
from propel.records.sample import Sample, Turn
from propel.records.task import Task
from propel.records.task_source import TaskSource

__all__ = ["Context", "Prompt", "Sample", "Task", "TaskSource", "Turn"]
