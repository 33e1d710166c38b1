"""Trajectories on disk: one Parquet row per episode that a person can open (pandas, DuckDB) and propel reads back
losslessly.

Flat columns say what happened at a glance (``context_id``, ``finish_reason``, ``reward``, ``turns``, ``solved``,
``infra_error``, the full ``token_ids`` with their ``loss_mask`` and ``turn_index``: for a step-wise episode, those of
its last segment, the earlier segments being in ``record``); ``turns`` holds every turn as a struct (role, text,
token ids, logprobs, finish reason, per-turn info as JSON); ``record`` holds the rest of the ``Sample`` as JSON.
Files are written under a temporary name and renamed, so a kill never leaves half a file.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from propel.durable import write_with
from propel.records import Context, Prompt, Sample, Turn

_TURN = pa.struct(
    [
        ("role", pa.string()),
        ("text", pa.string()),
        ("token_ids", pa.list_(pa.int64())),
        ("logprobs", pa.list_(pa.float64())),
        ("trainable", pa.bool_()),
        ("finish_reason", pa.string()),
        ("info", pa.string()),
    ]
)
SCHEMA = pa.schema(
    [
        ("context_id", pa.string()),
        ("finish_reason", pa.string()),
        ("reward", pa.float64()),
        ("turns_taken", pa.int64()),
        ("solved", pa.bool_()),
        ("infra_error", pa.string()),
        ("prompt", pa.string()),
        ("prompt_ids", pa.list_(pa.int64())),
        ("token_ids", pa.list_(pa.int64())),
        ("loss_mask", pa.list_(pa.int8())),
        ("turn_index", pa.list_(pa.int32())),
        ("turns", pa.list_(_TURN)),
        ("segments", pa.int64()),
        ("record", pa.string()),
    ]
)


def _turn_row(t: Turn) -> dict:
    return {
        "role": t.role,
        "text": t.text,
        "token_ids": list(t.token_ids),
        "logprobs": None if t.logprobs is None else list(t.logprobs),
        "trainable": t.trainable,
        "finish_reason": t.finish_reason,
        "info": json.dumps(t.info, sort_keys=True, default=str),
    }


def _turn(t: dict) -> Turn:
    logprobs = None if t["logprobs"] is None else list(t["logprobs"])
    return Turn(t["role"], t["text"], list(t["token_ids"]), logprobs, t["trainable"], t["finish_reason"],
                json.loads(t["info"]))  # fmt: skip


def _row(s: Sample) -> dict:
    mask = [0] * len(s.prompt_ids) + [int(t.trainable) for t in s.turns for _ in t.token_ids]
    index = [-1] * len(s.prompt_ids) + [k for k, t in enumerate(s.turns) for _ in t.token_ids]
    record = {
        "completion": s.completion,
        "valid": s.valid,
        "task": s.task if s.task is None or isinstance(s.task, (str, int, float, dict, list)) else asdict(s.task),
        "topic": s.topic,
        "info": s.info,
        "context": None if s.context is None else asdict(s.context),
        "artifacts": s.artifacts,
        "segments": [  # earlier segments of a step-wise episode (the flat columns hold the last one)
            {"prompt": g.prompt, "prompt_ids": list(g.prompt_ids), "turns": [_turn_row(t) for t in g.turns]}
            for g in s.segments
        ],
    }
    return {
        "context_id": None if s.context is None else s.context.id,
        "finish_reason": s.info.get("finish_reason"),
        "reward": s.info.get("reward"),
        "turns_taken": sum(t.trainable for t in s.all_turns),
        "solved": bool(s.artifacts.get("verifier", {}).get("passed", False)),
        "infra_error": s.infra_error,
        "prompt": s.prompt,
        "prompt_ids": list(s.prompt_ids),
        "token_ids": list(s.prompt_ids) + s.response_ids,
        "loss_mask": mask,
        "turn_index": index,
        "turns": [_turn_row(t) for t in s.turns],
        "segments": len(s.segments) + 1,
        "record": json.dumps(record, sort_keys=True, default=str),
    }


def write_trajectories(samples: Sequence[Sample], path: str | Path) -> Path:
    """Write ``samples`` to one Parquet file, atomically and durably (``propel.durable.write_with``)."""
    table = pa.Table.from_pylist([_row(s) for s in samples], schema=SCHEMA)
    return write_with(path, lambda tmp: pq.write_table(table, tmp))


def read_trajectories(path: str | Path) -> list[Sample]:
    """The samples of a file written by ``write_trajectories`` (parsed tasks come back as plain dicts)."""
    out = []
    for row in pq.read_table(path).to_pylist():
        record = json.loads(row["record"])
        ctx = record["context"]
        context = None
        if ctx is not None:
            prompt = Prompt(**{k: v for k, v in ctx.pop("prompt").items() if v is not None})
            context = Context(prompt=prompt, **ctx)
        turns = [_turn(t) for t in row["turns"]]
        segments = [
            Sample(
                g["prompt"], "", prompt_ids=list(g["prompt_ids"]), turns=[_turn(t) for t in g["turns"]], context=context
            )  # fmt: skip
            for g in record.get("segments", [])
        ]
        out.append(
            Sample(
                prompt=row["prompt"],
                completion=record["completion"],
                valid=record["valid"],
                task=record["task"],
                topic=record["topic"],
                info=record["info"],
                context=context,
                prompt_ids=list(row["prompt_ids"]),
                turns=turns,
                artifacts=record["artifacts"],
                infra_error=row["infra_error"],
                segments=segments,
            )
        )
    return out
