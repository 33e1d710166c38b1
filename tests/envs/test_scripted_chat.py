"""ScriptedChatEnv: the user turns follow the script whatever the assistant writes, each reply is graded by its check,
and the episode ends after the last turn with the share passed."""

from __future__ import annotations

import pytest

from propel.envs import ScriptedChatEnv, check_reply
from propel.errors import ConfigError
from propel.records import Context, Prompt


def _context() -> Context:
    turns = [{"user": "What is 1 + 2?", "check": {"number": 3}},
             {"user": "What is 2 + 2? End with [x].", "check": {"number": 4, "require": ["[x]"], "forbid": ["[y]"]}},
             {"user": "Say hi.", "check": {}}]  # fmt: skip
    return Context("c", Prompt(messages=[{"role": "system", "content": "Be brief."}]), data={"turns": turns})


def test_check_reply_reads_the_first_integer_and_the_substrings():
    assert check_reply("It is 7 [a]", {"number": 7, "require": ["[a]"], "forbid": ["[b]"]})["passed"]
    assert check_reply("7 [a] [b]", {"number": 7, "require": ["[a]"], "forbid": ["[b]"]}) == {
        "number": True, "require": True, "forbid": False, "passed": False}  # fmt: skip
    assert check_reply("3 + 4 = 7", {"number": 7})["passed"]  # the last integer is the answer
    assert not check_reply("7, or maybe 8", {"number": 7})["passed"]
    assert check_reply("anything", {})["passed"]
    assert check_reply("9 [CEDAR]", {"require": ["[cedar]"]})["passed"]  # case is ignored


def test_every_turn_is_reached_whatever_the_assistant_writes():
    env = ScriptedChatEnv()
    obs = env.reset(_context())
    assert obs.messages == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 1 + 2?"}]
    obs = env.step("I would rather write a poem about the sea")  # prose, wrong: the script goes on
    assert (obs.role, obs.content, obs.done, obs.turn_reward) == ("user", "What is 2 + 2? End with [x].", False, 0.0)
    obs = env.step("4 [x]")
    assert obs.content == "Say hi." and obs.turn_reward == 1.0
    obs = env.step("hi")
    assert obs.done and obs.finish_reason == "submitted" and obs.reward == pytest.approx(2 / 3)
    assert env.state.verifier["passed"] is False and [t["passed"] for t in env.state.verifier["turns"]] == [
        False, True, True]  # fmt: skip
    with pytest.raises(RuntimeError):
        env.step("again")


def test_an_episode_ended_from_outside_counts_unanswered_turns_as_failed():
    env = ScriptedChatEnv()
    env.reset(_context())
    env.step("3")
    obs = env.end("length")
    assert obs.done and obs.finish_reason == "length" and obs.reward == pytest.approx(1 / 3)


def test_a_context_without_turns_is_refused():
    with pytest.raises(ConfigError, match="turns"):
        ScriptedChatEnv().reset(Context("c", Prompt(messages=[])))
