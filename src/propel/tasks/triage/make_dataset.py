"""Write the synthetic triage set: ``python -m propel.tasks.triage.make_dataset --out DIR --seed 0``.

Writes ``DIR/tickets.parquet`` (``--n`` tickets, 240 by default, balanced over networking, security, cloud and
infrastructure) and prints a one-line summary. The same seed always gives the same file contents.
"""

from __future__ import annotations

import argparse
from collections import Counter

from propel.tasks.triage.generate import generate_tickets
from propel.tasks.triage.io import write_jsonl, write_parquet


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n", type=int, default=240, help="number of tickets")
    parser.add_argument("--distractors", type=int, default=3, help="non-gold articles per ticket")
    parser.add_argument("--jsonl", action="store_true", help="also write tickets.jsonl")
    args = parser.parse_args(argv)
    tickets = generate_tickets(args.n, args.seed, args.distractors)
    path = write_parquet(tickets, f"{args.out}/tickets.parquet")
    if args.jsonl:
        write_jsonl(tickets, f"{args.out}/tickets.jsonl")
    counts = Counter(t.category for t in tickets)
    escalate = sum(t.escalate for t in tickets)
    print(f"wrote {len(tickets)} tickets to {path} ({dict(sorted(counts.items()))}; {escalate} escalate)")


if __name__ == "__main__":
    main()
