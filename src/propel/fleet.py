"""Which member of a fleet (vLLM servers, Docker hosts) takes the next piece of work, and which are out.

One definition for both fleets: members are picked round-robin or least-loaded among those in service; a member
whose work failed is taken out (logged once) and offered again after ``cooldown_s``, first through an optional
health check, so a dead server costs one failed request, not one per call. When every member is out, the one due
back soonest is tried anyway: the caller's own retry loop (with its backoff) decides when to give up.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")
Routing = Literal["round_robin", "least_loaded"]
ROUTINGS: tuple[str, ...] = ("round_robin", "least_loaded")


@dataclass
class MemberState:
    """One member's bookkeeping."""

    name: str
    in_flight: int = 0
    """Pieces of work it holds now."""
    down_since: float | None = None
    """``time.monotonic()`` when it was taken out; None while in service."""
    retry_at: float = 0.0
    """When it may be offered again (after a health check)."""
    failures: int = 0
    """Times it was taken out."""
    last_error: str = ""


class Fleet(Generic[T]):
    """A fixed list of members, each in service or out until a cool-down has passed.

    Args:
        members: the members (server URLs, Docker clients, ...), in order.
        names: how each is named in logs (default: ``str(member)``).
        routing: ``round_robin`` (rotate over members in service) or ``least_loaded`` (fewest in flight; ties by
            rotation).
        cooldown_s: how long a failed member stays out before it is offered again.
        health_check: called on a member whose cool-down has passed before it is offered again; False (or an
            exception) keeps it out for another cool-down. None: offer it again unchecked.
        what: the kind of member, for log lines ("vLLM server", "Docker host").
    """

    def __init__(
        self,
        members: Sequence[T],
        *,
        names: Sequence[str] | None = None,
        routing: Routing = "round_robin",
        cooldown_s: float = 30.0,
        health_check: Callable[[T], bool] | None = None,
        what: str = "member",
    ) -> None:
        if not members:
            raise ValueError(f"a fleet needs at least one {what}")
        if routing not in ROUTINGS:
            raise ValueError(f"routing must be one of {ROUTINGS}, got {routing!r}")
        if cooldown_s < 0:
            raise ValueError(f"cooldown_s must be >= 0, got {cooldown_s}")
        names = list(names) if names is not None else [str(m) for m in members]
        if len(names) != len(members):
            raise ValueError(f"{len(names)} names for {len(members)} members")
        self.members = list(members)
        self.states = [MemberState(n) for n in names]
        self.routing, self.cooldown_s, self.health_check, self.what = routing, cooldown_s, health_check, what
        self._turn = itertools.count()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.members)

    def state(self, member: T) -> MemberState:
        return self.states[self._index(member)]

    def _index(self, member: T) -> int:
        for i, m in enumerate(self.members):
            if m is member:
                return i
        raise KeyError(f"{member!r} is not a member of this fleet")

    def in_service(self) -> list[T]:
        """Members in service now (no health checks run)."""
        return [m for m, s in zip(self.members, self.states, strict=True) if s.down_since is None]

    def _revive_due(self) -> None:
        """Offer again the members whose cool-down has passed and whose health check (if any) passes."""
        now = time.monotonic()
        for member, state in zip(self.members, self.states, strict=True):
            if state.down_since is None or now < state.retry_at:
                continue
            ok = True
            if self.health_check is not None:
                try:
                    ok = bool(self.health_check(member))
                except Exception as err:  # noqa: BLE001 - a check that raises is a failed check
                    ok, state.last_error = False, f"health check raised {type(err).__name__}: {err}"
            with self._lock:
                if state.down_since is None:  # another thread revived it meanwhile
                    continue
                if ok:
                    out_s, state.down_since = now - state.down_since, None
                    logger.info("%s %s is back in service after %.1f s out", self.what, state.name, out_s)
                else:
                    state.retry_at = time.monotonic() + self.cooldown_s

    def pick(self) -> T:
        """The member to send the next piece of work to (see the module docstring for the rules)."""
        self._revive_due()
        with self._lock:
            up = [i for i, s in enumerate(self.states) if s.down_since is None]
            if not up:  # all out: the one due back soonest, unchecked (the caller backs off between tries)
                return self.members[min(range(len(self.states)), key=lambda i: self.states[i].retry_at)]
            turn = next(self._turn)
            order = up[turn % len(up) :] + up[: turn % len(up)]
            if self.routing == "least_loaded":
                order.sort(key=lambda i: self.states[i].in_flight)  # stable: ties keep the rotation
            return self.members[order[0]]

    @contextmanager
    def hold(self, member: T) -> Iterator[T]:
        """Count ``member`` as busy for the ``with`` block (what ``least_loaded`` balances)."""
        state = self.state(member)
        with self._lock:
            state.in_flight += 1
        try:
            yield member
        finally:
            with self._lock:
                state.in_flight -= 1

    def failed(self, member: T, why: str) -> None:
        """Take ``member`` out for ``cooldown_s`` (logged when it goes out, not on every further failure)."""
        state = self.state(member)
        with self._lock:
            state.last_error = why
            state.retry_at = time.monotonic() + self.cooldown_s
            if state.down_since is not None:
                return
            state.down_since, state.failures = time.monotonic(), state.failures + 1
        logger.warning("%s %s failed (%s): taken out, retried in %g s", self.what, state.name, why, self.cooldown_s)

    def succeeded(self, member: T) -> None:
        """Work on ``member`` went through: it is in service (again)."""
        state = self.state(member)
        with self._lock:
            if state.down_since is None:
                return
            state.down_since = None
        logger.info("%s %s answered again: back in service", self.what, state.name)

    def summary(self) -> str:
        """One line: each member, in service or out, and its failures."""
        return ", ".join(
            f"{s.name}: {'up' if s.down_since is None else 'out'} ({s.failures} failure(s))" for s in self.states
        )
