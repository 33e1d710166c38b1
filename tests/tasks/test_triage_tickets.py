"""The triage domain: the synthetic set (reproducible, >= 200 tickets over four categories, consistent gold), the
Parquet/JSONL round trip and its errors, the prompt, the parser and the ticket source with its split."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pyarrow.parquet as pq
import pytest

from propel.datamodules.triage import TriageDataModule, TriageScorer
from propel.errors import ConfigError
from propel.records import Sample
from propel.tasks.triage import (
    TriageTickets,
    generate_tickets,
    load_tickets,
    parse_submission,
    render_ticket,
    split_of,
    ticket_context,
    write_jsonl,
    write_parquet,
)
from propel.tasks.triage.schema import REQUIRED, Ticket, split_steps


def test_synthetic_set_is_reproducible_balanced_and_consistent():
    tickets = generate_tickets(240, seed=0)
    assert [t.to_row() for t in tickets] == [t.to_row() for t in generate_tickets(240, seed=0)]
    assert [t.to_row() for t in tickets] != [t.to_row() for t in generate_tickets(240, seed=1)]
    assert Counter(t.category for t in tickets) == {
        c: 60 for c in ("networking", "security", "cloud", "infrastructure")
    }
    assert len({t.ticket_id for t in tickets}) == 240
    assert 0.1 < sum(t.escalate for t in tickets) / 240 < 0.5  # both answers of the escalation call occur
    for t in tickets:
        ids = [a.id for a in t.articles]
        assert set(t.gold_ids) <= set(ids) and len(t.distractor_ids) == 3
        assert set(t.distractor_ids) == set(ids) - set(t.gold_ids)
        assert ("KB-" + t.gold_ids[0].split("-")[1] + "-900" in t.gold_ids) == t.escalate  # the policy article
        assert "{" not in t.body + t.subject + t.gold_resolution  # every placeholder filled
    assert len({t.gold_ids[0] for t in tickets}) == 24  # every issue type of the bank is used


def test_parquet_and_jsonl_round_trip(tmp_path):
    tickets = generate_tickets(12, seed=3)
    assert load_tickets(write_parquet(tickets, tmp_path / "t.parquet")) == tickets
    assert load_tickets(write_jsonl(tickets, tmp_path / "t.jsonl")) == tickets
    assert pq.read_schema(tmp_path / "t.parquet").names[:3] == ["ticket_id", "category", "subject"]


def test_a_users_file_with_a_missing_column_names_it(tmp_path):
    rows = [t.to_row() for t in generate_tickets(3)]
    for row in rows:
        del row["gold_resolution"]
        del row["distractor_ids"]  # optional: filled in from the articles
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ConfigError, match=r"missing column\(s\) \['gold_resolution'\]"):
        load_tickets(path)
    import pyarrow as pa

    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "mine.parquet")
    with pytest.raises(ConfigError, match="gold_resolution"):
        load_tickets(tmp_path / "mine.parquet")
    rows[0]["gold_resolution"] = "x"
    for row in rows[1:]:
        row["gold_resolution"] = "y"
    rows[1]["gold_ids"] = ["KB-NOPE-1"]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(ConfigError, match="KB-NOPE-1"):
        load_tickets(path)
    with pytest.raises(ConfigError, match=".parquet or .jsonl"):
        (tmp_path / "x.csv").write_text("a,b\n")
        load_tickets(tmp_path / "x.csv")
    assert set(REQUIRED) >= {"ticket_id", "articles", "gold_ids", "escalate"}


def test_make_dataset_writes_the_parquet(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "propel.tasks.triage.make_dataset", "--out", str(tmp_path), "--seed", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "wrote 240 tickets" in out.stdout
    assert load_tickets(tmp_path / "tickets.parquet") == generate_tickets(240, seed=0)
    assert (tmp_path / "tickets.parquet").stat().st_size < 200_000


def test_prompt_shows_ticket_articles_with_ids_and_the_format():
    t = generate_tickets(4)[1]
    text = render_ticket(t)
    assert t.subject in text and t.body in text
    for a in t.articles:
        assert f"[{a.id}] {a.title}" in text and a.body in text
    assert "submit_resolution" in text and all(f'"{k}"' in text for k in ("resolution", "citations", "confidence"))
    assert t.gold_resolution not in text  # the answer is not in the prompt
    ctx = ticket_context(t)
    assert ctx.id == t.ticket_id and ctx.data["gold_ids"] == list(t.gold_ids) and ctx.data["escalate"] == t.escalate


def test_parser_finds_submissions_in_every_accepted_shape():
    body = {"resolution": "Flush the cache.", "citations": ["KB-NET-002"], "confidence": 0.6, "escalate": False}
    plain = parse_submission("Sure.\nsubmit_resolution " + json.dumps(body) + "\nDone.")
    assert plain.count == 1 and plain.reason == "ok" and plain.resolution == "Flush the cache."
    fenced = parse_submission("```json\n" + json.dumps(body) + "\n```")
    assert fenced.reason == "ok"
    tool = parse_submission(json.dumps({"name": "submit_resolution", "arguments": json.dumps(body)}))
    assert tool.reason == "ok" and tool.confidence == 0.6
    assert parse_submission(json.dumps(body) + json.dumps(body)).reason == "multiple_submissions"
    assert parse_submission("no json {here").reason == "no_submission"
    assert parse_submission('{"other": 1}').reason == "no_submission"
    bad = parse_submission(json.dumps({**body, "confidence": True, "citations": ["", 3]}))
    assert bad.reason == "invalid: citations,confidence" and bad.confidence is None and bad.citations == ["", ""]
    assert not bad.rejected and bad.field_errors == {
        "citations": "not a non-empty list of ids",
        "confidence": "not a number: True",  # a boolean is not a number
    }
    assert parse_submission(json.dumps({**body, "confidence": 1.5})).field_errors == {
        "confidence": "not a number in [0, 1]"
    }
    assert parse_submission(json.dumps({**body, "confidence": "0.9"})).field_errors == {
        "confidence": "not a number: '0.9'"
    }
    assert parse_submission(json.dumps({"resolution": "Flush."})).field_errors == dict.fromkeys(
        ("citations", "confidence", "escalate"), "missing"
    )


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("no json {here", "no_submission"),
        (
            '{"resolution": "a", "resolution": "b", "citations": [], "confidence": 1, "escalate": false}',
            "duplicate_keys: resolution",
        ),
        ('{"resolution": "a", "citations": [], "confidence": 1, "escalate": false, "note": 1}', "extra_keys: note"),
        (
            '{"name": "submit_resolution", "arguments": {"resolution": "a", "confidence": 1, "confidence": 0}}',
            "duplicate_keys: confidence",
        ),
        ('{"name": "submit_resolution", "id": 7, "arguments": {"resolution": "a"}}', "extra_keys: id"),
        ('{"name": "submit_resolution", "arguments": "{\\"resolution\\": \\"a\\", \\"x\\": 1}"}', "extra_keys: x"),
        ('{"name": "submit_resolution", "arguments": "not json"}', "malformed_arguments: not JSON"),
        ('{"name": "submit_resolution", "arguments": [1]}', "malformed_arguments: not an object"),
        ('{"resolution": "a"} then {"resolution": "b"}', "multiple_submissions"),
    ],
)
def test_parser_rejects_what_it_would_otherwise_choose_silently(text, reason):
    """Duplicate keys (JSON keeps the last), extra keys, a second submission, bad tool-call arguments: each is a
    named reason and the answer is rejected, not graded on a guess."""
    answer = parse_submission(text)
    assert answer.reason == reason and answer.rejected


def test_articles_split_into_steps_and_tickets_carry_gold_and_distractor_steps():
    assert split_steps("1. Restart it.\n2) Check the logs.\n- Tell the user.") == (
        "Restart it.",
        "Check the logs.",
        "Tell the user.",
    )
    assert split_steps("Restart it. Then check the logs! Done?") == ("Restart it.", "Then check the logs!", "Done?")
    t = generate_tickets(8, seed=0)[4]
    runbook = next(a for a in t.articles if a.id == t.gold_ids[0])
    assert t.gold_steps == runbook.steps and len(runbook.steps) == 4 and runbook.steps[0] in runbook.body
    distractors = [a for a in t.articles if a.id in t.distractor_ids]
    assert t.distractor_steps == tuple(s for a in distractors for s in a.steps) and len(t.distractor_steps) == 12
    data = t.grading_data()
    assert data["gold_steps"] == list(t.gold_steps) and data["distractor_steps"] == list(t.distractor_steps)
    assert json.loads(json.dumps(data)) == data  # plain JSON: it travels in contexts and pools
    no_gold = Ticket(t.ticket_id, t.category, t.subject, t.body, t.articles, (), "Restart it. Then test.", False)
    assert no_gold.gold_steps == ("Restart it.", "Then test.") and len(no_gold.distractor_steps) == 16


def test_ticket_source_splits_stably_and_draws_deterministically(tmp_path):
    train, held_out = TriageTickets(split="train"), TriageTickets(split="eval")
    ids_train, ids_eval = {t.ticket_id for t in train.tickets}, {t.ticket_id for t in held_out.tickets}
    assert not ids_train & ids_eval and len(ids_train | ids_eval) == 240 and 30 < len(ids_eval) < 70
    assert all(split_of(i, 0.2) == "eval" for i in ids_eval)
    assert [c.id for c in train.contexts(5, seed=7)] == [c.id for c in train.contexts(5, seed=7)]
    assert {t.category for t in TriageTickets(split=None, categories=["cloud"]).tickets} == {"cloud"}
    path = write_parquet(generate_tickets(20, seed=5), tmp_path / "own.parquet")
    assert len(TriageTickets(path=str(path), split=None).tickets) == 20
    with pytest.raises(ConfigError, match="split"):
        TriageTickets(split="test")
    with pytest.raises(ConfigError, match="distractors"):  # a file's tickets keep their own articles
        TriageTickets(path=str(path), split=None, distractors=0)


def test_distractors_set_the_retrieved_articles_and_keep_the_tickets():
    default, alone = TriageTickets(split="eval"), TriageTickets(split="eval", distractors=0)
    assert [t.ticket_id for t in alone.tickets] == [t.ticket_id for t in default.tickets]
    for t, a in zip(default.tickets, alone.tickets, strict=True):
        assert len(t.distractor_ids) == 3 and a.distractor_ids == ()
        assert {x.id for x in a.articles} == set(a.gold_ids) == set(t.gold_ids)
        assert (a.subject, a.body, a.gold_resolution) == (t.subject, t.body, t.gold_resolution)
    one, first = TriageTickets(split="eval", distractors=1).tickets[0], default.tickets[0]
    assert one.distractor_ids == first.distractor_ids[:1]
    assert [x.id for x in one.articles] == [x.id for x in first.articles if x.id not in first.distractor_ids[1:]]
    assert one.grading_data()["distractor_steps"] == [
        s for x in one.articles if x.id in one.distractor_ids for s in x.steps
    ]
    with pytest.raises(ConfigError, match="keep 0 to 3"):
        TriageTickets(split="eval", distractors=4)


def test_env_records_the_parse_verdict_and_topic():
    ctx = TriageTickets(split=None).contexts(1, seed=0)[0]
    good = "submit_resolution " + json.dumps(
        {"resolution": "Fix it.", "citations": ["KB-NET-001"], "confidence": 0.5, "escalate": False}
    )
    samples = [Sample(prompt="", completion=c, context=ctx) for c in (good, "no answer")]
    TriageScorer().score(samples)
    assert samples[0].valid and samples[0].task.data["confidence"] == 0.5 and samples[0].topic == ctx.data["category"]
    assert not samples[1].valid and samples[1].task is None and samples[1].info["triage"]["reason"] == "no_submission"
    dm = TriageDataModule(TriageTickets(), contexts_per_step=3, seed=1)
    assert [c.id for c in dm.batch_at(4).contexts] == [c.id for c in dm.batch_at(4).contexts]
    assert dm.stop == () and dm.scorer is dm.scorer


def test_a_forced_answer_prefix_opens_the_turn_and_the_graders_read_it_with_the_completion(tokenizer):
    from propel.engines.engine import chat_text
    from propel.rewards import triage_rewards
    from propel.rewards.combine import CombinedReward

    prefix = 'submit_resolution {"resolution": "'
    forced = TriageTickets(n=40, answer_prefix=prefix).contexts(3, seed=5)
    plain = TriageTickets(n=40).contexts(3, seed=5)
    assert [c.id for c in forced] == [c.id for c in plain]
    for f, p in zip(forced, plain, strict=True):
        assert f.prompt.messages == [*p.prompt.messages, {"role": "assistant", "content": prefix}]
        assert f.data == {**p.data, "answer_prefix": prefix}
        text = chat_text(tokenizer, f.prompt.messages)  # the model continues the opened turn
        assert text.endswith(prefix) and text.startswith(chat_text(tokenizer, p.prompt.messages))
    gold = plain[0].data
    rest = (
        f'{gold["gold_steps"][0]}. {gold["gold_steps"][1]}", "citations": {json.dumps(gold["gold_ids"])}, '
        f'"confidence": 0.7, "escalate": {json.dumps(gold["escalate"])}}}'
    )
    reward = CombinedReward(triage_rewards())
    with_prefix = Sample(prompt="p", completion=rest, context=forced[0])
    whole = Sample(prompt="p", completion=prefix + rest, context=plain[0])
    got, want = reward([with_prefix]), reward([whole])
    assert want.total.item() > 3.0  # a right, grounded answer: the comparison is not between two zeros
    assert got.total.tolist() == want.total.tolist()
    assert {k: v.tolist() for k, v in got.components.items()} == {k: v.tolist() for k, v in want.components.items()}
    scored = [
        Sample(prompt="p", completion=rest, context=forced[0]),
        Sample(prompt="p", completion=rest, context=plain[0]),
    ]
    TriageScorer().score(scored)
    assert [s.valid for s in scored] == [True, False]  # without the prefix the same completion is no submission
