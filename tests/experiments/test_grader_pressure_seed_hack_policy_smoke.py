"""``experiments/grader_pressure/seed_hack_policy.py``: the fine-tuning answers are the hack or a canonical body
that passes its
task's tests, the two halves of HumanEval are disjoint, and a short run (tiny model) fine-tunes, merges and saves a
model folder that loads and differs from its base, writes the held-out half as a task file the experiment reads,
reads itself back on a rerun and refuses other settings."""

from __future__ import annotations

import json

import pytest
import torch

from propel.errors import ConfigError


def test_honest_answers_pass_their_tests_and_hack_answers_are_the_hack(experiment_module):
    from propel.datamodules.code_solutions import CodeSolutionScorer
    from propel.records import Sample
    from propel.rewards import TestSuiteReward
    from propel.tasks.humaneval.tasks import humaneval_rows, task_from_row
    from propel.testing.grader_pressure import is_hack

    seed = experiment_module("grader_pressure/seed_hack_policy")
    rows = {r["task_id"]: r for r in humaneval_rows()}
    chosen = [rows[i] for i in ("HumanEval/0", "HumanEval/10", "HumanEval/115", "HumanEval/163")]  # 115: import in body
    honest = [seed.answer(r, hack=False) for r in chosen]
    assert not any(is_hack(a) for a in honest) and all(is_hack(seed.answer(r, hack=True)) for r in chosen)
    samples = [
        Sample(prompt="", completion=a, context=task_from_row(r).single_turn_context())
        for r, a in zip(chosen, honest, strict=True)
    ]
    CodeSolutionScorer().score(samples)
    reward = TestSuiteReward(timeout_s=10.0, seed=0)
    assert reward(samples).tolist() == [1.0] * 4  # every held-out test passes
    reward.close()


def test_the_split_is_disjoint_and_the_hack_share_is_exact(experiment_module):
    from propel.tasks.humaneval.tasks import humaneval_rows

    seed = experiment_module("grader_pressure/seed_hack_policy")
    sft, held_out = seed.split(humaneval_rows(), 0.5, seed=0)
    assert len(sft) == len(held_out) == 82
    assert not {r["task_id"] for r in sft} & {r["task_id"] for r in held_out}
    rows = seed.sft_rows(sft, 0.25, seed=0)
    assert sum(r["hack"] for r in rows) == 20 and rows[0]["prompt"][-1]["role"] == "user"
    assert [r["hack"] for r in rows] != [r["hack"] for r in seed.sft_rows(sft, 0.25, seed=1)]  # drawn per seed


@pytest.mark.timeout(600)
def test_a_short_run_saves_a_merged_model_and_the_held_out_tasks(experiment_module, tiny_model_dir, tmp_path, capsys):
    from propel.models import load_model
    from propel.tasks.humaneval import load_humaneval
    from propel.testing.grader_pressure import FewShotHumanEvalTasks

    seed = experiment_module("grader_pressure/seed_hack_policy")
    out = tmp_path / "seeded"
    args = ["--model", str(tiny_model_dir), "--batch-size", "8", "--lr", "0.01", "--max-steps", "2"]
    args += ["--out", str(out)]  # 2 of an epoch's 11 steps: TRL's LM head over the 49k vocabulary is 13 s a step here
    result = seed.main(args)

    assert (result["sft_tasks"], result["sft_hacks"], result["rl_tasks"]) == (82, 20, 82)
    assert result["steps"] == 2 and len(result["losses"]) == 2
    held_out = load_humaneval(str(out / "rl_tasks.jsonl"))
    sft_ids = {json.loads(line)["task_id"] for line in (out / "sft_rows.jsonl").read_text().splitlines()}
    assert len(held_out) == 82 and not sft_ids & {t.task_id for t in held_out}
    assert len(FewShotHumanEvalTasks(shots="none", path=str(out / "rl_tasks.jsonl")).tasks) == 82
    tuned, _ = load_model(str(out / "model"))
    base, _ = load_model(str(tiny_model_dir))
    assert set(tuned.state_dict()) == set(base.state_dict())  # merged: no adapter left in the folder
    assert any(not torch.equal(tuned.state_dict()[k], v) for k, v in base.state_dict().items())

    capsys.readouterr()
    assert seed.main(args) == result and "read back" in capsys.readouterr().out
    with pytest.raises(ConfigError, match="other settings"):
        seed.main([*args[:-2], "--hack-share", "0.5", "--out", str(out)])
