"""TRL-style reward functions both ways, against TRL 1.16's own ``GRPOTrainer`` (tiny model, one real step and its
``_calculate_rewards`` on chosen completions): a TRL reward function gives inside propel the values TRL's call gives,
on the same inputs; propel's test-suite, triage, reasoning-gym and probe rewards exported with ``as_trl_reward`` give
inside TRL the values they give inside propel."""

from __future__ import annotations

import dataclasses
import difflib
import json
import textwrap
from pathlib import Path

import pytest
import torch

from propel.errors import ConfigError
from propel.probes.gate import GateSpec
from propel.records import Context, Prompt, Sample, Turn
from propel.rewards import CombinedReward, TestSuiteReward, triage_rewards
from propel.rewards.trl_export import as_trl_reward
from propel.rewards.trl_function import TRLRewardFunction
from propel.rewards.trl_io import completion_text, trl_row, trl_samples


def similarity(prompts, completions, question, answer, log_metric=None, **kwargs):
    """A user's TRL reward function reading dataset columns: how close the completion is to question and answer."""
    targets = [f"{q} {a}" for q, a in zip(question, answer, strict=True)]
    texts = [completion_text(c) for c in completions]
    scores = [difflib.SequenceMatcher(None, x, t).ratio() for x, t in zip(texts, targets, strict=True)]
    if log_metric is not None:
        log_metric("best", max(scores))
    return scores


def prompt_echo(prompts, completions, **kwargs):
    """A user's TRL reward function reading the prompts: how much of the question the completion repeats."""
    asked = [p if isinstance(p, str) else p[-1]["content"] for p in prompts]
    return [
        difflib.SequenceMatcher(None, completion_text(c), q).ratio() for c, q in zip(completions, asked, strict=True)
    ]


class Recorded:
    """A reward function that keeps what TRL called it with and what it returned (the function itself runs)."""

    def __init__(self, fn) -> None:
        self.fn, self.calls, self.__name__ = fn, [], fn.__name__

    def __call__(self, prompts, completions, **kwargs):
        out = self.fn(prompts=prompts, completions=completions, **kwargs)
        self.calls.append({"prompts": prompts, "completions": completions, "kwargs": kwargs, "out": list(out)})
        return out


@pytest.fixture
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def trl_trainer(require, tiny_model_dir, tmp_path, one_thread):
    """``make(contexts, reward_funcs)``: TRL's GRPOTrainer on the tiny model over the contexts' TRL rows."""
    trl = require("trl")
    datasets = require("datasets")
    from propel.models import load_tokenizer

    def make(contexts, funcs, prompts_per_step=2):
        args = trl.GRPOConfig(
            output_dir=str(tmp_path / "trl"),
            per_device_train_batch_size=2 * prompts_per_step,
            num_generations=2,
            max_completion_length=12,
            max_steps=1,
            report_to="none",
            use_cpu=True,
            logging_steps=1,
            save_strategy="no",
            bf16=False,
            seed=0,
        )
        rows = datasets.Dataset.from_list([trl_row(c) for c in contexts])
        tokenizer = load_tokenizer(str(tiny_model_dir))
        return trl.GRPOTrainer(
            model=str(tiny_model_dir), reward_funcs=funcs, args=args, train_dataset=rows, processing_class=tokenizer
        )

    return make


def propel_samples(call: dict, contexts: list[Context]) -> list[Sample]:
    """The samples propel would hold for a recorded TRL call: the original contexts (by id), the same completions."""
    by_id = {c.id: c for c in contexts}
    ids = call["kwargs"]["propel_id"]
    out = []
    for i, completion in enumerate(call["completions"]):
        text = completion_text(completion)
        turn = Turn("assistant", text, list(call["kwargs"]["completion_ids"][i]), None, True, "stop")
        out.append(Sample(prompt="", completion=text, context=by_id[ids[i]], turns=[turn]))
    return out


def gym_contexts(conversational: bool) -> list[Context]:
    from propel.tasks import ReasoningGymTasks

    mix = [{"name": "chain_sum", "config": {"max_terms": 2, "max_digits": 1}}, {"name": "gcd"}]
    contexts = ReasoningGymTasks(datasets=mix).contexts(4, seed=0)
    if conversational:
        return contexts
    return [dataclasses.replace(c, prompt=Prompt(text=c.prompt.messages[-1]["content"])) for c in contexts]


# ---------------------------------------------------------------------------------------- a TRL function in propel
@pytest.mark.parametrize("conversational", [True, False], ids=["chat", "text"])
def test_a_trl_function_gives_inside_propel_what_trl_gives(require, trl_trainer, conversational):
    require("reasoning_gym")
    contexts = gym_contexts(conversational)
    recorded = [Recorded(similarity), Recorded(prompt_echo)]
    trainer = trl_trainer(contexts, recorded)
    trainer.train()
    for spy in recorded:
        (call,) = spy.calls
        samples = propel_samples(call, contexts)
        reward = TRLRewardFunction(spy.fn)
        inputs = reward.inputs(samples)
        # the function sees what TRL passed it: prompts, completions (chat messages or text), ids, the columns
        assert inputs["prompts"] == call["prompts"] and inputs["completions"] == call["completions"]
        assert inputs["completion_ids"] == [list(x) for x in call["kwargs"]["completion_ids"]]
        assert inputs["answer"] == call["kwargs"]["answer"] and inputs["question"] == call["kwargs"]["question"]
        assert isinstance(call["completions"][0], list) == conversational
        ours = reward(samples).tolist()
        assert ours == pytest.approx(call["out"], abs=1e-6)
        assert len(set(call["out"])) > 1, call["out"]  # not a constant: the comparison can fail
        logged = trainer.state.log_history[0][f"rewards/{spy.__name__}/mean"]
        assert logged == pytest.approx(sum(call["out"]) / len(call["out"]), abs=1e-5)
        print(f"{spy.__name__} ({'chat' if conversational else 'text'}): TRL {call['out']} propel {ours}")


def test_a_trl_function_by_import_path_with_its_hooks(tmp_path, monkeypatch):
    (tmp_path / "trl_user_rewards.py").write_text(
        textwrap.dedent(
            """
            def tagged(prompts, completions, answer, trainer_state, log_extra, log_metric, **kwargs):
                assert trainer_state is None
                log_extra("seen", [a for a in answer])
                log_metric("calls", 1.0)
                return [None if a is None else float(c[0]["content"] == a) for c, a in zip(completions, answer)]
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    chat = Prompt(messages=[{"role": "user", "content": "2 + 2?"}])
    contexts = [Context("a", chat, data={"answer": "4"}), Context("b", chat, data={"other": 1})]
    samples = [Sample(prompt="", completion="4", context=contexts[0]), Sample("", "4", context=contexts[1])]
    for path in ("trl_user_rewards.tagged", "trl_user_rewards:tagged"):
        reward = TRLRewardFunction(path, weight=0.5)
        assert reward.name == "tagged" and reward.inputs(samples)["other"] == [None, 1]
        got = reward(samples)  # None: not applicable, so not judged (NaN), never 0
        assert got[0] == 1.0 and torch.isnan(got[1])
        assert reward.step_stats() == {"calls": 1.0, "none": 1.0}
        assert samples[0].info["tagged"] == {"seen": "4"}
    with pytest.raises(ConfigError, match="cannot import"):
        TRLRewardFunction("trl_user_rewards.missing")


def not_for_the_first_prompt(prompts, completions, topic, **kwargs):
    """Judges completions by their length, except those of topic ``a`` (not applicable: None, as TRL documents)."""
    return [None if t == "a" else len(completion_text(c)) / 10 for c, t in zip(completions, topic, strict=True)]


def blind_to_the_first(prompts, completions, **kwargs):
    """Judges every completion by its vowels but the first of each call (None): that one no function judges."""
    return [None if k == 0 else sum(ch in "aeiou" for ch in completion_text(c)) for k, c in enumerate(completions)]


def test_an_unscorable_completion_gets_the_advantage_trl_gives_it(require, tiny_model_dir, tmp_path, one_thread):
    """TRL 1.16 leaves a completion every reward function returned None for out of its group's baseline and gives
    it advantage 0; inside propel the same functions give the same advantages, every one of them."""
    trl, datasets = require("trl"), require("datasets")
    from propel.losses.advantages import group_advantages
    from propel.losses.scorable import learnable
    from propel.models import load_tokenizer

    g = 4
    chat = Prompt(messages=[{"role": "user", "content": "Name a fruit."}])
    contexts = [Context("a", chat, data={"topic": "a"}), Context("b", chat, data={"topic": "b"})]
    funcs = [Recorded(not_for_the_first_prompt), Recorded(blind_to_the_first)]
    args = trl.GRPOConfig(
        output_dir=str(tmp_path / "trl"), per_device_train_batch_size=2 * g, num_generations=g,
        max_completion_length=12, max_steps=1, report_to="none", use_cpu=True, logging_steps=1, save_strategy="no",
        bf16=False, seed=0, shuffle_dataset=False,
    )  # fmt: skip
    trainer = trl.GRPOTrainer(
        model=str(tiny_model_dir), reward_funcs=funcs, args=args,
        train_dataset=datasets.Dataset.from_list([trl_row(c) for c in contexts]),
        processing_class=load_tokenizer(str(tiny_model_dir)),
    )  # fmt: skip
    trainer.train()
    call = funcs[0].calls[0]
    samples = propel_samples(call, contexts)
    breakdown = CombinedReward([TRLRewardFunction(f.fn) for f in funcs])(samples)
    assert torch.isnan(breakdown.total[0]) and torch.isfinite(breakdown.total[1:]).all()
    keep, skipped = learnable(breakdown.judged(g), g)
    ours = group_advantages(breakdown.total, g, mask=keep)
    theirs = list(trainer._logs["advantages"])
    assert call["kwargs"]["propel_id"] == ["a"] * g + ["b"] * g and not skipped.any()
    assert ours[0] == theirs[0] == 0.0
    assert ours.tolist() == pytest.approx(theirs, abs=1e-5) and any(abs(a) > 0.1 for a in theirs)
    print(f"unscorable completion: TRL advantages {theirs}, propel {ours.tolist()}")


def test_rows_keep_nested_data_exact_through_the_datasets_library(require):
    datasets = require("datasets")
    from propel.tasks.humaneval import HumanEvalTasks

    contexts = [t.single_turn_context() for t in HumanEvalTasks(task_ids=["HumanEval/0", "HumanEval/2"]).tasks]
    table = datasets.Dataset.from_list([trl_row(c) for c in contexts])
    back = [table[i] for i in range(len(contexts))]
    merged = datasets.Dataset.from_list([{"visible": c.data["visible"]} for c in contexts])["visible"]
    assert merged != [c.data["visible"] for c in contexts]  # why nested data travels as JSON: keys merged across rows
    assert any(None in tests.values() for tests in merged)
    columns = {k: [row[k] for row in back] for k in back[0] if k != "prompt"}
    samples = trl_samples([row["prompt"] for row in back], ["x", "y"], None, columns)
    for s, c in zip(samples, contexts, strict=True):
        assert s.context.data == c.data and s.context.id == c.id and s.context.prompt == c.prompt


# ---------------------------------------------------------------------------------------- propel rewards in TRL
def humaneval_case():
    from propel.tasks.humaneval import HumanEvalTasks

    tasks = HumanEvalTasks(task_ids=["HumanEval/0", "HumanEval/2"]).tasks
    contexts = [t.single_turn_context() for t in tasks]
    wrong = {
        "HumanEval/0": "def has_close_elements(numbers, threshold):\n    return False",
        "HumanEval/2": "def truncate_number(number):\n    return 0.5",
    }
    answers = [[f"```python\n{t.reference}\n```", f"```python\n{wrong[t.task_id]}\n```", "no code"] for t in tasks]
    return contexts, answers


def triage_case():
    from propel.tasks.triage import TriageTickets

    contexts = TriageTickets(split="train").contexts(2, seed=0)
    answers = []
    for c in contexts:
        steps, gold = c.data["gold_steps"], c.data
        full = {
            "resolution": " ".join(steps),
            "citations": gold["gold_ids"],
            "confidence": 0.9,
            "escalate": gold["escalate"],
        }
        half = {**full, "resolution": " ".join(steps[: max(1, len(steps) // 2)]), "confidence": 0.4}
        answers.append([f"submit_resolution {json.dumps(full)}", f"submit_resolution {json.dumps(half)}", "no idea"])
    return contexts, answers


def gym_case():
    contexts = gym_contexts(conversational=True)[:2]
    answers = [
        [f"<answer>{c.data['answer']}</answer>", f"<answer>so {c.data['answer']}</answer>", "<answer>-99</answer>"]
        for c in contexts
    ]
    return contexts, answers


def probe_case(tmp_path: Path, tiny_model_dir: Path):
    from propel.domains.math import MathExpressionDomain
    from propel.probes.artifact import ProbeArtifact
    from propel.probes.heads import ProbeHead
    from propel.rewards import ProbeReward
    from propel.rollouts.scorer import GeneratorScorer

    torch.manual_seed(0)
    head = ProbeHead("linear", 64)
    feats = torch.randn(32, 64)
    head.set_normalization(feats.mean(0), feats.std(0))
    folder = ProbeArtifact(head, str(tiny_model_dir), layer=1, pooling="last_token", max_length=128).save(
        tmp_path / "p"
    )
    reward = ProbeReward(artifact=str(folder), gate=GateSpec(floor=-1.0))
    scorer = GeneratorScorer(MathExpressionDomain())
    contexts = MathExpressionDomain().contexts(2, seed=0)
    answers = [
        [
            " Ann has 4 bags of 6 eggs. She uses 5. How many are left?\nExpression: 4 * 6 - 5",
            " Tom reads 12 pages a day for 3 days. How many pages?\nExpression: 12 * 3",
            "no task here",
        ],
        [" A box holds 7 pens. How many pens are in 5 boxes?\nExpression: 7 * 5", "Expression: (", "nothing"],
    ]
    return reward, scorer, contexts, answers


@pytest.mark.parametrize("kind", ["test_suite", "triage", "gym", "probe"])
def test_a_propel_reward_exported_gives_inside_trl_what_it_gives_inside_propel(
    require, trl_trainer, kind, tmp_path, tiny_model_dir
):
    scorer = None
    if kind == "test_suite":
        reward = TestSuiteReward()
        contexts, answers = humaneval_case()
    elif kind == "triage":
        reward = CombinedReward(triage_rewards())
        contexts, answers = triage_case()
    elif kind == "gym":
        require("reasoning_gym")
        from propel.rewards.gym import ReasoningGymReward

        reward = ReasoningGymReward()
        contexts, answers = gym_case()
    else:
        reward, scorer, contexts, answers = probe_case(tmp_path, tiny_model_dir)
    exported = Recorded(as_trl_reward(reward, scorer=scorer))
    try:
        trainer = trl_trainer(contexts, [exported], prompts_per_step=len(contexts))
        trainer.train()  # TRL's own step: its sampled completions through the exported reward
        (call,) = exported.calls
        inside = propel_samples(call, contexts)
        if scorer is not None:
            scorer.score(inside)
        total = reward(inside)
        total = total.total if isinstance(reward, CombinedReward) else total
        assert total.tolist() == pytest.approx(call["out"], abs=1e-6)
        logged = trainer.state.log_history[0]
        if kind == "triage":  # a combined reward's components reach TRL's logs through its log_metric
            assert {f"propel/{c.name}" for c in reward.components} <= set(logged), sorted(logged)
        if kind == "gym":  # and a component's step_stats: the reward per dataset
            assert any(k.startswith("gym/") and k.endswith("/mean") for k in logged), sorted(logged)

        # TRL's reward computation on chosen completions (right, partial, wrong): the rows as TRL's loader yields them
        rows = [trainer.train_dataset[i] for i in range(len(contexts))]
        inputs = [rows[i] for i, group in enumerate(answers) for _ in group]
        texts = [a for group in answers for a in group]
        chat = isinstance(rows[0]["prompt"], list)
        completions = [[{"role": "assistant", "content": t}] if chat else t for t in texts]
        ids = [trainer.processing_class(t, add_special_tokens=False)["input_ids"] for t in texts]
        in_trl = trainer._calculate_rewards(inputs, [r["prompt"] for r in inputs], completions, ids)[:, 0].tolist()
        by_id = {c.id: c for c in contexts}
        inside = [
            Sample(prompt="", completion=t, context=by_id[r["propel_id"]]) for r, t in zip(inputs, texts, strict=True)
        ]
        if scorer is not None:
            scorer.score(inside)
        expected = reward(inside)
        expected = expected.total if isinstance(reward, CombinedReward) else expected
        assert in_trl == pytest.approx(expected.tolist(), abs=1e-6)
        assert len(set(round(v, 6) for v in in_trl)) >= 3, in_trl  # right, partial and wrong differ
        print(f"{kind}: TRL step {call['out']}; chosen completions TRL {in_trl} propel {expected.tolist()}")
    finally:
        if hasattr(reward, "close"):
            reward.close()
        if scorer is not None:
            scorer.close()
