"""The task-independent hacks of the red-team corpus swept over every HumanEval task: each scores nothing on the
default (value) grader over all 164 tasks and on the hardened pytest grader over 12 drawn at random (a file of its
own: the sweep is the suite's longest, and a separate file lets the two test workers share the load)."""

from __future__ import annotations

import random

from propel.rewards import TestSuiteReward
from propel.rollouts.record import Sample
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
