"""Hints for turn-targeted distillation: which turn of an episode to correct, with what text, and the token ids of
the same context with the hint spliced in.

A ``HintSource`` looks at a finished episode and names ``Hint(turn, text)``s: ``turn`` counts the episode's
assistant turns from 0. ``HintSplicer`` builds the teacher's context token by token: the student's exact ids up to
turn ``turn``, with the hint inserted as one chat message just before that turn's assistant header (a message
boundary, so every token around it is unchanged and turn ``turn``'s own tokens follow both contexts identically).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from propel.errors import ConfigError
from propel.records import Sample, Turn


@dataclass(frozen=True)
class Hint:
    """A corrective hint for one assistant turn of an episode."""

    turn: int
    """Which assistant turn (0 = the episode's first)."""
    text: str


class HintSource(ABC):
    """Names the turns of an episode to correct, and the hints for them (none: the episode is left alone)."""

    @abstractmethod
    def hints(self, sample: Sample) -> list[Hint]: ...


def failed(sample: Sample) -> bool:
    """An episode that ended without its verifier passing (and not for infrastructure reasons)."""
    return sample.infra_error is None and not sample.artifacts.get("verifier", {}).get("passed", False)


class StaticHints(HintSource):
    """Hints from a JSON Lines file, one ``{"id", "turn", "hint"}`` per line; ``id`` is an episode id
    (``sample.info["episode_id"]``) or a context id (every episode of that task gets the hint).

    Args:
        path: the ``.jsonl`` file.
    """

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise ConfigError(f"StaticHints: no file at {self.path}")
        self.table: dict[str, list[Hint]] = {}
        for n, line in enumerate(self.path.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                self.table.setdefault(str(row["id"]), []).append(Hint(int(row["turn"]), str(row["hint"])))
            except (ValueError, KeyError, TypeError) as e:
                raise ConfigError(f"{self.path}:{n}: expected {{'id', 'turn', 'hint'}}, got {line[:80]!r} ({e})") from e

    def hints(self, sample: Sample) -> list[Hint]:
        keys = [sample.info.get("episode_id"), sample.context.id if sample.context else None]
        return [h for key in keys if key is not None for h in self.table.get(str(key), [])]


class ErrorHints(HintSource):
    """A rule from the episode's own outcome: in a failed episode, the first assistant turn whose observation
    reported an error (a malformed call, a failing command) gets a hint made from that error; with no such turn, the
    last assistant turn gets one made from the verifier's output.

    Args:
        tool_error: hint template for a turn whose observation was an error; ``{observation}`` is its text (other
            braces are kept as written: a template may quote JSON).
        verifier: hint template for the last turn of a failed episode; ``{output}`` is the verifier's output.
        failed_only: leave solved episodes alone.
    """

    def __init__(
        self,
        tool_error: str = "Your next message must be one valid tool call. Last time this went wrong: {observation}",
        verifier: str = "The final check failed with: {output}. Fix that before you submit.",
        failed_only: bool = True,
    ) -> None:
        self.tool_error, self.verifier, self.failed_only = tool_error, verifier, failed_only

    def hints(self, sample: Sample) -> list[Hint]:
        if self.failed_only and not failed(sample):
            return []
        turns, k = sample.all_turns, -1
        for i, turn in enumerate(turns):
            if not turn.trainable:
                continue
            k += 1
            obs = _next_observation(turns, i)
            if obs is not None and (obs.info.get("error") or obs.info.get("exit_code") not in (None, 0)):
                return [Hint(k, self.tool_error.replace("{observation}", obs.text.strip()[:300]))]
        if k < 0:
            return []
        output = str(sample.artifacts.get("verifier", {}).get("output", "")).strip()[:300] or "no output"
        return [Hint(k, self.verifier.replace("{output}", output))]


def _next_observation(turns: list[Turn], i: int) -> Turn | None:
    return turns[i + 1] if i + 1 < len(turns) and not turns[i + 1].trainable else None


class FunctionHints(HintSource):
    """Hints from a function ``sample -> list[Hint]`` (a dotted path in YAML)."""

    def __init__(self, fn: Callable[[Sample], list[Hint]]) -> None:
        self.fn = fn

    def hints(self, sample: Sample) -> list[Hint]:
        return list(self.fn(sample))


@dataclass
class TurnTarget:
    """One distillation target: the student's and the teacher's token ids, both ending with turn ``turn``'s
    ``length`` generated tokens (the positions the loss reads)."""

    episode: int
    turn: int
    hint: str
    student_ids: list[int]
    teacher_ids: list[int]
    length: int
    engine_logprobs: list[float] | None = None
    """The engine's logprobs of the turn's tokens when the student regenerated it (on-policy), else None."""
    mask: list[int] | None = None
    """Which of the trailing ``length`` tokens the loss reads (None: all of them). The whole-sequence scope spans
    turn ``turn`` to turn ``through`` and masks the observations between them."""
    through: int | None = None
    """The last assistant turn the span covers (None: ``turn`` alone)."""

    @property
    def scored(self) -> int:
        """Tokens the loss reads."""
        return self.length if self.mask is None else sum(self.mask)

    @property
    def covered(self) -> range:
        """The assistant turns the loss reads."""
        return range(self.turn, (self.turn if self.through is None else self.through) + 1)

    def regenerated(self, token_ids: list[int], logprobs: list[float] | None) -> TurnTarget:
        """The same target with the turn's tokens replaced by a fresh sample from the same prefixes."""
        if self.mask is not None:
            raise ValueError("a whole-sequence target cannot be regenerated turn by turn")
        cut = len(self.student_ids) - self.length
        teacher_cut = len(self.teacher_ids) - self.length
        return TurnTarget(self.episode, self.turn, self.hint, self.student_ids[:cut] + list(token_ids),
                          self.teacher_ids[:teacher_cut] + list(token_ids), len(token_ids), logprobs)  # fmt: skip


class HintSplicer:
    """Inserts a hint message into a token prefix that ends with the chat template's assistant header.

    Args:
        tokenizer: the policy's tokenizer (its chat template renders the hint message).
        role: the hint message's role (``system`` as prime-rl's self-distillation does, or ``user``).
        template: the message text; ``{hint}`` is the hint.
    """

    _ANCHOR = ({"role": "user", "content": "x"},)
    """A one-message conversation the hint message is rendered after (its delta is the message's own text)."""

    def __init__(self, tokenizer, role: str = "system", template: str = "Hint: {hint}") -> None:
        self.tokenizer, self.role, self.template = tokenizer, role, template
        self._base = self._render(list(self._ANCHOR), False)
        header = self._render(list(self._ANCHOR), True)
        if not header.startswith(self._base) or header == self._base:
            raise ConfigError("the chat template has no assistant header to splice a hint before")
        self.header_ids = self._encode(header[len(self._base) :])
        self._messages: dict[str, list[int]] = {}  # hint -> its message ids (a step splices the same hints often)

    def _render(self, messages: list[dict], generation: bool) -> str:
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation)

    def _encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def message_ids(self, hint: str) -> list[int]:
        """The ids of the hint as one message, as the template renders a message appended to a conversation."""
        if hint not in self._messages:
            text = self.template.replace("{hint}", hint)  # not str.format: hints quote JSON and code, braces included
            full = self._render([*self._ANCHOR, {"role": self.role, "content": text}], False)
            if not full.startswith(self._base):
                raise ConfigError(f"the chat template re-renders earlier messages when a {self.role!r} message follows")
            self._messages[hint] = self._encode(full[len(self._base) :])
        return list(self._messages[hint])

    def splice(self, prefix: list[int], hint: str) -> list[int]:
        """``prefix`` (ending with the assistant header) with the hint message inserted before that header; an
        empty hint changes nothing."""
        h = len(self.header_ids)
        if prefix[-h:] != self.header_ids:
            raise ValueError("the context before the turn does not end with the template's assistant header")
        if not hint:
            return list(prefix)
        return prefix[:-h] + self.message_ids(hint) + self.header_ids

    def target(self, sample: Sample, episode: int, hint: Hint, scope: str = "turn") -> TurnTarget:
        """The student's and teacher's ids for ``hint`` on ``sample`` (step-wise segments handled): ending with turn
        ``hint.turn`` (``scope="turn"``), or with every token from that turn to the last assistant turn of its
        segment, observations masked (``scope="sequence"``, the whole-sequence baseline)."""
        if scope == "turn":
            prefix, ids = turn_context(sample, hint.turn, episode)
            teacher = self.splice(prefix, hint.text)
            return TurnTarget(episode, hint.turn, hint.text, prefix + ids, teacher + ids, len(ids))
        if scope != "sequence":
            raise ValueError(f"scope must be 'turn' or 'sequence', got {scope!r}")
        prefix, ids, mask, through = sequence_context(sample, hint.turn, episode)
        teacher = self.splice(prefix, hint.text)
        return TurnTarget(episode, hint.turn, hint.text, prefix + ids, teacher + ids, len(ids), mask=mask,
                          through=through)  # fmt: skip


def turn_context(sample: Sample, turn: int, episode: int = 0) -> tuple[list[int], list[int]]:
    """The exact ids before assistant turn ``turn`` of an episode (its segment's prompt and the turns before it)
    and that turn's own ids; ``episode`` only names the episode in the error."""
    k = -1
    for segment in [*sample.segments, sample]:
        prefix = list(segment.prompt_ids)
        for t in segment.turns:
            if t.trainable:
                k += 1
                if k == turn:
                    return prefix, list(t.token_ids)
            prefix += t.token_ids
    raise ValueError(f"episode {episode} has {k + 1} assistant turns; a hint names turn {turn}")


def sequence_context(sample: Sample, turn: int, episode: int = 0) -> tuple[list[int], list[int], list[int], int]:
    """The exact ids before assistant turn ``turn``; the ids from that turn to the end of the last assistant turn of
    its segment (a step-wise episode's later segments re-render their prompt, so the span stops at the boundary);
    which of those ids are the assistant's (1) or an observation's (0); and the last assistant turn covered."""
    k = -1
    for segment in [*sample.segments, sample]:
        prefix, span, mask, through = list(segment.prompt_ids), [], [], None
        for t in segment.turns:
            if t.trainable:
                k += 1
            if through is None and not (t.trainable and k == turn):
                prefix += t.token_ids
                continue
            if t.trainable:
                through = k
            span += t.token_ids
            mask += [int(t.trainable)] * len(t.token_ids)
        if through is not None:
            while mask and not mask[-1]:  # end with the last assistant turn (a trailing observation is not read)
                span.pop(), mask.pop()
            return prefix, span, mask, through
    raise ValueError(f"episode {episode} has {k + 1} assistant turns; a hint names turn {turn}")
