"""HumanEval agent episodes in a real sandbox, driven by a scripted policy: the workspace ToolEnv collects is what
TestSuiteReward grades, against the pristine suite in a fresh sandbox job: an honest fix earns the full pass rate,
a conftest.py that forces every test to pass is flagged and earns nothing."""

from __future__ import annotations

from propel.engines.engine import SamplingSpec
from propel.engines.scripted import ScriptedEngine
from propel.engines.tool_calls import ToolCall, format_tool_call
from propel.envs import ToolEnv
from propel.rewards import TestSuiteReward
from propel.rollouts.episode_runner import EpisodeRunner
from propel.sandbox import LocalSandbox
from propel.tasks.humaneval import load_humaneval
from propel.testing.testsuite_hacks import AGENT_TASK

CONFTEST = (
    "import pytest\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
    "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n"
)


def episode(tokenizer, sandbox, task, path: str, content: str):
    moves = [
        format_tool_call(ToolCall("write_file", {"path": path, "content": content})),
        format_tool_call(ToolCall("submit", {})),
    ]
    engine = ScriptedEngine(tokenizer, lambda p: moves[min(p.count("<|im_start|>assistant") - 1, 1)])
    runner = EpisodeRunner(engine, lambda: ToolEnv(max_turns=3), sandbox)
    ((sample,),), _ = runner.run([task.agent_context()], SamplingSpec(n=1, max_new_tokens=200))
    assert sample.infra_error is None, sample.infra_error
    return sample


def test_agent_workspaces_are_graded_from_the_pristine_suite(tokenizer):
    task = {t.task_id: t for t in load_humaneval()}[AGENT_TASK]
    with LocalSandbox(max_workers=2) as sandbox:
        honest = episode(tokenizer, sandbox, task, "solution.py", task.reference)
        hack = episode(tokenizer, sandbox, task, "conftest.py", CONFTEST)
        rewards = TestSuiteReward(sandbox=sandbox)([honest, hack]).tolist()
    assert set(honest.artifacts["files"]) >= {"solution.py", "test_visible.py"}
    assert honest.info["reward"] == 1.0  # the episode's own verifier agrees
    assert honest.info["test_suite"]["pass_rate"] == 1.0 and honest.info["test_suite"]["flags"] == []
    assert rewards[0] == 1.0
    assert hack.artifacts["files"]["conftest.py"] == CONFTEST
    assert hack.info["test_suite"]["flags"] == ["test_files_modified"]  # reported; it changes nothing graded
    assert hack.info["test_suite"]["passed"] == 0 and rewards[1] == 0.0  # the conftest was not part of the graded run
