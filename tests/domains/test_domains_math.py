"""Math domains: safe expression evaluation, answer extraction, symbolic equivalence, and the expression domain."""

from fractions import Fraction

import pytest
import sympy

from propel.domains.interface import ParseFailure
from propel.domains.math import MathExpressionDomain, OracleMathDomain, equivalent, extract_answer, parse_number
from propel.domains.math.expression import ExpressionError, evaluate
from propel.domains.math.symbolic import to_sympy
from propel.records import Task


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("3 * 12 - 5", 31),
        ("(15 + 9) / 2", 12),
        ("7 / 2", Fraction(7, 2)),
        ("2 ^ 10", 1024),
        ("0.5 * 4", 2),
        ("-3 + 1", -2),
    ],
)
def test_evaluate(text, value):
    assert evaluate(text) == value


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("9 ** 9 ** 9", "bad_exponent"),
        ("10 ** 60 * 10 ** 60 * 10 ** 60 * 10 ** 60", "too_large"),
        ("__import__('os').system('id')", "not_arithmetic"),
        ("x + 1", "not_arithmetic"),
        ("1 / 0", "division_by_zero"),
        ("3 +", "syntax_error"),
        ("", "empty_expression"),
    ],
)
def test_evaluate_refuses(text, reason):
    with pytest.raises(ExpressionError, match=reason):
        evaluate(text)


def test_extract_answer():
    assert extract_answer("so \\boxed{\\frac{1}{2}} done") == "\\frac{1}{2}"
    assert extract_answer("first \\boxed{1} then \\boxed{x^{2}}") == "x^{2}"
    assert extract_answer("We add.\nAnswer: 42 apples") == "42 apples"
    assert extract_answer("The final answer is 7") == "7"
    assert extract_answer("no answer here") is None
    assert parse_number("$1,234.") == 1234
    assert parse_number("-3.5 dollars") == Fraction(-7, 2)
    assert parse_number("\\frac{3}{4}") == Fraction(3, 4)
    assert parse_number("none") is None


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("\\frac{1}{2}", "0.5"),
        ("\\frac{\\sqrt{2}}{2}", "1/\\sqrt{2}"),
        ("2x+2", "2(x+1)"),
        ("x^2-1", "(x-1)(x+1)"),
        ("5\\sqrt{2}", "\\sqrt{50}"),
        ("$12$", "12"),
        ("\\pi/2", "\\frac{\\pi}{2}"),
    ],
)
def test_equivalent(a, b):
    assert equivalent(a, b)
    # agrees with sympy's own simplification on the same expressions
    assert sympy.simplify(to_sympy(a) - to_sympy(b)) == 0


@pytest.mark.parametrize(("a", "b"), [("\\frac{1}{3}", "0.33"), ("2x", "x^2"), ("3", "-3"), ("12", "__import__('os')")])
def test_not_equivalent(a, b):
    assert not equivalent(a, b)


def test_huge_powers_are_refused_quickly():
    assert to_sympy("2^(10^9)") is None


def test_expression_domain_contexts_parse_validity_grade():
    domain = MathExpressionDomain()
    ctx = domain.contexts(4, seed=0)
    assert ctx[0].prompt.text.endswith("Problem:") and ctx[0].prompt.text.count("Expression:") == 3
    assert len({c.prompt.text for c in ctx}) > 1 and domain.generator_stop == ("\n\n",)
    good = domain.parse(
        " Ann has 4 bags of 6 eggs. She uses 5. How many are left?\nExpression: 4 * 6 - 5\n\nProblem: x"
    )
    half = domain.parse(" Split 7 apples between 2 kids.\nExpression: 7 / 2")
    code = domain.parse(" Hack.\nExpression: __import__('os').getpid()")
    assert domain.parse(" Just a story with no expression") == ParseFailure("no_expression")
    assert domain.parse("\nExpression: 1 + 1") == ParseFailure("empty_problem")
    tasks = [good, half, code]
    assert all(isinstance(t, Task) for t in tasks)
    assert [v.reason for v in domain.validity(tasks)] == ["ok", "not_whole_number", "not_arithmetic"]
    assert good.data["answer"] == 19
    assert domain.solver_prompt(good).messages[0]["content"].endswith("Give the final answer as: Answer: <number>")
    completions = ["4*6=24, 24-5=19.\nAnswer: 19", "Answer: 19.0 eggs", "\\boxed{19}", "Answer: 20", "19"]
    assert domain.grade(good, completions) == [True, True, True, False, False]
    assert domain.topic(good) == "other" and domain.topic(Task("m", {"problem": "It costs 3 dollars"})) == "money"


def test_oracle_domain_needs_oracle():
    domain = OracleMathDomain()
    task = domain.parse("Problem: What is the sum of the first 10 positive integers?\nSolution: 55")
    assert isinstance(task, Task) and task.data["problem"].endswith("integers?")
    with pytest.raises(ValueError, match="set_oracle"):
        domain.validity([task])
    task.data["answer"] = "55"
    assert domain.grade(task, ["\\boxed{55}", "Answer: 55", "\\boxed{56}", "nothing"]) == [True, True, False, False]


def test_lenient_expression_reads_the_arithmetic_prefix():
    strict, lenient = MathExpressionDomain(), MathExpressionDomain(lenient_expression=True)
    text = " A box holds 35 pens and 3 bags hold 74 each. How many pens?\nExpression: 35 + 74*3 = 257 pens"
    assert strict.validity([strict.parse(text)])[0].reason == "syntax_error"
    task = lenient.parse(text)
    assert task.data["expression"] == "35 + 74*3" and lenient.validity([task])[0].ok and task.data["answer"] == 257
    assert lenient.parse(" Hack.\nExpression: __import__('os')") == ParseFailure("empty_expression")


def test_ungrounded_numbers_are_degenerate_under_the_strict_rule():
    from propel.records import Sample
    from propel.rollouts.scorer import GeneratorScorer

    texts = [
        " Five boxes hold 1,200 pens; 4 cups hold 2.5. Total?\nExpression: 5 * 1200 + 4 * 2.5",
        " Tom buys twelve eggs and eats three. How many are left?\nExpression: 12 - 3",
        " Chris has 3 apples. Ben splits them evenly.\nExpression: 12 * (2) - 3",
    ]
    reasons = {}
    for strict in (True, False):
        samples = [Sample(prompt="", completion=t) for t in texts]
        GeneratorScorer(MathExpressionDomain(strict=strict)).score(samples)
        reasons[strict] = [s.info["reason"] for s in samples]
    assert reasons[True] == ["ok", "ok", "degenerate:ungrounded_number"]
    assert reasons[False] == ["ok", "ok", "ok"]  # the lenient rule of earlier runs


def test_few_shot_solver_prompt_and_grading():
    domain = MathExpressionDomain(solver_format="few_shot", solver_shots=2)
    task = domain.parse(" Ann has 4 bags of 6 eggs. She uses 5. How many are left?\nExpression: 4 * 6 - 5")
    assert domain.validity([task])[0].ok and domain.solver_stop == ("\n",)
    prompt = domain.solver_prompt(task)
    assert prompt.messages is None and prompt.text.count("\nAnswer: ") == 2  # two solved examples with their values
    assert "Problem: Tom has 3 boxes" in prompt.text and "\nAnswer: 31\n\n" in prompt.text
    assert prompt.text.endswith("Problem: Ann has 4 bags of 6 eggs. She uses 5. How many are left?\nAnswer:")
    assert domain.grade(task, [" 19", " 19.0", "19 eggs\nProblem: more", " 20", "", " nineteen"]) == [
        True, True, True, False, False, False,
    ]  # fmt: skip
    assert MathExpressionDomain().solver_stop == ()  # chat default: the answer line comes after the working
    with pytest.raises(ValueError, match="solver_format"):
        MathExpressionDomain(solver_format="boxed")
    with pytest.raises(ValueError, match="solver_shots"):
        MathExpressionDomain(solver_format="few_shot", solver_shots=0)


def test_oracle_is_explicit_for_labeling_and_set_up_for_grpo(tiny_model_dir, tokenizer):
    """No silent "the solver is its own oracle"; GRPO (ContextDataModule) builds the domain's
    ``oracle_model`` when fitting starts and refuses a domain without one then, not at the first step."""
    from propel.datamodules.contexts import ContextDataModule
    from propel.engines.hf import HFEngine
    from propel.engines.scripted import ScriptedEngine
    from propel.errors import ConfigError
    from propel.lit_modules.labeling import LabelingModule

    with pytest.raises(ConfigError, match="oracle"):
        LabelingModule(OracleMathDomain(), generator=str(tiny_model_dir))
    LabelingModule(OracleMathDomain(), generator=str(tiny_model_dir), oracle=str(tiny_model_dir))
    LabelingModule(OracleMathDomain(oracle_model=str(tiny_model_dir)), generator=str(tiny_model_dir))

    with pytest.raises(ConfigError, match="explicit oracle"):
        ContextDataModule(OracleMathDomain()).setup("fit")
    domain = OracleMathDomain(oracle_model=str(tiny_model_dir), oracle_attempts=2, oracle_max_new_tokens=4)
    dm = ContextDataModule(domain)
    dm.setup("fit")
    assert isinstance(domain.oracle, HFEngine)
    task = domain.parse("Problem: What is the sum of the first 10 positive integers?")
    assert domain.validity([task])[0].reason in ("oracle_no_answer", "oracle_disagree", "ok")
    dm.teardown("fit")

    scripted = OracleMathDomain(oracle_model="never-loaded")
    scripted.set_oracle(ScriptedEngine(tokenizer, lambda prompt: "It is \\boxed{55}"))  # an engine given wins
    task = scripted.parse("Problem: What is the sum of the first 10 positive integers?")
    assert scripted.validity([task])[0].ok and task.data["answer"] == "55"
    with pytest.raises(ValueError, match="engine must be one of"):
        OracleMathDomain(oracle_engine="trt")
