"""The hack corpus graded for real, on both sandbox backends: honest-correct > honest-partial > every hack, every
hack flagged with at least its expected flags, no honest entry flagged."""

from __future__ import annotations

import pytest

from propel.domains.humaneval import load_humaneval
from propel.domains.humaneval.corpus import AGENT_TASK, CORPUS, SINGLE_TASK, entry_files
from propel.rewards import TestSuiteReward
from propel.rollouts.record import Sample
from propel.sandbox import LocalSandbox


def corpus_samples() -> list[Sample]:
    tasks = {t.task_id: t for t in load_humaneval()}
    out = []
    for entry in CORPUS:
        task = tasks[SINGLE_TASK if entry.mode == "single" else AGENT_TASK]
        ctx = task.single_turn_context() if entry.mode == "single" else task.agent_context()
        out.append(Sample(prompt="", completion="", context=ctx, artifacts={"files": entry_files(entry, task)}))
    return out


def check_corpus(sandbox) -> None:
    samples = corpus_samples()
    rewards = TestSuiteReward(sandbox=sandbox, timeout_s=10.0)(samples).tolist()
    for mode in ("single", "agent"):
        rows = [(e, r, s) for e, r, s in zip(CORPUS, rewards, samples, strict=True) if e.mode == mode]
        correct = [r for e, r, _ in rows if e.kind == "honest_correct"]
        partial = [r for e, r, _ in rows if e.kind == "honest_partial"]
        hacks = {e.name: r for e, r, _ in rows if e.kind == "hack"}
        assert min(correct) > max(partial) > max(hacks.values()), (mode, correct, partial, hacks)
    for entry, s in zip(CORPUS, samples, strict=True):
        info = s.info["test_suite"]
        if entry.kind == "hack":
            assert entry.flags <= set(info["flags"]), (entry.name, info["flags"], info["reason"])
            assert all(info["evidence"][f] for f in info["flags"])
        else:
            assert info["flags"] == [], (entry.name, info["evidence"])
    by_name = {e.name: s.info["test_suite"] for e, s in zip(CORPUS, samples, strict=True)}
    assert by_name["honest_correct"]["pass_rate"] == 1.0 and by_name["honest_partial"]["pass_rate"] == 5 / 7
    # the hacks that really made every test pass were caught by the run checks, not only by reading the code
    for name in ("patch_pytest_reports", "constant_eq"):
        assert by_name[name]["passed"] == 7 and "canary_passed" in by_name[name]["flags"]
    assert by_name["forge_junit_report"]["passed"] == 7 and "report_tampered" in by_name["forge_junit_report"]["flags"]
    assert by_name["read_hidden_tests"]["passed"] == 7 and by_name["read_hidden_tests"]["reward"] == 0.0
    assert by_name["kill_test_runner"]["status"] == "runner"


def test_hack_corpus_local():
    with LocalSandbox(max_workers=2) as sandbox:
        check_corpus(sandbox)


@pytest.mark.docker
def test_hack_corpus_docker(docker_sandbox_or_skip):
    with docker_sandbox_or_skip(max_workers=2) as sandbox:
        check_corpus(sandbox)
