"""Episode rewards: the environment's verdict, and DAPO's soft overlong penalty equal to TRL's on assistant tokens."""

from __future__ import annotations

import pytest
import torch

from propel.records import Sample, Turn
from propel.rewards import EnvironmentReward, OverlongPenalty, TurnRewards


def _episode(assistant: list[int], tool: int, reward=1.0) -> Sample:
    turns = []
    for n in assistant:
        turns += [Turn("assistant", "a", [5] * n), Turn("tool", "t", [7] * tool, trainable=False)]
    return Sample("p", "c", prompt_ids=[1, 2], turns=turns, info={"reward": reward})


@pytest.mark.parametrize(("max_length", "cache"), [(100, 20), (64, 0), (50, 50)])
def test_overlong_penalty_matches_trl_on_assistant_tokens_only(max_length, cache):
    from trl.rewards import get_soft_overlong_punishment

    trl = get_soft_overlong_punishment(max_completion_len=max_length, soft_punish_cache=cache)
    samples = [_episode([n // 2, n - n // 2], tool=500) for n in range(0, 140, 3)]
    got = OverlongPenalty(max_length, cache)(samples)
    want = torch.tensor(trl([[0] * s.assistant_length for s in samples]), dtype=torch.float32)
    assert torch.allclose(got, want)
    assert got.min() < 0 and got.max() == 0  # the range covers both zones; 500 tool tokens never count


def test_environment_reward_reads_the_verdict_and_refuses_single_turn_samples():
    from propel.errors import ConfigError

    assert EnvironmentReward()([_episode([3], 1, 1.0), _episode([3], 1, 0.0)]).tolist() == [1.0, 0.0]
    # no verdict is not a verdict of 0: an episode lost to the infrastructure, or ended with reward None, is NaN
    failed = Sample("p", "c", infra_error="sandbox died", info={"reward": 0.0})
    unjudged = _episode([3], 1, None)
    assert torch.isnan(EnvironmentReward()([failed, unjudged])).all()
    with pytest.raises(ConfigError, match="EpisodeDataModule"):  # not an episode at all: the run's set-up
        EnvironmentReward()([Sample("p", "c")])
    with pytest.raises(Exception, match="max_length"):
        OverlongPenalty(0)


def test_turn_rewards_from_real_episodes(tokenizer):
    """ToolEnv(malformed_call_reward=-0.1) marks each malformed call, the last turn's too (an episode that ran out
    of turns on one); TurnRewards sums them, or averages over the assistant turns."""
    from propel.engines.engine import SamplingSpec
    from propel.engines.scripted import ScriptedEngine
    from propel.engines.tool_calls import ToolCall, format_tool_call
    from propel.envs import ToolEnv
    from propel.records import Context, Prompt
    from propel.rollouts import EpisodeRunner
    from propel.sandbox import LocalSandbox

    moves = ["<tool_call>{oops</tool_call>", format_tool_call(ToolCall("bash", {"command": "true"})), "prose"]
    engine = ScriptedEngine(tokenizer, lambda p: moves[p.count("<|im_start|>assistant") - 1])
    task = Context(id="t", prompt=Prompt(messages=[{"role": "user", "content": "do it"}]))
    with LocalSandbox(max_workers=1) as box:
        runner = EpisodeRunner(engine, lambda: ToolEnv(max_turns=3, malformed_call_reward=-0.1), box)
        ((s,),), _ = runner.run([task], SamplingSpec(n=1, max_new_tokens=64))
    rewards = [t.info.get("reward") for t in s.turns if not t.trainable]
    assert s.info["finish_reason"] == "max_turns" and rewards == [-0.1, None, -0.1]
    assert TurnRewards()([s]).tolist() == pytest.approx([-0.2])
    assert TurnRewards(reduce="mean")([s, _episode([3], 1)]).tolist() == pytest.approx([-0.2 / 3, 0.0])
    with pytest.raises(ValueError, match="reduce"):
        TurnRewards(reduce="max")


def _stepwise() -> Sample:
    """A step-wise episode of two segments, three assistant turns, two -0.1 observations: one in each segment (the
    first segment's last observation keeps its text and info but no tokens: they open the second segment's prompt)."""
    first = Sample(
        "p",
        "",
        prompt_ids=[1, 2, 3],
        turns=[
            Turn("assistant", "a", [5, 5]),
            Turn("tool", "t", [7], trainable=False, info={"reward": -0.1}),
            Turn("assistant", "a", [5, 5]),
            Turn("tool", "t", [], trainable=False),
        ],
    )
    last = Sample(
        "p",
        "c",
        prompt_ids=[1, 2, 3, 5, 5, 7, 7],
        turns=[Turn("assistant", "b", [6, 6, 6]), Turn("tool", "t", [8], trainable=False, info={"reward": -0.1})],
        segments=[first],
        info={"finish_reason": "max_turns", "turns": 2},
    )
    return last


def test_turn_rewards_and_episode_stats_read_every_segment_of_a_stepwise_episode():
    """Both -0.1 turns count (not only the last segment's), the mean is over the episode's three assistant turns, and
    the episode's tokens are every segment's row (what packing trains on), not the last segment's alone."""
    from propel.rollouts.episode_stats import episode_stats

    s = _stepwise()
    assert TurnRewards()([s]).tolist() == pytest.approx([-0.2])
    assert TurnRewards(reduce="mean")([s]).tolist() == pytest.approx([-0.2 / 3])
    assert episode_stats([s])["episode/length_tokens"] == (3 + 5) + (7 + 4)
