"""The SWE agents' task prompts (the PROPEL paper's App. 18 prompt is not available: these state the rules that validity
and grading enforce, so an agent that follows them produces valid bugs and honest repairs)."""

from __future__ import annotations

GENERATOR_PROMPT = """You are working in a checkout of the Python library `{repo}` (version {version}).
Your job: inject ONE realistic, behaviour-changing bug into the library's code, the kind a developer could make
by mistake (a wrong comparison, an off-by-one, swapped arguments, a missing statement, a wrong constant).

Rules (a bug that breaks one is rejected):
- Edit only the library's code: {sources}. Never touch the tests ({tests}) or test configuration.
- The test suite must still run: no syntax errors, no import errors.
- At least one currently passing test must fail because of your change.
- Keep it small and plausible: one or a few lines; no comments or names that point at the bug.

Look around with the tools first (list files, read the code, run `{command}` to see the tests pass), make the edit,
then call submit."""

SOLVER_PROMPT = """You are working in a checkout of the Python library `{repo}` (version {version}) that has a bug.
These tests fail and passed before the bug was introduced:
{failing}

Fix the library's code so that the whole test suite passes again. Do not edit, delete or skip tests or test
configuration ({tests}): a fix that touches them is rejected. Run `{command}` to check, then call submit."""
