"""Any verifiers environment (single- or multi-turn) as a propel agent environment, driven the way verifiers' own
rollout loop drives it, with propel's engine writing the assistant turns.

``reset`` builds the episode's state from the context's dataset row (``init_state``, then the environment's
``setup_state``); ``step`` appends the assistant's text to the state's trajectory, asks the environment's stop
conditions (``is_completed``), and otherwise its ``env_response``, whose messages are the next observation; an
environment that sets ``final_env_response`` ends the episode after showing it. When the episode ends, the state is
finished as verifiers finishes it (``cleanup``: the completion rendered from the trajectory, per-rollout resources
released) and kept for the rubric (``final_state``), which scores it (``propel.rewards.VerifiersRubric``). A turn cut at
the token budget is the policy's turn in verifiers, answered and scored like any other: the episode data module's
``execute_cut_turns=True`` (``configs/verifiers/grpo.yaml``) hands it to ``step``; without it the rollout ends the
episode there (``end("length")``), the environment never sees the cut turn, and the state is marked truncated and scored
as it stands (a rubric that cannot read an empty completion then judges nothing). An environment that raises ends the
episode as an infrastructure failure (out of the group statistics, never scored), not as a rubric score of what it could
not finish.
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from typing import Any

from propel.envs.agent_env import AgentEnv, EpisodeState, Observation
from propel.errors import ConfigError
from propel.records import Context
from propel.sandbox.sandbox import Sandbox
from propel.tasks.verifiers_env import load, run
from propel.tasks.verifiers_tasks import chat_messages

KEEP = 4096
"""Finished states kept for the rubric (oldest dropped first): far more than one step's episodes."""
_finished: OrderedDict[str, Any] = OrderedDict()
_finished_lock = threading.Lock()
FINISH = {"max_turns_reached": "max_turns", "prompt_too_long": "length", "timeout_reached": "time_limit"}
"""verifiers' stop conditions with a propel finish reason of their own; any other is the environment's own end
(``submitted``)."""


def final_state(key: str) -> Any | None:
    """The finished verifiers state of the episode ``key`` (``Sample.artifacts["verifier"]["verifiers_state"]``), or
    None when this process no longer (or never) held it."""
    with _finished_lock:
        return _finished.get(key)


def _keep(key: str, state: Any) -> None:
    with _finished_lock:
        _finished[key] = state
        while len(_finished) > KEEP:
            _finished.popitem(last=False)


def _no_model_client() -> Any:
    """A verifiers ``Client`` that refuses to generate: propel's engine writes every assistant turn, so an
    environment that calls the model itself (a simulated user, a judge through the policy's client) fails loudly."""
    from verifiers.clients import Client

    class PropelWritesTurns(Client):
        def setup_client(self, config):
            return None

        async def to_native_tool(self, tool):
            raise RuntimeError("propel's engine writes the turns; this environment asked the policy's client")

        to_native_prompt = get_native_response = raise_from_native_response = from_native_response = to_native_tool

        async def close(self) -> None:
            return None

    return PropelWritesTurns(None)


def _text(message: Any) -> str:
    return chat_messages([message])[0]["content"]


class VerifiersAgentEnv(AgentEnv):
    """One episode of the verifiers environment that the context names (contexts from ``propel.tasks.VerifiersTasks``:
    ``data["env"]``, ``data["env_args"]``, ``data["row"]``).

    Args:
        max_turns: assistant turns after which the episode ends (``max_turns``) if the environment has not ended it
            (its own ``max_turns`` applies too; a ``SingleTurnEnv`` ends after one).
    """

    def __init__(self, max_turns: int = 16) -> None:
        if max_turns < 1:
            raise ConfigError(f"VerifiersAgentEnv max_turns must be >= 1, got {max_turns}")
        self.max_turns = max_turns
        self._vf: Any = None
        self._vf_state: Any = None
        self._prompt: list[Any] = []
        self._state = EpisodeState()

    @property
    def state(self) -> EpisodeState:
        return self._state

    def reset(self, context: Context, sandbox: Sandbox | None = None) -> Observation:
        self.close()
        data = context.data
        if not {"env", "row"} <= set(data):
            raise ConfigError("VerifiersAgentEnv needs contexts from propel.tasks.VerifiersTasks (data: env, row)")
        self._vf = load(data["env"], data.get("env_args"))
        self._state = EpisodeState(episode_id=f"{context.id}-{uuid.uuid4().hex[:8]}")
        self._vf_state = run(self._start(data["row"]))
        self._prompt = list(self._vf_state["prompt"])
        messages = chat_messages(self._prompt)
        if run(self._vf.is_completed(self._vf_state)):  # nothing to do (or the setup failed): no turn to train
            obs = self._finish()
            obs.messages = messages
            return obs
        return Observation(role="user", messages=messages)

    async def _start(self, row: dict[str, Any]) -> Any:
        vf_state = await self._vf.init_state(row, _no_model_client(), "propel")
        ready = await self._vf.setup_state(vf_state)
        return vf_state if ready is None else ready

    def step(self, action: str) -> Observation:
        if self._state.done:
            raise RuntimeError("step() after the episode ended: call reset() first")
        self._state.step_count += 1
        reply, done = run(self._act(action))
        content = "\n\n".join(_text(m) for m in reply)
        role = chat_messages(reply[:1])[0]["role"] if reply else "user"
        if done:
            return self._finish(content, role)
        if self._state.step_count >= self.max_turns:
            return self._finish(content, role, reason="max_turns")
        return Observation(content, role=role)

    async def _act(self, action: str) -> tuple[list[Any], bool]:
        """verifiers' rollout loop for one assistant turn: record it, check the stop conditions, else respond."""
        from verifiers.types import AssistantMessage, TrajectoryStep

        env, vf_state, completion = self._vf, self._vf_state, [AssistantMessage(content=action)]
        step = TrajectoryStep(
            prompt=self._prompt,
            completion=completion,
            response=None,
            tokens=None,
            reward=None,
            advantage=None,
            is_truncated=False,
            trajectory_id=vf_state["trajectory_id"],
            extras={},
        )
        await env.add_trajectory_step(vf_state, step)
        if await env.is_completed(vf_state):
            return [], True
        seen = len(self._prompt) + len(completion)
        self._prompt = list(await env.get_prompt_messages(vf_state))
        if vf_state.get("final_env_response") is None:
            return self._prompt[seen:], False
        await env.is_completed(vf_state)  # the stop verifiers' loop checks next: it records why the episode ended
        return self._prompt[seen:], True

    def end(self, finish_reason: str) -> Observation:
        """The rollout cut the episode (``length``: a turn past its budget, a full context): the cut turn is not the
        policy's finished action, so the environment never sees it; the state is scored as it stands."""
        if self._state.done:
            raise RuntimeError("end() after the episode ended")
        self._vf_state["is_truncated"] = True
        return self._finish(reason=finish_reason)

    def _finish(self, content: str = "", role: str = "user", reason: str | None = None) -> Observation:
        vf_state = self._vf_state
        stop = vf_state.get("stop_condition")
        if reason is None:
            reason = "submitted" if self._single_turn() else FINISH.get(stop, "submitted")
        run(self._vf.cleanup(vf_state))
        self._vf_state = None
        _keep(self._state.episode_id, vf_state)
        if stop == "has_error":  # verifiers' own error stop (a vf.Error its state recorded): not the policy's outcome
            reason, self._state.infra_error = "error", f"verifiers environment error: {vf_state.get('error')!r}"
        self._state.done, self._state.finish_reason = True, reason
        self._state.verifier = {
            "verifiers_state": self._state.episode_id,
            "stop_condition": stop,
            "truncated": bool(vf_state.get("is_truncated")),
            "steps": self._state.step_count,
        }
        return Observation(content, role=role, done=True, finish_reason=reason)

    def _single_turn(self) -> bool:
        import verifiers as vf

        return isinstance(self._vf, vf.SingleTurnEnv)

    def close(self) -> None:
        """Release an unfinished episode's resources (its ``cleanup``); a finished one was cleaned up already."""
        vf_state, self._vf_state = self._vf_state, None
        if vf_state is not None:
            run(self._vf.cleanup(vf_state))
