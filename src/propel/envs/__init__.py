"""Agent environments: the episode interface (``AgentEnv``: reset / step / state), the sandboxed tool environment
(``ToolEnv``), any OpenEnv environment (``OpenEnvAgentEnv``; OpenEnv itself is imported only when an episode starts) and
any verifiers environment (``VerifiersAgentEnv``; verifiers is imported only when an episode starts). Where their tasks
come from is ``propel.tasks``; the text format of tool calls is ``propel.engines.tool_calls``."""

from propel.envs.agent_env import FINISH_REASONS, AgentEnv, EpisodeState, Observation
from propel.envs.openenv_env import OpenEnvAgentEnv
from propel.envs.scripted_chat import ScriptedChatEnv, check_reply
from propel.envs.tool_env import ToolEnv
from propel.envs.verifiers_env import VerifiersAgentEnv

__all__ = [
    "FINISH_REASONS",
    "AgentEnv",
    "EpisodeState",
    "Observation",
    "OpenEnvAgentEnv",
    "ScriptedChatEnv",
    "ToolEnv",
    "VerifiersAgentEnv",
    "check_reply",
]
