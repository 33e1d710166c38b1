"""propel's triage environment in the shape TRL's ``GRPOTrainer(environment_factory=...)`` expects.

TRL builds one instance per rollout, calls ``reset(**row)`` (the returned text is appended to the prompt), offers
every public method as a tool (its type hints and Google-style docstring become the tool schema) and, when the
environment has ``get_reward``, reads the reward from it once the rollout ends. So the class has exactly one public
tool, ``submit_resolution``, and everything else private. The episode runs in OpenEnv's ``TriageEnvironment``,
in-process or on a ``propel serve-env triage`` server, through the same sessions propel's own adapter uses.
"""

from __future__ import annotations

import itertools
from typing import Any

from propel.envs.openenv_session import ActionRejected, InProcessSession, ServerSession


class TriageToolEnv:
    """``GRPOTrainer(environment_factory=TriageToolEnv)``: one triage ticket per rollout, graded by propel's six
    triage rewards; ``components`` holds the last answer's six values.

    Args:
        url: an OpenEnv server running ``propel serve-env triage``; None runs the environment in this process.
        seed: first reset seed; each reset without a ``seed`` or ``ticket_id`` column takes the next one.
        env_kwargs: ``TriageEnvironment``'s arguments (in-process: ``path``, ``split``, ...).
    """

    def __init__(self, url: str | None = None, seed: int = 0, env_kwargs: dict[str, Any] | None = None) -> None:
        if url is None:
            from propel.served.triage import TriageEnvironment

            self._session = InProcessSession(TriageEnvironment, dict(env_kwargs or {}))
        else:
            self._session = ServerSession(url, 10.0, 60.0, retries=3, backoff_s=0.5)
        self._seeds = itertools.count(seed)
        self._reward = 0.0
        self._open = False
        self.components: dict[str, float] = {}

    def reset(self, **row: Any) -> str:
        """Start a ticket: the row's ``ticket_id`` or ``seed`` if the dataset has them, else the next seed."""
        kwargs = {"ticket_id": row["ticket_id"]} if row.get("ticket_id") else {}
        kwargs["seed"] = int(row["seed"]) if row.get("seed") is not None else next(self._seeds)
        out = self._session.reset(**kwargs)
        self._reward, self.components, self._open = 0.0, {}, True
        return out.fields["prompt"]

    def submit_resolution(self, resolution: str, citations: list[str], confidence: float, escalate: bool) -> str:
        """Submit the ticket's resolution; it is graded and the ticket is closed (one submission per ticket).

        Args:
            resolution: The steps that fix the ticket, in a few sentences.
            citations: The ids of the retrieved articles used, each once.
            confidence: Your probability (0 to 1) that the resolution is right.
            escalate: True if the ticket must go to the on-call team, otherwise false.

        Returns:
            The grade of the answer, component by component.
        """
        if not self._open:
            return "error: this ticket already has its resolution"
        arguments = {"resolution": resolution, "citations": citations, "confidence": confidence, "escalate": escalate}
        try:
            out = self._session.step(arguments)
        except ActionRejected as e:
            return f"error: {e.reason}"
        self._open = False
        self._reward, self.components = float(out.reward or 0.0), dict(out.fields.get("components", {}))
        return out.fields.get("feedback", "")

    def get_reward(self) -> float:
        """The rollout's reward: the six components' sum for the submitted answer, 0 without a submission."""
        return self._reward
