"""A labeled pool too small to fit and validate a probe (fewer rows of a class than folds) is a pipeline outcome, not
a crash: the reward becomes the domain's zero-fit rule, the one ranker that needs no labels, and the summary, the
stage's verdict and the report say why. A domain with no such rule stops with the reason in one line. (Seed 3 of
the demo over seeds labeled 11 valid tasks, 2 in the band, and the pipeline died in the sweep's fold split.)"""

from __future__ import annotations

import json

import pytest

from propel.domains import MathExpressionDomain
from propel.errors import ConfigError
from propel.jobs.probe_job import PROBE_ARTIFACT, ProbeJob, RVPSpec
from propel.pipeline.headline import caveats, what_ran
from propel.pipeline.summary_report import _probe_section
from propel.pipeline.verdicts import probe_verdict
from propel.pools.io import write_part
from propel.probes.competition import RivalSpec
from propel.probes.rivals import RivalRanker, load_ranker
from propel.probes.sweep_spec import SweepSpec
from propel.records import Task


class _NoRule(MathExpressionDomain):
    def zero_fit_score(self, task):
        return None


def _pool(path, positives: int, n: int = 11, domain: str = "math") -> None:
    rows = []
    for i in range(n):
        positive = i < positives
        problem = f"Ann has {i + 2} apples and buys {i + 3} more. How many now?"
        data = {"problem": problem, "expression": f"{i + 2}+{i + 3}", "answer": 2 * i + 5}
        rows.append(
            {
                "id": f"t{i}",
                "group": f"g{i}",
                "domain": domain,
                "task": Task(domain=domain, data=data).to_json(),
                "completion": json.dumps(data),
                "valid": True,
                "reason": "ok",
                "solve_count": 1 if positive else 0,
                "label": int(positive),
                "n_trials": 3,
            }
        )
    write_part(path, rows)


def _job(tmp_path, tiny_model_dir, domain, **kw) -> ProbeJob:
    return ProbeJob(
        pool=str(tmp_path / "pool"),
        domain=domain,
        output_dir=str(tmp_path / "probe"),
        reference_model=str(tiny_model_dir),
        layers=[1],
        poolings=["mean_full"],
        rvp=RVPSpec(contexts=0),
        sweep=SweepSpec(archs=["linear"], balances=["weighted"], seeds=[0], split="stratified_kfold", n_folds=5),
        **kw,
    )


def test_too_few_positives_make_the_zero_fit_rule_the_reward(tmp_path, tiny_model_dir):
    _pool(tmp_path / "pool", positives=2)
    (tmp_path / "probe" / PROBE_ARTIFACT).mkdir(parents=True)  # a probe left by an earlier run into this folder
    with pytest.warns(UserWarning, match="no probe fitted .*the reward is `zero_fit`"):
        summary = _job(tmp_path, tiny_model_dir, MathExpressionDomain()).run()
    assert summary["reward"] == "zero_fit" and summary["rivals"]["unfitted"] is True
    assert summary["rows"] == 11 and summary["positives"] == 2 and summary["selected"] is None
    assert "the smaller class has 2" in summary["rivals"]["skipped"]
    assert summary["probe_artifact"] is None and not (tmp_path / "probe" / PROBE_ARTIFACT).exists()
    assert json.loads((tmp_path / "probe" / "summary.json").read_text()) == summary
    ranker = load_ranker(tmp_path / "probe" / "artifact")
    assert isinstance(ranker, RivalRanker) and ranker.kind == "zero_fit"
    small, large = (Task(domain="math", data={"problem": "p", "expression": "1", "answer": a}) for a in (3, 300))
    assert ranker.score([small, large])[0] > ranker.score([small, large])[1]  # the rule: prefer the smaller answer
    words = probe_verdict(summary)
    assert words.startswith("no probe was fitted (11 labeled valid tasks, 2 in the band") and "`zero_fit`" in words
    assert "No probe was fitted (11 labeled" in _probe_section(summary, tmp_path, None)  # the report's section
    assert any("no probe was fitted" in line and "`zero_fit`" in line for line in caveats({"probe": summary}))
    assert "`probe`: no probe fitted (too few labels) on 11 valid tasks" in what_ran({"probe": summary})


def test_a_domain_without_a_zero_fit_rule_stops_with_the_reason(tmp_path, tiny_model_dir):
    _pool(tmp_path / "pool", positives=1)
    with pytest.raises(ConfigError, match=r"no probe can be fitted \(11 labeled valid tasks, 1 in the band: .*declares "
                       "no zero-fit rule"):  # fmt: skip
        _job(tmp_path, tiny_model_dir, _NoRule()).run()


def test_a_config_that_asks_for_the_probe_or_a_rival_is_answered_as_asked(tmp_path, tiny_model_dir):
    """``rivals.reward: probe`` (or the competition off) cannot be honoured without a probe: refused in one line, not
    swapped for the rule; a rival named there is fitted on every row and becomes the reward."""
    _pool(tmp_path / "pool", positives=2)
    for rivals in (RivalSpec(reward="probe"), RivalSpec(enabled=False)):
        with pytest.raises(ConfigError, match=r"no probe can be fitted .*makes the probe the reward"):
            _job(tmp_path, tiny_model_dir, MathExpressionDomain(), rivals=rivals).run()
    with pytest.warns(UserWarning, match="the reward is `features`"):
        summary = _job(tmp_path, tiny_model_dir, MathExpressionDomain(), rivals=RivalSpec(reward="features")).run()
    assert summary["reward"] == "features" and load_ranker(tmp_path / "probe" / "artifact").kind == "features"
    assert "`features` (as configured)" in probe_verdict(summary)


@pytest.mark.parametrize(
    ("split", "labels", "groups", "short"),
    [
        ("stratified_kfold", [1, 1] + [0] * 9, None, "the smaller class has 2"),
        ("stratified_kfold", [1] * 5 + [0] * 6, None, None),
        ("group_kfold", [1, 0] * 5, ["a", "b", "c", "d"] * 2 + ["a", "b"], "4 distinct groups cannot fill n_folds=5"),
        ("random", [1, 1] + [0] * 9, None, "2 in the smaller class"),
        ("random", [1, 0, 1, 0, 1, 0, 0, 0, 0], None, "got 9 rows"),
        ("random", [1] * 3 + [0] * 8, None, None),
    ],
)
def test_the_shortage_is_named_before_any_split_is_tried(split, labels, groups, short):
    from propel.probes.splits import fold_shortage, make_split

    got = fold_shortage(labels, groups, split=split, n_folds=5)
    assert (got is None) == (short is None) and (short is None or short in got), got
    if got is not None and split != "random":  # the folds themselves refuse with the same words
        with pytest.raises(ValueError, match=short):
            make_split(labels, groups, split=split, n_folds=5)
