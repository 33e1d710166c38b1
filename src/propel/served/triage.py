"""propel's IT-triage task as an OpenEnv environment: a ticket with its retrieved articles, one ``submit_resolution``
action, the six triage rewards as its rubric.

``reset(seed=..., ticket_id=...)`` draws a ticket (the synthetic set or a user's file, ``TriageTickets``) and shows
it; ``step(SubmitResolution(...))`` grades the answer and ends the episode. The answer is graded as the text propel's
single-turn policy writes (``submit_resolution {json}``), so the six values equal propel's own reward on that answer.
Each component is in the observation's ``metadata`` (OpenEnv's place for it, in-process) and in its ``components``
field, because OpenEnv's wire format drops ``metadata``: a client over the server reads ``components``.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import ConfigDict, Field

from propel.rewards.triage import TriageReward
from propel.served.triage_rubric import TriageRubric
from propel.tasks.triage import Ticket, TriageTickets, render_ticket

TOOL_FORMAT = (
    "Answer by calling submit_resolution once, with four arguments:\n"
    "- resolution: the steps that fix the ticket, in a few sentences;\n"
    "- citations: the ids of the articles you used, each once;\n"
    "- confidence: your probability (0 to 1) that the resolution is right;\n"
    "- escalate: true if the ticket must go to the on-call team, otherwise false."
)


class SubmitResolution(Action):
    """Submit the ticket's resolution (ends the episode)."""

    model_config = ConfigDict(strict=True)  # graded as given: no "0.9" -> 0.9 or 1 -> true the reward would not see

    resolution: str = Field(description="the steps that fix the ticket, in a few sentences")
    citations: list[str] = Field(description="ids of the retrieved articles used, each once")
    confidence: float = Field(description="probability (0 to 1) that the resolution is right")
    escalate: bool = Field(description="true if the ticket must go to the on-call team")

    def answer_text(self) -> str:
        """The answer as propel's single-turn policy writes it (what the triage rewards parse)."""
        fields = {"resolution": self.resolution, "citations": self.citations, "confidence": self.confidence}
        return "submit_resolution " + json.dumps({**fields, "escalate": self.escalate}, ensure_ascii=False)


class TriageObservation(Observation):
    prompt: str = Field(default="", description="the ticket and its retrieved articles (after reset)")
    feedback: str = Field(default="", description="the grade of the submitted answer")
    components: dict[str, float] = Field(default_factory=dict, description="the six reward components")
    reason: str = Field(default="", description="the parse verdict: ok, invalid: <fields>, or why it was rejected")


class TriageState(State):
    ticket_id: str = ""
    submitted: bool = False
    components: dict[str, float] = Field(default_factory=dict)


@functools.lru_cache(maxsize=8)
def _tickets(path: str | None, n: int, data_seed: int, split: str | None, eval_fraction: float) -> TriageTickets:
    return TriageTickets(path, n, data_seed, split, eval_fraction)


class TriageEnvironment(Environment[SubmitResolution, TriageObservation, TriageState]):
    """One triage ticket per episode, graded by propel's six triage rewards (``TriageRubric``).

    Args:
        path: a ticket file (Parquet/JSONL, ``propel.tasks.triage.schema`` columns); None: the synthetic set.
        n: synthetic tickets (when ``path`` is None).
        data_seed: the synthetic set's seed.
        split: ``train``, ``eval`` or None (all tickets).
        eval_fraction: share of tickets in ``eval``.
        rewards: the components; None: the six at weight 1 (``triage_rewards()``).
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(
        self,
        path: str | None = None,
        n: int = 240,
        data_seed: int = 0,
        split: str | None = "train",
        eval_fraction: float = 0.2,
        rewards: list[TriageReward] | None = None,
    ) -> None:
        super().__init__(rubric=TriageRubric(rewards))
        self.tickets = _tickets(path, n, data_seed, split, eval_fraction)
        self.ticket: Ticket | None = None
        self._state = TriageState()

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, ticket_id: str | None = None, **kwargs: Any
    ) -> TriageObservation:
        """A ticket: ``ticket_id`` if given, else drawn with ``seed`` (the same seed, the same ticket)."""
        if ticket_id is not None:
            found = [t for t in self.tickets.tickets if t.ticket_id == ticket_id]
            if not found:
                raise ValueError(f"no ticket {ticket_id!r} in this split")
            self.ticket = found[0]
        else:
            self.ticket = self.tickets.draw(1, 0 if seed is None else seed)[0]
        self._reset_rubric()
        self.rubric.start(self.ticket.grading_data())
        self._state = TriageState(episode_id=episode_id, ticket_id=self.ticket.ticket_id)
        return TriageObservation(prompt=render_ticket(self.ticket, TOOL_FORMAT))

    def step(self, action: SubmitResolution, timeout_s: float | None = None, **kwargs: Any) -> TriageObservation:
        if self.ticket is None or self._state.submitted:
            raise RuntimeError("the episode is over (one submission per ticket): call reset()")
        self._state.step_count += 1
        observation = TriageObservation(done=True)
        reward = float(self._apply_rubric(action, observation))
        components, details = self.rubric.components(), self.rubric.details()
        shown = ", ".join(f"{k} {v:.2f}" for k, v in components.items())
        observation.reward, observation.components = reward, components
        observation.reason = str(details.get("reason", ""))
        observation.feedback = f"graded {reward:.2f}: {shown} ({observation.reason})"
        observation.metadata = {"components": components, "triage": details}
        self._state.submitted, self._state.components = True, components
        return observation

    @property
    def state(self) -> TriageState:
        return self._state
