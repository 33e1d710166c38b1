"""The task pool's columns: one row per generated task, its validity, its solver trials and its utility label."""

from __future__ import annotations

import pyarrow as pa

SCHEMA = pa.schema(
    [
        ("id", pa.string()),  # the context id (resume key)
        ("group", pa.string()),  # the context group (grouped splits)
        ("domain", pa.string()),
        ("context", pa.string()),  # the generator prompt as JSON
        ("completion", pa.string()),  # the raw generation
        ("task", pa.string()),  # the parsed task as JSON (null when malformed)
        ("valid", pa.bool_()),
        ("reason", pa.string()),  # why invalid ("ok" when valid)
        ("grades", pa.list_(pa.bool_())),  # one per solver trial (valid tasks only)
        ("solve_count", pa.int32()),
        ("label", pa.int8()),  # 1 iff solve_count is in the utility band
        ("topic", pa.string()),
        ("n_trials", pa.int32()),
        ("solver_tokens", pa.int64()),
        ("exact_p", pa.float64()),  # the solver's exact solve probability (teacher forcing), where computed
    ]
)
COLUMNS = list(SCHEMA.names)

MINED_SCHEMA = SCHEMA.append(pa.field("probe_logit", pa.float32())).append(pa.field("step", pa.int64()))
"""Rows adversarial probe mining writes: the pool row plus the probe's logit and the GRPO step."""
