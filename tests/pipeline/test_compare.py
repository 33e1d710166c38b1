"""Base vs trained evaluation summaries side by side, with intervals and the change trained - base in words."""

import json

import pytest

from propel.metrics.intervals import Interval, bootstrap_difference, newcombe, normal_difference
from propel.pipeline.compare import compare, compare_dirs, lift
from propel.pools.summary import diversity_scores, evaluation_summary


def _summary(valid, counts, texts, topics):
    return evaluation_summary(valid, counts, texts, topics, 2, (1, 1))


def test_compare_writes_table_and_plot(tmp_path):
    base = _summary([True, False], [0, None], ["a b c d", "junk"], ["t", None])
    trained = _summary([True, True], [1, 1], ["a b c", "d e f"], ["t", "u"])
    table = compare(base, trained, tmp_path)
    assert "| utility | 0 [0, 0.658] | 1 [0.342, 1] | +1 [" in table
    assert "| solve_count_hist | [1, 0, 0] | [0, 2, 0] |" in table
    assert (tmp_path / "compare.md").read_text() == table
    assert (tmp_path / "solve_counts.png").stat().st_size > 1000
    assert json.loads((tmp_path / "lift.json").read_text())["utility"]["estimate"] == 1.0


def test_lift_is_newcombe_for_rates_and_says_whether_it_is_distinguishable():
    """24 tasks each, validity 0.54 -> 0.29 (the demo's numbers before the floor fix): at this size even a fall of
    25 points is not distinguishable from zero; 20 of 24 valid is."""
    base = _summary([True] * 13 + [False] * 11, [1, 1] + [0] * 11 + [None] * 11, ["x y z"] * 24, [None] * 24)
    trained = _summary([True] * 7 + [False] * 17, [1, 1, 1] + [0] * 4 + [None] * 17, ["x y z"] * 24, [None] * 24)
    changes = lift(base, trained)
    expected = newcombe(7, 24, 13, 24)
    assert changes["valid_rate"]["low"] == pytest.approx(expected.low)
    assert (
        changes["valid_rate"]["high"] == pytest.approx(expected.high) and not changes["valid_rate"]["distinguishable"]
    )
    assert changes["utility"]["estimate"] == pytest.approx(1 / 24)
    assert not changes["utility"]["distinguishable"] and "not distinguishable from zero" in changes["utility"]["words"]
    big = _summary([True] * 20 + [False] * 4, [1] * 20 + [None] * 4, ["x y z"] * 24, [None] * 24)
    assert lift(base, big)["valid_rate"]["distinguishable"]
    assert lift(base, big)["valid_rate"]["words"].startswith(
        "validity (strict: degenerate tasks invalid) rose by +0.292"
    )
    assert "top_topic_rate" not in changes  # no known topic: no rate, no change


def test_compare_dirs_bootstraps_self_bleu_from_the_scores_files(tmp_path):
    base_texts = [f"task number {i} adds {i} and {i + 1}" for i in range(6)]
    trained_texts = ["the same task again and again"] * 5 + ["one other task here"]
    for name, texts in (("base", base_texts), ("trained", trained_texts)):
        folder = tmp_path / name
        folder.mkdir()
        valid = [True] * 6
        summary = _summary(valid, [1] * 6, texts, ["t"] * 6)
        (folder / "summary.json").write_text(json.dumps(summary))
        (folder / "scores.json").write_text(json.dumps(diversity_scores(valid, texts)))
    text = compare_dirs(tmp_path / "base", tmp_path / "trained", tmp_path)
    changes = json.loads((tmp_path / "lift.json").read_text())
    base_scores, trained_scores = (diversity_scores([True] * 6, t)["self_bleu_3"] for t in (base_texts, trained_texts))
    expected = bootstrap_difference(trained_scores, base_scores)
    assert changes["self_bleu_3"]["low"] == pytest.approx(expected.low) and changes["self_bleu_3"]["distinguishable"]
    assert "Self-BLEU-3 rose by" in text
    with pytest.raises(FileNotFoundError, match="propel test"):
        compare_dirs(tmp_path / "nope", tmp_path / "trained", tmp_path)


def test_lift_compares_distinct_3_by_the_two_jackknife_intervals():
    """A collapsed policy (one task repeated) against a diverse base: Distinct-3 falls, distinguishably, and the
    change's interval is the two evaluations' jackknife intervals in quadrature."""
    base_texts = [f"add {i} apples to {2 * i} pears and {i + 7} plums" for i in range(30)]
    trained_texts = ["add 3 apples to 6 pears and 10 plums"] * 27 + base_texts[:3]
    base = _summary([True] * 30, [1] * 30, base_texts, [None] * 30)
    trained = _summary([True] * 30, [1] * 30, trained_texts, [None] * 30)
    change = lift(base, trained)["distinct_3"]
    as_interval = [Interval(s["distinct_3"], *s["intervals"]["distinct_3"]) for s in (trained, base)]
    expected = normal_difference(*as_interval)
    assert change["estimate"] == pytest.approx(trained["distinct_3"] - base["distinct_3"])
    assert change["low"] == pytest.approx(expected.low) and change["high"] == pytest.approx(expected.high)
    assert change["distinguishable"] and change["words"].startswith("Distinct-3 fell by")
    older = {k: v for k, v in base.items() if k != "intervals"} | {"intervals": {}}  # a summary from before
    assert "distinct_3" not in lift(older, trained)


def test_exact_utility_is_the_band_chance_at_the_exact_solve_rate_and_its_change_is_bootstrapped(tmp_path):
    """Per generation: P(lo <= Bin(n, p) <= hi) of a valid task (scipy's binomial, computed here by hand), 0 for an
    invalid one; a valid task without its exact p leaves the metric out rather than counting it as 0."""
    from math import comb

    from propel.pools.summary import exact_utility_values

    def by_hand(p: float, n: int = 8, lo: int = 1, hi: int = 3) -> float:
        return sum(comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(lo, hi + 1))

    valid, ps = [True, True, False, True], [0.05, 0.6, None, 0.0]
    values = exact_utility_values(valid, ps, 8, (1, 3))
    assert values == pytest.approx([by_hand(0.05), by_hand(0.6), 0.0, 0.0])
    assert exact_utility_values([True, False], [float("nan"), None], 8, (1, 3)) is None
    texts = [f"task {i} of {i + 1}" for i in range(4)]
    folders = {}
    for name, us in (("base", values), ("trained", [0.9, 0.8, 0.7, 0.95])):
        summary = evaluation_summary(valid, [1, 5, None, 0], texts, [None] * 4, 8, (1, 3), exact_utility=us)
        assert summary["exact_utility"] == pytest.approx(sum(us) / 4) and summary["intervals"]["exact_utility"]
        folders[name] = tmp_path / name
        folders[name].mkdir()
        (folders[name] / "summary.json").write_text(json.dumps(summary))
        scores = {**diversity_scores(valid, texts), "exact_utility": us}
        (folders[name] / "scores.json").write_text(json.dumps(scores))
    table = compare_dirs(folders["base"], folders["trained"], tmp_path)
    change = json.loads((tmp_path / "lift.json").read_text())["exact_utility"]
    expected = bootstrap_difference([0.9, 0.8, 0.7, 0.95], values)
    assert change["estimate"] == pytest.approx(expected.estimate) and change["low"] == pytest.approx(expected.low)
    assert "| exact_utility |" in table and "strict yield (exact utility: a valid task's in-band chance" in table
    plain = _summary([True], [1], ["a b c"], ["t"])
    assert "exact_utility" not in plain and "exact_utility" not in compare(plain, plain)  # no exact p: no row
