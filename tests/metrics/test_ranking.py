import numpy as np
import pytest

from propel.metrics.ranking import best_pick_lift


def test_lift_is_the_top_picks_utility_minus_the_groups_mean():
    keys, lifts = best_pick_lift(["a", "a", "a", "b", "b"], [0.1, 0.9, 0.5, 2.0, 1.0], [0.0, 0.6, 0.3, 0.2, 0.4])
    assert keys == ["a", "b"]
    np.testing.assert_allclose(lifts, [0.6 - 0.3, 0.2 - 0.3])


def test_ties_for_the_top_are_averaged_and_small_groups_dropped():
    keys, lifts = best_pick_lift(["a", "a", "a", "c"], [1.0, 1.0, 0.0, 5.0], [1.0, 0.0, 0.5, 1.0])
    assert keys == ["a"]  # "c" has one item: nothing to pick between
    np.testing.assert_allclose(lifts, [0.5 - 0.5])


def test_a_random_scorer_has_no_lift_on_average_and_the_oracle_the_most():
    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(400), 6)
    u = rng.random(groups.size)
    _, random_lift = best_pick_lift(groups, rng.random(groups.size), u)
    _, oracle_lift = best_pick_lift(groups, u, u)
    assert abs(random_lift.mean()) < 0.03
    assert oracle_lift.mean() > 0.3 and (oracle_lift >= 0).all()


def test_lengths_must_agree():
    with pytest.raises(ValueError, match="differ in length"):
        best_pick_lift(["a"], [1.0, 2.0], [0.0])
