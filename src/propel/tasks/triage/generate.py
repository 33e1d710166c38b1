"""A reproducible synthetic ticket set: ``generate_tickets(n, seed)`` gives the same tickets for the same arguments.

Each ticket instantiates one issue of ``bank.ISSUES`` (round-robin over the categories, so the set is balanced) with
drawn host, site, user and time; its retrieved articles are the issue's runbook (gold), the category's escalation
policy when the issue calls for escalation (gold), and ``distractors`` other runbooks (two from the same category
where possible, the rest from others), shuffled.
"""

from __future__ import annotations

import random

from propel.errors import ConfigError
from propel.tasks.triage.bank import CATEGORIES, ESCALATION_ARTICLES, ISSUES, PREFIX, SLOTS, Issue
from propel.tasks.triage.schema import Article, Ticket


def knowledge_base() -> dict[str, Article]:
    """Every article of the synthetic knowledge base by id (runbooks ``KB-NET-001``..., policies ``KB-NET-900``)."""
    articles: dict[str, Article] = {}
    for category in CATEGORIES:
        issues = [i for i in ISSUES if i.category == category]
        for k, issue in enumerate(issues, start=1):
            article_id = f"KB-{PREFIX[category]}-{k:03d}"
            articles[article_id] = Article(article_id, issue.title, _numbered(issue.steps))
        title, steps = ESCALATION_ARTICLES[category]
        policy_id = f"KB-{PREFIX[category]}-900"
        articles[policy_id] = Article(policy_id, title, _numbered(steps))
    return articles


def _numbered(steps: tuple[str, ...]) -> str:
    return "\n".join(f"{i}. {s}" for i, s in enumerate(steps, start=1))


def _article_id(issue: Issue) -> str:
    same = [i for i in ISSUES if i.category == issue.category]
    return f"KB-{PREFIX[issue.category]}-{same.index(issue) + 1:03d}"


def generate_tickets(n: int = 240, seed: int = 0, distractors: int = 3) -> list[Ticket]:
    """``n`` tickets, balanced over the four categories, deterministic in ``seed``.

    Args:
        n: number of tickets (ids ``T0000``...).
        seed: the generator's seed.
        distractors: non-gold articles retrieved per ticket.
    """
    if n < 1 or distractors < 0:
        raise ConfigError(f"n must be >= 1 and distractors >= 0, got {n}, {distractors}")
    rng = random.Random(seed)
    kb = knowledge_base()
    by_category = {c: [i for i in ISSUES if i.category == c] for c in CATEGORIES}
    tickets = []
    for t in range(n):
        category = CATEGORIES[t % len(CATEGORIES)]
        issue = rng.choice(by_category[category])
        slots = {k: rng.choice(v) for k, v in SLOTS.items()}
        gold = [_article_id(issue)] + ([f"KB-{PREFIX[category]}-900"] if issue.escalate else [])
        same = [_article_id(i) for i in by_category[category] if i is not issue]
        other = [_article_id(i) for i in ISSUES if i.category != category]
        picked = rng.sample(same, min(2, distractors, len(same)))
        picked += rng.sample(other, distractors - len(picked))
        ids = gold + picked
        rng.shuffle(ids)
        tickets.append(
            Ticket(
                ticket_id=f"T{t:04d}",
                category=category,
                subject=rng.choice(issue.subjects).format(**slots),
                body=rng.choice(issue.bodies).format(**slots),
                articles=tuple(kb[i] for i in ids),
                gold_ids=tuple(gold),
                gold_resolution=issue.resolution.format(**slots),
                escalate=issue.escalate,
                distractor_ids=tuple(picked),
            )
        )
    return tickets
