"""The auxiliary probe's training pool (the PROPEL paper's App. 12): what the main probe over-rewards, labeled negative.

Positives are the original corpus's valid positives. Negatives are the mined false positives (valid tasks the main
probe scored as useful whose real solve count fell outside the band) plus the valid tasks of the topic the
single-probe run collapsed to. The collapsed topic is named explicitly (``topic``) or found by a rule: the most
common topic among the valid rows of the ``topic_from`` pools (the mined pool, the single-probe policy's evaluation
pool), counted as collapsed only when its share reaches ``min_topic_share``. A task is identified by its parsed
task (the text the probe reads): one that is an original positive is never also a negative.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from propel.pools.io import read_pool, write_part
from propel.pools.rows import from_record


def _valid(frame: pd.DataFrame) -> pd.DataFrame:
    if not len(frame):
        return frame
    return frame[frame["valid"].astype(bool) & frame["task"].notna()]


def dominant_topic(frames: Sequence[pd.DataFrame]) -> tuple[str | None, float | None, int]:
    """The most common topic among the frames' valid rows with a topic (ties: the alphabetically first), its share
    of those rows, and how many rows had a topic; ``(None, None, 0)`` when none had one."""
    topics = pd.concat([_valid(f)["topic"] for f in frames if len(f)], ignore_index=True) if frames else pd.Series()
    topics = topics.dropna() if len(topics) else topics
    if not len(topics):
        return None, None, 0
    counts = topics.value_counts()
    best = sorted(counts[counts == counts.max()].index)[0]
    return str(best), float(counts[best] / len(topics)), len(topics)


def auxiliary_rows(
    original: pd.DataFrame,
    mined: pd.DataFrame,
    topic_frames: Sequence[pd.DataFrame] = (),
    topic: str | None = None,
    min_topic_share: float = 0.0,
    keep_negatives: bool = False,
) -> tuple[list[dict], dict]:
    """The auxiliary pool's rows (``SCHEMA``, negatives relabeled 0) and what went into it.

    Args:
        original: the labeled corpus the main probe trained on.
        mined: rows ``AdversarialProbeMining`` wrote (valid by construction; label 0 = out of band).
        topic_frames: pools whose valid rows decide the collapsed topic and give its negatives.
        topic: the collapsed topic by name; None finds it in ``topic_frames`` (``dominant_topic``).
        min_topic_share: a found topic below this share is not a collapse: no topic negatives are added.
        keep_negatives: also keep the original valid negatives.
    """
    valid = _valid(original)
    valid = valid[valid["label"].notna()]
    positives = valid[valid["label"] == 1]
    mined_valid = _valid(mined)
    false_pos = mined_valid[mined_valid["label"] == 0] if len(mined_valid) else mined_valid
    if not len(positives):
        raise ValueError("the original pool has no valid positive rows; the auxiliary probe needs them")
    found, share, n_topic = dominant_topic(list(topic_frames))
    if topic is None and found is not None and share is not None and share >= min_topic_share:
        topic = found
    topic_rows = []
    if topic is not None:
        for frame in topic_frames:
            rows = _valid(frame)
            topic_rows.append(rows[rows["topic"] == topic])
    if not len(false_pos) and not any(len(r) for r in topic_rows):
        raise ValueError("no mined false positives and no collapsed-topic tasks; nothing for the auxiliary probe")

    pos_tasks = set(positives["task"])
    seen: set[str] = set()
    out = [from_record(r) for r in positives.to_dict("records")]
    counts = {"false_positives": 0, "topic_negatives": 0, "original_negatives": 0, "dropped_positive_overlap": 0}
    sources = [("false_positives", false_pos, "")] + [("topic_negatives", r, "topic:") for r in topic_rows]
    if keep_negatives:
        sources.append(("original_negatives", valid[valid["label"] == 0], ""))
    for kind, frame, prefix in sources:
        for record in frame.to_dict("records"):
            task = record["task"]
            if task in pos_tasks:
                counts["dropped_positive_overlap"] += 1
                continue
            if task in seen:
                continue
            seen.add(task)
            row = from_record(record)
            row.update(id=prefix + str(row["id"]), label=0)
            out.append(row)
            counts[kind] += 1
    info = {
        "positives": len(positives),
        **counts,
        "negatives": len(out) - len(positives),
        "rows": len(out),
        "topic": topic,
        "topic_found": found,
        "topic_share": share,
        "topic_rows_counted": n_topic,
        "min_topic_share": min_topic_share,
    }
    return out, info


def adversarial_pool(
    original: str | Path,
    mined: str | Path,
    output_dir: str | Path,
    keep_negatives: bool = False,
    topic_from: Sequence[str | Path] = (),
    topic: str | None = None,
    min_topic_share: float = 0.0,
) -> dict:
    """Write the auxiliary probe's training pool (``auxiliary_rows`` of the pool folders) into an empty folder;
    returns what went into it (class counts, the collapsed topic and its share)."""
    out = Path(output_dir)
    if any(out.glob("part-*.parquet")):
        raise FileExistsError(f"{out} already holds a pool; pick an empty folder")
    found = read_pool(mined)
    if not len(found) and not topic_from:
        raise ValueError(f"{mined}: no mined false positives; nothing for the auxiliary probe to learn")
    try:
        rows, info = auxiliary_rows(
            read_pool(original),
            found,
            [read_pool(p) for p in topic_from],
            topic=topic,
            min_topic_share=min_topic_share,
            keep_negatives=keep_negatives,
        )
    except ValueError as err:
        raise ValueError(f"{original} + {mined}: {err}") from None
    write_part(out, rows)
    return info
