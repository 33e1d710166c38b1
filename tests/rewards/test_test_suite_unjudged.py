"""What the test-suite grader cannot judge is NaN, never 0: a rollout lost to the infrastructure, and every submission
of a call whose sandbox could not run (a real, closed ``LocalSandbox``); while the graded code's own failures stay
real verdicts of 0, and a combined reward leaves out only what nothing judged."""

from __future__ import annotations

import math

import pytest
import torch

from propel.records import Sample
from propel.rewards import CombinedReward, TestSuitePart, TestSuiteReward
from propel.sandbox import LocalSandbox
from propel.tasks.humaneval import load_humaneval

TASK = {t.task_id: t for t in load_humaneval()}["HumanEval/0"]


def sample(files: dict | None, infra_error: str | None = None) -> Sample:
    artifacts = {} if files is None else {"files": files}
    return Sample("", "", context=TASK.single_turn_context(), artifacts=artifacts, infra_error=infra_error)


def test_a_sandbox_that_cannot_run_judges_nothing_and_the_code_that_failed_still_scores_0(caplog):
    samples = [
        sample({"solution.py": TASK.reference}),  # would pass: not judged when the grader cannot run
        sample({"notes.txt": "no solution file"}),  # nothing to grade: a real 0 whatever the sandbox does
        sample({"solution.py": TASK.reference}, infra_error="the episode's sandbox went away"),
    ]
    parts = [TestSuitePart("pass_rate"), TestSuitePart("hacked")]
    with LocalSandbox(max_workers=1) as box:
        working = CombinedReward([TestSuiteReward(sandbox=box), *parts])(samples)
    assert working.total[0] == 1.0 and working.total[1] == 0.0 and math.isnan(working.total[2])
    assert samples[2].info["test_suite"]["status"] == "infra" and math.isnan(working.components["pass_rate"][2])

    closed = LocalSandbox(max_workers=1)
    closed.close()
    with caplog.at_level("WARNING", logger="propel.rewards.code_tests"):
        out = CombinedReward([TestSuiteReward(sandbox=closed), *parts])(samples)
    assert math.isnan(out.total[0]) and out.total[1] == 0.0 and math.isnan(out.total[2])
    info = samples[0].info["test_suite"]
    assert info["status"] == "grader_failed" and "could not run" in info["reason"]
    assert torch.isnan(out.components["pass_rate"][[0, 2]]).all() and torch.isnan(out.components["hacked"][0])
    assert out.components["pass_rate"][1] == 0.0 and not out.errors  # judged what it could, raised nothing
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["propel"]


def test_a_part_listed_before_its_reward_is_a_set_up_error():
    from propel.errors import ConfigError

    with pytest.raises(ConfigError, match="list it after TestSuiteReward"):
        CombinedReward([TestSuitePart("pass_rate")])([sample({"solution.py": TASK.reference})])
