"""The letter-counting generator domain: parsing the generator's blocks, validity with the count done by code (0
allowed), the solver's few-shot prompt and grading, and the answer text that makes its solve probability exact."""

from __future__ import annotations

import pytest

from propel.domains import LetterCountingDomain
from propel.domains.letter_counting import count_letter, letter_examples
from propel.errors import ConfigError


def test_contexts_are_few_shot_blocks_ending_where_the_generator_writes_a_letter():
    domain = LetterCountingDomain(few_shot=3)
    contexts = domain.contexts(5, seed=1)
    assert len({c.id for c in contexts}) == 5 and contexts == domain.contexts(5, seed=1)  # deterministic
    text = contexts[0].prompt.text
    assert text.endswith("Letter:") and text.count("Text: ") == 3
    assert all(ex["count"] == count_letter(ex["text"], ex["letter"]) for ex in letter_examples())  # reasoning-gym's


@pytest.mark.parametrize(
    ("completion", "valid", "reason", "answer"),
    [
        (" r\nText: strawberry fields\n\nLetter: x", True, "ok", 3),
        (' "E"\nText: Every tree\n', True, "ok", 4),  # quotes and case are read as reasoning-gym reads them
        (" z\nText: apple pie", True, "ok", 0),  # a count of 0 is a task too
        (" ab\nText: apple", False, "not_one_letter", None),
        (" a\nText: 1 + 2 = 3", False, "not_words", None),
        (" a\nText: " + "word " * 17, False, "too_long", None),
    ],
)
def test_validity_counts_the_letter_by_code(completion, valid, reason, answer):
    domain = LetterCountingDomain()
    task = domain.parse(completion)
    verdict = domain.validity([task])[0]
    assert (verdict.ok, verdict.reason) == (valid, reason)
    assert task.data.get("answer") == answer


def test_blocks_without_a_text_are_parse_failures():
    domain = LetterCountingDomain()
    assert domain.parse(" a\nWord: apple").reason == "no_text"
    assert domain.parse(" a\nText:   \n").reason == "empty_text"


def test_the_solver_is_graded_on_its_first_line_and_the_answer_text_is_the_count():
    domain = LetterCountingDomain(solver_shots=2)
    task = domain.parse(" r\nText: strawberry")
    domain.validity([task])
    prompt = domain.solver_prompt(task).text
    assert prompt.endswith('Question: How many times does the letter "r" appear in the text: "strawberry"?\nAnswer:')
    assert prompt.count("Answer: ") == 2
    assert domain.grade(task, [" 3", "3 times\nmore", " 2", " 33"]) == [True, True, False, False]
    assert domain.answer_text(task).prefix == " 3"
    assert domain.topic(task) == "1 word" and domain.render(task) == "Letter: r\nText: strawberry"


def test_bad_settings_are_refused():
    with pytest.raises(ConfigError, match="few_shot"):
        LetterCountingDomain(few_shot=0)
    with pytest.raises(ConfigError, match="max_words"):
        LetterCountingDomain(max_words=0)
