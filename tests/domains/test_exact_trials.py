"""Exact solve probabilities: checked against a one-prefix-at-a-time computation, the binomial band, and (on the real
bundled model) against sampled solver trials."""

import math

import numpy as np
import pytest
import torch
from scipy.stats import binom

from propel.domains.exact_trials import band_utility, solve_probabilities
from propel.domains.math.expression_domain import MathExpressionDomain
from propel.engines.engine import SamplingSpec
from propel.engines.factory import make_engine
from propel.records import Task


def _task(domain, problem, expression):
    task = Task(domain="math_expression", data={"problem": problem, "expression": expression})
    assert domain.validity([task])[0].ok
    return task


@pytest.mark.parametrize("p", [0.0, 0.03, 0.25, 0.7, 1.0])
def test_band_utility_is_the_binomial_mass_in_the_band(p):
    assert band_utility(p, 8, (1, 3)) == pytest.approx(sum(binom.pmf(k, 8, p) for k in range(1, 4)))
    assert band_utility(p, 8, (0, 8)) == pytest.approx(1.0)


def test_only_the_few_shot_solver_has_an_answer_text():
    few, chat = (MathExpressionDomain(solver_format=f) for f in ("few_shot", "chat"))
    task = _task(few, "Tom has 3 apples and buys 4.", "3 + 4")
    assert few.answer_text(task).prefix == " 7"
    assert chat.answer_text(task) is None


def test_solve_probability_equals_the_product_of_next_token_probabilities(tiny_model, tokenizer):
    model, _ = tiny_model
    engine = make_engine("hf", "tiny", model=model, tokenizer=tokenizer)
    domain = MathExpressionDomain(solver_format="few_shot")
    tasks = [_task(domain, "Tom has 3 apples and buys 4.", "3 + 4"), _task(domain, "Ten boxes of 12 eggs.", "10 * 12")]
    got = solve_probabilities(domain, tasks, engine, temperature=0.7, batch_size=2)  # padded together
    texts = [tokenizer.decode([i]) for i in range(model.config.vocab_size)]
    extends = [i for i, text in enumerate(texts) if text and text[0] in "0123456789.,/"]
    for task, p in zip(tasks, got, strict=True):
        ids = engine.encode_prompt(domain.solver_prompt(task))
        answer = tokenizer(domain.answer_text(task).prefix, add_special_tokens=False)["input_ids"]
        logp = 0.0
        with torch.no_grad():
            for tok in answer:
                probs = torch.softmax(model(input_ids=torch.tensor([ids])).logits[0, -1].float() / 0.7, -1)
                logp += math.log(float(probs[tok]))
                ids = ids + [tok]
            probs = torch.softmax(model(input_ids=torch.tensor([ids])).logits[0, -1].float() / 0.7, -1)
        end = 1.0 - float(probs[extends].sum())
        assert p == pytest.approx(math.exp(logp) * end, rel=1e-4)


@pytest.mark.real_model
def test_exact_probability_agrees_with_sampled_trials(real_model):
    model, tokenizer = real_model
    engine = make_engine("hf", "smollm2-135m-instruct", model=model, tokenizer=tokenizer)
    domain = MathExpressionDomain(solver_format="few_shot")
    tasks = [
        _task(domain, "Tom has 3 apples and buys 4 more.", "3 + 4"),
        _task(domain, "A class has 5 rows of 6 desks.", "5 * 6"),
        _task(domain, "Sara had 20 stickers and gave away 8.", "20 - 8"),
        _task(domain, "A farmer has 12 cows and buys 15 more.", "12 + 15"),
    ]
    exact = solve_probabilities(domain, tasks, engine)
    torch.manual_seed(0)
    n = 64
    outs = engine.generate([domain.solver_prompt(t) for t in tasks], SamplingSpec(n=n, max_new_tokens=8, stop=["\n"]))
    sampled = [sum(domain.grade(t, [c.text for c in out])) for t, out in zip(tasks, outs, strict=True)]
    for p, k in zip(exact, sampled, strict=True):  # each count inside its binomial 99.9% range under the exact p
        lo, hi = binom.ppf(0.0005, n, p), binom.ppf(0.9995, n, p)
        assert lo <= k <= hi, (p, k)
    expected = n * np.asarray(exact)  # and in total (the check means something: the model solves some of these)
    assert sum(sampled) >= 3
    assert abs(sum(sampled) - expected.sum()) <= 3.3 * np.sqrt((expected * (1 - np.asarray(exact))).sum())
