"""Agent solver trials in real sandbox sessions: a scripted agent solves (or fails) generated code and math tasks, the
domain's own grader judges the files each episode left, and infrastructure failures are rerun, then stop the job."""

from __future__ import annotations

import itertools

import pytest

from propel.domains.code import CodeDomain
from propel.domains.math import MathExpressionDomain
from propel.domains.trials import SolverSpec
from propel.engines.scripted import ScriptedEngine
from propel.engines.tool_calls import ToolCall, format_tool_call
from propel.envs import ToolEnv
from propel.records import Task
from propel.rollouts import AgentSolver
from propel.sandbox import LocalSandbox

SPEC = SolverSpec(n_trials=4, band=(1, 3), max_new_tokens=200)
SUBMIT = format_tool_call(ToolCall("submit", {}))


def write(path: str, content: str) -> str:
    return format_tool_call(ToolCall("write_file", {"path": path, "content": content}))


def agent(first_moves: list[str], shown: int = 0):
    """A scripted agent: episode k's first move is ``first_moves[k]`` (rounds keep episode order), then submit
    (``shown``: assistant turns of a demonstration before the episode's own)."""
    counter = itertools.count()

    def script(prompt: str) -> str:
        if prompt.count("<|im_start|>assistant") > 1 + shown:
            return SUBMIT
        return first_moves[next(counter) % len(first_moves)]

    return script


@pytest.fixture(scope="module")
def sandbox():
    with LocalSandbox(max_workers=2) as box:
        yield box


def code_task(domain: CodeDomain, sandbox) -> Task:
    inputs = "\n".join(str(i) for i in range(10))
    task = domain.parse(
        f"```python\ndef f(x):\n    return x * x + 1\n```\n```input\n{inputs}\n```\n```message\nhm\n```"
    )
    assert domain.validity([task], sandbox)[0].ok
    return task


def test_code_induction_trials_grade_the_solution_file(tokenizer, sandbox):
    domain = CodeDomain(mode="induction", timeout_s=3.0)
    task = code_task(domain, sandbox)
    moves = [
        write("solution.py", "def f(x):\n    return x ** 2 + 1\n"),  # right
        write("solution.py", "def f(x):\n    return [1, 2, 5, 10, 17][x] if x < 5 else 0\n"),  # fits the shown only
        format_tool_call(
            ToolCall("bash", {"command": "printf 'import os\\ndef f(x):\\n    return x*x+1\\n' > solution.py"})
        ),
        format_tool_call(ToolCall("bash", {"command": "python3 -c 'print(17)'"})),  # never writes a solution
    ]
    engine = ScriptedEngine(tokenizer, agent(moves))
    solver = AgentSolver(lambda: ToolEnv(max_turns=3), concurrency=4)
    (trials,), (group,) = solver.trials(domain, engine, [task], SPEC, sandbox, ids=["code-0"])
    assert trials.grades == [True, False, False, False]  # the hidden inputs decide; `import os` fails the allowlist
    assert trials.solve_count == 1 and trials.tokens == sum(s.assistant_length for s in group) > 0
    assert group[0].artifacts["files"] == {"solution.py": "def f(x):\n    return x ** 2 + 1\n"}
    assert group[3].artifacts["files"] == {"solution.py": None}
    prompt = group[0].prompt
    assert "f(4) == 17" in prompt and "f(5)" not in prompt and "solution.py" in prompt  # hidden inputs withheld
    assert all(s.info["finish_reason"] == "submitted" for s in group)


def test_default_route_grades_the_answer_file_with_the_domain(tokenizer, sandbox):
    domain = MathExpressionDomain(solver_format="chat")
    task = Task(domain=domain.name, data={"problem": "What is 2 + 3?", "expression": "2 + 3"})
    assert domain.validity([task], None)[0].ok
    ctx = domain.agent_context(task, "m-0")
    text = ctx.prompt.messages[-1]["content"]
    assert "What is 2 + 3?" in text and "Answer: <number>" in text and "answer.txt" in text
    assert ctx.data["collect"] == ["answer.txt"]
    moves = [
        write("answer.txt", "Answer: 5"),
        write("answer.txt", "Answer: 6"),
        format_tool_call(ToolCall("bash", {"command": 'echo "Answer: $((2 + 3))" > answer.txt'})),  # computed
        write("notes.txt", "Answer: 5"),  # the wrong file
    ]
    engine = ScriptedEngine(tokenizer, agent(moves))
    (trials,), _ = AgentSolver(lambda: ToolEnv(max_turns=3)).trials(domain, engine, [task], SPEC, sandbox, ["m-0"])
    assert trials.grades == [True, False, True, False]
    shown = AgentSolver(lambda: ToolEnv(max_turns=3), demonstration=True)
    engine = ScriptedEngine(tokenizer, agent(moves, shown=2))
    (trials,), (group,) = shown.trials(domain, engine, [task], SPEC, sandbox, ["m-0"])
    assert trials.grades == [True, False, True, False] and "hello.txt" in group[0].prompt  # the solved example


class FlakyEnv(ToolEnv):
    """A ToolEnv whose first ``fail`` resets (over all instances) raise, as a dying sandbox would."""

    resets = itertools.count()
    fail = 0

    def reset(self, context, sandbox=None):
        if next(FlakyEnv.resets) < FlakyEnv.fail:
            raise OSError("sandbox went away")
        return super().reset(context, sandbox)


def test_infra_failures_are_rerun_then_stop_the_job(tokenizer, sandbox):
    domain = MathExpressionDomain(solver_format="chat")
    task = Task(domain=domain.name, data={"problem": "What is 2 + 3?", "expression": "2 + 3"})
    domain.validity([task], None)
    engine = ScriptedEngine(tokenizer, agent([write("answer.txt", "Answer: 5")]))
    FlakyEnv.resets, FlakyEnv.fail = itertools.count(), 3  # 3 of 4 episodes fail once: rerun, then all solve
    (trials,), (group,) = AgentSolver(FlakyEnv, retries=1).trials(domain, engine, [task], SPEC, sandbox, ["m-0"])
    assert trials.grades == [True] * 4 and not any(s.infra_error for s in group)
    FlakyEnv.resets, FlakyEnv.fail = itertools.count(), 10**6  # the sandbox never comes back
    with pytest.raises(
        RuntimeError,
        match=r"4 agent episodes failed outside the policy after 2 retries.*m-0.*"
        r"sandbox went away",
    ):
        AgentSolver(FlakyEnv, retries=2).trials(domain, engine, [task], SPEC, sandbox, ["m-0"])


def test_bad_settings_are_refused():
    with pytest.raises(TypeError, match="must build an AgentEnv"):
        AgentSolver(env=ToolEnv())
    with pytest.raises(ValueError, match="schedule"):
        AgentSolver(ToolEnv, schedule="fast")
