"""The six triage reward components on hand-computed cases: each value below is worked out in the comment next to
it from the component's docstring formula, and the step rule's worked examples are those of ``steps.py``."""

from __future__ import annotations

import difflib
import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from rouge_score import rouge_scorer
from rouge_score.rouge_scorer import _lcs_table

from propel.errors import ConfigError
from propel.records import Context, Prompt, Sample
from propel.rewards import CombinedReward
from propel.rewards.triage import (
    CitationGrounding,
    Parsimony,
    RepetitionPenalty,
    TriageCalibration,
    TriageFormat,
    TriageResolution,
    check_steps,
    copied_span,
    copied_words,
    loop_fraction,
    normalize,
    parsimony,
    rouge_l,
    submission,
    triage_rewards,
    word_count,
)
from propel.rewards.triage.normalize import words
from propel.tasks.triage.generate import knowledge_base

KB = knowledge_base()
DNS, NTP = KB["KB-NET-002"], KB["KB-INF-003"]  # the gold runbook and a distractor of the worked examples
TICKET = "DNS broken\nUsers cannot resolve intranet names since this morning"  # 10 words
GOLD = {
    "ticket_id": "T1",
    "category": "networking",
    "ticket": TICKET,
    "article_ids": ["KB-NET-002", "KB-INF-003", "KB-CLD-001"],
    "articles_text": f"{DNS.title}\n{DNS.body}\n{NTP.title}\n{NTP.body}",
    "gold_ids": ["KB-NET-002"],
    "gold_resolution": "restart the dns resolver service",
    "gold_steps": list(DNS.steps),
    "distractor_steps": list(NTP.steps),
    "escalate": False,
}
RIGHT = (
    "Query both internal resolvers with nslookup, fix the failing forwarder on the resolver service, flush the DNS "
    "cache on the clients and make sure the record exists in the zone"
)
SWAPPED = (  # changed by the procedure rule: this was RIGHT, and it states steps 1, 2, 4, 3
    "Query both internal resolvers with nslookup, fix the failing forwarder on the resolver service, make sure the "
    "record exists in the zone and flush the DNS cache on the clients"
)
HALF = "Query both internal resolvers with nslookup and make sure the record exists in the zone"


def sample(completion: str, gold: dict | None = None) -> Sample:
    ctx = Context(id="T1", prompt=Prompt(text="ticket"), data=dict(gold or GOLD))
    return Sample(prompt="ticket", completion=completion, context=ctx)


def answer(resolution=RIGHT, citations=("KB-NET-002",), confidence=0.8, escalate=False) -> str:
    body = {"resolution": resolution, "citations": list(citations), "confidence": confidence, "escalate": escalate}
    return "submit_resolution " + json.dumps(body)


def one(reward, completion: str, gold: dict | None = None) -> float:
    return float(reward([sample(completion, gold)])[0])


STEPS = (tuple(DNS.steps), tuple(NTP.steps))


def content(resolution: str, escalate: bool | None = False) -> float:
    return check_steps(resolution, escalate, tuple(DNS.steps), tuple(NTP.steps), False, TICKET).content


# ------------------------------------------------------------------------------------------------ normalisation
def test_normalize_folds_width_lookalikes_and_invisible_characters():
    assert normalize("Ｆｌｕｓｈ ﬁle") == "Flush file"  # NFKC: full-width letters, the ligature
    assert normalize("r\u0435st\u0430rt") == "restart"  # Cyrillic ie and a folded to Latin
    assert normalize("re\u200bstart the\u00adcache\x00") == "restart thecache"  # removed
    assert normalize("restart\u200bthe\u2060cache", invisible=" ") == "restart the cache"  # read as separators
    assert normalize("tab\tand\nnewline") == "tab\tand\nnewline"  # whitespace controls stay
    assert words(normalize("Flush\u200dDNS, now!")) == ["flushdns", "now"]
    # parsimony counts words with invisibles as spaces: three words, not one
    assert word_count("restart\u200bthe\u200bresolver") == 3 and word_count("restart the resolver") == 3


# ------------------------------------------------------------------------------------------------ the step rule
def test_step_rule_worked_examples():
    """The examples of ``steps.py``'s docstring, value by value."""
    assert content(RIGHT) == 1.0  # 4 of 4 steps, in order
    # changed by the procedure rule (was 1.0, order ignored): steps 1, 2, 4, 3 keep three on the chain, one off it
    swapped = check_steps(SWAPPED, False, tuple(DNS.steps), tuple(NTP.steps), False, TICKET)
    assert swapped.content == 0.5 and swapped.unordered == (DNS.steps[2],) and swapped.missed == (DNS.steps[2],)
    # ... and a step out of order makes it no procedure (rule 8): no style, not a right fix even under threshold 0.5
    assert swapped.procedure == 0.0 and not swapped.right_fix(0.5)
    # the first instruction said again at the end: step 1 is out of order, so not in place, and cancels one
    again = check_steps(RIGHT + ", then query both internal resolvers with nslookup", False, *STEPS, False, TICKET)
    assert again.content == 0.5 and again.unordered == (DNS.steps[0],) and again.procedure == 0.0
    # the swapped answer with its last two instructions run together: the run-on states no step alone (steps 1 and 2
    # count), and says step 4, then step 3 (rule 8): no procedure
    run_on = check_steps(SWAPPED.replace(" and flush", " flush"), False, *STEPS, False, TICKET)
    assert run_on.content == 0.5 and run_on.unordered == (DNS.steps[2],) and run_on.procedure == 0.0
    # step 1's terms after step 4's are a reference to its object, not step 1 said again
    back = RIGHT.replace("the record exists", "the record for the internal resolvers exists")
    assert check_steps(back, False, *STEPS, False, TICKET).procedure == 1.0
    # changed by the procedure rule (was 1.0): the four instructions reversed keep one step on the chain, three off it
    assert content(", ".join(reversed(RIGHT.replace(" and ", ", ").split(", ")))) == 0.0
    # the gold runbook's content words without a sentence: no instruction (was 1.0)
    assert (
        content("nslookup internal resolvers resolver service forwarders flush client cache ipconfig zone record") == 0
    )
    assert content(HALF) == 0.5  # steps 1 and 4
    half = check_steps(HALF, False, *STEPS, False, TICKET)
    assert half.procedure == 0.5 and half.right_fix(0.5)  # in order: a procedure worth its content
    assert content(HALF, escalate=True) == 0.25 and content(HALF, escalate=None) == 0.25  # wrong or missing flag
    # ROUGE-L 1.0 against the reference text, yet only step 2: not a right fix
    assert rouge_l("restart the dns resolver service", GOLD["gold_resolution"]) == pytest.approx(1.0)
    assert content("restart the dns resolver service") == 0.25
    assert content("Restart the resolver") == 0.0
    wrong = check_steps(RIGHT.split(",")[0], False, tuple(DNS.steps), tuple(NTP.steps), False, TICKET)
    assert wrong.matched == (DNS.steps[0],) and not wrong.wrong
    distractor = check_steps(
        "Restart chronyd and step the clock with chronyc makestep", False, tuple(DNS.steps), tuple(NTP.steps), False
    )
    assert distractor.content == 0.0 and distractor.wrong == ("Restart chronyd.", "Force a step with chronyc makestep.")
    # each distractor step cancels one gold step: 4 gold - 2 wrong = 2 of 4, and no procedure (rule 8)
    followed = check_steps(
        RIGHT + ", then restart chronyd and step the clock with chronyc makestep", False, *STEPS, False
    )
    assert followed.content == 0.5 and followed.procedure == 0.0
    for junk in (TICKET, "x", "", "Star Wars was released in 1977."):
        assert content(junk) == 0.0, junk
    # invisible characters and lookalike letters do not hide a step
    assert content(RIGHT.replace("nslookup", "ns\u200blookup").replace("record", "r\u0435cord")) == 1.0


def test_a_shared_step_is_not_wrong_and_the_ticket_alone_is_not_a_fix():
    escalate = "Escalate to the security on-call."
    shared = check_steps("escalate to the security on-call", True, (escalate, "Revoke the key."), (escalate,), True)
    assert shared.matched == (escalate,) and shared.wrong == ()  # the distractor's copy of a gold step is not wrong
    # a step the ticket states in full cannot be told from an echo of it; one with new terms can
    assert check_steps("unlock the account", False, ("Unlock the account.",), (), False, "account locked").content == 1
    echo = check_steps("the disk failed", False, ("Replace the failed disk.",), (), False, "the disk failed")
    assert echo.content == 0.0


# ------------------------------------------------------------------------------------------------------ format
def test_format_pays_the_parse_and_gates_the_fields_by_content():
    fmt = TriageFormat()
    assert one(fmt, answer()) == pytest.approx(1.0)  # 0.2 + 0.8 * 4/4 fields * content 1
    # changed by content gating: an empty or punctuation-only resolution has no content, no field credit: 0.2 (was 0.8)
    assert one(fmt, answer(resolution="")) == pytest.approx(0.2)
    assert one(fmt, answer(resolution=" ... ")) == pytest.approx(0.2)
    assert one(fmt, answer(citations=())) == pytest.approx(0.8)  # 0.2 + 0.8 * 3/4 * 1
    assert one(fmt, answer(confidence="0.9")) == pytest.approx(0.8)  # a string is not a number
    assert one(fmt, answer(confidence=1.5)) == pytest.approx(0.8)  # out of [0, 1]
    # changed by content gating: an invalid escalate flag halves the content: 0.2 + 0.8 * 3/4 * 0.5 = 0.5 (was 0.8)
    assert one(fmt, answer(escalate="no")) == pytest.approx(0.5)
    assert one(fmt, answer(resolution=HALF)) == pytest.approx(0.2 + 0.8 * 0.5)  # half the steps, half the fields
    assert one(fmt, answer(resolution="", citations=(), confidence=None, escalate=None)) == pytest.approx(0.2)
    assert one(fmt, "I think you should restart the DNS server.") == 0.0  # no JSON at all
    # changed by content gating: two submissions are rejected outright (was 0.8: the first one graded)
    assert one(fmt, answer() + "\n" + answer()) == 0.0
    tool_call = json.dumps(
        {"name": "submit_resolution", "arguments": json.loads(answer()[len("submit_resolution ") :])}
    )
    assert one(fmt, f"```json\n{tool_call}\n```") == pytest.approx(1.0)
    s = sample(answer(confidence="high"))
    fmt([s])
    assert s.info["triage"]["reason"] == "invalid: confidence"
    assert s.info["triage"]["field_errors"] == {"confidence": "not a number: 'high'"}
    with pytest.raises(ConfigError):
        TriageFormat(object_credit=1.5)


# -------------------------------------------------------------------------------------------------- resolution
def test_resolution_is_the_step_content_with_rouge_l_logged_only():
    # LCS("restart the dns server", "restart the dns resolver service") = 3: P = 3/4, R = 3/5, F = 2/3
    assert rouge_l("restart the dns server", "restart the dns resolver service") == pytest.approx(2 / 3)
    res = TriageResolution()
    assert one(res, answer()) == 1.0
    assert one(res, answer(resolution=HALF)) == 0.5
    # changed by content gating: the reference's own words score by the steps they name, not by ROUGE-L (was 1.0)
    assert one(res, answer(resolution="restart the dns resolver service")) == 0.25
    assert one(res, answer(resolution="")) == 0.0
    assert one(res, "restart the dns resolver service") == 0.0  # no submission: nothing graded
    s = sample(answer(resolution=HALF))
    res([s])
    info = s.info["triage"]
    assert info["steps"] == "2/4" and info["missed_steps"] == [DNS.steps[1], DNS.steps[2]] and info["wrong_steps"] == []
    reference = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True).score(GOLD["gold_resolution"], HALF)
    assert info["rouge_l"] == pytest.approx(reference["rougeL"].fmeasure)  # the diagnostic is rouge-score's value


# --------------------------------------------------------------------------------------------------- grounding
def test_grounding_is_f1_with_invented_ids_wrong_and_duplicates_once():
    g = CitationGrounding()
    assert one(g, answer(citations=["KB-NET-002"])) == pytest.approx(1.0)
    assert one(g, answer(citations=["kb-net-002 "])) == pytest.approx(1.0)  # case and spaces ignored
    # a distractor next to the gold: P = 1/2, R = 1 -> F1 = 2/3
    assert one(g, answer(citations=["KB-NET-002", "KB-INF-003"])) == pytest.approx(2 / 3)
    # an invented id counts as a wrong citation: P = 1/3, R = 1 -> F1 = 1/2
    assert one(g, answer(citations=["KB-NET-002", "KB-XYZ-123", "KB-NET-999"])) == pytest.approx(0.5)
    assert one(g, answer(citations=["KB-XYZ-123"])) == 0.0
    assert one(g, answer(citations=["KB-NET-002"] * 30)) == pytest.approx(1.0)  # counted once: no more than one
    assert one(g, answer(citations=[])) == 0.0
    two_gold = {**GOLD, "gold_ids": ["KB-NET-002", "KB-CLD-001"]}
    assert one(g, answer(citations=["KB-NET-002"]), two_gold) == pytest.approx(2 / 3)  # P = 1, R = 1/2
    no_gold = {**GOLD, "gold_ids": []}
    assert one(g, answer(citations=[]), no_gold) == 1.0 and one(g, answer(), no_gold) == 0.0
    s = sample(answer(citations=["KB-NET-002", "KB-FAKE-1"]))
    g([s])
    assert s.info["triage"]["invalid_citations"] == ["KB-FAKE-1"]


# ------------------------------------------------------------------------------------------------- calibration
def test_calibration_is_one_minus_brier_against_a_right_fix():
    c = TriageCalibration()
    assert one(c, answer(confidence=0.8)) == pytest.approx(1 - 0.2**2)  # right fix, 0.8
    assert one(c, answer(confidence=1.0)) == pytest.approx(1.0)
    assert one(c, answer(resolution="reboot the printer", confidence=0.95)) == pytest.approx(1 - 0.95**2)
    assert one(c, answer(resolution="reboot the printer", confidence=0.1)) == pytest.approx(1 - 0.1**2)
    # right fix but the wrong escalation call: not correct
    assert one(c, answer(confidence=0.9, escalate=True)) == pytest.approx(1 - 0.9**2)
    # changed by content gating: ROUGE-L 1.0 against the reference but one step of four is not a right fix (was correct)
    assert one(c, answer(resolution="restart the dns resolver service", confidence=0.9)) == pytest.approx(1 - 0.81)
    # half the steps: below the default threshold 0.75, right under a threshold of 0.5
    assert one(c, answer(resolution=HALF, confidence=1.0)) == 0.0
    assert one(TriageCalibration(threshold=0.5), answer(resolution=HALF, confidence=1.0)) == 1.0
    assert one(c, answer(confidence="high")) == 0.0  # no valid confidence: worst outcome
    s = sample(answer())
    c([s])
    assert s.info["triage"]["correct"] is True
    with pytest.raises(ConfigError):
        TriageCalibration(threshold=0.0)


# --------------------------------------------------------------------------------------------------- parsimony
def test_parsimony_is_one_within_the_budget_then_linear_to_zero_and_gated():
    assert parsimony(30, 40, 1.0) == 1.0 and parsimony(40, 40, 1.0) == 1.0
    assert parsimony(60, 40, 1.0) == pytest.approx(0.5)  # 20 words over a 40-word budget, tail 40
    assert parsimony(80, 40, 1.0) == 0.0 and parsimony(10_000, 40, 1.0) == 0.0
    assert Parsimony(ratio=2.0, min_words=10).budget(GOLD["ticket"]) == 20.0  # 2 x 10 ticket words
    assert Parsimony(ratio=2.0, min_words=50).budget(GOLD["ticket"]) == 50.0  # the floor for short tickets
    p = Parsimony(ratio=2.0, min_words=60)  # budget 60, zero at 120
    base = answer()
    n = word_count(base)
    assert n < 60
    assert one(p, base + " word" * (60 - n)) == 1.0
    assert one(p, base + " word" * (90 - n)) == pytest.approx(0.5)  # 30 over a budget of 60
    # words joined by zero-width spaces are counted one by one: the same 0.5
    assert one(p, base + " " + "\u200b".join(["word"] * (90 - n))) == pytest.approx(0.5)
    # ... and so are words joined by JSON-escaped spaces inside the resolution string
    escaped = answer(resolution=RIGHT + " WORDS").replace("WORDS", "\\u0020".join(["word"] * (90 - n)))
    assert "\\u0020word" in escaped and one(p, escaped) == pytest.approx(0.5)
    # gated: half the content pays half, a stub without a right fix nothing (changed by content gating: a stub paid 1)
    assert one(p, answer(resolution=HALF)) == pytest.approx(0.5)
    assert one(p, answer(resolution="x")) == 0.0
    with pytest.raises(ConfigError):
        Parsimony(tail=0)


# -------------------------------------------------------------------------------------------------- repetition
def test_repetition_helpers():
    assert loop_fraction(["a", "b", "c", "d", "e", "f"], 4) == 0.0
    looped = ["a", "b", "c", "d"] * 3
    assert loop_fraction(looped, 4) == pytest.approx(5 / 9)  # 9 4-grams, 4 distinct
    source = ["one", "two", "three", "four", "five", "six", "seven"]
    assert copied_span(["x", "two", "three", "four", "five", "y"], source) == 4
    # junk the source lacks is dropped, one source word may be skipped: still a copy of 6
    assert copied_span(["two", "qz", "three", "four", "zz", "zz", "zz", "five", "seven", "one"], source) == 5
    assert (
        copied_span(["two", "four", "six"], source, skip=1) == 3 and copied_span(["two", "four", "six"], source, 0) == 1
    )
    assert copied_span(["two", "five"], source) == 1  # two words skipped: the chain breaks


@settings(max_examples=200, deadline=None)
@given(
    a=st.lists(st.sampled_from("abcdef"), max_size=25),
    b=st.lists(st.sampled_from("abcdef"), max_size=25),
    skip=st.integers(0, 3),
)
def test_copied_span_lies_between_the_longest_common_substring_and_the_lcs(a, b, skip):
    """``skip=0`` on source words is difflib's longest common substring; any ``skip`` is at most rouge-score's LCS."""
    kept = [t for t in a if t in b]
    substring = difflib.SequenceMatcher(None, kept, b, autojunk=False).find_longest_match(0, len(kept), 0, len(b))
    if skip == 0:
        assert copied_span(a, b, 0) == substring.size
    lcs = _lcs_table(b, kept)[-1][-1] if kept and b else 0
    assert substring.size <= copied_span(a, b, skip) <= lcs


def _copied_words_by_definition(clauses, instructions, sources, skip):
    """``copied_words`` as its docstring defines it, every pair chained (no bound skips a pair)."""
    from propel.rewards.triage.copying import QUOTE_SHARE, QUOTE_WORDS, instruction_runs

    source = [t for s in sources for t in s]
    chain = max((copied_span(run, source, skip) for run in instruction_runs(clauses, instructions)), default=0)
    quoted = 0
    for clause in clauses:
        spans = [copied_span(clause, s, skip) for s in sources]
        quotes = (n for n, s in zip(spans, sources, strict=True) if n >= QUOTE_WORDS and n >= QUOTE_SHARE * len(s))
        quoted += max(quotes, default=0)
    return max(chain, quoted)


_clause = st.lists(st.sampled_from("abcdefgh"), max_size=12)


@settings(max_examples=300, deadline=None)
@given(
    clauses=st.lists(_clause, max_size=6),
    flags=st.lists(st.booleans(), min_size=6, max_size=6),
    sources=st.lists(_clause, max_size=6),
    skip=st.integers(0, 2),
)
def test_copied_words_skips_only_pairs_that_cannot_change_it(clauses, flags, sources, skip):
    """The bounds that spare most chains (a chain is no longer than its source clause nor than the clause's words in
    it) leave the measure as defined: equal to chaining every pair."""
    flags = flags[: len(clauses)]
    assert copied_words(clauses, flags, sources, skip) == _copied_words_by_definition(clauses, flags, sources, skip)


def test_copied_words_is_unchanged_on_the_triage_answers_and_attacks():
    """On the shipped tickets, their reference answers and the runbooks pasted whole: the same numbers as chaining
    every pair."""
    from propel.rewards.triage.clauses import clauses, instruction
    from propel.rewards.triage.repetition import clause_words
    from propel.tasks.triage import generate_tickets

    checked = 0
    for ticket in generate_tickets(60, seed=0):
        gold = ticket.grading_data()
        source = clause_words(gold["ticket"] + "\n" + gold["articles_text"])
        for text in (
            ticket.gold_resolution,
            gold["articles_text"],
            gold["ticket"],
            "\n".join(gold["gold_steps"][::-1]),
        ):
            parts = clauses(normalize(text))
            args = ([words(c) for c in parts], [instruction(c) for c in parts], source, 1)
            measured = copied_words(*args)
            assert measured == _copied_words_by_definition(*args), text
            checked += measured > 15
    assert checked >= 60  # the pasted articles and tickets are copies: the pairs that count were chained


def test_repetition_penalty_parts():
    r = RepetitionPenalty(n=4, loop_tolerance=0.1, copy_span=3)
    assert one(r, answer()) == 1.0
    # 30 copies of one id: duplicates = 29/30 (the id's own words also loop, less)
    assert one(r, answer(citations=["KB-NET-002"] * 30)) == pytest.approx(1 / 30)
    # the ticket pasted after the fix: 8 copied words past a free span of 3 -> copy = clip((8 - 3) / 3) = 1
    assert one(r, answer(resolution=RIGHT + ". Users cannot resolve intranet names since this morning")) == 0.0
    # 4 copied words: copy = (4 - 3) / 3
    assert one(r, answer(resolution=RIGHT + ". Users cannot resolve intranet, so fix it")) == pytest.approx(1 - 1 / 3)
    # ... also with junk words, invisible characters or lookalike letters inside the copied span
    for disguised in ("users qz cannot resolve intranet", "us\u200bers cannot re\u200bsolve intranet"):
        assert one(r, answer(resolution=f"{RIGHT}. {disguised}, so fix it")) == pytest.approx(1 - 1 / 3), disguised
    assert one(r, answer(resolution=f"{RIGHT}. users c\u0430nnot resolve intranet")) == pytest.approx(1 - 1 / 3)
    # a loop: the formula on the completion's words (the loop helper is checked by hand above)
    looped = answer(resolution=" ".join([RIGHT] * 3))
    share = loop_fraction(words(normalize(looped)), 4)
    assert share > 0.5
    style, _ = r.style(submission(looped), looped, GOLD)
    assert style == pytest.approx(1 - (share - 0.1) / 0.9)
    # changed by the procedure rule (was gated by content 1): each repeat goes back to step 1, out of order, so the
    # loop keeps at most half the content and is no procedure: the style is gated to 0
    assert content(" ".join([RIGHT] * 3)) <= 0.5 and one(r, looped) == 0.0
    s = sample(answer(resolution=RIGHT + ". Users cannot resolve intranet, so fix it"))
    r([s])
    assert s.info["triage"]["copied_words"] == 4 and s.info["triage"]["repetition_style"] == pytest.approx(2 / 3)
    # gated: half the content, half the value
    assert one(r, answer(resolution=HALF)) == pytest.approx(0.5)


# -------------------------------------------------------------------------------------------------- combined
def test_defaults_combine_six_named_components():
    reward = CombinedReward(triage_rewards())
    out = reward([sample(answer(confidence=1.0))])
    assert list(out.components) == ["format", "resolution", "grounding", "calibration", "parsimony", "repetition"]
    assert float(out.total[0]) == pytest.approx(6.0)
    stats = out.stats("reward")
    assert all(f"reward/{n}/mean" in stats for n in out.components)


@pytest.mark.parametrize(
    ("resolution", "escalate", "confidence", "total"),
    [
        (RIGHT, False, 0.9, 5.99),  # 5 + (1 - 0.1^2)
        (HALF, False, 0.9, 3.29),  # 0.6 + 0.5 + 1 + 0.19 + 0.5 + 0.5
        (HALF, True, 0.9, 2.34),  # content 0.25: 0.4 + 0.25 + 1 + 0.19 + 0.25 + 0.25
        ("restart the dns resolver service", False, 0.9, 2.34),
        ("Restart chronyd and step the clock with chronyc makestep", False, 0.9, 1.39),  # 0.2 + 1 + 0.19
        ("x", False, 0.0, 2.2),  # 0.2 + 1 + 1: the most a content-free answer keeps
        (SWAPPED, False, 0.9, 1.89),  # 0.2 + 0.5 + 1 + 0.19: a step out of order, no procedure, no style
        (SWAPPED, False, 0.0, 2.7),
        (", ".join(reversed(RIGHT.split(", "))), False, 0.9, 1.39),
    ],
)
def test_worked_examples_of_the_docs_table(resolution, escalate, confidence, total):
    """``docs/triage_rewards.md``'s worked examples, total by total."""
    out = CombinedReward(triage_rewards())([sample(answer(resolution, confidence=confidence, escalate=escalate))])
    assert float(out.total[0]) == pytest.approx(total, abs=1e-5)


@pytest.mark.parametrize(
    ("completion", "reason"),
    [
        ("I would restart the resolver and flush the caches.", "no_submission"),
        (answer() + answer(), "multiple_submissions"),
        (answer().replace('{"resolution": ', '{"resolution": "x", "resolution": ', 1), "duplicate_keys: resolution"),
        (answer()[:-1] + ', "notes": "checked"}', "extra_keys: notes"),
        ('{"name": "submit_resolution", "arguments": "{not json"}', "malformed_arguments: not JSON"),
    ],
)
def test_a_rejected_answer_scores_zero_on_every_component_with_its_reason(completion, reason):
    samples = [sample(completion), sample(answer())]
    out = CombinedReward(triage_rewards())(samples)
    assert all(float(v[0]) == 0.0 for v in out.components.values()) and float(out.total[0]) == 0.0
    assert float(out.total[1]) > 5.9  # the same batch's accepted answer is graded as usual
    assert samples[0].info["triage"]["reason"] == reason and samples[1].info["triage"]["reason"] == "ok"


def test_a_context_without_gold_data_is_a_clear_error():
    s = Sample(prompt="p", completion=answer(), context=Context(id="x", prompt=Prompt(text="p")))
    with pytest.raises(ValueError, match="gold"):
        TriageFormat()([s])
    stale = {k: v for k, v in GOLD.items() if k != "gold_steps"}
    with pytest.raises(ValueError, match="gold_steps"):
        TriageResolution()([sample(answer(), stale)])
    assert isinstance(TriageFormat()([sample(answer())]), torch.Tensor)
