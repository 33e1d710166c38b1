"""The oracle reward: a valid task's exact band utility (``solve_probabilities`` + ``band_utility``), the floor
for invalid tasks, and a clear refusal where the domain has no answer text."""

import pytest

from propel.domains.exact_trials import band_utility, solve_probabilities
from propel.domains.math.expression_domain import MathExpressionDomain
from propel.domains.trials import SolverSpec
from propel.engines.factory import make_engine
from propel.errors import ConfigError
from propel.records import Sample
from propel.rewards.exact_utility import ExactUtilityReward
from propel.rewards.reward import RewardContext
from propel.rollouts import GeneratorScorer


def _samples(domain, completions):
    samples = [Sample("p", c) for c in completions]
    GeneratorScorer(domain).score(samples)
    return samples


def test_valid_tasks_get_their_exact_band_utility_and_invalid_ones_the_floor(tiny_model, tokenizer):
    model, _ = tiny_model
    engine = make_engine("hf", "tiny", model=model, tokenizer=tokenizer)
    domain = MathExpressionDomain(solver_format="few_shot")
    samples = _samples(
        domain,
        [
            " Tom has 3 apples and buys 4. How many apples does he have?\nExpression: 3 + 4",
            " not a task",
            " A box holds 12 pens; 5 are taken. How many pens are left?\nExpression: 12 - 5",
        ],
    )
    assert [s.valid for s in samples] == [True, False, True]
    solver = SolverSpec(n_trials=8, band=(0, 2))
    reward = ExactUtilityReward(domain, solver, engine=engine, floor=-2.0)
    got = reward(samples)
    ps = solve_probabilities(domain, [samples[0].task, samples[2].task], engine)
    assert got[1] == -2.0
    assert got[0].item() == pytest.approx(band_utility(ps[0], 8, (0, 2)), abs=1e-6)
    assert got[2].item() == pytest.approx(band_utility(ps[1], 8, (0, 2)), abs=1e-6)
    assert samples[0].info["exact_p"] == pytest.approx(ps[0])
    assert reward.step_stats()["mean_p"] == pytest.approx(sum(ps) / 2)


def test_refuses_a_domain_without_answer_text_and_a_floor_at_or_above_zero(tiny_model, tokenizer):
    model, _ = tiny_model
    engine = make_engine("hf", "tiny", model=model, tokenizer=tokenizer)
    chat = MathExpressionDomain(solver_format="chat")
    samples = _samples(chat, [" Tom has 3 apples and buys 4. How many apples does he have?\nExpression: 3 + 4"])
    with pytest.raises(ValueError, match="no answer text"):
        ExactUtilityReward(chat, engine=engine)(samples)
    with pytest.raises(ConfigError, match="floor must be below 0"):
        ExactUtilityReward(chat, floor=0.0)
    with pytest.raises(ConfigError, match="set solver.model"):
        ExactUtilityReward(chat).setup(RewardContext())
