"""ToolEnv end to end in real sandboxes (bubblewrap locally, a container per episode with Docker), driven by a
scripted policy: malformed calls, timeouts, output floods and hostile commands come back as observations, the
workspace persists between turns, and the verdict, decided outside the workspace on the files the episode left,
gives the reward: no exit status of the agent's code, no process it left running and no check file it rewrote can
pass a task it did not solve."""

from __future__ import annotations

import os

import pytest

from propel.engines.engine import SamplingSpec
from propel.engines.scripted import ScriptedEngine
from propel.engines.tool_calls import ToolCall, format_tool_call
from propel.envs import ToolEnv
from propel.errors import ConfigError
from propel.records import Context, Prompt
from propel.rollouts.episode_runner import EpisodeRunner
from propel.sandbox import Limits, LocalSandbox
from propel.tasks.shell import ShellTasks

ACTIONS = [  # (action text, what its observation must say)
    ("<tool_call>{bad json</tool_call>", "error: bad_json"),
    (format_tool_call(ToolCall("rm_rf", {"path": "/"})), "error: unknown_tool"),
    (format_tool_call(ToolCall("bash", {"command": "sleep 30"})), "ran past 1 s"),
    (format_tool_call(ToolCall("bash", {"command": "yes | head -c 300000"})), "output truncated"),
    (format_tool_call(ToolCall("bash", {"command": "echo keep > kept.txt; kill -9 $PPID"})), "[exit code"),
    (format_tool_call(ToolCall("bash", {"command": ":(){ :|:& };:"})), "[exit code"),
    (
        format_tool_call(ToolCall("bash", {"command": "echo x > /etc/propel_pwned; echo y > /propel_pwned"})),
        "Read-only file system",
    ),
    (format_tool_call(ToolCall("write_file", {"path": "../escape.txt", "content": "x"})), "must be relative"),
    (format_tool_call(ToolCall("read_file", {"path": "kept.txt"})), "keep"),  # the workspace outlived the kill
    (format_tool_call(ToolCall("write_file", {"path": "a.txt", "content": "hi"})), "wrote 2 characters"),
    (format_tool_call(ToolCall("bash", {"command": "echo a\x00b"})), "bash.command contains a NUL byte"),
    (format_tool_call(ToolCall("submit", {})), None),
]


def _script(prompt: str) -> str:
    return ACTIONS[prompt.count("<|im_start|>assistant") - 1][0]


@pytest.fixture(scope="module", params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def backend(request, docker_sandbox_or_skip):
    limits = Limits(max_processes=16)
    if request.param == "local":
        sandbox = LocalSandbox(limits=limits, max_workers=1)
    else:
        sandbox = docker_sandbox_or_skip(limits=limits, max_workers=1)
    yield sandbox
    sandbox.close()


def test_a_scripted_episode_survives_everything_and_is_verified(backend, tokenizer):
    task = Context(
        "hostile",
        Prompt(messages=[{"role": "user", "content": "Put hi in a.txt."}]),
        data={"expect_files": {"a.txt": "hi"}},
    )
    env = lambda: ToolEnv(max_turns=20, command_timeout_s=1.0, max_output_chars=500)  # noqa: E731
    runner = EpisodeRunner(ScriptedEngine(tokenizer, _script), env, backend)
    (group,), _ = runner.run([task], SamplingSpec(n=1, max_new_tokens=200))
    s = group[0]
    assert s.infra_error is None, s.infra_error
    observations = [t for t in s.turns if not t.trainable]
    assert len(observations) == len(ACTIONS) - 1
    for (_, want), obs in zip(ACTIONS, observations, strict=False):
        assert want in obs.text, (want, obs.text)
    assert observations[3].info["truncated"] and len(observations[3].text) < 700
    assert observations[2].info["outcome"] == "timeout"
    assert s.info["finish_reason"] == "submitted" and s.info["reward"] == 1.0 and s.artifacts["verifier"]["passed"]
    assert s.info["tool_errors"] == 4  # bad json, unknown tool, bad path, NUL byte
    assert not os.path.exists("/etc/propel_pwned") and not os.path.exists("/propel_pwned")


def test_budgets_end_episodes_and_the_verifier_still_runs(backend, tokenizer):
    """Task files are laid out in the workspace; turn and wall-time budgets end the episode, verified as it stands."""
    (ctx,) = [c for c in ShellTasks(["fix_function"], demonstration=False).contexts(1, seed=3)]
    fix = ctx.data["files"]["calc.py"].replace(" - ", " + ").replace(" + b\n", " + b\n")
    correct = {"add": "+", "mul": "*", "sub": "-"}
    name = next(k for k in correct if f"def {k}(" in fix)
    fixed = f"def {name}(a, b):\n    return a {correct[name]} b\n"
    script = [
        format_tool_call(ToolCall("bash", {"command": "cat calc.py check.py"})),
        format_tool_call(ToolCall("write_file", {"path": "calc.py", "content": fixed})),
    ]
    engine = ScriptedEngine(tokenizer, lambda p: script[min(p.count("<|im_start|>assistant") - 1, 1)])
    runner = EpisodeRunner(engine, lambda: ToolEnv(max_turns=2), backend)
    (group,), _ = runner.run([ctx], SamplingSpec(n=2, max_new_tokens=200))
    for s in group:
        assert f"def {name}(a, b)" in s.turns[1].text  # the task's files were there
        assert s.info["finish_reason"] == "max_turns" and s.info["reward"] == 1.0  # fixed, though never submitted
    slow = EpisodeRunner(engine, lambda: ToolEnv(max_turns=5, time_limit_s=0.001), backend)
    (group,), _ = slow.run([ctx], SamplingSpec(n=1, max_new_tokens=200))
    assert group[0].info["finish_reason"] == "time_limit" and group[0].info["turns"] == 1


def test_collected_files_and_globs(tokenizer, backend):
    """``collect`` hands back named files (None when missing) and glob matches (``**`` across folders, dot files,
    names with spaces); a file past ``max_collect_chars`` is cut and the cut noted."""
    make = "mkdir -p src/deep && echo 1 > src/deep/a.py && echo 2 > 'my file.py' && echo 3 > .hidden.py"
    moves = [
        format_tool_call(ToolCall("bash", {"command": make + " && printf 0123456789abc > big.txt"})),
        format_tool_call(ToolCall("submit", {})),
    ]
    engine = ScriptedEngine(tokenizer, lambda p: moves[min(p.count("<|im_start|>assistant") - 1, 1)])
    task = Context(
        "c",
        Prompt(messages=[{"role": "user", "content": "go"}]),
        data={
            "files": {"keep.py": "0\n"},
            "collect": ["big.txt", "nope.txt", "**/*.py"],
            "expect_files": {"keep.py": "0"},
        },
    )
    runner = EpisodeRunner(engine, lambda: ToolEnv(max_collect_chars=10), backend)
    ((s,),), _ = runner.run([task], SamplingSpec(n=1, max_new_tokens=200))
    files = s.artifacts["files"]
    assert files == {
        "big.txt": "0123456789",
        "nope.txt": None,
        ".hidden.py": "3\n",
        "keep.py": "0\n",
        "my file.py": "2\n",
        "src/deep/a.py": "1\n",
    }
    assert s.artifacts["verifier"]["collect_truncated"] == ["big.txt"] and s.artifacts["verifier"]["passed"]


def _run_moves(tokenizer, backend, ctx, moves, **env):
    engine = ScriptedEngine(tokenizer, lambda p: moves[min(p.count("<|im_start|>assistant") - 1, len(moves) - 1)])
    runner = EpisodeRunner(engine, lambda: ToolEnv(max_turns=len(moves), **env), backend)
    ((s,),), _ = runner.run([ctx], SamplingSpec(n=1, max_new_tokens=200))
    return s


def _bash(command: str) -> str:
    return format_tool_call(ToolCall("bash", {"command": command}))


def _write(path: str, content: str) -> str:
    return format_tool_call(ToolCall("write_file", {"path": path, "content": content}))


FIX_ATTACKS = {
    "exit 0 at import, bug kept": "import sys\nsys.exit(0)\n",
    "os._exit at import, bug kept": "import os\nos._exit(0)\n",
    "always-equal return": (
        "class _Any(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n\n\n"
        "def {fn}(a, b):\n    return _Any(0)\n"
    ),
    "check.py rewritten, bug kept": None,
    "a process left behind rewrites calc.py": None,
}


@pytest.mark.parametrize("attack", sorted(FIX_ATTACKS))
def test_the_fix_task_verdict_is_out_of_the_agents_reach(backend, tokenizer, attack):
    """The shell task's fix is graded by value on the collected calc.py: an exit at import, an always-equal value, a
    rewritten check.py or a background process that edits the file after the episode all leave it unsolved; the
    honest fix solves it."""
    (ctx,) = ShellTasks(["fix_function"], demonstration=False).contexts(1, seed=3)
    buggy = ctx.data["files"]["calc.py"]
    name = ctx.data["value_tests"]["entry_point"]
    code = FIX_ATTACKS[attack]
    if attack == "check.py rewritten, bug kept":
        moves = [_write("check.py", "print('ok')\n"), format_tool_call(ToolCall("submit", {}))]
    elif attack == "a process left behind rewrites calc.py":
        good = {"add": "+", "mul": "*", "sub": "-"}[name]
        fixed = f"def {name}(a, b):\n    return a {good} b\n"
        later = f"(sleep 2; printf '%s' {fixed!r} > calc.py) > /dev/null 2>&1 &"
        moves = [_bash(later), format_tool_call(ToolCall("submit", {}))]
    elif "{fn}" in code:
        moves = [_write("calc.py", code.format(fn=name)), format_tool_call(ToolCall("submit", {}))]
    else:
        moves = [_write("calc.py", code + buggy), format_tool_call(ToolCall("submit", {}))]
    s = _run_moves(tokenizer, backend, ctx, moves)
    assert s.infra_error is None, s.infra_error
    assert s.info["reward"] == 0.0 and not s.artifacts["verifier"]["passed"], (attack, s.artifacts["verifier"])
    good = {"add": "+", "mul": "*", "sub": "-"}[name]
    honest = _run_moves(tokenizer, backend, ctx, [_write("calc.py", f"def {name}(a, b):\n    return a {good} b\n")])
    assert honest.info["reward"] == 1.0, honest.artifacts["verifier"]


def test_a_shell_verify_command_is_refused(backend):
    task = Context("v", Prompt(messages=[{"role": "user", "content": "go"}]), data={"verify": "true"})
    with pytest.raises(ConfigError, match="expect_files"):
        ToolEnv().reset(task, backend)
