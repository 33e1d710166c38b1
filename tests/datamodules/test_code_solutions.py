"""Single-turn coding rollouts: the completion becomes solution.py (artifacts), validity is 'it parses'; the sample
table shows the test-suite verdict next to the rewards."""

from __future__ import annotations

import torch

from propel.callbacks.samples import SampleTable
from propel.datamodules.code_solutions import CodeSolutionDataModule, CodeSolutionScorer
from propel.records import Sample
from propel.rewards import RewardBreakdown
from propel.tasks.humaneval import HumanEvalTasks


def test_completions_become_solution_files():
    ctx = HumanEvalTasks(task_ids=["HumanEval/2"]).contexts(1)[0]
    good = Sample(
        prompt="", completion="```python\ndef truncate_number(number):\n    return number % 1.0\n```", context=ctx
    )
    bad = Sample(prompt="", completion="```python\ndef truncate_number(number)\n    return\n```", context=ctx)
    CodeSolutionScorer().score([good, bad])
    source = good.artifacts["files"]["solution.py"]
    namespace: dict = {}
    exec(source, namespace)
    assert namespace["truncate_number"](3.5) == 0.5
    assert good.valid and good.info["reason"] == "ok" and good.topic == "HumanEval/2"
    assert not bad.valid and bad.info["reason"].startswith("syntax error")
    data = CodeSolutionDataModule(HumanEvalTasks(), contexts_per_step=3, seed=5)
    assert [c.id for c in data.batch_at(0).contexts] == [c.id for c in data.batch_at(0).contexts]
    assert data.stop == () and not data.scorer.needs_sandbox


def test_sample_table_shows_info_keys():
    s = Sample(prompt="p", completion="c", info={"test_suite": {"reason": "3/5 passed", "flags": ["a", "b"]}})
    table = SampleTable(every_n_steps=1, info_keys=["test_suite.reason", "test_suite.flags", "missing.key"])
    breakdown = RewardBreakdown(torch.tensor([0.5]), {"tests": torch.tensor([0.5])})
    columns, rows = table.rows(3, [s], breakdown)
    assert columns[-4:] == ["tests", "test_suite.reason", "test_suite.flags", "missing.key"]
    assert rows[0][-3:] == ["3/5 passed", "a,b", ""]
