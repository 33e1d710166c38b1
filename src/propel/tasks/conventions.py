"""Scripted six-turn conversations with a team convention asked for at one turn (for ``ScriptedChatEnv``).

Each conversation is ``turns`` short arithmetic requests ("What is 3 + 5?"), checked by value. At one turn, the
*target* (its position drawn per conversation, never the first or the last), the user asks for "our team's tag" at
the end of the reply: a convention the model cannot infer (``rule``, ``[cedar]`` by default), which a hint can
carry (``RULE_HINT``). At ``conflicts`` other turns (one before the target and one after where there is room) the
user asks for a different tag by name: a reply there that carries the team's tag is the hint bleeding where it
must not. The other turns are plain. Every turn's check is data (``propel.envs.scripted_chat.check_reply``): the
sum, plus the tag asked for (target and conflict turns) and, everywhere but the target, no team tag. ``data`` also
holds the target turn, the kinds of all turns and the rule, for an experiment's metrics.
"""

from __future__ import annotations

import random

from propel.errors import ConfigError
from propel.records import Context, Prompt, TaskSource

SYSTEM = "You are a helpful assistant. Answer in one short line."
EXAMPLE = [
    {"role": "user", "content": "What is 2 + 2? End your reply with the tag [blue]."},
    {"role": "assistant", "content": "4 [blue]"},
]
"""The worked example opening each conversation (a reply that is the sum, then the tag asked for)."""
OTHER_TAGS = ["[maple]", "[river]", "[stone]", "[amber]", "[tiger]", "[lemon]"]
RULE_HINT = "Our team's tag is {rule}. Example: 4 {rule}"
"""The hint (with an example reply: without one the bundled 135M model put the tag at the turn 0-2 times in 12)."""


class ConventionChats(TaskSource):
    """Deterministic scripted conversations: ``contexts(n, seed)``.

    Args:
        turns: user turns per conversation (at least 3: the target is never first or last).
        rule: the team's tag, the convention only a hint names.
        conflicts: turns asking for another tag (0, 1 or 2).
        example: open each conversation with the worked example (``EXAMPLE``).
    """

    def __init__(self, turns: int = 6, rule: str = "[cedar]", conflicts: int = 2, example: bool = True) -> None:
        if turns < 3:
            raise ConfigError(f"ConventionChats needs turns >= 3, got {turns}")
        if not 0 <= conflicts <= 2:
            raise ConfigError(f"conflicts must be 0, 1 or 2, got {conflicts}")
        if rule in OTHER_TAGS:
            raise ConfigError(f"rule {rule!r} is one of the conflict tags {OTHER_TAGS}")
        self.turns, self.rule, self.conflicts, self.example = turns, rule, conflicts, example

    @property
    def hint(self) -> str:
        """The hint that carries the rule."""
        return RULE_HINT.format(rule=self.rule)

    def contexts(self, n: int, seed: int = 0) -> list[Context]:
        rng = random.Random(seed)
        return [self._conversation(rng, f"conv-{seed}-{i}") for i in range(n)]

    def _conversation(self, rng: random.Random, cid: str) -> Context:
        target = rng.randrange(1, self.turns - 1)
        before, after = list(range(target)), list(range(target + 1, self.turns))
        conflicts = []
        if self.conflicts >= 1:
            conflicts.append(rng.choice(before if (self.conflicts == 2 or rng.random() < 0.5) else after))
        if self.conflicts == 2:
            conflicts.append(rng.choice(after))
        kinds = ["target" if k == target else "conflict" if k in conflicts else "plain" for k in range(self.turns)]
        turns = []
        for kind in kinds:
            a, b = rng.randint(1, 9), rng.randint(1, 9)
            text, check = f"What is {a} + {b}?", {"number": a + b}
            if kind == "target":
                text += " End your reply with our team's tag."
                check["require"] = [self.rule]
            else:
                check["forbid"] = [self.rule]
            if kind == "conflict":
                tag = rng.choice(OTHER_TAGS)
                text += f" End your reply with the tag {tag}."
                check["require"] = [tag]
            turns.append({"user": text, "kind": kind, "check": check})
        opening = [{"role": "system", "content": SYSTEM}, *(EXAMPLE if self.example else [])]
        return Context(id=cid, prompt=Prompt(messages=opening), group="conventions",
                       data={"turns": turns, "target_turn": target, "kinds": kinds, "rule": self.rule})  # fmt: skip
