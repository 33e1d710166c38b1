"""Per-test outcomes from pytest's JUnit XML, with the standard library's parser, refusing DTDs and entities."""

from __future__ import annotations

import xml.etree.ElementTree as ET

OUTCOMES = ("passed", "failed", "error", "skipped")


class ReportError(ValueError):
    """The report is not a JUnit XML document pytest could have written."""


def parse_junit(text: str, keys: str = "name") -> dict[str, str]:
    """``{test: outcome}`` (``passed``/``failed``/``error``/``skipped``) of every ``<testcase>``, keyed by its
    ``name`` (``keys="name"``) or by ``classname::name`` (``keys="id"``: names repeat across a repository's modules).

    A test is passed only when its testcase has no ``failure``, ``error`` or ``skipped`` child (an xfail is reported
    as skipped; an xpass as passed, pytest's own convention). A test seen twice (a teardown error after a pass) keeps
    its worst outcome. Raises ``ReportError`` for malformed XML or a document with a DOCTYPE (entity expansion).
    """
    if keys not in ("name", "id"):
        raise ValueError(f"parse_junit keys must be 'name' or 'id', got {keys!r}")
    if "<!DOCTYPE" in text or "<!ENTITY" in text:
        raise ReportError("the report declares a DOCTYPE or entities")
    try:
        root = ET.fromstring(text)
    except ET.ParseError as e:
        raise ReportError(f"the report is not well-formed XML: {e}") from e
    if root.tag not in ("testsuites", "testsuite"):
        raise ReportError(f"the report's root is <{root.tag}>, not <testsuites>")
    outcomes: dict[str, str] = {}
    rank = {o: i for i, o in enumerate(OUTCOMES)}
    for case in root.iter("testcase"):
        name = case.get("name")
        if not name:
            continue
        key = name if keys == "name" else f"{case.get('classname') or ''}::{name}"
        children = {child.tag for child in case}
        outcome = next((o for o in ("error", "failure", "skipped") if o in children), "passed")
        outcome = "failed" if outcome == "failure" else outcome
        if key not in outcomes or rank[outcome] > rank[outcomes[key]]:
            outcomes[key] = outcome
    return outcomes
