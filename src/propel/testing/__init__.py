"""Red-team data and honest variants the graders are tried with: attacks written from descriptions of their classes
(never the payloads of a particular red team) and the honest code no grader may penalise. Used by the test suite and
by ``benchmarks/reward_integrity.py``; nothing here is imported by training code."""
