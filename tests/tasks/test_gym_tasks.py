"""reasoning-gym as a task source and a reward, with the real package: the reward is the dataset's own
``score_answer`` on the stripped extracted answer, a weighted mix comes out in its weights' ratio, and a batch is a
function of the seed alone (fresh instances, another process, another hash seed)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

from propel.datamodules.gym import GymAnswerScorer, ReasoningGymDataModule
from propel.errors import ConfigError
from propel.records import Sample
from propel.rewards import CombinedReward
from propel.rewards.gym import ReasoningGymReward

MIX = [
    {"name": "chain_sum", "weight": 1.0, "config": {"max_terms": 2, "max_digits": 1}},
    {"name": "gcd", "weight": 1.0, "config": {"max_value": 20}},
    {"name": "spell_backward", "weight": 1.0, "config": {"max_word_len": 5}},
    {"name": "number_sorting", "weight": 1.0, "config": {"max_numbers": 4}},
    {"name": "letter_counting", "weight": 1.0, "config": {"max_words": 6}},
]


@pytest.fixture(autouse=True)
def rg(require):
    return require("reasoning_gym")


def tasks(**kwargs):
    from propel.tasks import ReasoningGymTasks

    return ReasoningGymTasks(**{"datasets": MIX, "seed": 3, **kwargs})


def completions(oracle: str) -> dict[str, tuple[str, str | None]]:
    """Completion kinds -> (completion, the answer extracted from it by hand; None: no answer)."""
    return {
        "exact": (f"<answer>{oracle}</answer>", oracle),
        "spaced": (f"Let me think.\n<answer>\n  {oracle} \n</answer>", oracle),
        "contains": (f"<answer>x = {oracle}</answer>", f"x = {oracle}"),
        "wrong": ("<answer>zebra 17</answer>", "zebra 17"),
        "last_tag": (f"<answer>nope</answer> no wait <answer>{oracle}</answer>", oracle),
        "untagged": (oracle, None),
        "empty_tag": ("<answer></answer>", ""),
    }


def test_reward_is_score_answer_of_the_stripped_answer_on_a_fixed_set(rg):
    source = tasks()
    reward = ReasoningGymReward()
    checked = 0
    for k, spec in enumerate(MIX):
        reference = rg.create_dataset(spec["name"], seed=3 + k, size=10_000, **spec["config"])
        for index in (1, 7, 12):
            ctx = source.context(k, index)
            entry = reference[index]  # built independently of propel's cache
            assert ctx.data["question"] == entry["question"] and ctx.data["answer"] == entry["answer"]
            cases = completions(entry["answer"])
            samples = [Sample(prompt="", completion=text, context=ctx) for text, _ in cases.values()]
            got = reward(samples).tolist()
            for (kind, (_, answer)), value, s in zip(cases.items(), got, samples, strict=True):
                expected = 0.0 if answer is None else reference.score_answer(answer, entry)
                assert value == pytest.approx(expected, abs=1e-6), (spec["name"], index, kind)
                assert s.info["gym"]["answer"] == answer and s.info["gym"]["dataset"] == spec["name"]
            assert got[0] == got[1] == got[4] == 1.0 and got[5] == 0.0  # exact, stripped, last tag; untagged
            checked += len(samples)
    assert checked == 5 * 3 * 7


def test_containment_pays_oracle_over_answer_length_so_stripping_matters(rg):
    """gcd keeps reasoning-gym's default scoring: exact 1.0, else len(oracle) / len(answer) when it contains it."""
    source = tasks(datasets=[MIX[1]])
    ctx = source.context(0, 5)
    oracle = ctx.data["answer"]
    reward = ReasoningGymReward()
    values = reward(
        [
            Sample(prompt="", completion=c, context=ctx)
            for c in (f"<answer> {oracle} </answer>", f"<answer>x = {oracle}</answer>")
        ]
    )
    assert values.tolist() == pytest.approx([1.0, len(oracle) / len(f"x = {oracle}")])
    unstripped = rg.create_dataset("gcd", seed=3, size=10_000, max_value=20)
    entry = {"question": ctx.data["question"], "answer": oracle, "metadata": ctx.data["metadata"]}
    assert unstripped.score_answer(f" {oracle} ", entry) == pytest.approx(len(oracle) / (len(oracle) + 2))


def test_untagged_contexts_score_the_whole_completion():
    source = tasks(datasets=[MIX[0]], tag=None)
    ctx = source.context(0, 4)
    assert ctx.data["answer_tag"] is None and ctx.prompt.messages[-1]["content"].endswith("only the final answer.")
    got = ReasoningGymReward()([Sample(prompt="", completion=f"  {ctx.data['answer']}\n", context=ctx)])
    assert got.tolist() == [1.0]


def test_each_dataset_is_logged_as_its_own_series():
    source = tasks()
    ctxs = source.contexts(12, seed=0)
    samples = [Sample(prompt="", completion=f"<answer>{c.data['answer']}</answer>", context=c) for c in ctxs]
    samples[0].completion = "no answer"
    breakdown = CombinedReward([ReasoningGymReward()])(samples)
    stats = breakdown.stats("train/reward")
    first = ctxs[0].data["dataset"]
    counts = {d: sum(c.data["dataset"] == d for c in ctxs) for d in {c.data["dataset"] for c in ctxs}}
    for dataset, n in counts.items():
        assert stats[f"train/reward/gym/{dataset}/n"] == n
        expected = (n - 1) / n if dataset == first else 1.0
        assert stats[f"train/reward/gym/{dataset}/mean"] == pytest.approx(expected)
    assert stats["train/reward/gym/mean"] == pytest.approx(11 / 12)


def test_two_datasets_mix_in_their_weights_ratio():
    """3:1 weights over the datamodule's stream: 500 batches of 4 contexts (n = 2000 draws). The share of the first
    dataset is a binomial proportion with p = 0.75, std sqrt(p (1 - p) / n) = 0.0097; 4 std (0.039) bounds it."""
    mix = [{**MIX[0], "weight": 3.0}, {**MIX[1], "weight": 1.0}]
    data = ReasoningGymDataModule(tasks(datasets=mix), contexts_per_step=4, seed=11)
    names = [c.data["dataset"] for i in range(500) for c in data.batch_at(i).contexts]
    n, share = len(names), names.count("chain_sum") / len(names)
    assert n == 2000 and set(names) == {"chain_sum", "gcd"}
    assert abs(share - 0.75) < 4 * math.sqrt(0.75 * 0.25 / n), share
    print(f"measured share of chain_sum (weight 3 of 4) over {n} draws: {share:.4f}")


SNAPSHOT = (
    "import json, sys; from propel.tasks import ReasoningGymTasks; "
    "t = ReasoningGymTasks(datasets=json.loads(sys.argv[1]), seed=3, shots=1); "
    "print(json.dumps([c.to_json() for s in (0, 1, 2) for c in t.contexts(6, s)]))"
)


def test_batches_are_a_function_of_the_seed():
    from propel.tasks.gym import _dataset

    first = [c.to_json() for c in tasks(shots=1).contexts(10, seed=5)]
    _dataset.cache_clear()  # fresh reasoning-gym instances
    again = [c.to_json() for c in tasks(shots=1).contexts(10, seed=5)]
    other = [c.to_json() for c in tasks(shots=1).contexts(10, seed=6)]
    assert first == again and first != other
    assert len({json.loads(c)["id"] for c in first}) == 10
    here = [c.to_json() for s in (0, 1, 2) for c in tasks(shots=1).contexts(6, s)]
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run(
            [sys.executable, "-c", SNAPSHOT, json.dumps(MIX)], capture_output=True, text=True, env=env, timeout=300
        )
        assert out.returncode == 0, out.stderr[-2000:]
        assert json.loads(out.stdout.strip().splitlines()[-1]) == here


def test_shots_teach_the_format_with_items_never_asked():
    source = tasks(shots=2)
    ctx = source.contexts(1, seed=0)[0]
    messages = ctx.prompt.messages
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    assert messages[1]["content"].startswith("<answer>") and messages[1]["content"].endswith("</answer>")
    indices = [int(c.id.rsplit("/", 1)[1]) for c in source.contexts(300, seed=1)]
    assert min(indices) >= 2  # items 0 and 1 are the examples


def test_answer_env_marks_answers_and_topics():
    ctx = tasks().context(1, 3)
    good = Sample(prompt="", completion="<answer>4</answer>", context=ctx)
    bad = Sample(prompt="", completion="four", context=ctx)
    GymAnswerScorer().score([good, bad])
    assert good.valid and good.topic == "gcd" and good.info["reason"] == "ok"
    assert not bad.valid and bad.info["reason"] == "no_answer"


def test_misconfigurations_fail_in_one_line():
    from propel.tasks import ReasoningGymTasks

    with pytest.raises(ConfigError, match="unknown reasoning-gym dataset 'chain_sums'"):
        ReasoningGymTasks(datasets=[{"name": "chain_sums"}])
    with pytest.raises(ConfigError, match="rejects config"):
        ReasoningGymTasks(datasets=[{"name": "gcd", "config": {"max_valu": 3}}])
    with pytest.raises(ConfigError, match="seed"):
        ReasoningGymTasks(datasets=[{"name": "gcd", "config": {"seed": 3}}])
    with pytest.raises(ConfigError, match="each dataset once"):
        ReasoningGymTasks(datasets=[{"name": "gcd"}, {"name": "gcd"}])
    with pytest.raises(ConfigError, match="weights"):
        ReasoningGymTasks(datasets=[{"name": "gcd", "weight": 0}])
    with pytest.raises(ValueError, match="lacks"):
        ReasoningGymReward()([Sample(prompt="", completion="")])
