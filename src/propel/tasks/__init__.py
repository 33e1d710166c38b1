"""Where tasks come from: every task source in one room (``propel.records.TaskSource``: ``contexts(n, seed)``).

HumanEval's coding problems (single-turn and as agent workspaces), IT-triage tickets, reasoning-gym's procedural
datasets, the tiny shell tasks, SWE bug-injection episodes, OpenEnv episodes and verifiers environments' datasets. A
generator's *domain* (what it writes, how that is parsed and checked) is ``propel.domains``; a task source only hands
out graded problems.
"""

from propel.tasks.conventions import ConventionChats
from propel.tasks.gym import GymDataset, ReasoningGymTasks, answer_tag, extract_answer, gym_dataset
from propel.tasks.humaneval import HumanEvalAgentTasks, HumanEvalTasks
from propel.tasks.openenv import OpenEnvTasks
from propel.tasks.shell import DEMONSTRATION, ShellTasks
from propel.tasks.swe import BugInjectionTasks
from propel.tasks.triage import TriageTickets
from propel.tasks.verifiers_tasks import VerifiersTasks

__all__ = [
    "DEMONSTRATION",
    "BugInjectionTasks",
    "ConventionChats",
    "GymDataset",
    "HumanEvalAgentTasks",
    "HumanEvalTasks",
    "OpenEnvTasks",
    "ReasoningGymTasks",
    "ShellTasks",
    "TriageTickets",
    "VerifiersTasks",
    "answer_tag",
    "extract_answer",
    "gym_dataset",
]
