"""Multi-turn rollouts: many agent episodes advanced together, one token-exact ``Sample`` per episode.

Each live episode waits either for the engine (its next assistant turn) or for its environment (reset, a tool call,
the verifier). The engine gets the waiting episodes' exact token prefixes in one ``generate`` call; environment work
runs on a thread pool, so the tool calls of different episodes run in parallel in the sandbox. Two schedules:

* ``rounds`` (default): every live episode takes one turn per round -- one batched generation, then all their tool
  calls in parallel. Batches do not depend on timing, so a seeded run samples the same tokens again (resume).
* ``async``: the engine takes whichever episodes are waiting as soon as it is free, so generation overlaps the
  tool calls still running (more throughput; batch composition then depends on timing).

``concurrency=1`` runs the episodes one after another (the baseline ``benchmarks/episodes.py`` compares against).
An episode never outgrows the context: when the next turn or observation would not fit, it ends with
``finish_reason="length"`` (verified as it stands), and so does one whose turn was cut by the token budget or the
context limit (``execute_cut_turns=False``, the default): a cut turn is kept and trained on, never executed.
Exceptions from an environment or the engine end only the episodes concerned, marked ``infra_error``.

Chat templates that re-render history (stripping past reasoning, say) cannot give one token sequence per episode.
With ``stepwise=True`` (default) such an episode goes on from the template's fresh tokenization and is kept as
segments (``Sample.segments``), each exactly what the model saw and produced, each a training row of its own (the
step-wise mode of SkyRL); ``stepwise=False`` raises ``TemplateNotAppendOnly`` instead.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace

from propel.engines.engine import Completion, Engine, SamplingSpec
from propel.envs.agent_env import AgentEnv, Observation
from propel.records import Context, Prompt, Sample, Turn
from propel.rollouts.conversation import Conversation, TemplateNotAppendOnly
from propel.sandbox.sandbox import Sandbox

SCHEDULES = ("rounds", "async")
log = logging.getLogger(__name__)


@dataclass
class EpisodeTimes:
    """Where the wall time of a batch of episodes went."""

    wall_s: float = 0.0
    generation_s: float = 0.0
    """Time inside ``engine.generate``."""
    environment_s: float = 0.0
    """Summed time of environment calls (resets, tool calls, verifiers); exceeds wall time when they overlap."""
    turns: int = 0


@dataclass
class _Episode:
    index: int
    context: Context
    env: AgentEnv
    sample: Sample | None = None
    conversation: Conversation | None = None
    done: bool = False
    generation_s: float = 0.0
    environment_s: float = 0.0


def _end(episode: _Episode, obs: Observation) -> None:
    """Copy the final observation and the environment's state into the sample."""
    sample, state = episode.sample, episode.env.state
    sample.infra_error = state.infra_error
    sample.valid = state.infra_error is None
    sample.artifacts["verifier"] = dict(state.verifier)
    if state.files:
        sample.artifacts["files"] = dict(state.files)
    sample.info.update(
        finish_reason=obs.finish_reason or state.finish_reason,
        reward=obs.reward,
        reward_components=dict(obs.reward_components),
        episode_id=state.episode_id,
        turns=sum(t.trainable for t in sample.all_turns),
        tool_errors=sum(bool(t.info.get("error")) for t in sample.all_turns if not t.trainable),
        segments=len(sample.segments) + 1,
        generation_s=episode.generation_s,
        environment_s=episode.environment_s,
        reason="ok" if state.infra_error is None else "infra_error",
    )
    sample.completion = "\n".join(sample.assistant_texts)
    episode.done = True
    episode.env.close()


def _turn_info(obs: Observation) -> dict:
    info = dict(obs.metadata)
    if obs.turn_reward is not None:
        info["reward"] = float(obs.turn_reward)
    return info


class EpisodeRunner:
    """Runs agent episodes with an engine.

    Args:
        engine: generates assistant turns from token prefixes.
        make_env: builds one environment instance per episode (a YAML ``class_path`` becomes such a factory).
        sandbox: the shared sandbox backend handed to each ``reset``.
        concurrency: episodes alive at once (1: sequential).
        schedule: ``rounds`` or ``async`` (see the module docstring).
        max_context_tokens: cap on an episode's tokens (prompt + all turns); the engine's own limit applies too.
        stepwise: when the chat template is not append-only, go on step-wise (see the module docstring) instead of
            raising ``TemplateNotAppendOnly``.
        execute_cut_turns: hand a turn cut by ``max_new_tokens`` or the context limit (``finish_reason="length"``)
            to the environment anyway. False (default): a cut turn ends the episode as ``length``, verified as it
            stands, because the text is not what the policy meant, yet a lenient parser would run it (a tool call
            cut before its closing tag still parses).
    """

    def __init__(
        self,
        engine: Engine,
        make_env: Callable[[], AgentEnv],
        sandbox: Sandbox | None = None,
        concurrency: int = 8,
        schedule: str = "rounds",
        max_context_tokens: int | None = None,
        stepwise: bool = True,
        execute_cut_turns: bool = False,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        if schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
        self.engine, self.make_env, self.sandbox = engine, make_env, sandbox
        self.concurrency, self.schedule, self.stepwise = concurrency, schedule, stepwise
        self.execute_cut_turns = execute_cut_turns
        self._warned = False
        limits = [x for x in (engine.context_length(), max_context_tokens) if x]
        self.max_context = min(limits) if limits else None
        self.eos_ids = engine.eos_ids()  # the ids the engine stops on: one set, from the engine

    # ------------------------------------------------------------------------------------------------- run
    def run(self, contexts: Sequence[Context], sampling: SamplingSpec) -> tuple[list[list[Sample]], EpisodeTimes]:
        """``sampling.n`` episodes per context (a GRPO group), scored by their environments; groups in order."""
        start = time.perf_counter()
        per_turn = replace(sampling, n=1)
        episodes = [
            _Episode(i, c, self.make_env()) for i, c in enumerate(c for c in contexts for _ in range(sampling.n))
        ]
        if per_turn.stop == [] and episodes:
            per_turn.stop = list(episodes[0].env.stop)
        times = EpisodeTimes()
        queue = list(episodes)
        waiting: list[_Episode] = []  # for the engine
        running: dict[Future, _Episode] = {}  # environment calls in flight
        with ThreadPoolExecutor(self.concurrency) as pool:
            try:
                while queue or waiting or running:
                    while queue and len(waiting) + len(running) < self.concurrency:
                        ep = queue.pop(0)
                        running[pool.submit(self._timed, ep, ep.env.reset, ep.context, self.sandbox)] = ep
                    if self.schedule == "rounds" and running:
                        wait(running)  # the whole round's environment calls
                        finished = list(running)
                    elif waiting and self.schedule == "async":
                        finished = {f for f in running if f.done()}
                    else:
                        finished, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in finished:
                        ep = running.pop(future)
                        self._collect(ep, future, waiting)
                    if waiting and (self.schedule == "async" or not running):
                        batch, waiting = sorted(waiting, key=lambda e: e.index), []  # rounds: a fixed order
                        for ep, action in self._generate(batch, per_turn, times):
                            if action is None:  # ended (context full or engine error) without a step
                                continue
                            running[pool.submit(self._timed, ep, ep.env.step, action)] = ep
            finally:
                for ep in episodes:
                    if not ep.done:
                        ep.env.close()
        times.wall_s = time.perf_counter() - start
        times.environment_s = sum(ep.environment_s for ep in episodes)
        n = sampling.n
        samples = [ep.sample for ep in episodes]
        return [samples[i * n : (i + 1) * n] for i in range(len(contexts))], times

    # ------------------------------------------------------------------------------------- environment side
    def _timed(self, ep: _Episode, fn, *args) -> Observation:
        """``fn(*args)`` (an environment call), its time added to the episode's environment time."""
        t0 = time.perf_counter()
        try:
            return fn(*args)
        finally:
            ep.environment_s += time.perf_counter() - t0

    def _collect(self, ep: _Episode, future: Future, waiting: list[_Episode]) -> None:
        """Take an environment call's observation: start, extend or end the episode's conversation."""
        try:
            obs = future.result()
        except Exception as e:  # noqa: BLE001 - an environment bug ends this episode only, marked as infra
            self._infra(ep, f"environment raised {type(e).__name__}: {e}")
            return
        if ep.sample is None:  # the reset
            self._start(ep, obs)
            if ep.done:
                return
        elif (obs.content or not obs.done) and not self._append(ep, obs):
            return
        if obs.done:
            _end(ep, obs)
            return
        if self.max_context is not None and len(ep.conversation.ids) >= self.max_context:
            self._finish_now(ep, "length")
            return
        waiting.append(ep)

    def _start(self, ep: _Episode, obs: Observation) -> None:
        messages = obs.messages or ([] if ep.context.prompt.messages is None else ep.context.prompt.messages)
        conv = Conversation(self.engine.tokenizer, messages, ep.env.tools)
        ep.conversation = conv
        ep.sample = Sample(prompt=conv.text, completion="", context=ep.context, prompt_ids=list(conv.ids))
        if obs.done:
            _end(ep, obs)

    def _append(self, ep: _Episode, obs: Observation) -> bool:
        """Add the observation to the conversation, or end the episode (``length``) when it would not fit."""
        conv = ep.conversation
        try:
            rendered = conv.render_message(obs.role, obs.content)
        except TemplateNotAppendOnly as e:
            if not self.stepwise:
                raise
            return self._new_segment(ep, obs, e)
        if self.max_context is not None and len(conv.ids) + len(rendered[1]) > self.max_context:
            if obs.done:
                _end(ep, replace(obs, content=""))
            else:
                self._finish_now(ep, "length")
            return False
        ids = conv.add_message(obs.role, obs.content, rendered)
        ep.sample.turns.append(Turn(obs.role, obs.content, ids, None, False, "", _turn_info(obs)))
        return True

    def _new_segment(self, ep: _Episode, obs: Observation, why: TemplateNotAppendOnly) -> bool:
        """Step-wise fallback: the observation closes the current segment (its text and info, no tokens) and, unless
        the episode is over, a new segment starts from the template's fresh tokenization of the conversation; when
        that leaves no room for a token within ``max_context``, the episode ends there as ``length`` (False)."""
        if not self._warned:
            log.warning("%s: going on step-wise (one training row per segment)", why)
            self._warned = True
        old = ep.sample
        old.turns.append(Turn(obs.role, obs.content, [], None, False, "", _turn_info(obs)))
        if obs.done:
            return True
        ids = ep.conversation.restart(obs.role, obs.content)
        if self.max_context is not None and len(ids) >= self.max_context:
            self._finish_now(ep, "length")
            return False
        segments = [*old.segments, replace(old, segments=[])]
        ep.sample = Sample(ep.conversation.text, "", context=ep.context, prompt_ids=list(ids), segments=segments)
        return True

    def _finish_now(self, ep: _Episode, reason: str) -> None:
        """End an episode from outside (synchronously: rare, and keeps the schedule simple)."""
        try:
            obs = self._timed(ep, ep.env.end, reason)
        except Exception as e:  # noqa: BLE001
            self._infra(ep, f"environment raised {type(e).__name__} ending the episode: {e}")
            return
        _end(ep, replace(obs, content=""))

    def _infra(self, ep: _Episode, error: str) -> None:
        if ep.sample is None:
            ep.sample = Sample(prompt="", completion="", context=ep.context)
        ep.env.state.infra_error = ep.env.state.infra_error or error
        ep.env.state.finish_reason = "error"
        _end(ep, Observation(done=True, reward=0.0, finish_reason="error"))

    # ------------------------------------------------------------------------------------------ engine side
    def _generate(self, batch: list[_Episode], sampling: SamplingSpec, times: EpisodeTimes):
        """One engine call per distinct token budget; yields ``(episode, action text)``, or ``None`` when ended."""
        budgets: dict[int, list[_Episode]] = {}
        for ep in batch:
            room = sampling.max_new_tokens
            if self.max_context is not None:
                room = min(room, self.max_context - len(ep.conversation.ids))
            if room < 1:
                self._finish_now(ep, "length")
                yield ep, None
                continue
            budgets.setdefault(room, []).append(ep)
        for room, eps in budgets.items():
            t0 = time.perf_counter()
            try:
                groups = self.engine.generate(
                    [Prompt(token_ids=list(ep.conversation.ids)) for ep in eps], replace(sampling, max_new_tokens=room)
                )
            except Exception as e:  # noqa: BLE001 - an engine failure ends these episodes as infrastructure errors
                for ep in eps:
                    self._infra(ep, f"engine raised {type(e).__name__}: {e}")
                    yield ep, None
                continue
            spent = time.perf_counter() - t0
            times.generation_s += spent
            times.turns += len(eps)
            for ep, group in zip(eps, groups, strict=True):
                ep.generation_s += spent / len(eps)
                action = self._add_turn(ep, group[0])
                if group[0].finish_reason == "length" and not self.execute_cut_turns:
                    self._finish_now(ep, "length")  # a cut turn is never executed
                    action = None
                yield ep, action

    def _add_turn(self, ep: _Episode, completion: Completion) -> str:
        content = ep.conversation.add_assistant(list(completion.token_ids), self.eos_ids)
        ep.sample.turns.append(
            Turn("assistant", content, list(completion.token_ids), completion.logprobs, True, completion.finish_reason)
        )
        return content
