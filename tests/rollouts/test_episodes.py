"""The episode runner: token-exact trajectories, masks that cover exactly the generated tokens, concurrency, the
context limit, and failures outside the policy marked instead of scored. The environment here keeps its files in
memory (the sandboxed ``ToolEnv`` has its own tests); the policy is scripted, tokenized like real output."""

from __future__ import annotations

import pytest
import torch

from propel.engines.engine import SamplingSpec
from propel.engines.scripted import ScriptedEngine
from propel.engines.tool_calls import CLOSE, ToolCall, check_arguments, format_tool_call, parse_tool_call
from propel.envs.agent_env import AgentEnv, EpisodeState, Observation
from propel.envs.tool_env import TOOLS
from propel.records import Context, Prompt
from propel.rollouts import pack
from propel.rollouts.conversation import with_tool_block
from propel.rollouts.episode_runner import EpisodeRunner

SAMPLING = SamplingSpec(n=3, max_new_tokens=64)


class MemoryFilesEnv(AgentEnv):
    """write_file into a dict, submit checks ``context.data['want']``; ``fail_on`` raises on that step."""

    tools, stop = TOOLS, (CLOSE,)

    def __init__(self, fail_on: int | None = None) -> None:
        self.fail_on, self._state, self.files = fail_on, EpisodeState(), {}

    @property
    def state(self):
        return self._state

    def reset(self, context, sandbox=None):
        self.context, self.files, self._state = context, {}, EpisodeState(episode_id=context.id)
        return Observation(role="user", messages=[{"role": "system", "content": "agent"}, *context.prompt.messages])

    def step(self, action):
        self._state.step_count += 1
        if self._state.step_count == self.fail_on:
            raise OSError("the sandbox went away")
        call = parse_tool_call(action)
        problem = call.reason if not isinstance(call, ToolCall) else check_arguments(call, self.tools)
        if problem:
            return Observation(f"error: {problem}", metadata={"error": problem})
        if call.name == "submit":
            return self.end("submitted")
        self.files[call.arguments["path"]] = call.arguments["content"]
        return Observation(f"wrote {call.arguments['path']}", metadata={"tool": call.name})

    def end(self, finish_reason):
        ok = self.files.get("a.txt") == self.context.data["want"]
        self._state.done, self._state.finish_reason, self._state.verifier = True, finish_reason, {"passed": ok}
        return Observation(done=True, reward=float(ok), finish_reason=finish_reason, reward_components={"ok": ok})


def _contexts(n=2):
    return [
        Context(f"t{i}", Prompt(messages=[{"role": "user", "content": f"put w{i} in a.txt"}]), data={"want": f"w{i}"})
        for i in range(n)
    ]


def _script(prompt: str) -> str:
    """Write the wanted word (read from the task), then submit; a garbled call first on task t1."""
    want = "w1" if "put w1" in prompt else "w0"
    turns = prompt.count("<|im_start|>assistant") - 1
    if want == "w1" and turns == 0:
        return "<tool_call>{oops</tool_call>"
    if "wrote a.txt" not in prompt:
        return format_tool_call(ToolCall("write_file", {"path": "a.txt", "content": want}))
    return format_tool_call(ToolCall("submit", {}))


def _run(tokenizer, env=MemoryFilesEnv, **kw):
    engine = ScriptedEngine(tokenizer, _script, context_length=kw.pop("context_length", None))
    runner = EpisodeRunner(engine, env, concurrency=kw.pop("concurrency", 4), **kw)
    groups, times = runner.run(_contexts(), SAMPLING)
    return engine, groups, times


def test_episodes_are_token_exact_and_masked_on_generated_tokens_only(tokenizer):
    engine, groups, times = _run(tokenizer)
    assert [len(g) for g in groups] == [3, 3]
    for group, turns in zip(groups, (2, 3), strict=True):
        for s in group:
            assert s.info["finish_reason"] == "submitted" and s.info["reward"] == 1.0 and s.infra_error is None
            assert s.info["turns"] == turns and s.info["tool_errors"] == turns - 2
            # The ids are the chat template's encoding of the whole conversation (its closing of the last turn aside)
            messages = with_tool_block([{"role": "system", "content": "agent"}, *s.context.prompt.messages], TOOLS)
            messages += [{"role": t.role, "content": t.text} for t in s.turns]
            full = tokenizer(tokenizer.apply_chat_template(messages, tokenize=False), add_special_tokens=False)
            ids = s.prompt_ids + s.response_ids
            assert full["input_ids"] == ids + [tokenizer.eos_token_id, tokenizer("\n")["input_ids"][0]]
            # spans tile the sequence; the loss mask is 1 exactly on what the engine generated
            assert s.turn_spans[0][0] == len(s.prompt_ids) and s.turn_spans[-1][1] == len(ids)
            packed = pack([s], torch.zeros(1), tokenizer.pad_token_id)
            generated = [t for turn in s.turns if turn.role == "assistant" for t in turn.token_ids]
            assert packed.response_ids[0][packed.loss_mask[0] == 1].tolist() == generated
            assert all(t.logprobs is not None for t in s.turns if t.trainable)
    assert engine.calls[0] == 4 and sum(engine.calls) == times.turns == 3 * 2 + 3 * 3  # batched, 4 alive at once
    assert times.generation_s <= times.wall_s


def test_schedules_and_sequential_runs_agree(tokenizer):
    results = {}
    for name, kw in {"rounds": {}, "async": {"schedule": "async"}, "sequential": {"concurrency": 1}}.items():
        engine, groups, _ = _run(tokenizer, **kw)
        results[name] = [[(s.prompt_ids + s.response_ids, s.info["reward"]) for s in g] for g in groups]
        if name == "sequential":
            assert set(engine.calls) == {1}
    assert results["rounds"] == results["async"] == results["sequential"]


def test_the_context_limit_ends_episodes_with_length_never_beyond_it(tokenizer):
    _, groups, _ = _run(tokenizer, max_context_tokens=None, context_length=230)
    for s in (s for g in groups for s in g):
        assert len(s.prompt_ids) + len(s.response_ids) <= 230
    reasons = {s.info["finish_reason"] for g in groups for s in g}
    assert "length" in reasons, reasons


def test_failures_outside_the_policy_are_marked_not_scored(tokenizer):
    _, groups, _ = _run(tokenizer, env=lambda: MemoryFilesEnv(fail_on=1), concurrency=2)
    for s in (s for g in groups for s in g):
        assert s.infra_error and "the sandbox went away" in s.infra_error and not s.valid
        assert s.info["finish_reason"] == "error"

    class Broken(ScriptedEngine):
        def generate(self, prompts, sampling):
            raise ConnectionError("engine down")

    runner = EpisodeRunner(Broken(tokenizer, _script), MemoryFilesEnv)
    groups, _ = runner.run(_contexts(1), SAMPLING)
    assert all("engine down" in s.infra_error for s in groups[0])


def test_bad_settings_are_refused(tokenizer):
    engine = ScriptedEngine(tokenizer, _script)
    with pytest.raises(ValueError, match="concurrency"):
        EpisodeRunner(engine, MemoryFilesEnv, concurrency=0)
    with pytest.raises(ValueError, match="schedule"):
        EpisodeRunner(engine, MemoryFilesEnv, schedule="eager")


def test_trajectories_round_trip_through_parquet(tokenizer, tmp_path):
    import pandas as pd

    from propel.rollouts.trajectories import read_trajectories, write_trajectories

    _, groups, _ = _run(tokenizer)
    samples = [s for g in groups for s in g]
    write_trajectories(samples, tmp_path / "step.parquet")
    assert read_trajectories(tmp_path / "step.parquet") == samples
    frame = pd.read_parquet(tmp_path / "step.parquet")  # what a person opens
    assert list(frame["finish_reason"]) == ["submitted"] * 6 and frame["solved"].all()
    assert [len(m) for m in frame["loss_mask"]] == [len(t) for t in frame["token_ids"]]


STRIP_THINKING = (  # a reasoning model's template: past turns lose their <think> block, so history is re-rendered
    "{% for m in messages %}{% set c = m['content'] %}"
    "{% if m['role'] == 'assistant' and not loop.last %}{% set c = c.split('</think>')[-1] %}{% endif %}"
    "{{'<|im_start|>' + m['role'] + '\n' + c + '<|im_end|>\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{'<|im_start|>assistant\n'}}{% endif %}"
)


class Recording(ScriptedEngine):
    """Remembers the token ids of every prompt it was given, in order."""

    def generate(self, prompts, sampling):
        self.seen = getattr(self, "seen", []) + [list(p.token_ids) for p in prompts]
        return super().generate(prompts, sampling)


def test_a_template_that_rewrites_history_goes_step_wise(tokenizer, tmp_path):
    """Each segment is exactly what the engine was given and produced; the template's fresh encoding opens the next
    segment; packing makes one training row per segment with the episode's advantage and global turn ids."""
    import copy

    from propel.rollouts import read_trajectories, write_trajectories
    from propel.rollouts.conversation import TemplateNotAppendOnly

    tok = copy.deepcopy(tokenizer)
    tok.chat_template = STRIP_THINKING
    engine = Recording(tok, lambda p: "<think>plan</think>" + _script(p))
    runner = EpisodeRunner(engine, MemoryFilesEnv, concurrency=1)
    (group,), _ = runner.run(_contexts(1), SamplingSpec(n=1, max_new_tokens=64))
    s = group[0]
    assert s.info["finish_reason"] == "submitted" and s.info["reward"] == 1.0
    assert s.info["turns"] == 2 and s.info["segments"] == 2 and len(s.segments) == 1
    rows = [*s.segments, s]
    assert [r.prompt_ids for r in rows] == engine.seen  # token-exact: what the engine was given
    first, last = rows
    assert first.turns[-1].role == "tool" and first.turns[-1].token_ids == [] and first.turns[-1].text == "wrote a.txt"
    messages = [
        {"role": "system", "content": with_tool_block([{"role": "system", "content": "agent"}], TOOLS)[0]["content"]},
        {"role": "user", "content": "put w0 in a.txt"},
        {"role": "assistant", "content": first.turns[0].text},
        {"role": "tool", "content": "wrote a.txt"},
    ]
    fresh = tok(tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True), add_special_tokens=False)
    assert last.prompt_ids == fresh["input_ids"] and "<think>" not in tok.decode(last.prompt_ids)
    assert s.assistant_length == sum(len(r.turns[0].token_ids) for r in rows) and "<think>plan" in s.completion
    batch = pack(group, torch.tensor([0.5]), tok.pad_token_id)
    assert batch.input_ids.shape[0] == 2 and batch.advantages.tolist() == [0.5, 0.5]
    assert batch.loss_mask.sum(1).tolist() == [len(r.turns[0].token_ids) for r in rows]
    assert sorted(set(batch.turn_index[batch.loss_mask.bool()].tolist())) == [0, 2]  # episode-wide turn ids
    assert read_trajectories(write_trajectories(group, tmp_path / "t.parquet")) == group
    with pytest.raises(TemplateNotAppendOnly):
        EpisodeRunner(engine, MemoryFilesEnv, stepwise=False).run(_contexts(1), SamplingSpec(n=1, max_new_tokens=64))


class OtherEndOfTurn(ScriptedEngine):
    """Ends replies with ``<|endoftext|>``: an id of this engine's EOS set other than the tokenizer's EOS (as Qwen's
    ``<|endoftext|>`` or Llama-3.1's ``<|eom_id|>`` are in their generation configs' lists)."""

    def eos_ids(self) -> frozenset[int]:
        return frozenset({self.tokenizer.eos_token_id, self.tokenizer.convert_tokens_to_ids("<|endoftext|>")})

    def _completion(self, text, sampling):
        c = super()._completion(text, sampling)
        if c.token_ids and c.token_ids[-1] == self.tokenizer.eos_token_id:
            c.token_ids[-1] = self.tokenizer.convert_tokens_to_ids("<|endoftext|>")
        return c


def test_a_turn_ended_by_any_id_of_the_engines_eos_set_is_closed_once(tokenizer):
    """The runner strips the engine's whole EOS set (one set, from the engine), so the environment never sees the
    end token's text, and the generated end token closes the turn: the template's own closing is not added after it,
    and the episode stays one token-exact segment."""
    other = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    actions = []

    class Watching(MemoryFilesEnv):
        def step(self, action):
            actions.append(action)
            return super().step(action)

    def script(prompt: str) -> str:
        return "Let me think." if prompt.count("<|im_start|>assistant") == 1 else _script(prompt)

    engine = OtherEndOfTurn(tokenizer, script)
    (group,), _ = EpisodeRunner(engine, Watching, concurrency=1).run(_contexts(1), SamplingSpec(n=1, max_new_tokens=64))
    s = group[0]
    assert actions[0] == "Let me think." and not any("<|endoftext|>" in a for a in actions)
    assert s.turns[0].text == "Let me think." and s.turns[0].token_ids[-1] == other
    assert s.segments == [] and s.info["finish_reason"] == "submitted"
    ids = s.prompt_ids + s.response_ids
    at = ids.index(other)
    assert ids[at + 1] != tokenizer.eos_token_id  # no second terminator after the generated one
    assert tokenizer.decode(ids[at + 1 : at + 3]) == "\n<|im_start|>"  # the next message opens right after it


def test_non_canonical_token_splits_reach_the_engine_exactly_as_generated(tokenizer):
    """The engine emits words as sub-tokens the tokenizer would merge: every ``generate`` input must be the episode's
    ``prompt_ids + response_ids`` so far, never a re-tokenization of the text (which would merge them back)."""
    engine = Recording(tokenizer, _script, split_tokens=True)
    groups, _ = EpisodeRunner(engine, MemoryFilesEnv, concurrency=2).run(
        _contexts(), SamplingSpec(n=2, max_new_tokens=256)
    )
    expected = []
    for s in (s for g in groups for s in g):
        assert s.info["finish_reason"] == "submitted" and s.info["reward"] == 1.0
        so_far = list(s.prompt_ids)
        for turn in s.turns:
            if turn.trainable:
                expected.append(so_far)
                canonical = tokenizer(tokenizer.decode(turn.token_ids), add_special_tokens=False)["input_ids"]
                assert canonical != turn.token_ids  # the split is not the tokenizer's own
            so_far = so_far + turn.token_ids
    assert sorted(engine.seen) == sorted(expected)


def test_a_turn_cut_by_the_token_budget_ends_the_episode_as_length_unless_told_to_execute_it(tokenizer):
    """A turn cut by max_new_tokens (or the context limit) is not what the policy meant, yet the lenient parser
    reads a call cut just before its ``</tool_call>``: by default the environment never executes a cut turn and the
    episode ends as ``length``, verified as it stands; ``execute_cut_turns=True`` hands it over anyway."""
    call = format_tool_call(ToolCall("write_file", {"path": "a.txt", "content": "w0"}))
    ids = tokenizer(call, add_special_tokens=False)["input_ids"]
    budget = next(k for k in range(len(ids)) if tokenizer.decode(ids[:k]) == call[: -len(CLOSE)])
    actions = []

    class Watching(MemoryFilesEnv):
        def step(self, action):
            actions.append(action)
            obs = super().step(action)
            return obs if obs.done or self._state.step_count < 2 else self.end("max_turns")

    engine = ScriptedEngine(tokenizer, lambda p: call)
    cut = SamplingSpec(n=1, max_new_tokens=budget)
    (group,), _ = EpisodeRunner(engine, Watching, concurrency=1).run(_contexts(1), cut)
    s = group[0]
    assert actions == [] and s.info["finish_reason"] == "length" and s.info["reward"] == 0.0
    assert s.turns[-1].trainable and s.turns[-1].finish_reason == "length" and len(s.turns[-1].token_ids) == budget

    (group,), _ = EpisodeRunner(engine, Watching, concurrency=1, execute_cut_turns=True).run(_contexts(1), cut)
    assert actions[0] == call[: -len(CLOSE)] and group[0].info["reward"] == 1.0  # the cut call ran: a.txt written
