"""Agent environments: the episode interface (``AgentEnv``: reset / step / state), text tool calls, the sandboxed
tool environment (``ToolEnv``), a tiny built-in task family (``ShellTasks``) and any OpenEnv environment
(``OpenEnvAgentEnv`` with ``OpenEnvTasks``; OpenEnv itself is imported only when an episode starts)."""

from propel.envs.base import FINISH_REASONS, AgentEnv, EpisodeState, Observation, TaskSource
from propel.envs.openenv_env import OpenEnvAgentEnv
from propel.envs.openenv_tasks import OpenEnvTasks
from propel.envs.shell_tasks import DEMONSTRATION, ShellTasks
from propel.envs.tool_calls import ToolCall, ToolCallError, describe_tools, format_tool_call, parse_tool_call
from propel.envs.tool_env import ToolEnv

__all__ = [
    "DEMONSTRATION",
    "FINISH_REASONS",
    "AgentEnv",
    "EpisodeState",
    "Observation",
    "OpenEnvAgentEnv",
    "OpenEnvTasks",
    "ShellTasks",
    "TaskSource",
    "ToolCall",
    "ToolCallError",
    "ToolEnv",
    "describe_tools",
    "format_tool_call",
    "parse_tool_call",
]
