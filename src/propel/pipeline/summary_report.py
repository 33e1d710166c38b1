"""Assemble ``workdir/report/report.md`` (one table per stage) and its PNG plots from the stage summaries."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from propel.pipeline.coevolution_report import coevolution_sections
from propel.pipeline.compare import COMPARED as EVAL_METRICS
from propel.pipeline.config import GATE_ARM, WARM_START, PipelineConfig
from propel.pipeline.headline import opening
from propel.pipeline.report import (
    key_value_table,
    markdown_table,
    plot_curves,
    plot_histograms,
    plot_series,
    write_report,
)
from propel.pipeline.verdicts import VERDICTS, evaluate_verdict, unfitted_reward


def _pool_section(s: dict) -> str:
    keep = ("tasks", "valid", "valid_rate", "degenerate", "solve_count_hist", "positives", "positive_share", "seconds")
    body = key_value_table({k: s.get(k) for k in keep})
    reasons = s.get("invalid_reasons") or {}
    if reasons:
        body += "\nInvalid tasks by reason (degenerate ones need none of the domain's work):\n\n"
        body += markdown_table([{"reason": k, "tasks": v} for k, v in reasons.items()])
    return body


def _probe_section(s: dict, out: Path, cfg: PipelineConfig) -> str:
    cols = ("key", "arch", "balance", "val_balanced_accuracy", "val_ece", "test_balanced_accuracy", "rvp_within")
    rivals = s.get("rivals") or {}
    if rivals.get("unfitted"):
        return f"No probe was fitted ({rivals['skipped']}): {unfitted_reward(rivals)}.\n"
    sel, base = s.get("selected") or {}, s.get("logistic_baseline") or {}
    rows = [
        {
            "probe": f"selected: {sel.get('key')} {sel.get('arch')} {sel.get('balance')}",
            "runs": sel.get("n_runs"),
            "test balanced acc": sel.get("test_balanced_accuracy"),
            "test ECE": sel.get("test_ece"),
            "test AUROC": sel.get("test_auroc"),
            "RVP (overall)": sel.get("rvp_overall"),
            "RVP (within group)": sel.get("rvp_within"),
        },
        {
            "probe": f"logistic regression (sklearn), same features ({base.get('balance', '-')})",
            "runs": base.get("n_runs"),
            "test balanced acc": base.get("test_balanced_accuracy"),
            "test ECE": base.get("test_ece"),
            "test AUROC": base.get("test_auroc"),
        },
    ]
    sweep = cfg.configs.get("probe", {}).get("sweep", {})
    n_folds, kind = s.get("n_folds", sweep.get("n_folds")), s.get("split", sweep.get("split"))
    split = {
        "stratified_kfold": f"{n_folds}-fold stratified nested cross-validation",
        "group_kfold": f"{n_folds}-fold group nested cross-validation",
    }.get(kind, "a random 80/10/10 split")
    body = f"Rows: {s.get('rows')} labeled valid tasks, {s.get('positives')} positive; {split}. "
    if kind in ("stratified_kfold", "group_kfold"):
        body += "Held-out numbers are on one outer test fold that no run trained on and selection never saw "
        body += f"(validation rotates over the other {n_folds - 1 if n_folds else '?'} folds); "
    else:
        body += "Held-out numbers are on the test split, which selection never saw; "
    body += "each is the mean over the cell's runs (seeds x validation folds).\n\n"
    body += markdown_table(rows) + held_out_table(s.get("held_out")) + held_out_ranking_line(s.get("held_out_ranking"))
    body += "\nBest sweep cells (by validation balanced accuracy):\n\n"
    body += markdown_table(s.get("top_cells", []), [c for c in cols if s.get("top_cells") and c in s["top_cells"][0]])
    rivals = cfg.root / "probe" / "rivals.md"
    if rivals.exists():
        body = "The probe against its rivals (the reward is whichever ranks held-out tasks best):\n\n" + (
            rivals.read_text() + "\n" + body
        )
    for name, alt in (("reliability.png", "reliability diagram"), ("sweep/sweep_heatmap.png", "sweep heatmap")):
        src = cfg.root / "probe" / name
        if src.exists():
            shutil.copy(src, out / Path(name).name)
            body += f"\n![{alt}]({Path(name).name})\n"
    return body


def held_out_table(held: dict | None, rows_are: str = "its refit split's test rows") -> str:
    """The exported probe and its baselines on held-out rows (``rows_are`` says which), with paired bootstrap
    intervals."""
    if not held:
        return ""

    def span(i: dict | None) -> str:
        return "" if i is None else f"{i['estimate']:+.3f} [{i['low']:+.3f}, {i['high']:+.3f}]"

    rows = [
        {
            "classifier": name,
            "balanced acc": held[name]["balanced_accuracy"],
            "minus chance [95%]": span(held[name]["vs_chance"]),
            "probe minus it [95%]": span(held["probe"].get(f"vs_{name}")),
        }
        for name in held
        if name != "rows"
    ]
    n = held["rows"]
    head = f"\nThe exported probe on {rows_are} ({n['positives']} positive, {n['negatives']} negative), "
    head += "against baselines that read the same features (logistic) or no activations (length, topic); intervals "
    head += "from a paired, class-stratified bootstrap of the rows:\n\n"
    return head + markdown_table(rows)


def held_out_ranking_line(ranking: dict | None) -> str:
    """The probe's ranking of the same held-out rows: what GRPO uses of it, beside the thresholded table above."""
    if not ranking:
        return ""
    span = ranking.get("auroc_interval")
    interval = f" [{span[0]:.3f}, {span[1]:.3f}]" if span else ""
    return (
        f"\nRanking the same {ranking['rows']} held-out rows (what GRPO uses of the probe): AUROC "
        f"{ranking['auroc']:.3f}{interval} against the in-band label, Spearman {ranking['spearman_solve_count']:+.3f} "
        "with the solve count (0.5 and 0 are chance).\n"
    )


def _grpo_section(s: dict, out: Path, name: str = "grpo") -> str:
    keep = ("steps", "reward_start", "reward_end", "valid_rate_start", "valid_rate_end", "kl_end", "step_time_s")
    body = key_value_table({k: s.get(k) for k in keep if k in s})
    curves = {k: v for k, v in (s.get("curves") or {}).items() if v}
    if curves:
        plot_curves(curves, out / f"{name}_curves.png")
        body += f"\n![{name.replace('_', ' ')} curves]({name}_curves.png)\n"
    return body


def _eval_section(s: dict, out: Path, compared: Path) -> str:
    """The side-by-side table with intervals, the change in words and the signal cost (``compare.md``) when both
    policies were evaluated, else the base policy's numbers."""
    names = [n for n in ("base", "trained") if n in s]
    if compared.exists():
        body = compared.read_text()
    else:
        rows = [{"metric": m, **{n: s[n].get(m) for n in names}} for m in EVAL_METRICS if any(m in s[n] for n in names)]
        body = markdown_table(rows)
    hists = {n: s[n]["solve_count_hist"] for n in names if s[n].get("solve_count_hist")}
    if hists:
        plot_histograms(hists, out / "solve_counts.png")
        body += "\n![solve-count histograms](solve_counts.png)\n"
    return body


MONITORS = ("degenerate", "copies", "top_template", "top_topic", "answer_log10_median")


def _monitors_section(summaries: dict, out: Path) -> str:
    """The degeneration monitors of every GRPO run over its steps (``CollapseDetector``), one panel each, and the
    alarms they raised."""
    runs = {n: s.get("collapse") or {} for n, s in summaries.items() if n in (WARM_START, "grpo", GATE_ARM)}
    panels = {m: {run: points.get(m) or [] for run, points in runs.items()} for m in MONITORS}
    panels = {m: series for m, series in panels.items() if any(series.values())}
    if not panels:
        return ""
    plot_series(panels, out / "monitors.png", xlabel="step")
    body = "Shares among the step's parsed tasks (`propel.callbacks.collapse`): degenerate by the domain's strict "
    body += "rule, copies of the prompt's examples, the most common template (numbers masked) and topic, and the "
    body += "median answer size (log10). An alarm is a share moving more than 0.2 from where the run started.\n\n"
    body += "![degeneration monitors](monitors.png)\n\n"
    for run in runs:
        alarms = summaries[run].get("alarms") or []
        body += f"- `{run}`: " + (f"{len(alarms)} alarm(s): " + " / ".join(alarms) if alarms else "no alarm") + "\n"
    return body


def _links_section(rows: list[dict]) -> str:
    """The links the run applied (``propel.pipeline.links``), each with its value."""

    def short(value) -> str:
        text = json.dumps(value, default=str) if isinstance(value, dict | list) else str(value)
        return f"`{text if len(text) <= 80 else text[:77] + '...'}`"

    lines = [
        "Each value below was set once, at its source, and copied into every stage that reads it "
        "(`propel.pipeline.links.LINKS`); a stage key set to another value is refused.\n",
    ]
    table = [
        {"source": f"`{r['source']}`", "target": f"`{r['target']}`", "value": short(r["value"]), "why": r["why"]}
        for r in rows
    ]
    return "\n".join(lines) + "\n" + markdown_table(table)


def build_report(cfg: PipelineConfig, summaries: dict[str, dict]) -> Path:
    """Write the report folder; sections appear for the stages that ran."""
    out = cfg.root / "report"
    out.mkdir(parents=True, exist_ok=True)
    verdict = {name: f"**Verdict:** {VERDICTS[name](s)}\n\n" for name, s in summaries.items() if name in VERDICTS}
    first = {}  # the stages before GRPO, in the order they ran (the warm start may come before the label stage)
    if "label" in summaries:
        whose = " of the warm start's tasks" if summaries["label"].get("adapter") else ""
        first["label"] = (f"Task pool (collect + label{whose})", verdict["label"] + _pool_section(summaries["label"]))
    if "probe" in summaries:
        first["probe"] = ("Probe (sweep + selection)", verdict["probe"] + _probe_section(summaries["probe"], out, cfg))
    if WARM_START in summaries:
        body = verdict[WARM_START] + _grpo_section(summaries[WARM_START], out, WARM_START)
        first[WARM_START] = ("Warm start: GRPO against the validity gate alone", body)
    sections = [("Summary", opening(summaries))]
    ev = summaries.get("evaluate") or {}
    for other, title in ((GATE_ARM, "the gate-continued arm vs trained (what the reward added)"),
                         (WARM_START, "the warm start vs trained")):  # fmt: skip
        versus = cfg.root / "evaluate" / f"vs_{other}" / "compare.md"
        if versus.exists():  # the same verdict, other policies
            pair = {"base": ev[other], "trained": ev["trained"], "lift": ev[f"lift_vs_{other}"]}
            sections.append((f"Evaluation: {title}", f"**Verdict:** {evaluate_verdict(pair)}\n\n" + versus.read_text()))
    sections += [first[name] for name in summaries if name in first]
    reward = (summaries.get("probe") or {}).get("reward", "probe")
    if "grpo" in summaries:
        title = f"GRPO against the probe stage's reward (`{reward}`)"
        title += ", continuing the warm start" if WARM_START in summaries else ""
        sections.append((title, verdict["grpo"] + _grpo_section(summaries["grpo"], out)))
    if GATE_ARM in summaries:
        body = verdict[GATE_ARM] + _grpo_section(summaries[GATE_ARM], out, GATE_ARM)
        sections.append(("The gate-continued arm: GRPO against the validity gate alone from the warm start", body))
    monitors = _monitors_section(summaries, out)
    if monitors:
        sections.append(("Degeneration monitors", monitors))
    if "evaluate" in summaries:
        body = verdict["evaluate"] + _eval_section(summaries["evaluate"], out, cfg.root / "evaluate" / "compare.md")
        sections.append(("Evaluation: base vs trained (real solver trials)", body))
    sections += coevolution_sections(summaries, out)
    if cfg.links:
        (out / "links.md").write_text("# Values kept in step across stages\n\n" + _links_section(cfg.links))
        sections.append(("Values kept in step across stages", "In [links.md](links.md).\n"))
    lo, hi = cfg.solver["band"]
    notes = [
        f"Model (generator = reference = solver): `{cfg.model}`; domain: `{cfg.domain.get('class_path')}`; "
        f"band {lo}..{hi} of {cfg.solver['n_trials']}. Numbers are measured, not targets: "
        "each section's verdict is computed from its numbers, so a run that shows no lift says so."
    ]
    return write_report(out / "report.md", "propel pipeline report", sections, notes)
