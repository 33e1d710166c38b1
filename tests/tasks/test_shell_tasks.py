"""The built-in task family: deterministic, and each kind's verdict (computed outside the workspace, on the files the
episode left) passes a solution and fails otherwise (editing the provided check does not pass)."""

from __future__ import annotations

import re

import pytest

from propel.envs.verdict import needed_files, verdict
from propel.sandbox import Job, LocalSandbox
from propel.tasks.shell import DEMONSTRATION, KINDS, ShellTasks


def _solve(ctx) -> str:
    text = ctx.prompt.messages[-1]["content"]
    kind = ctx.data["kind"]
    if kind == "create_file":
        name, word = re.findall(r"named (\S+) that contains exactly the word (\w+)", text)[0]
        return f"echo {word} > {name}"
    if kind == "copy_line":
        name = re.findall(r"into a new file (\S+)\.", text)[0]
        return f"head -n 1 input.txt > {name}"
    return "sed -i 's/return a [-+*] b/return a OP b/' calc.py".replace(
        "OP", {"add": "+", "mul": "*", "sub": "-"}[re.findall(r"def (\w+)", ctx.data["files"]["calc.py"])[0]]
    )


def test_contexts_are_deterministic_with_a_demonstration():
    a, b = ShellTasks().contexts(6, seed=4), ShellTasks().contexts(6, seed=4)
    assert a == b and a != ShellTasks().contexts(6, seed=5)
    assert a[0].prompt.messages[: len(DEMONSTRATION)] == DEMONSTRATION
    assert ShellTasks(demonstration=False).contexts(1)[0].prompt.messages[0]["role"] == "user"
    with pytest.raises(ValueError, match="kinds"):
        ShellTasks(["nope"])


@pytest.mark.parametrize("kind", KINDS)
def test_the_verdict_passes_a_solution_and_nothing_else(kind):
    ctx = ShellTasks([kind]).contexts(1, seed=2)[0]
    names = needed_files(ctx.data)
    with LocalSandbox(max_workers=1) as sandbox:
        for solution, want in (("true", False), ("echo 'assert True' > check.py", False), (_solve(ctx), True)):
            with sandbox.session() as session:
                if ctx.data["files"]:
                    session.run(Job(command=["true"], files=ctx.data["files"]))
                session.run(Job(command=["bash", "-c", solution]))
                files = {}
                for name in names:
                    read = session.run(Job(command=["cat", name]))
                    files[name] = read.stdout if read.ok else None
            assert verdict(ctx.data, files, [], sandbox)["passed"] is want, (kind, solution)
