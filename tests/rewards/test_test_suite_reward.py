"""TestSuiteReward, graded for real in the local sandbox: the formula on hand-computed cases, each part as a logged
component, the trust rule, the coverage part that padding cannot buy, and loud misuse."""

from __future__ import annotations

import pytest
import torch

from propel.errors import ConfigError
from propel.rewards import CombinedReward, TestSuitePart, TestSuiteReward
from propel.rewards.code_tests import suite_reward
from propel.rollouts.record import Sample
from propel.sandbox import LocalSandbox
from propel.tasks.humaneval import load_humaneval
from propel.tasks.humaneval.corpus import _PARTIAL_0

TASK = load_humaneval()[0]  # HumanEval/0: 3 visible + 4 hidden tests


@pytest.fixture(scope="module")
def sandbox():
    with LocalSandbox(max_workers=2) as box:
        yield box


def sample(code: str | None = None, workspace: dict | None = None) -> Sample:
    ctx = TASK.single_turn_context() if workspace is None else TASK.agent_context()
    files = workspace if workspace is not None else {"solution.py": code}
    return Sample(prompt="", completion="", context=ctx, artifacts={"files": files})


def test_formula_on_hand_computed_cases():
    assert suite_reward(0.6, False, 0.4, 1.0, 0.4, 0.1) == pytest.approx(0.64)
    assert suite_reward(0.6, True, 0.4, 1.0, 0.4, 0.1) == pytest.approx(0.24)
    assert suite_reward(0.2, True, 0.0, 1.0, 0.4, 0.1) == 0.0  # clipped at 0
    assert suite_reward(1.0, False, 1.0, 2.0, 0.4, 0.5) == pytest.approx(2.5)


def test_reward_is_the_formula_with_parts_logged_per_component(sandbox):
    start = TASK.agent_context().data["files"]
    edited = {**start, "solution.py": TASK.reference, "test_visible.py": start["test_visible.py"] + "\n# edited\n"}
    samples = [
        sample(TASK.reference),  # 7/7
        sample(TASK.prompt + _PARTIAL_0),  # 5/7
        sample(workspace=edited),  # 7/7 against the pristine tests; the edit is only reported
        sample(TASK.prompt + "    while True:\n        pass\n"),  # runs past the limit: nothing passes
        sample("import sys\nsys.exit(0)\n" + TASK.reference),  # exits: untrusted, penalised
    ]
    parts = [TestSuitePart("pass_rate"), TestSuitePart("hacked"), TestSuitePart("test_files_modified")]
    parts.append(TestSuitePart("early_exit"))
    combined = CombinedReward([TestSuiteReward(sandbox=sandbox, timeout_s=3.0), *parts])
    breakdown = combined(samples)
    torch.testing.assert_close(breakdown.total, torch.tensor([1.0, 5 / 7, 1.0, 0.0, 0.0]))
    torch.testing.assert_close(breakdown.components["pass_rate"], torch.tensor([1.0, 5 / 7, 1.0, 0.0, 0.0]))
    torch.testing.assert_close(breakdown.components["hacked"], torch.tensor([0.0, 0.0, 0.0, 0.0, 1.0]))
    torch.testing.assert_close(breakdown.components["test_files_modified"], torch.tensor([0.0, 0.0, 1.0, 0.0, 0.0]))
    torch.testing.assert_close(breakdown.components["early_exit"], torch.tensor([0.0, 0.0, 0.0, 0.0, 1.0]))
    stats = breakdown.stats("reward")
    assert stats["reward/hacked/mean"] == pytest.approx(0.2)
    assert samples[2].info["test_suite"]["evidence"] == {"test_files_modified": ["test_visible.py: modified"]}
    assert "time limit" in samples[3].info["test_suite"]["why"]["test_hidden_3"]
    assert "not counted (early_exit)" in samples[4].info["test_suite"]["reason"]


def test_coverage_counts_missed_statements_so_padding_buys_nothing(sandbox):
    """The coverage part pays only for a run where every test passes, and counts the statements the tests never
    ran: dead code costs a tenth each; 300 executed padding lines change nothing (they added +0.06 before)."""
    padding = "".join(f"_pad{i} = {i}\n" for i in range(300))
    dead = TASK.reference.rstrip("\n") + "\n\n\ndef _unused():\n    x = 1\n    return x\n"
    codes = [TASK.reference, padding + TASK.reference, dead, TASK.prompt + _PARTIAL_0]
    reward = TestSuiteReward(sandbox=sandbox, grader="pytest", coverage_bonus=0.1, seed=0)
    got = reward([sample(c) for c in codes]).tolist()
    assert got == pytest.approx([1.1, 1.1, 1.08, 5 / 7])


def test_misuse_fails_loudly():
    with pytest.raises(ConfigError, match=">= 0"):
        TestSuiteReward(hack_penalty=-1)
    with pytest.raises(ConfigError, match="grader must be one of"):
        TestSuiteReward(grader="subprocess")
    with pytest.raises(ConfigError, match="coverage_bonus needs grader: pytest"):
        TestSuiteReward(coverage_bonus=0.1)
    with pytest.raises(ConfigError, match="part must be one of"):
        TestSuitePart("speed")
    with pytest.raises(ValueError, match="list it after TestSuiteReward"):
        TestSuitePart("pass_rate")([sample(TASK.reference)])
    bare = Sample(prompt="", completion="")
    with pytest.raises(ValueError, match="lacks"):
        TestSuiteReward()([bare])
