"""TestSuiteReward: the formula on hand-computed cases, each part as a logged component, the trust rule, configs."""

from __future__ import annotations

import pytest
import torch

from propel.domains.humaneval import load_humaneval
from propel.errors import ConfigError
from propel.rewards import CombinedReward, TestSuitePart, TestSuiteReward
from propel.rewards.test_suite import suite_reward
from propel.rollouts.record import Sample
from propel.testsuite import SuiteRun

REQUIRED = [f"test_visible_{i}" for i in range(2)] + [f"test_hidden_{i}" for i in range(3)]


class FakeRunner:
    """Stands in for the sandbox: returns prepared runs, with the canary's real (random) name filled in."""

    def __init__(self, runs):
        self.runs, self.seen = runs, []

    def run(self, submissions):
        self.seen.extend(submissions)
        out = []
        for sub, run in zip(submissions, self.runs, strict=True):
            canary = next(n[:-3] for n in sub.tests if n.startswith("test_c"))
            tests = {canary if k == "CANARY" else k: v for k, v in run.tests.items()}
            out.append(SuiteRun(run.status, run.reason, tests, run.exit_code, run.coverage))
        return out


def sample(files=None, workspace=None) -> Sample:
    task = load_humaneval()[0]
    ctx = task.single_turn_context() if workspace is None else task.agent_context()
    ctx.data.update(visible_tests=REQUIRED[:2], hidden_tests=REQUIRED[2:], visible_calls=["[1.0, 2.0], 0.5"])
    if workspace is not None:
        ctx.data["files"] = workspace
    return Sample(prompt="", completion="", context=ctx, artifacts={"files": files or {"solution.py": "x = 1\n"}})


def outcomes(passed: int, canary: str = "failed") -> dict[str, str]:
    out = {t: ("passed" if i < passed else "failed") for i, t in enumerate(REQUIRED)}
    return {**out, "CANARY": canary}


def graded(reward: TestSuiteReward, samples, runs):
    reward._runner = lambda: FakeRunner(runs)
    return reward(samples)


def test_formula_on_hand_computed_cases():
    assert suite_reward(0.6, False, 0.4, 1.0, 0.4, 0.1) == pytest.approx(0.64)
    assert suite_reward(0.6, True, 0.4, 1.0, 0.4, 0.1) == pytest.approx(0.24)
    assert suite_reward(0.2, True, 0.0, 1.0, 0.4, 0.1) == 0.0  # clipped at 0
    assert suite_reward(1.0, False, 1.0, 2.0, 0.4, 0.5) == pytest.approx(2.5)


def test_reward_is_the_formula_with_parts_logged_per_component():
    ws = {"solution.py": "def f():\n    pass\n", "test_visible.py": "def test_visible_0():\n    assert 1\n"}
    touched = {**ws, "test_visible.py": "def test_visible_0():\n    assert 1\n\n# edited\n"}
    samples = [sample(), sample(touched, workspace=ws), sample(), sample()]
    runs = [
        SuiteRun("ran", "", outcomes(3), 1, 40.0),  # pass 3/5, 40% coverage: 0.6 + 0.04
        SuiteRun("ran", "", outcomes(3), 1, 40.0),  # same, but a test file was edited: 0.6 - 0.4 + 0.04
        SuiteRun("ran", "", {**outcomes(5), "test_hidden_2": "skipped"}, 0, 100.0),  # skipped is not passed: 0.8+0.1
        SuiteRun("timeout", "the test run exceeded its time limit"),
    ]
    parts = [TestSuitePart("pass_rate"), TestSuitePart("coverage"), TestSuitePart("hacked")]
    parts.append(TestSuitePart("test_files_modified"))
    combined = CombinedReward([TestSuiteReward(), *parts])
    combined.components[0]._runner = lambda: FakeRunner(runs)
    breakdown = combined(samples)
    torch.testing.assert_close(breakdown.total, torch.tensor([0.64, 0.24, 0.9, 0.0]))
    torch.testing.assert_close(breakdown.components["pass_rate"], torch.tensor([0.6, 0.6, 0.8, 0.0]))
    torch.testing.assert_close(breakdown.components["coverage"], torch.tensor([0.4, 0.4, 1.0, 0.0]))
    torch.testing.assert_close(breakdown.components["hacked"], torch.tensor([0.0, 1.0, 0.0, 0.0]))
    torch.testing.assert_close(breakdown.components["test_files_modified"], torch.tensor([0.0, 1.0, 0.0, 0.0]))
    stats = breakdown.stats("reward")
    assert stats["reward/pass_rate/mean"] == pytest.approx(0.5) and stats["reward/hacked/mean"] == pytest.approx(0.25)
    info = samples[1].info["test_suite"]
    assert info["flags"] == ["test_files_modified"] and info["evidence"]["test_files_modified"] == [
        "test_visible.py: modified"
    ]
    assert samples[3].info["test_suite"]["reason"] == "the test run exceeded its time limit"


def test_untrusted_passes_count_zero_and_the_canary_must_fail():
    samples = [sample(), sample(), sample({"solution.py": "import sys\nsys.exit(0)\n"})]
    runs = [
        SuiteRun("ran", "", outcomes(5, canary="passed"), 0, 100.0),  # everything passed, even the canary
        SuiteRun("ran", "", {t: "passed" for t in REQUIRED}, 0, 100.0),  # a report without the canary
        SuiteRun("ran", "", outcomes(5), 0, 100.0),  # sys.exit in the code
    ]
    rewards = graded(TestSuiteReward(), samples, runs)
    assert rewards.tolist() == [0.0, 0.0, 0.0]
    flags = [s.info["test_suite"]["flags"] for s in samples]
    assert flags == [["canary_passed"], ["report_tampered"], ["early_exit"]]
    assert all("not counted" in s.info["test_suite"]["reason"] for s in samples)


def test_misuse_fails_loudly():
    with pytest.raises(ConfigError, match=">= 0"):
        TestSuiteReward(hack_penalty=-1)
    with pytest.raises(ConfigError, match="part must be one of"):
        TestSuitePart("speed")
    with pytest.raises(ValueError, match="list it after TestSuiteReward"):
        TestSuitePart("pass_rate")([sample()])
    bare = Sample(prompt="", completion="")
    with pytest.raises(ValueError, match="data\\['tests'\\]"):
        TestSuiteReward()([bare])
