"""The pool row of a scored sample (and back from a pandas record), built in one place for every writer."""

from __future__ import annotations

import json
from dataclasses import asdict

from propel.domains.trials import Trials
from propel.pools.schema import SCHEMA
from propel.records import Sample


def pool_row(
    sample: Sample,
    domain: str,
    n_trials: int,
    trials: Trials | None = None,
    band: tuple[int, int] | None = None,
    **extra,
) -> dict:
    """One row in ``SCHEMA`` (plus ``extra`` columns, e.g. ``probe_logit``): id, group and prompt from the sample's
    context; the environment's verdict; the solver ``trials`` and their ``band`` label when the task was tried."""
    ctx = sample.context
    if ctx is None:
        raise ValueError("pool_row needs a sample with its context (id, group, prompt)")
    row = {
        "id": ctx.id,
        "group": ctx.group,
        "domain": domain,
        # generator prompts are text or messages; a token-id prompt is kept only when it is one (rows stay as before)
        "context": json.dumps(
            {k: v for k, v in asdict(ctx.prompt).items() if k != "token_ids" or v is not None}, sort_keys=True
        ),
        "completion": sample.completion,
        "task": sample.task.to_json() if sample.task is not None else None,
        "valid": bool(sample.valid),
        "reason": sample.info.get("reason", "unchecked"),
        "grades": None,
        "solve_count": None,
        "label": None,
        "topic": None,
        "n_trials": n_trials,
        "solver_tokens": 0,
        "exact_p": sample.info.get("exact_p"),
    }
    if trials is not None:
        if band is None:
            raise ValueError("pool_row: a row with solver trials needs the utility band")
        row.update(
            grades=list(trials.grades),
            solve_count=trials.solve_count,
            label=int(trials.in_band(band)),
            topic=sample.topic,
            solver_tokens=trials.tokens,
        )
    row.update(extra)
    return row


def from_record(record: dict) -> dict:
    """A pandas record back in ``SCHEMA``'s Python types (labels and counts as ints, grades as bools, nulls as None:
    pandas reads a null string or number as NaN, which the schema would refuse)."""
    row = {f.name: _null(record.get(f.name)) for f in SCHEMA}
    for key in ("solve_count", "label", "n_trials", "solver_tokens"):
        row[key] = None if row[key] is None else int(row[key])
    row["grades"] = None if row["grades"] is None else [bool(g) for g in row["grades"]]
    row["valid"] = bool(row["valid"])
    return row


def _null(value):
    return None if isinstance(value, float) and value != value else value
