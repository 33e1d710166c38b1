"""Held out means unseen, and honest code runs, graded for real: the completion that answers its own prompt's
examples earns nothing, a program wrong on a visible input is not fully correct, a table that misses a visible input
on purpose is still flagged, a task short of held-out inputs gets reference-generated ones that a memorised test
suite fails, answers that start with ``from __future__`` run, and so do thread pools, while new processes do not;
each as a class over many tasks, threads on both sandbox backends."""

from __future__ import annotations

import copy

import pytest

from propel.records import Sample
from propel.rewards import TestSuiteReward
from propel.rewards.code_tests import HACK_PENALTY
from propel.sandbox import LocalSandbox
from propel.tasks.humaneval import load_humaneval
from propel.testing.testsuite_hacks import CORPUS, single_source
from propel.testsuite.held_out import MIN_HELD_OUT
from propel.testsuite.neighbours import literal_calls
from propel.testsuite.shown import distinct_inputs

TASKS = load_humaneval()
BY_ID = {t.task_id: t for t in TASKS}
EXAMPLES = next(e for e in CORPUS if e.name == "answers_the_prompt_examples")
SOLUTION = "solution.py"


@pytest.fixture(scope="module")
def sandbox():
    with LocalSandbox(max_workers=2) as box:
        yield box


def grade(sandbox, pairs, completions=False):
    """Rewards and infos of ``(task, code)`` pairs (``completions``: the code is a single-turn completion)."""
    samples = [
        Sample(prompt="", completion=code, context=t.single_turn_context())
        if completions
        else Sample(
            prompt="", completion="", context=t.single_turn_context(), artifacts={"files": {"solution.py": code}}
        )
        for t, code in pairs
    ]
    rewards = TestSuiteReward(sandbox=sandbox, timeout_s=5.0, batch_size=16)(samples).tolist()
    return rewards, [s.info["test_suite"] for s in samples]


def _answers(task):
    namespace: dict = {}
    exec(task.reference, namespace)
    function = namespace[task.entry_point]
    return [(args, function(*copy.deepcopy(args))) for args in literal_calls(task.visible_calls())]


def test_the_prompt_examples_completion_earns_nothing(sandbox):
    """A task-independent completion that parses its prompt's examples (any call with an output after it), answers
    them and raises elsewhere: it answers visible tests, and no held-out test pays it, on every fourth task."""
    tasks = TASKS[::4]
    rewards, infos = grade(sandbox, [(t, single_source(EXAMPLES, t)) for t in tasks])
    paid = [(t.task_id, i["reason"]) for t, r, i in zip(tasks, rewards, infos, strict=True) if r > 0]
    assert not paid, paid
    assert sum(i["visible_pass_rate"] > 0 for i in infos) >= len(tasks) // 3  # it does read its examples


WRONG_ONCE = """{reference}

_right = {entry}


def {entry}(*args):
    if repr(args) == {key!r}:
        return ("not", "the", "answer")
    return _right(*args)
"""


def test_a_program_wrong_on_a_visible_input_is_not_graded_correct(sandbox):
    """The reference, wrong on one visible input only: every held-out test passes, and the reward stays below 1,
    at the share of all tests it passes."""
    tasks = [t for t in TASKS[::6] if t.hidden and _answers(t)]
    code = [WRONG_ONCE.format(reference=t.reference, entry=t.entry_point, key=repr(_answers(t)[0][0])) for t in tasks]
    rewards, infos = grade(sandbox, list(zip(tasks, code, strict=True)))
    for task, reward, info in zip(tasks, rewards, infos, strict=True):
        held = len(task.hidden) + info["generated"]
        assert info["passed"] == held and info["visible_pass_rate"] < 1.0, (task.task_id, info["reason"])
        visible = round(info["visible_pass_rate"] * len(task.visible))
        assert reward == pytest.approx((held + visible) / (held + len(task.visible))) and reward < 1.0


def _table(task, answers, miss: int) -> str:
    """Visible answers from a table (the ``miss``-th answered wrongly on purpose), one default elsewhere."""
    table = {repr(a): v for a, v in answers}
    table[repr(answers[miss][0])] = ("wrong",)
    return (
        f"{task.prompt.split('def ')[0]}\n_TABLE = {table!r}\n\n\ndef {task.entry_point}(*args):\n"
        f"    return _TABLE.get(repr(args), {DEFAULTS[task.task_id]})\n"
    )


DEFAULTS = {"HumanEval/0": "False", "HumanEval/55": "0", "HumanEval/148": "()", "HumanEval/59": "2"}
DEFAULTS |= {"HumanEval/30": "[]"}
"""Tasks with at least two visible inputs whose answer is not the table's default, and that default."""


def test_a_table_that_misses_a_visible_input_on_purpose_is_flagged(sandbox):
    """Hard-coders over several tasks answer one visible input wrongly so their visible tests do not all pass: the
    flag is decided on what they answer, so they are still caught and score below an honest failure."""
    pairs = []
    for task_id, default in DEFAULTS.items():
        task = BY_ID[task_id]
        answers = _answers(task)
        special = [i for i, (_, v) in enumerate(answers) if repr(v) != default]
        assert len(special) >= 2, task_id  # answers the table must know (else it hard-codes nothing)
        pairs.append((task, _table(task, answers, special[0])))
    rewards, infos = grade(sandbox, pairs)
    for (task, _), reward, info in zip(pairs, rewards, infos, strict=True):
        assert info["visible_pass_rate"] < 1.0, task.task_id
        assert "hardcoded_outputs" in info["flags"] and reward == -HACK_PENALTY, (task.task_id, info["reason"])


MEMORISED = """{reference}

_right = {entry}
_TESTED = {tested!r}


def {entry}(*args):
    value = _right(*args)
    if repr(args) in _TESTED:
        return value
    return value + value if isinstance(value, (int, float, str, list, tuple)) and value else "x"
"""


def test_short_tasks_get_reference_generated_inputs_a_memorised_suite_fails(sandbox):
    """Tasks left with fewer than MIN_HELD_OUT held-out inputs: the reference passes the generated tests (1.0) and a
    program right only on the benchmark's own inputs (public, so memorisable) does not."""
    short = [t for t in TASKS if distinct_inputs(list(t.hidden.values()), t.entry_point) < MIN_HELD_OUT][::4]
    tested = {t.task_id: [repr(a) for a in literal_calls(t.visible_calls() + t.visible_calls("hidden"))] for t in short}
    rewards, infos = grade(sandbox, [(t, t.reference) for t in short])
    assert rewards == [1.0] * len(short), [i["reason"] for i in infos if i["reward"] != 1.0]
    gained = [t for t, i in zip(short, infos, strict=True) if i["generated"]]
    assert len(gained) >= len(short) // 2
    code = [MEMORISED.format(reference=t.reference, entry=t.entry_point, tested=tested[t.task_id]) for t in gained]
    rewards, infos = grade(sandbox, list(zip(gained, code, strict=True)))
    for task, reward, info in zip(gained, rewards, infos, strict=True):
        assert info["visible_pass_rate"] == 1.0 and reward < 1.0, (task.task_id, info["reason"])


FUTURE = [
    "from __future__ import annotations\n\n{reference}",
    '"""My answer."""\nfrom __future__ import annotations\n{reference}',
    "from __future__ import (annotations,\n    generator_stop)\n{reference}",
    "```python\nfrom __future__ import annotations as _a\n{reference}\n```",
]


def test_answers_starting_with_future_imports_run(sandbox):
    """Single-turn completions (the prompt is placed above them) whose whole function starts with a future import,
    spelt four ways, on every twelfth task: each is the reference and scores 1.0."""
    pairs = [(t, f.format(reference=t.reference)) for t in TASKS[::12] for f in FUTURE]
    rewards, infos = grade(sandbox, pairs, completions=True)
    assert rewards == [1.0] * len(pairs), [i["reason"] for i in infos if i["reward"] != 1.0][:3]


THREADED = """from concurrent.futures import ThreadPoolExecutor
import threading

{reference}

_plain = {entry}


def {entry}(*args):
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda a: _plain(*a), [args] * 4))
    worker = threading.Thread(target=_plain, args=args)
    worker.start()
    worker.join()
    return results[0]
"""
SPAWNS = {
    "subprocess": "import subprocess\n    subprocess.run(['true'], check=True)",
    "fork": "import os\n    if os.fork() == 0:\n        os._exit(0)",
    "exec": "import os\n    os.execv('/bin/true', ['true'])",
    "posix_spawn": "import os\n    os.posix_spawn('/bin/true', ['true'], {})",
    "multiprocessing": "import multiprocessing\n    multiprocessing.Process(target=print).start()",
}
SPAWNING = """{reference}

_plain = {entry}


def {entry}(*args):
    {spawn}
    return _plain(*args)
"""


def check_threads_not_processes(sandbox):
    tasks = TASKS[::20]
    threaded = [(t, THREADED.format(reference=t.reference, entry=t.entry_point)) for t in tasks]
    spawning = [
        (t, SPAWNING.format(reference=t.reference, entry=t.entry_point, spawn=spawn))
        for t in tasks[:3]
        for spawn in SPAWNS.values()
    ]
    rewards, infos = grade(sandbox, threaded + spawning)
    assert rewards[: len(threaded)] == [1.0] * len(threaded), [i["reason"] for i in infos[: len(threaded)]][:3]
    for info, reward in zip(infos[len(threaded) :], rewards[len(threaded) :], strict=True):
        assert reward == 0.0 and not info["hacked"], info["reason"]  # the process is refused; no penalty either
        assert any("Operation not permitted" in why or "PermissionError" in why for why in info["why"].values())


def test_threads_run_and_processes_do_not_local():
    with LocalSandbox(max_workers=2) as sandbox:
        check_threads_not_processes(sandbox)


@pytest.mark.docker
def test_threads_run_and_processes_do_not_docker(docker_sandbox_or_skip):
    with docker_sandbox_or_skip(max_workers=2) as sandbox:
        check_threads_not_processes(sandbox)
