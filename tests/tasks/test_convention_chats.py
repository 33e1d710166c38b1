"""ConventionChats: deterministic six-turn conversations, the target turn drawn per conversation (never first or
last), one conflict turn on each side of it, and checks that name the team's tag only where it is asked for."""

from __future__ import annotations

import pytest

from propel.envs import check_reply
from propel.errors import ConfigError
from propel.tasks import ConventionChats


def test_conversations_are_deterministic_and_place_the_target_and_conflicts():
    tasks = ConventionChats()
    a, b = tasks.contexts(40, seed=3), tasks.contexts(40, seed=3)
    assert [c.to_json() for c in a] == [c.to_json() for c in b]
    assert {c.data["target_turn"] for c in a} == {1, 2, 3, 4}  # randomised, never the first or the last turn
    for c in a:
        kinds, t = c.data["kinds"], c.data["target_turn"]
        assert len(c.data["turns"]) == 6 and kinds[t] == "target" and kinds.count("target") == 1
        assert "conflict" in kinds[:t] and "conflict" in kinds[t + 1 :] and kinds.count("conflict") == 2
        for k, turn in enumerate(c.data["turns"]):
            check = turn["check"]
            if k == t:
                assert "team's tag" in turn["user"] and check["require"] == ["[cedar]"] and "forbid" not in check
            else:
                assert check["forbid"] == ["[cedar]"] and "[cedar]" not in turn["user"]
        conflict = c.data["turns"][kinds.index("conflict")]
        assert check_reply(f"{conflict['check']['number']} {conflict['check']['require'][0]}", conflict["check"])[
            "passed"]  # fmt: skip
    assert tasks.hint == "Our team's tag is [cedar]. Example: 4 [cedar]"
    assert c.prompt.messages[0]["role"] == "system" and c.prompt.messages[-1]["role"] == "assistant"  # the example


def test_settings_are_checked():
    with pytest.raises(ConfigError):
        ConventionChats(turns=2)
    with pytest.raises(ConfigError):
        ConventionChats(rule="[maple]")
    assert "conflict" not in ConventionChats(conflicts=0).contexts(1)[0].data["kinds"]
