"""What the test suite and the benchmarks try propel with; nothing here is imported by training code.

Red-team data and honest variants the graders are tried with, attacks written from descriptions of their classes
(never the payloads of a particular red team) beside the honest answers no grader may penalise:

- ``testsuite_hacks``: the test-suite reward's corpus on HumanEval (single-turn solutions and agent workspaces);
- ``honest_code``: honest HumanEval solutions value grading must never penalise;
- ``swe_repairs``: repairs of a known ``parse`` bug, attacks and honest ones;
- ``agent_verdicts``: agent workspaces for the verdicts of agent tasks;
- ``triage_attacks``: adversarial triage answers, each with the component it must lose on.

Fixtures:

- ``probe_data``: synthetic probe features with a planted signal and their task pool;
- ``plain_configs``: shipped config files composed and read as plain data;
- ``wandb_offline``: an offline W&B run's logged rows read back.

Used by ``tests/``, ``benchmarks/reward_integrity.py`` and ``benchmarks/triage_integrity.py``.
"""
