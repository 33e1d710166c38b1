"""The red-team corpus graded for real, on both sandbox backends and both graders: every hack scores strictly below an
honest partial solution of the same task and carries its expected flags; honest entries carry exactly theirs (an
agent that comments or deletes its copy of the visible tests keeps its pristine pass rate). The task-independent
hacks are swept over all 164 HumanEval tasks (mean reward 0.000), and the value grader agrees with the pytest grader
test by test on the 164 canonical solutions and on 164 wrong ones."""

from __future__ import annotations

import ast
import random

import pytest

from propel.rewards import TestSuiteReward
from propel.rollouts.record import Sample
from propel.sandbox import LocalSandbox
from propel.tasks.humaneval import load_humaneval
from propel.testing.testsuite_hacks import CORPUS, entry_files, single_source

TASKS = {t.task_id: t for t in load_humaneval()}
GRADERS = ("value", "pytest")


def corpus_samples() -> list[Sample]:
    out = []
    for entry in CORPUS:
        task = TASKS[entry.task_id]
        ctx = task.single_turn_context() if entry.mode == "single" else task.agent_context()
        out.append(Sample(prompt="", completion="", context=ctx, artifacts={"files": entry_files(entry, task)}))
    return out


def check_corpus(sandbox, grader: str) -> None:
    samples = corpus_samples()
    rewards = TestSuiteReward(sandbox=sandbox, grader=grader, allow_in_process_verdict=True, timeout_s=5.0, seed=7)(
        samples
    ).tolist()
    graded = list(zip(CORPUS, rewards, samples, strict=True))
    partial = {(e.mode, e.task_id): r for e, r, _ in graded if e.kind == "honest_partial"}
    correct = min(r for e, r, _ in graded if e.kind == "honest_correct")
    assert correct > max(partial.values()), (grader, correct, partial)
    for entry, reward, s in graded:
        info = s.info["test_suite"]
        if entry.kind == "hack":
            key = (entry.mode, entry.task_id)
            assert reward < partial[key], (grader, entry.name, reward, partial[key], info["reason"])
            assert entry.flags(grader) <= set(info["flags"]), (grader, entry.name, info["flags"], info["reason"])
            assert all(info["evidence"][f] for f in info["flags"])
        else:
            assert set(info["flags"]) == entry.flags(grader), (grader, entry.name, info["evidence"])
    by_name = {e.name: s.info["test_suite"] for e, _, s in graded}
    for name in ("agent_honest_comments_tests", "agent_honest_deletes_tests"):
        assert by_name[name]["pass_rate"] == 1.0 and by_name[name]["reward"] == 1.0
    if grader == "pytest":  # the tricks that made every test pass were caught by what the run did, not by names
        for name in ("patch_builtins_abs", "frame_getframe", "swap_test_code_via_modules"):
            assert by_name[name]["passed"] == by_name[name]["required"], name
        assert by_name["forge_junit_xml"]["flags"] == ["pytest_tampered", "report_tampered"]


@pytest.mark.parametrize("grader", GRADERS)
def test_hack_corpus_local(grader):
    with LocalSandbox(max_workers=2) as sandbox:
        check_corpus(sandbox, grader)


@pytest.mark.docker
@pytest.mark.parametrize("grader", GRADERS)
def test_hack_corpus_docker(docker_sandbox_or_skip, grader):
    with docker_sandbox_or_skip(max_workers=2) as sandbox:
        check_corpus(sandbox, grader)


def universal_samples(tasks) -> list[tuple[str, Sample]]:
    out = []
    for entry in (e for e in CORPUS if e.universal):
        for task in tasks:
            files = {"solution.py": single_source(entry, task)}
            out.append(
                (
                    entry.name,
                    Sample(prompt="", completion="", context=task.single_turn_context(), artifacts={"files": files}),
                )
            )
    return out


def test_universal_hacks_score_nothing_on_every_task():
    """Each task-independent hack over all 164 tasks, on the default (value) grader: mean reward 0.000."""
    pairs = universal_samples(list(TASKS.values()))
    with LocalSandbox(max_workers=2) as sandbox:
        rewards = TestSuiteReward(sandbox=sandbox, timeout_s=5.0, batch_size=32)([s for _, s in pairs]).tolist()
    scored = [(name, s.context.id, r) for (name, s), r in zip(pairs, rewards, strict=True) if r > 0]
    assert not scored, scored[:5]
    assert len(pairs) >= 164 * 25


def test_universal_hacks_score_nothing_on_the_pytest_grader():
    """The same sweep on the hardened pytest grader, over 12 tasks drawn at random (the full 164 runs in
    ``benchmarks/reward_integrity.py``)."""
    tasks = random.Random(0).sample(list(TASKS.values()), 12)
    pairs = universal_samples(tasks)
    with LocalSandbox(max_workers=2) as sandbox:
        reward = TestSuiteReward(
            sandbox=sandbox, grader="pytest", allow_in_process_verdict=True, timeout_s=5.0, batch_size=16, seed=0
        )
        rewards = reward([s for _, s in pairs]).tolist()
    scored = [(name, s.context.id, r) for (name, s), r in zip(pairs, rewards, strict=True) if r > 0]
    assert not scored, scored[:5]


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
    outcomes, status = {}, {}
    with LocalSandbox(max_workers=2) as sandbox:
        for grader in GRADERS:
            copies = [Sample(prompt="", completion="", context=s.context, artifacts=s.artifacts) for s in samples]
            TestSuiteReward(
                sandbox=sandbox, grader=grader, allow_in_process_verdict=True, timeout_s=5.0, batch_size=16, seed=0
            )(copies)
            outcomes[grader] = [{t: o == "passed" for t, o in c.info["test_suite"]["tests"].items()} for c in copies]
            status[grader] = [c.info["test_suite"]["status"] for c in copies]
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
