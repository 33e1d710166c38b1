"""The co-evolution part of the pipeline report: the auxiliary pool and the topic the single-probe run collapsed to,
the auxiliary probe, collapse per step under each GRPO arm (plotted), and the arms table with its changes."""

from __future__ import annotations

from pathlib import Path

from propel.pipeline.compare import arms_lift_table
from propel.pipeline.config import ALL_STAGES
from propel.pipeline.report import key_value_table, markdown_table, plot_series

GRPO_ARMS = {"grpo": "single", "constrained": "constrained", "auxiliary": "auxiliary"}
"""The GRPO stages whose per-step collapse metrics are plotted, under their arm names."""


def collapsed_topic_words(pool: dict) -> str:
    """The topic the single-probe run collapsed to, named, with the share it held (or why none was named)."""
    topic, found, share = pool.get("topic"), pool.get("topic_found"), pool.get("topic_share")
    counted = pool.get("topic_rows_counted")
    if topic is not None and topic == found and share is not None:
        return (
            f"The single-probe run collapsed to topic **{topic}**: {share:.0%} of the {counted} valid tasks with a "
            f"topic in {', '.join('/'.join(Path(p).parts[-2:]) for p in pool.get('topic_from', [])) or 'no pool'}."
        )
    if topic is not None:
        return f"Collapsed topic set by the config: **{topic}** (the most common found was {found!r})."
    if found is not None:
        return (
            f"No collapsed topic: the most common, **{found}**, held {share:.0%} of {counted} valid tasks, below "
            f"the rule's {pool.get('min_topic_share')}."
        )
    return "No collapsed topic: no valid task with a topic in the topic pools."


def _pool_section(s: dict) -> str:
    keep = ("positives", "false_positives", "topic_negatives", "original_negatives", "dropped_positive_overlap")
    body = collapsed_topic_words(s) + "\n\n"
    return body + key_value_table({k: s.get(k) for k in (*keep, "rows", "seconds")})


def _aux_probe_section(s: dict) -> str:
    sel = s.get("selected") or {}
    keep = ("key", "arch", "balance", "test_balanced_accuracy", "test_ece", "test_auroc", "rvp_overall")
    return f"Rows: {s.get('rows')}, {s.get('positives')} positive.\n\n" + key_value_table({k: sel.get(k) for k in keep})


def _collapse_section(summaries: dict, out: Path) -> str:
    panels = {"top-topic share": {}, "Self-BLEU-3": {}}
    rows = []
    for stage, arm in GRPO_ARMS.items():
        curves = (summaries.get(stage) or {}).get("collapse") or {}
        top, bleu = curves.get("top_topic") or [], curves.get("self_bleu") or []
        if not (top or bleu):
            continue
        panels["top-topic share"][arm], panels["Self-BLEU-3"][arm] = top, bleu
        rows.append(
            {
                "arm": arm,
                "checks": max(len(top), len(bleu)),
                "top-topic first": top[0][1] if top else None,
                "top-topic last": top[-1][1] if top else None,
                "Self-BLEU-3 first": bleu[0][1] if bleu else None,
                "Self-BLEU-3 last": bleu[-1][1] if bleu else None,
            }
        )
    if not rows:
        return "No collapse metrics were logged (add `CollapseDetector` to the GRPO templates).\n"
    plot_series(panels, out / "collapse.png", xlabel="step")
    body = "Measured by `CollapseDetector` over all generations of the step, every `every_n_steps`.\n\n"
    return body + markdown_table(rows) + "\n![collapse per step, per arm](collapse.png)\n"


def _arms_section(s: dict) -> str:
    body = s.get("table", "")
    if s.get("lift"):
        body += "\nChanges (later arm - earlier arm) with their intervals:\n\n" + arms_lift_table(s["lift"]) + "\n"
        for pair, changes in s["lift"].items():
            body += "".join(f"- {pair}: {changes[k]['words']}\n" for k in ("utility", "valid_rate") if k in changes)
    return body


def _times(summaries: dict) -> str:
    rows = [{"stage": n, "seconds": summaries[n].get("seconds")} for n in ALL_STAGES if n in summaries]
    return markdown_table(rows)


def coevolution_sections(summaries: dict, out: Path) -> list[tuple[str, str]]:
    """The report sections of the co-evolution stages that ran (none when none did)."""
    sections = []
    if "aux_pool" in summaries:
        sections.append(("Co-evolution: auxiliary pool", _pool_section(summaries["aux_pool"])))
    if "aux_probe" in summaries:
        sections.append(("Co-evolution: auxiliary probe", _aux_probe_section(summaries["aux_probe"])))
    if any(s in summaries for s in ("constrained", "auxiliary")):
        sections.append(("Co-evolution: collapse per step, per arm", _collapse_section(summaries, out)))
    if "arms" in summaries:
        sections.append(("Co-evolution: arms (real solver trials)", _arms_section(summaries["arms"])))
    if sections:
        sections.append(("Stage wall times", _times(summaries)))
    return sections
