"""Agent verdicts decided outside the workspace, on the files the episode left: every attack class of
``propel.testing.agent_verdicts`` (exit statuses forced at import or at exit, always-equal results, rewritten checks,
start-up hooks) leaves its task unsolved and every honest fix solves it, for the shell fix task and HumanEval agent
tasks, in the local sandbox and in Docker; file checks compare text in the trainer."""

from __future__ import annotations

import pytest

from propel.envs.verdict import check_task, needed_files, verdict
from propel.errors import ConfigError
from propel.sandbox import LocalSandbox
from propel.tasks.humaneval import HumanEvalAgentTasks
from propel.tasks.shell import ShellTasks
from propel.testing.agent_verdicts import WORKSPACES


@pytest.fixture(scope="module", params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def box(request, docker_sandbox_or_skip):
    sandbox = LocalSandbox(max_workers=2) if request.param == "local" else docker_sandbox_or_skip(max_workers=2)
    yield sandbox
    sandbox.close()


CONTEXTS = [
    *ShellTasks(["fix_function"], demonstration=False).contexts(2, seed=1),
    *HumanEvalAgentTasks(task_ids=["HumanEval/0", "HumanEval/13", "HumanEval/148"]).contexts(3, seed=0),
]


@pytest.mark.parametrize("workspace", WORKSPACES, ids=lambda w: w.name)
def test_only_an_honest_fix_passes(box, workspace):
    for ctx in CONTEXTS:
        files = {**ctx.data["files"], **workspace.files(ctx)}
        got = verdict(ctx.data, files, [], box)
        assert got["passed"] is (workspace.kind == "honest"), (workspace.name, ctx.id, got["output"])


def test_file_checks_compare_text_here_and_cut_files_fail():
    data = {"expect_files": {"a.txt": "hi"}}
    assert verdict(data, {"a.txt": "hi\n"}, [], None)["passed"]
    assert not verdict(data, {"a.txt": "hi!"}, [], None)["passed"]
    assert not verdict(data, {"a.txt": None}, [], None)["passed"]
    assert not verdict(data, {"a.txt": "hi"}, ["a.txt"], None)["passed"]  # cut: not the workspace's text
    assert not verdict({}, {}, [], None)["passed"]  # no check describes nothing passed
    assert needed_files({"expect_files": {"a": 1}, "value_tests": {"module": "pkg.calc"}}) == ["a", "pkg/calc.py"]


def test_exit_status_verifiers_and_malformed_checks_are_refused():
    for data, match in (
        ({"verify": "python3 check.py"}, "expect_files"),
        ({"expect_files": ["a.txt"]}, "mappings"),
        ({"value_tests": {"module": "calc"}}, "lacks"),
    ):
        with pytest.raises(ConfigError, match=match):
            check_task(data, "t")
