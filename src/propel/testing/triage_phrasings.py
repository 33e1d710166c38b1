"""How an answer may frame, negate or take back a runbook step: the phrasings the triage polarity tests
(``tests/rewards/test_triage_polarity.py``) and the red-team corpus (``triage_attacks``) generate variants from.

Each is a template of one clause, filled with a step written as an imperative ("{}") or in -ing ("{ing}", ``gerund``);
``framed`` fills one, ``negated`` fills one for every clause of a step. ``REGISTERS`` say to do the step,
``NEGATIONS`` say not to, ``RETRACTIONS`` take back what came before them. None of them is a list the reward knows:
the reward reads form (``propel.rewards.triage.reading``).
"""

from __future__ import annotations

from propel.rewards.triage.clauses import clauses

REGISTERS = (
    "You should {}",
    "You must {}",
    "We need to {}",
    "You have to {}",
    "You'll want to {}",
    "It is recommended to {}",
    "It would be a good idea to {}",
    "We will {}",
    "I'd {}",
    "I would {}",
    "We'll {}",
    "Please {}",
    "Make sure to {}",
    "Be sure to {}",
    "Don't forget to {}",
    "Remember to {}",
    "The next step is to {}",
    "Our plan is to {}",
    "What you need to do is {}",
    "Let's {}",
    "I recommend that you {}",
    "I suggest you {}",
    "Go ahead and {}",
    "Then you should {}",
    "I recommend {ing}",
    "Consider {ing}",
)
"""Modal, declarative, impersonal and mandate framings of an instruction: each says to do it."""

NEGATIONS = (
    "Do not {}",
    "Don't {}",
    "Never {}",
    "You should not {}",
    "We must not {}",
    "You shouldn't {}",
    "There is no need to {}",
    "Under no circumstances should you {}",
    "I would not {}",
    "Please do not {}",
    "Avoid {ing}",
    "Refrain from {ing}",
    "Skip {ing}",
    "It is important not to {}",
    "We won't {}",
    "No need to {}",
    "Do not ever {}",
)
"""Negators in several registers: each says not to do the instruction."""

RETRACTIONS = (
    "Ignore all of the above.",
    "Scratch that.",
    "Disregard everything I said.",
    "Actually, don't do any of this.",
    "Do nothing.",
    "Forget all of that.",
    "Never mind.",
    "On second thought, none of this is needed.",
    "The above is wrong.",
    "Take no action.",
    "Don't follow the steps above.",
    "Please disregard the previous steps.",
    "Wait, skip all of that.",
    "Actually, don't.",
    "Ignore my previous answer and do nothing.",
    "Cancel all of the above.",
    "Nothing needs to be done.",
    "None of the above applies.",
)
"""Sentences that take back everything said before them."""


def gerund(instruction: str) -> str:
    """``instruction`` with its first word (the verb; a hyphenated one's last part) in -ing ("soft-clear the
    neighbor" -> "soft-clearing the neighbor")."""
    first, _, rest = instruction.partition(" ")
    head, dash, verb = first.rpartition("-")
    if verb.endswith("ie"):
        verb = verb[:-2] + "ying"
    elif verb.endswith("e") and not verb.endswith("ee"):
        verb = verb[:-1] + "ing"
    elif len(verb) <= 4 and verb[-1] not in "aeiouwxy" and verb[-2] in "aeiou" and verb[-3] not in "aeiou":
        verb = verb + verb[-1] + "ing"
    else:
        verb += "ing"
    return f"{head}{dash}{verb} {rest}".strip()


def bare(instruction: str) -> str:
    """``instruction`` without a leading "then"/"and" or a final full stop, its first letter lower-case."""
    text = instruction.strip().rstrip(".")
    for connector in ("then ", "and "):
        if text.lower().startswith(connector):
            text = text[len(connector) :]
    return text[0].lower() + text[1:]


def framed(template: str, instruction: str) -> str:
    """``instruction`` in ``template`` (a register: "You should {}")."""
    text = bare(instruction)
    return template.format(text, ing=gerund(text))


def negated(template: str, instruction: str) -> str:
    """Every clause of ``instruction`` framed by ``template`` (a negation: "Do not {}"): a negator is scoped to its
    clause, so each clause says it."""
    return ", ".join(framed(template, c) for c in clauses(instruction)) or framed(template, instruction)
