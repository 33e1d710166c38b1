"""Letter counting as a task-generator domain: where a 135M solver's band is two-sided.

The generator continues few-shot ``Letter: ... / Text: ...`` blocks (examples from reasoning-gym's
``letter_counting``, whose texts no one here wrote); a task is valid when its letter is one letter and its text (the
line after ``Text:``) is 1..``max_words`` words, and its answer (which may be 0) is counted by code. The solver answers
raw few-shot (``Question: How many times does the letter "r" appear in the text: "..."? / Answer: <count>``), so its
exact solve probability is computable by teacher forcing (``answer_text``). Text length controls difficulty: for the
bundled model 1-word texts are mostly too easy and 16-word texts mostly too hard
(``experiments/letter_band/pilot.py``).

Strict validity (the default), the domain's equivalent of "the answer is stated": a task is degenerate when its
count needs no counting. ``letter_absent``: the letter does not occur (the answer is 0, found by an absence check,
and it is the guess a weak solver makes anyway); ``only_letter``: every letter of the text is the target letter
(the answer is the text's length); ``solved_example``: the text and letter are a solved example of the solver's own
prompt, which shows the answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache

from propel.domains.interface import AnswerText, Domain, ParseFailure, Verdict, few_shot_contexts
from propel.domains.math.answers import parse_number
from propel.errors import ConfigError
from propel.records import Context, Prompt, Task
from propel.sandbox.sandbox import Sandbox

_WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?")


@cache
def letter_examples(n: int = 24, max_words: int = 8, seed: int = 2026) -> tuple[dict, ...]:
    """``n`` reasoning-gym ``letter_counting`` items (text, letter, count) as the few-shot pool."""
    try:
        import reasoning_gym
    except ModuleNotFoundError as e:
        raise ConfigError("the letter-counting domain needs reasoning-gym: pip install -e '.[gym]'") from e
    data = reasoning_gym.create_dataset("letter_counting", min_words=1, max_words=max_words, size=n, seed=seed)
    return tuple(
        {"text": " ".join(x["metadata"]["span"]), "letter": x["metadata"]["target_letter"], "count": int(x["answer"])}
        for x in data
    )


def count_letter(text: str, letter: str) -> int:
    """Occurrences of ``letter`` in ``text``, ignoring case (reasoning-gym's rule)."""
    return text.lower().count(letter.lower())


def question(text: str, letter: str) -> str:
    return f'How many times does the letter "{letter}" appear in the text: "{text}"?'


class LetterCountingDomain(Domain):
    """Tasks "count letter x in this text", written by the generator, solved few-shot.

    Args:
        few_shot: examples per generator prompt.
        max_words: longer texts are invalid.
        solver_shots: solved examples in the solver's prompt.
        strict: degenerate tasks (see the module docstring) are invalid; False records the reason and keeps them.
    """

    name = "letter_counting"
    degenerate_reasons = ("letter_absent", "only_letter", "solved_example")
    needs_sandbox = False
    generator_stop = ("\n\n",)
    solver_stop = ("\n",)
    cut_completions_invalid = True

    def __init__(self, few_shot: int = 4, max_words: int = 16, solver_shots: int = 3, strict: bool = True):
        pool = len(letter_examples())
        if not 0 < few_shot <= pool or not 0 < solver_shots <= pool:
            raise ConfigError(f"LetterCountingDomain few_shot and solver_shots must be in 1..{pool}")
        if max_words < 1:
            raise ConfigError(f"LetterCountingDomain max_words must be >= 1, got {max_words}")
        self.few_shot, self.max_words, self.solver_shots, self.strict = few_shot, max_words, solver_shots, strict

    def contexts(self, n: int, seed: int = 0) -> list[Context]:
        blocks = [f"Letter: {e['letter']}\nText: {e['text']}\n\n" for e in letter_examples()]
        return few_shot_contexts(self.name, n, seed, blocks, self.few_shot, "Letter:")

    def parse(self, completion: str) -> Task | ParseFailure:
        block = completion.split("\n\n")[0]
        if "Text:" not in block:
            return ParseFailure("no_text")
        letter, _, rest = block.partition("Text:")
        letter, text = letter.strip().strip("\"'").lower(), rest.strip().split("\n")[0].strip()
        if not text:
            return ParseFailure("empty_text")
        return Task(domain=self.name, data={"text": text, "letter": letter})

    def validity(self, tasks: Sequence[Task], sandbox: Sandbox | None = None) -> list[Verdict]:
        verdicts = []
        for task in tasks:
            text, letter = task.data["text"], task.data["letter"]
            words = text.split()
            if not words or any(not _WORD.fullmatch(w.strip(".,!?;:")) for w in words):
                verdicts.append(Verdict(False, "not_words"))
            elif len(words) > self.max_words:
                verdicts.append(Verdict(False, "too_long"))
            elif len(letter) != 1 or not letter.isalpha():
                verdicts.append(Verdict(False, "not_one_letter"))
            else:
                task.data["answer"] = count_letter(text, letter)
                verdicts.append(Verdict(True, "ok"))
        return verdicts

    def _solved(self) -> tuple[dict, ...]:
        """The solved examples the solver's prompt shows."""
        return letter_examples()[-self.solver_shots :]

    def degeneracy(self, task: Task) -> str | None:
        text, letter = task.data["text"], task.data["letter"]
        letters = [c for c in text.lower() if c.isalpha()]
        if task.data["answer"] == 0:
            return "letter_absent"
        if all(c == letter for c in letters):
            return "only_letter"
        key = (" ".join(text.lower().split()), letter)
        if any((" ".join(x["text"].lower().split()), x["letter"]) == key for x in self._solved()):
            return "solved_example"
        return None

    def task_features(self, task: Task) -> dict[str, float]:
        """The count, the text's size and how much of it is the letter: what a rival ranks tasks by."""
        text, letter, count = task.data["text"], task.data["letter"], task.data["answer"]
        letters = [c for c in text.lower() if c.isalpha()]
        return {
            "count": float(count),
            "words": float(len(text.split())),
            "letters": float(len(letters)),
            "letter_share": count / max(len(letters), 1),
            "words_with_letter": float(sum(letter in w.lower() for w in text.split())),
        }

    def zero_fit_score(self, task: Task) -> float | None:
        """Prefer the smaller count (declared before any data: the solver guesses small numbers)."""
        return -float(task.data["answer"])

    def solver_prompt(self, task: Task) -> Prompt:
        shots = "".join(
            f"Question: {question(x['text'], x['letter'])}\nAnswer: {x['count']}\n\n" for x in self._solved()
        )
        return Prompt(text=f"{shots}Question: {question(task.data['text'], task.data['letter'])}\nAnswer:")

    def grade(self, task: Task, completions: Sequence[str], sandbox: Sandbox | None = None) -> list[bool]:
        return [parse_number(c.strip().split("\n")[0]) == task.data["answer"] for c in completions]

    def answer_text(self, task: Task) -> AnswerText | None:
        return AnswerText(prefix=f" {task.data['answer']}", extends=r"[0-9.,/]") if "answer" in task.data else None

    def topic(self, task: Task) -> str:
        n = len(task.data["text"].split())
        return "1 word" if n == 1 else "2-3 words" if n <= 3 else "4-7 words" if n <= 7 else "8+ words"

    def render(self, task: Task) -> str:
        return f"Letter: {task.data['letter']}\nText: {task.data['text']}"
