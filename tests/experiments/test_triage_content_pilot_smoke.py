"""``experiments/triage_content/pilot.py``: its grading pays an answer that states the runbook and nothing for an
empty one on every variant's tickets (seconds), and a tiny-model run writes one table row per variant. The measured
table is the pilot's own, committed under ``docs/experiments/triage_content_pilot/``."""

from __future__ import annotations

import json

import pytest

from propel.records import Sample
from propel.tasks.triage import TriageTickets


@pytest.mark.parametrize("variant", ["default", "gold_only_list"])
def test_the_pilot_grades_the_runbook_stated_and_nothing_for_an_empty_answer(experiment_module, variant):
    exp = experiment_module("triage_content/pilot")
    distractors, opening = exp.VARIANTS[variant]
    prefix = exp.OPENINGS[opening]
    ctx = TriageTickets(split="eval", distractors=distractors, answer_prefix=prefix).contexts(1, seed=0)[0]
    steps = ctx.data["gold_steps"]
    numbered = prefix.endswith("1. ")
    body = " ".join(f"{i}. {s}" if i > 1 or not numbered else s for i, s in enumerate(steps, start=1))
    honest = body + '", "citations": [], "confidence": 0.5, "escalate": ' + json.dumps(ctx.data["escalate"]) + "}"
    empty = '", "citations": [], "confidence": 0.5, "escalate": false}'
    resolution, fmt = exp.grade([Sample(prompt="", completion=c, context=ctx) for c in (honest, empty)])
    assert resolution[0] == pytest.approx(1.0) and resolution[1] == 0.0
    assert fmt[0] > 0 and fmt[1] > 0  # both parse: the prefix is read in front of the completion


def test_a_tiny_model_run_writes_a_row_per_variant(experiment_module, tiny_model_dir, tmp_path):
    exp = experiment_module("triage_content/pilot")
    argv = ["--model", str(tiny_model_dir), "--tickets", "2", "--samples", "2", "--max-new-tokens", "4"]
    rows = exp.main([*argv, "--variants", "default", "gold_only", "--out", str(tmp_path)])
    assert [r["variant"] for r in rows] == ["default", "gold_only"]
    for r in rows:
        assert r["answers"] == 4 and 0 <= r["resolution_above_0"] <= 4
        assert r["share_95"][0] <= r["share"] <= r["share_95"][1]
    saved = json.loads((tmp_path / "pilot.json").read_text())
    assert saved["rows"] == rows and saved["settings"]["tickets"] == 2
    assert "| gold_only | 0 |" in (tmp_path / "report.md").read_text()
