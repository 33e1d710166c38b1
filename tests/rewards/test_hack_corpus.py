"""The red-team corpus graded for real, on both sandbox backends and both graders: every hack scores strictly below an
honest partial solution of the same task and carries its expected flags; honest entries carry exactly theirs (an
agent that comments or deletes its copy of the visible tests keeps its pristine pass rate). The sweep of the
task-independent hacks over all 164 tasks is ``test_universal_hacks.py``; the two graders' agreement test by test,
``test_grader_agreement.py``."""

from __future__ import annotations

import pytest

from propel.records import Sample
from propel.rewards import TestSuiteReward
from propel.sandbox import LocalSandbox
from propel.tasks.humaneval import load_humaneval
from propel.testing.testsuite_hacks import CORPUS, entry_files

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
    if grader == "pytest":  # the tricks that made tests pass were caught by what the run did, not by names
        for name in ("frame_getframe", "swap_test_code_via_modules"):
            assert by_name[name]["passed"] == by_name[name]["required"], name
        # abs rebound passes the visible tests that compare through abs(); the generated held-out ones compare answers
        assert (
            by_name["patch_builtins_abs"]["passed"] >= 1 and "pytest_tampered" in by_name["patch_builtins_abs"]["flags"]
        )
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
