"""The report's verdicts follow the numbers: each sentence flips when the numbers do."""

from __future__ import annotations

from propel.pipeline.verdicts import change, evaluate_verdict, grpo_verdict, pool_verdict, probe_verdict


def test_probe_verdict_compares_with_the_logistic_baseline():
    def summary(probe, base):
        return {"selected": {"test_balanced_accuracy": probe}, "logistic_baseline": {"test_balanced_accuracy": base}}

    assert probe_verdict(summary(0.61, 0.64)).startswith("the probe is not better than the logistic baseline")
    assert probe_verdict(summary(0.70, 0.64)).startswith("the probe beats the logistic baseline")
    assert "chance is 0.5" in probe_verdict(summary(0.52, 0.50))


def test_grpo_verdict_names_reward_and_validity_moves():
    up = {"reward_first5_mean": -0.5, "reward_last5_mean": 0.1, "valid_rate_start": 0.4, "valid_rate_end": 0.2}
    assert grpo_verdict(up) == ("the mean reward rose (first 5 steps -0.5, last 5 0.1); validity fell (0.4 -> 0.2).")
    down = {"reward_first5_mean": 0.3, "reward_last5_mean": 0.1, "valid_rate_start": 0.4, "valid_rate_end": 0.5}
    assert "reward fell" in grpo_verdict(down) and "validity rose (0.4 -> 0.5)" in grpo_verdict(down)
    flat = {**down, "valid_rate_end": 0.4}
    assert "validity held (0.4 -> 0.4)" in grpo_verdict(flat)


def test_utility_change_within_the_interval_is_called_unchanged():
    assert change("utility", 0.10, 0.15, 24, 24).startswith("utility unchanged within the interval")
    assert change("utility", 0.10, 0.60, 200, 200).startswith("utility rose")
    assert change("validity", 0.50, 0.20, 400, 400).startswith("validity fell")
    base = {"tasks": 24, "utility": 0.08, "valid_rate": 0.5}
    trained = {"tasks": 24, "utility": 0.12, "valid_rate": 0.05}
    text = evaluate_verdict({"base": base, "trained": trained})
    assert "utility (in-band share of all generations) unchanged within the interval" in text
    assert "validity fell (0.5 -> 0.05" in text
    assert evaluate_verdict({"base": base}).startswith("only the base policy")


def test_pool_verdict_flags_a_pool_without_positives():
    assert "no positive" in pool_verdict({"tasks": 24, "valid": 9, "positives": 0})
    assert "too few positives" in pool_verdict({"tasks": 240, "valid": 80, "positives": 6})
    assert pool_verdict({"tasks": 240, "valid": 80, "positives": 14}) == "80 valid tasks of 240, 14 in the band."


def test_evaluate_verdict_states_the_interval_of_the_change_when_the_stage_computed_it():
    from propel.pipeline.compare import lift
    from propel.pools.summary import evaluation_summary

    base = evaluation_summary([True] * 13 + [False] * 11, [0] * 13 + [None] * 11, ["a"] * 24, [None] * 24, 2, (1, 1))
    trained = evaluation_summary([True] * 7 + [False] * 17, [0] * 7 + [None] * 17, ["a"] * 24, [None] * 24, 2, (1, 1))
    # the demo's numbers before the floor fix (0.54 -> 0.29 on 24 tasks each): Newcombe's interval of the change
    # (-0.479 to +0.0265) does not exclude zero at this size
    text = evaluate_verdict({"base": base, "trained": trained, "lift": lift(base, trained)})
    assert "validity (strict: degenerate tasks invalid) changed by -0.25 (95% interval -0.479 to +0.0265): not" in text
    assert "utility (in-band share of all generations) changed by +0 (95% interval" in text


def _interval(estimate, low, high):
    return {"estimate": estimate, "low": low, "high": high, "confidence": 0.95}


def test_probe_verdict_with_held_out_intervals_says_chance_when_the_interval_holds_it():
    held = {
        "rows": {"positives": 11, "negatives": 74},
        "probe": {
            "balanced_accuracy": 0.528,
            "vs_chance": _interval(0.028, -0.12, 0.17),
            "vs_logistic": _interval(0.045, -0.15, 0.22),
            "vs_length_only": _interval(-0.2, -0.35, -0.05),
        },
    }
    text = probe_verdict({"held_out": held, "selected": {"test_balanced_accuracy": 0.528}})
    assert text.startswith("the probe is not distinguishable from chance (held-out balanced accuracy 0.528")
    assert "11 positive and 74 negative held-out rows" in text
    assert "is not distinguishable from logistic regression (+0.045" in text
    assert "is below length alone (-0.2" in text and "beats" not in text
    held["probe"]["vs_chance"] = _interval(0.25, 0.1, 0.38)
    held["probe"]["vs_logistic"] = _interval(0.12, 0.02, 0.2)
    text = probe_verdict({"held_out": held})
    assert text.startswith("the probe is above chance") and "beats logistic regression (+0.12" in text
