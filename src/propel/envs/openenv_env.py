"""Any OpenEnv environment as a propel agent environment, in-process (an import path in YAML) or over a server URL.

The policy sees the environment's pydantic ``Action`` as one tool (``openenv_schema``) and answers with a tool call;
the call's arguments become the action, the observation's fields come back as the tool result, the observation's
``reward`` is that turn's reward (``Turn.info["reward"]``, summed by ``propel.rewards.TurnRewards``) and ``done``
ends the episode, whose reward (``EnvironmentReward``) is the environment's return: the sum of its turn rewards.
What the policy gets wrong stays in the episode as an observation: no tool call, another tool's name, or arguments
the action model rejects (pydantic's own message, the same in both modes) are counted as tool errors and cost
``malformed_call_reward``. An episode the rollout cuts (a turn past ``max_new_tokens``, a full context, a time
limit: ``end``) is an outcome too, with the environment's return so far. What the policy did not cause ends the
episode as an infrastructure failure, left out of the group statistics: a server that cannot be reached after the
retries, or a connection lost mid-episode.
"""

from __future__ import annotations

import functools
import uuid
from typing import Any

from propel.engines.tool_calls import CLOSE, ToolCall, ToolCallError, parse_tool_call
from propel.envs.agent_env import AgentEnv, EpisodeState, Observation
from propel.envs.openenv_schema import action_tool, import_object, observation_text
from propel.envs.openenv_session import (
    ActionRejected,
    InProcessSession,
    LostServer,
    ServerSession,
    action_class,
    openenv_missing,
    server_schema,
)
from propel.errors import ConfigError
from propel.records import Context
from propel.sandbox.sandbox import Sandbox

URL_SCHEMES = ("http://", "https://", "ws://", "wss://")
"""An ``env`` starting with one of these is a server; anything else is an import path."""
SYSTEM_PROMPT = (
    "You act in an environment through its tool. Call the tool once per message, in the form "
    '<tool_call>{"name": "<tool>", "arguments": {...}}</tool_call>, and read its result before the next call.'
)


@functools.lru_cache(maxsize=64)
def _in_process_schema(path: str) -> tuple[type, dict[str, Any]]:
    try:
        env_cls = import_object(path)
        return env_cls, action_class(env_cls).model_json_schema()
    except ImportError as e:
        if "openenv" in str(e):
            raise openenv_missing(e) from e
        raise


class OpenEnvAgentEnv(AgentEnv):
    """One episode of an OpenEnv environment, driven by propel's multi-turn rollouts.

    Contexts come from ``OpenEnvTasks`` (or any task source): ``data["seed"]``, ``data["reset_kwargs"]`` and the
    episode's id go to the environment's ``reset``, those its signature names (as OpenEnv's server passes them); the
    context's messages, if any, open the conversation before the first observation.

    Args:
        env: an OpenEnv ``Environment`` class's import path (``package.module.Class``), run in this process, or an
            OpenEnv server's URL (``http://127.0.0.1:8000``, ``ws://...``), driven over its WebSocket.
        env_kwargs: the in-process environment's constructor arguments.
        tool: the tool's name; None derives it from the action class (``GuessAction`` -> ``guess``).
        observation_field: show only this field of each observation; None shows its non-empty fields.
        system_prompt: the system message (the tool's schema is added by the chat template or the rollout).
        max_turns: actions before the episode ends (``max_turns``) if the environment has not ended it.
        malformed_call_reward: the turn reward of an action that is not a valid call of the tool (0: none).
        connect_timeout_s: limit of one connection attempt (a server).
        message_timeout_s: limit of one reply of a server; past it the server counts as lost.
        retries: further attempts to connect and reset while a server is unreachable.
        backoff_s: wait before the first retry, doubled before each next one.
    """

    stop = (CLOSE,)

    def __init__(
        self,
        env: str,
        env_kwargs: dict[str, Any] | None = None,
        tool: str | None = None,
        observation_field: str | None = None,
        system_prompt: str = SYSTEM_PROMPT,
        max_turns: int = 8,
        malformed_call_reward: float = 0.0,
        connect_timeout_s: float = 10.0,
        message_timeout_s: float = 60.0,
        retries: int = 3,
        backoff_s: float = 0.5,
    ) -> None:
        if not isinstance(env, str) or not env:
            raise ConfigError(f"OpenEnvAgentEnv env must be an import path or a server URL, got {env!r}")
        url = env if env.startswith(URL_SCHEMES) else None
        if max_turns < 1 or retries < 0 or min(connect_timeout_s, message_timeout_s) <= 0 or backoff_s < 0:
            raise ConfigError(
                "OpenEnvAgentEnv needs max_turns >= 1, retries >= 0, positive timeouts and backoff_s >= 0, got "
                f"{max_turns}, {retries}, {connect_timeout_s}, {message_timeout_s}, {backoff_s}"
            )
        if url is not None and env_kwargs:
            raise ConfigError("OpenEnvAgentEnv env_kwargs configure an in-process env; a server builds its own")
        self.env_path, self.url, self.env_kwargs = (None if url else env), url, dict(env_kwargs or {})
        self.tool, self.observation_field, self.system_prompt = tool, observation_field, system_prompt
        self.max_turns, self.malformed_call_reward = max_turns, malformed_call_reward
        self.connect_timeout_s, self.message_timeout_s = connect_timeout_s, message_timeout_s
        self.retries, self.backoff_s = retries, backoff_s
        self._tools: list[dict[str, Any]] | None = None
        self._session: InProcessSession | ServerSession | None = None
        self._state = EpisodeState()
        self._return = 0.0

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The action as one tool schema (read from the class in-process, from the server's ``/schema`` otherwise,
        once per episode instance and only when needed: building the environment contacts nothing)."""
        if self._tools is None:
            if self.env_path is not None:
                schema = _in_process_schema(self.env_path)[1]
            else:
                schema = server_schema(self.url, self.connect_timeout_s, self.retries, self.backoff_s)
            self._tools = [action_tool(schema, self.tool)]
        return self._tools

    @property
    def tool_name(self) -> str:
        return self.tools[0]["function"]["name"]

    @property
    def state(self) -> EpisodeState:
        return self._state

    # ----------------------------------------------------------------------------------------------- episode
    def reset(self, context: Context, sandbox: Sandbox | None = None) -> Observation:
        self.close()
        self._state = EpisodeState(episode_id=f"{context.id}-{uuid.uuid4().hex[:8]}")
        self._return = 0.0
        messages = [{"role": "system", "content": self.system_prompt}, *(context.prompt.messages or [])]
        kwargs = {"episode_id": self._state.episode_id, **context.data.get("reset_kwargs", {})}
        if context.data.get("seed") is not None:
            kwargs["seed"] = int(context.data["seed"])
        if self._tools == []:  # an earlier reset could not read the schema
            self._tools = None
        try:
            self.tools  # noqa: B018 - the schema first: a server that is down fails here, as infrastructure
            self._session = self._open()
            out = self._session.reset(**kwargs)
        except LostServer as e:
            self._tools = self._tools or []  # the rollout reads tools after any reset: none known, none shown
            return self._fail(str(e), messages)
        text = observation_text(out.fields, self.observation_field)
        if messages[-1]["role"] == "user":
            messages[-1] = {"role": "user", "content": f"{messages[-1]['content']}\n\n{text}"}
        else:
            messages.append({"role": "user", "content": text})
        if out.done:  # an environment may end an episode at once (nothing to do): no reward, nothing to train
            obs = self._finish("submitted")
            obs.messages = messages
            return obs
        return Observation(role="user", messages=messages)

    def _open(self) -> InProcessSession | ServerSession:
        if self.env_path is not None:
            return InProcessSession(_in_process_schema(self.env_path)[0], self.env_kwargs)
        return ServerSession(self.url, self.connect_timeout_s, self.message_timeout_s, self.retries, self.backoff_s)

    def step(self, action: str) -> Observation:
        if self._state.done:
            raise RuntimeError("step() after the episode ended: call reset() first")
        self._state.step_count += 1
        call = parse_tool_call(action)
        if isinstance(call, ToolCall) and call.name != self.tool_name:
            call = ToolCallError(f"unknown_tool: {call.name!r}; the tool is {self.tool_name!r}")
        if isinstance(call, ToolCallError):
            obs = self._malformed(call.reason)
        else:
            meta = {"tool": call.name, "arguments": call.arguments}
            try:
                out = self._session.step(call.arguments)
            except ActionRejected as e:
                obs = self._malformed(e.reason, meta)
            except LostServer as e:
                return self._fail(str(e))
            else:
                text = observation_text(out.fields, self.observation_field)
                self._return += out.reward or 0.0
                obs = Observation(text, metadata={**meta, "env_reward": out.reward}, turn_reward=out.reward)
                if out.done:
                    final = self._finish("submitted", obs.metadata, text)
                    final.turn_reward = out.reward
                    return final
        if self._state.step_count >= self.max_turns:
            final = self._finish("max_turns", obs.metadata, obs.content)
            final.turn_reward = obs.turn_reward
            return final
        return obs

    def _malformed(self, reason: str, meta: dict[str, Any] | None = None) -> Observation:
        obs = Observation(f"error: {reason}", metadata={"tool": None, **(meta or {}), "error": reason})
        obs.turn_reward = self.malformed_call_reward or None
        return obs

    def end(self, finish_reason: str) -> Observation:
        """The rollout cut the episode (``length``: a turn past its token budget or a full context): the policy's
        outcome, ended like any other with the environment's return so far, not an infrastructure failure."""
        if self._state.done:
            raise RuntimeError("end() after the episode ended")
        return self._finish(finish_reason)

    def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            session.close()

    # ---------------------------------------------------------------------------------------------- endings
    def _finish(self, reason: str, meta: dict[str, Any] | None = None, content: str = "") -> Observation:
        """End the episode with the environment's return (the sum of its turn rewards)."""
        env_done = reason == "submitted"
        self._state.done, self._state.finish_reason = True, reason
        self._state.verifier = {"return": self._return, "env_done": env_done, "steps": self._state.step_count}
        self.close()
        return Observation(
            content,
            done=True,
            reward=self._return,
            reward_components={"return": self._return},
            finish_reason=reason,
            metadata=dict(meta or {}),
        )

    def _fail(self, error: str, messages: list[dict[str, str]] | None = None) -> Observation:
        self._state.done, self._state.finish_reason, self._state.infra_error = True, "error", error
        self.close()
        return Observation(done=True, reward=0.0, finish_reason="error", metadata={"error": error}, messages=messages)
