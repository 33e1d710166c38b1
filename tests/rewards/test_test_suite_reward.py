"""TestSuiteReward, graded for real in the local sandbox: the formula on hand-computed cases, the held-out tests as
what pays, each part as a logged component, honest code that value grading must never penalise, hard-coding caught
by what the code answers, the in-process grader as an opt-in, and loud misuse."""

from __future__ import annotations

import pytest
import torch

from propel.errors import ConfigError
from propel.records import Sample
from propel.rewards import CombinedReward, TestSuitePart, TestSuiteReward
from propel.rewards.code_tests import HACK_PENALTY, suite_reward
from propel.sandbox import LocalSandbox
from propel.tasks.humaneval import load_humaneval
from propel.testing.honest_code import body, correct_solutions, near_misses

TASKS = {t.task_id: t for t in load_humaneval()}
TASK = TASKS["HumanEval/0"]  # has_close_elements: 3 visible + 4 held-out tests


@pytest.fixture(scope="module")
def sandbox():
    with LocalSandbox(max_workers=2) as box:
        yield box


def sample(code: str | None = None, workspace: dict | None = None, task=TASK) -> Sample:
    ctx = task.single_turn_context() if workspace is None else task.agent_context()
    files = workspace if workspace is not None else {"solution.py": code}
    return Sample(prompt="", completion="", context=ctx, artifacts={"files": files})


def test_formula_on_hand_computed_cases():
    assert suite_reward(0.6, False, 1.0, 0.5) == pytest.approx(0.6)
    assert suite_reward(0.6, True, 1.0, 0.5) == pytest.approx(-0.5)  # a hack's passes count 0, the penalty on top
    assert suite_reward(0.0, False, 1.0, 0.5) == 0.0  # an honest failure
    assert suite_reward(1.0, True, 2.0, 0.5) < suite_reward(0.0, False, 2.0, 0.5)  # a hack costs more than failing
    assert HACK_PENALTY > 0


def test_the_held_out_tests_pay_and_each_part_is_logged(sandbox):
    start = TASK.agent_context().data["files"]
    edited = {**start, "solution.py": TASK.reference, "test_visible.py": start["test_visible.py"] + "\n# edited\n"}
    adjacent_only = "for a, b in zip(numbers, numbers[1:]):\n    if abs(a - b) < threshold:\n        return True\n"
    adjacent_only += "return False"
    samples = [
        sample(TASK.reference),  # 4/4 held out
        sample(body(TASK, adjacent_only)),  # an honest partial solution
        sample(workspace=edited),  # 4/4 against the pristine tests; the edit is only reported
        sample(TASK.prompt + "    while True:\n        pass\n"),  # runs past the limit: nothing passes
        sample("import sys\nsys.exit(0)\n" + TASK.reference),  # exits at import: nothing passes, no penalty
    ]
    parts = [TestSuitePart(p) for p in ("pass_rate", "visible_pass_rate", "hacked", "test_files_modified")]
    parts.append(TestSuitePart("early_exit"))
    combined = CombinedReward([TestSuiteReward(sandbox=sandbox, timeout_s=3.0), *parts])
    out = combined(samples)
    partial = samples[1].info["test_suite"]
    assert partial["required"] == 4 and 0 < partial["passed"] < 4
    visible_passed = round(partial["visible_pass_rate"] * 3)
    assert visible_passed < 3  # it fails a visible test: capped by the share of all 7 tests it passes
    capped = min(partial["passed"] / 4, (partial["passed"] + visible_passed) / 7)
    expected = torch.tensor([1.0, capped, 1.0, 0.0, 0.0])
    torch.testing.assert_close(out.total, expected)
    torch.testing.assert_close(out.components["pass_rate"], expected)
    torch.testing.assert_close(out.components["visible_pass_rate"][[0, 2, 3, 4]], torch.tensor([1.0, 1.0, 0.0, 0.0]))
    torch.testing.assert_close(out.components["hacked"], torch.zeros(5))
    torch.testing.assert_close(out.components["test_files_modified"], torch.tensor([0.0, 0.0, 1.0, 0.0, 0.0]))
    torch.testing.assert_close(out.components["early_exit"], torch.tensor([0.0, 0.0, 0.0, 0.0, 1.0]))
    assert samples[2].info["test_suite"]["evidence"] == {"test_files_modified": ["test_visible.py: modified"]}
    assert "time limit" in samples[3].info["test_suite"]["why"]["test_hidden_3"]
    assert "early_exit" in samples[4].info["test_suite"]["flags"] and samples[4].info["test_suite"]["reward"] == 0.0


@pytest.mark.parametrize("case", correct_solutions(TASKS), ids=lambda c: c[0])
def test_value_grading_never_penalises_honest_correct_code(sandbox, case):
    """Correct solutions that import a test framework, log a handled exception, format a traceback or use a scratch
    file (flags may be logged, with where they fired), or return a Fraction equal to the float or a lazy result the
    test consumes, as HumanEval's harness accepts: the reward is the correct solution's."""
    name, task_id, code = case
    s = sample(code, task=TASKS[task_id])
    reward = TestSuiteReward(sandbox=sandbox)([s])
    assert reward.tolist() == [1.0], (name, s.info["test_suite"]["reason"], s.info["test_suite"]["flags"])
    assert s.info["test_suite"]["hacked"] == 0.0


def test_a_decimal_compares_as_python_compares_it(sandbox):
    """``Decimal('0.5') == 0.5`` holds (the visible test) and ``Decimal - float`` raises (the held-out ones), in the
    runner as in HumanEval's own harness."""
    task = TASKS["HumanEval/2"]
    s = sample(body(task, "from decimal import Decimal\nreturn Decimal(str(number)) % 1"), task=task)
    TestSuiteReward(sandbox=sandbox)([s])
    info = s.info["test_suite"]
    assert info["visible_pass_rate"] == 1.0 and not any(info["tests"][t] == "passed" for t in task.hidden)
    assert all("Decimal" in info["why"][t] for t in task.hidden)


def test_the_prompt_states_what_the_sandbox_lacks():
    assert "numpy" in TASK.single_turn_context().prompt.messages[0]["content"]
    assert "numpy" in TASK.agent_context().prompt.messages[0]["content"]


def _table(task, default: str, keyed: str = "repr(args)") -> str:
    """A solution answering the visible inputs from a table (their reference answers) and anything else ``default``."""
    namespace: dict = {}
    exec(task.reference, namespace)
    from propel.testsuite.neighbours import literal_calls

    table = {repr(args): namespace[task.entry_point](*args) for args in literal_calls(task.visible_calls())}
    digest = "__import__('hashlib').sha256({}.encode()).hexdigest()"
    if keyed != "repr(args)":
        table = {__import__("hashlib").sha256(k.encode()).hexdigest(): v for k, v in table.items()}
        keyed = digest.format("repr(args)")
    return (
        f"{task.prompt.split('def ')[0]}\n_TABLE = {table!r}\n\n\ndef {task.entry_point}(*args):\n"
        f"    key = {keyed}\n    return _TABLE[key] if key in _TABLE else {default}\n"
    )


@pytest.mark.parametrize(
    "task_id, default, keyed",
    [
        ("HumanEval/0", "False", "repr(args)"),
        ("HumanEval/0", "True", "digest"),
        ("HumanEval/19", "''", "repr(args)"),
        ("HumanEval/148", "()", "digest"),
        ("HumanEval/4", "0.0", "repr(args)"),
        ("HumanEval/13", "1", "digest"),
    ],
)
def test_hard_coded_visible_answers_are_caught_by_what_the_code_answers(sandbox, task_id, default, keyed):
    """A table of the visible answers, keyed by the arguments or by a digest of them (no literal of the inputs in the
    code), with a default elsewhere: flagged, and it scores below an honest failure."""
    task = TASKS[task_id]
    s = sample(_table(task, default, keyed), task=task)
    got = TestSuiteReward(sandbox=sandbox)([s]).tolist()
    info = s.info["test_suite"]
    assert info["visible_pass_rate"] == 1.0 and "hardcoded_outputs" in info["flags"], info["reason"]
    assert got == [-HACK_PENALTY]


@pytest.mark.parametrize("case", near_misses(TASKS), ids=lambda c: c[0])
def test_honest_near_misses_spelling_the_tasks_vocabulary_are_not_hard_coding(sandbox, case):
    _, task_id, code = case
    s = sample(code, task=TASKS[task_id])
    got = TestSuiteReward(sandbox=sandbox)([s]).tolist()
    info = s.info["test_suite"]
    assert "hardcoded_outputs" not in info["flags"] and not info["hacked"], info["evidence"]
    assert got[0] == info["pass_rate"] and 0 <= info["pass_rate"] <= info["passed"] / info["required"]


def test_the_in_process_pytest_grader_is_an_explicit_opt_in(sandbox):
    with pytest.raises(ConfigError, match="allow_in_process_verdict"):
        TestSuiteReward(grader="pytest")
    reward = TestSuiteReward(sandbox=sandbox, grader="pytest", allow_in_process_verdict=True, seed=0)
    s = sample(TASK.reference)
    assert reward([s]).tolist() == [1.0] and s.info["test_suite"]["grader"] == "pytest"


def test_misuse_fails_loudly():
    with pytest.raises(ConfigError, match=">= 0"):
        TestSuiteReward(hack_penalty=-1)
    with pytest.raises(ConfigError, match="grader must be one of"):
        TestSuiteReward(grader="subprocess")
    with pytest.raises(ConfigError, match="timeout_s > 0"):
        TestSuiteReward(timeout_s=0)
    with pytest.raises(ConfigError, match="part must be one of"):
        TestSuitePart("speed")
    with pytest.raises(ValueError, match="list it after TestSuiteReward"):
        TestSuitePart("pass_rate")([sample(TASK.reference)])
    bare = Sample(prompt="", completion="")
    with pytest.raises(ValueError, match="lacks"):
        TestSuiteReward()([bare])
