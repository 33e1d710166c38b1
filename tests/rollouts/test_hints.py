"""Hints: sources that name the turn to correct, and the teacher's context spliced token by token at a message
boundary (equal to the chat template's rendering of the conversation with the hint message inserted)."""

from __future__ import annotations

import json

import pytest

from propel.errors import ConfigError
from propel.records import Context, Prompt, Sample, Turn
from propel.rollouts.conversation import Conversation
from propel.rollouts.hints import ErrorHints, FunctionHints, Hint, HintSplicer, StaticHints

OPENING = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Make a.txt say hi."}]


def _episode(tokenizer, actions, observations, passed=False):
    """A token-exact episode built like the runner builds one (Conversation deltas)."""
    conv = Conversation(tokenizer, OPENING)
    sample = Sample(conv.text, "", context=Context("ctx", Prompt(messages=OPENING)), prompt_ids=list(conv.ids))
    for action, (obs, info) in zip(actions, observations, strict=True):
        ids = tokenizer(action, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        conv.add_assistant(ids, {tokenizer.eos_token_id})
        sample.turns.append(Turn("assistant", action, ids))
        if obs is not None:
            sample.turns.append(Turn("tool", obs, conv.add_message("tool", obs), trainable=False, info=info))
    sample.artifacts["verifier"] = {"passed": passed, "output": "a.txt is empty"}
    sample.info["episode_id"] = "ctx-1"
    return sample, conv


def test_spliced_teacher_context_equals_the_template_with_the_hint_message(tokenizer):
    sample, conv = _episode(tokenizer, ["ls", "echo hi", "done"], [("a.txt", {}), ("ok", {}), (None, {})])
    splicer = HintSplicer(tokenizer, role="system", template="Hint: {hint}")
    for turn in range(3):
        target = splicer.target(sample, 0, Hint(turn, "write the file"))
        before = conv.messages[: 2 + 2 * turn]  # the opening, then (assistant, tool) pairs before the turn
        hinted = [*before, {"role": "system", "content": "Hint: write the file"}]
        text = tokenizer.apply_chat_template(hinted, tokenize=False, add_generation_prompt=True)
        turn_ids = sample.turns[2 * turn].token_ids
        assert target.teacher_ids == tokenizer(text, add_special_tokens=False)["input_ids"] + turn_ids
        plain = tokenizer.apply_chat_template(before, tokenize=False, add_generation_prompt=True)
        assert target.student_ids == tokenizer(plain, add_special_tokens=False)["input_ids"] + turn_ids
        assert target.length == len(turn_ids) and target.student_ids[-target.length :] == turn_ids
    assert splicer.splice(target.student_ids[: -target.length], "") == target.student_ids[: -target.length]
    with pytest.raises(ValueError, match="has 3 assistant turns"):
        splicer.target(sample, 0, Hint(3, "x"))
    with pytest.raises(ValueError, match="assistant header"):
        splicer.splice(target.student_ids, "x")  # ends with the turn, not a header


def test_error_hints_target_the_first_failing_turn_or_the_verifier(tokenizer):
    error = {"error": "bad_json"}
    sample, _ = _episode(tokenizer, ["ls", "oops", "x"], [("a.txt", {}), ("error: bad_json", error), (None, {})])
    assert ErrorHints(tool_error="fix: {observation}").hints(sample) == [Hint(1, "fix: error: bad_json")]
    quoted = ErrorHints(tool_error='e.g. {"name": "ls"} after {observation}')  # braces of a quoted call stay
    assert quoted.hints(sample) == [Hint(1, 'e.g. {"name": "ls"} after error: bad_json')]
    failing = {"exit_code": 2}
    sample, _ = _episode(tokenizer, ["cat nope"], [("No such file", failing)])
    assert ErrorHints(tool_error="{observation}").hints(sample) == [Hint(0, "No such file")]
    quiet, _ = _episode(tokenizer, ["ls", "done"], [("a.txt", {}), (None, {})])
    assert ErrorHints(verifier="check: {output}").hints(quiet) == [Hint(1, "check: a.txt is empty")]
    solved, _ = _episode(tokenizer, ["oops"], [("error", error)], passed=True)
    assert ErrorHints().hints(solved) == [] and ErrorHints(failed_only=False).hints(solved)[0].turn == 0


def test_static_and_function_hints(tokenizer, tmp_path):
    sample, _ = _episode(tokenizer, ["ls"], [(None, {})])
    path = tmp_path / "hints.jsonl"
    rows = [{"id": "ctx-1", "turn": 0, "hint": "by episode"}, {"id": "ctx", "turn": 0, "hint": "by task"}]
    path.write_text("\n".join(json.dumps(r) for r in [*rows, {"id": "other", "turn": 2, "hint": "no"}]) + "\n")
    assert StaticHints(str(path)).hints(sample) == [Hint(0, "by episode"), Hint(0, "by task")]
    path.write_text('{"id": "x", "turn": "zero"}\n')
    with pytest.raises(ConfigError, match="hints.jsonl:1"):
        StaticHints(str(path))
    assert FunctionHints(lambda s: [Hint(0, s.context.id)]).hints(sample) == [Hint(0, "ctx")]


def test_a_whole_sequence_target_stops_at_its_segment_and_ends_with_an_assistant_turn(tokenizer):
    """``scope="sequence"``: from turn t to the segment's last assistant turn; a step-wise episode's later segment
    re-renders its prompt, so the span does not cross into it; a trailing observation is not part of the span."""
    first, _ = _episode(tokenizer, ["ls", "cat a.txt"], [("a.txt", {}), ("river", {})])
    second, _ = _episode(tokenizer, ["echo hi", "done"], [("ok", {}), (None, {})])
    second.segments = [first]
    splicer = HintSplicer(tokenizer)
    target = splicer.target(second, 0, Hint(0, "look first"), scope="sequence")
    a0, o0, a1 = (first.turns[i].token_ids for i in (0, 1, 2))
    assert target.student_ids == first.prompt_ids + a0 + o0 + a1 and list(target.covered) == [0, 1]
    assert target.mask == [1] * len(a0) + [0] * len(o0) + [1] * len(a1)
    later = splicer.target(second, 0, Hint(2, "x"), scope="sequence")
    assert later.student_ids[: -later.length] == second.prompt_ids and list(later.covered) == [2, 3]
    with pytest.raises(ValueError, match="regenerated"):
        target.regenerated([1, 2], None)
    with pytest.raises(ValueError, match="scope"):
        splicer.target(second, 0, Hint(0, "x"), scope="episode")
