"""The value grader agrees with the pytest grader test by test on the 164 canonical HumanEval solutions and on 164
wrong ones (one-operator or one-constant mutations of each), and on both graders every canonical solution passes
every test, visible and hidden, with no hack flag (no false positive). One sweep serves both checks: each grades the
same 328 programs, and grading them once per grader is the suite's second-longest test."""

from __future__ import annotations

import ast

from propel.records import Sample
from propel.rewards import TestSuiteReward
from propel.sandbox import LocalSandbox
from propel.tasks.humaneval import load_humaneval

TASKS = {t.task_id: t for t in load_humaneval()}
GRADERS = ("value", "pytest")


class _Mutate(ast.NodeTransformer):
    """One deterministic bug: the first comparison operator flipped, else the first integer constant moved by one."""

    FLIP = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq}

    def __init__(self) -> None:
        self.done = False

    def visit_Compare(self, node):
        if not self.done and type(node.ops[0]) in self.FLIP:
            node.ops[0] = self.FLIP[type(node.ops[0])]()
            self.done = True
        return self.generic_visit(node)


def wrong_solution(task) -> str:
    tree = ast.parse(task.reference)
    mutate = _Mutate()
    tree = mutate.visit(tree)
    if not mutate.done:
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and type(node.value) is int:
                node.value += 1
                break
    return ast.unparse(tree) + "\n"


def test_value_and_pytest_graders_agree_test_by_test():
    """Identical pass/fail per test on the 164 canonical solutions and on 164 wrong ones (each a one-operator or
    one-constant mutation of the canonical solution). Two mutants loop forever: pytest's run then times out as a
    whole (every test counts failed) while value grading keeps the tests that passed before the hang, so those
    two are compared only on "the run did not pass everything"."""
    tasks = list(TASKS.values())
    samples = []
    for task in tasks:
        for code in (task.reference, wrong_solution(task)):
            samples.append(
                Sample(
                    prompt="",
                    completion="",
                    context=task.single_turn_context(),
                    artifacts={"files": {"solution.py": code}},
                )
            )
    outcomes, status, references = {}, {}, {}
    with LocalSandbox(max_workers=2) as sandbox:
        for grader in GRADERS:
            copies = [Sample(prompt="", completion="", context=s.context, artifacts=s.artifacts) for s in samples]
            rewards = TestSuiteReward(
                sandbox=sandbox, grader=grader, allow_in_process_verdict=True, timeout_s=5.0, batch_size=16, seed=0
            )(copies)
            outcomes[grader] = [{t: o == "passed" for t, o in c.info["test_suite"]["tests"].items()} for c in copies]
            status[grader] = [c.info["test_suite"]["status"] for c in copies]
            references[grader] = [(c.context.id, c.info["test_suite"]) for c in copies[0::2]]
            assert float(rewards[0::2].min()) == 1.0, grader  # every reference earns the full reward
    for grader, infos in references.items():  # no false positive: every reference passes everything, unflagged
        bad = [(i, info) for i, info in infos if info["pass_rate"] != 1.0 or info["visible_pass_rate"] != 1.0]
        bad += [(i, info) for i, info in infos if info["flags"] or not info["landlock"] > 0]
        assert len(infos) == 164 and not bad, (grader, bad[:3])
    hung = [i for i, st in enumerate(status["pytest"]) if st == "timeout"]
    assert len(hung) <= 2 and all(i % 2 == 1 for i in hung), [samples[i].context.id for i in hung]
    assert all(not all(outcomes["value"][i].values()) for i in hung)
    differ = [
        (samples[i].context.id, i % 2, v, p)
        for i, (v, p) in enumerate(zip(outcomes["value"], outcomes["pytest"], strict=True))
        if v != p and i not in hung
    ]
    assert not differ, differ[:3]
    wrong = outcomes["value"][1::2]
    assert sum(not all(o.values()) for o in wrong) >= 120  # most mutations are caught by some test
