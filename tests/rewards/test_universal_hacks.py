"""The task-independent hacks of the red-team corpus swept over HumanEval tasks drawn at random: each scores nothing
on the default (value) grader over 48 tasks and on the hardened pytest grader over 12 (all 164 tasks on both graders
and both backends: ``benchmarks/reward_integrity.py``; here a sample, so the suite's longest test fits CI's time)."""

from __future__ import annotations

import random

from propel.records import Sample
from propel.rewards import TestSuiteReward
from propel.sandbox import LocalSandbox
from propel.tasks.humaneval import load_humaneval
from propel.testing.testsuite_hacks import CORPUS, single_source

TASKS = {t.task_id: t for t in load_humaneval()}


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


def test_universal_hacks_score_nothing_on_the_value_grader():
    """Each task-independent hack over 48 tasks drawn at random, on the default (value) grader: every reward 0.000."""
    tasks = random.Random(1).sample(list(TASKS.values()), 48)
    pairs = universal_samples(tasks)
    with LocalSandbox(max_workers=2) as sandbox:
        rewards = TestSuiteReward(sandbox=sandbox, timeout_s=5.0, batch_size=32)([s for _, s in pairs]).tolist()
    scored = [(name, s.context.id, r) for (name, s), r in zip(pairs, rewards, strict=True) if r > 0]
    assert not scored, scored[:5]
    assert len(pairs) >= 48 * 25


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
