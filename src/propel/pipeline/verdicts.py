"""One sentence per stage of the report, computed from the stage's numbers (never written by hand): does the pool
have positives, is the probe above chance and does it beat its baselines (with intervals), did GRPO raise its
reward and keep validity, did the trained generator's utility and validity change beyond a 95% interval."""

from __future__ import annotations

import math

Z95 = 1.96


def _num(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def change(name: str, before: float, after: float, n_before: int, n_after: int) -> str:
    """``name`` of two shares (of ``n`` tasks each) in words: risen or fallen beyond the 95% interval of the
    difference (normal approximation), else unchanged within it."""
    diff = after - before
    se = math.sqrt(before * (1 - before) / max(n_before, 1) + after * (1 - after) / max(n_after, 1))
    half = Z95 * se
    numbers = f"{before:.3g} -> {after:.3g}, 95% interval of the change ±{half:.2g}"
    if abs(diff) <= half:
        return f"{name} unchanged within the interval ({numbers})"
    return f"{name} {'rose' if diff > 0 else 'fell'} ({numbers})"


def pool_verdict(s: dict) -> str:
    tasks, valid, positives = s.get("tasks") or 0, s.get("valid") or 0, s.get("positives") or 0
    if not valid:
        return f"no valid task among {tasks}: nothing to label or to train a probe on."
    if not positives:
        return f"{valid} valid tasks, none in the band: the probe has no positive to learn from."
    text = f"{valid} valid tasks of {tasks}, {positives} in the band"
    return text + (": too few positives for stable probe numbers." if positives < 10 else ".")


BASELINE_NAMES = {"logistic": "logistic regression", "length_only": "length alone", "topic_only": "topic alone"}


def _span(i: dict) -> str:
    return f"{i['estimate']:+.3g}, 95% interval {i['low']:+.3g} to {i['high']:+.3g}"


def held_out_verdict(held: dict) -> str:
    """The probe on its held-out rows in words: against chance, then against each baseline, each by whether the
    paired bootstrap interval of the difference excludes zero."""
    probe, rows = held["probe"], held["rows"]
    where = f"{rows['positives']} positive and {rows['negatives']} negative held-out rows"
    chance = probe["vs_chance"]
    if chance["low"] > 0:
        text = f"the probe is above chance (held-out balanced accuracy {probe['balanced_accuracy']:.3g}; "
    elif chance["high"] < 0:
        text = f"the probe is below chance (held-out balanced accuracy {probe['balanced_accuracy']:.3g}; "
    else:
        text = "the probe is not distinguishable from chance "
        text += f"(held-out balanced accuracy {probe['balanced_accuracy']:.3g}; "
    text += f"minus 0.5: {_span(chance)}; {where})"
    parts = []
    for name, label in BASELINE_NAMES.items():
        diff = probe.get(f"vs_{name}")
        if diff is None:
            continue
        outcome = "beats" if diff["low"] > 0 else "is below" if diff["high"] < 0 else "is not distinguishable from"
        parts.append(f"{outcome} {label} ({_span(diff)})")
    return text + ("; it " + ", ".join(parts) if parts else "") + "."


def probe_verdict(s: dict) -> str:
    rivals = s.get("rivals") or {}
    if rivals.get("unfitted"):
        return f"no probe was fitted ({rivals['skipped']}): {unfitted_reward(rivals)}."
    return _probe_verdict(s) + reward_verdict(rivals)


def unfitted_reward(rivals: dict) -> str:
    """The reward of a probe stage that could fit no probe, in words."""
    rule = ", the domain's rule that fits nothing" if rivals["reward"] == "zero_fit" else " (as configured)"
    return f"the reward GRPO trains on is `{rivals['reward']}`{rule}"


def reward_verdict(rivals: dict | None) -> str:
    """Which ranker became the reward and why, in words (after the probe's own verdict, so that a weak probe and a
    reward that still pays do not read as a contradiction)."""
    if not rivals:
        return ""
    if rivals.get("skipped"):
        return f" The probe is the reward without competing: {rivals['skipped']}."
    lifts = rivals["lifts"]
    reward, best = rivals["reward"], lifts[rivals["reward"]]
    text = f" Ranking held-out tasks (best of {rivals['k']} over a random valid pick), `{reward}` did best "
    text += f"({best['lift']:+.3g}, 95% interval {best['low']:+.3g} to {best['high']:+.3g})"
    if rivals.get("forced"):
        text = f" The reward is `{reward}`, as configured (rivals.reward); its held-out lift {best['lift']:+.3g}"
    diff = rivals.get("probe_minus_best_rival") or {}
    if diff:
        text += f"; the probe minus the best rival ({rivals['best_rival']}): {_span(diff)}"
    return text + f": the reward GRPO trains on is `{reward}`."


def _probe_verdict(s: dict) -> str:
    if s.get("held_out"):
        return held_out_verdict(s["held_out"])
    sel, base = s.get("selected") or {}, s.get("logistic_baseline") or {}
    probe, logistic = _num(sel.get("test_balanced_accuracy")), _num(base.get("test_balanced_accuracy"))
    if probe is None:
        return "no held-out balanced accuracy for the selected probe."
    chance = " (chance is 0.5)" if probe <= 0.55 else ""
    if logistic is None:
        return f"the selected probe's held-out balanced accuracy is {probe:.3g}{chance}; no logistic baseline ran."
    if probe <= logistic:
        return (
            f"the probe is not better than the logistic baseline (held-out balanced accuracy {probe:.3g} vs "
            f"{logistic:.3g}){chance}."
        )
    return f"the probe beats the logistic baseline (held-out balanced accuracy {probe:.3g} vs {logistic:.3g}){chance}."


def grpo_verdict(s: dict) -> str:
    parts = []
    first, last = _num(s.get("reward_first5_mean")), _num(s.get("reward_last5_mean"))
    if first is not None and last is not None:
        moved = "rose" if last > first else "fell" if last < first else "did not move"
        parts.append(f"the mean reward {moved} (first 5 steps {first:.3g}, last 5 {last:.3g})")
    start, end = _num(s.get("valid_rate_start")), _num(s.get("valid_rate_end"))
    if start is not None and end is not None:  # the first and the last step's batch
        moved = "rose" if end > start else "fell" if end < start else "held"
        parts.append(f"validity {moved} ({start:.3g} -> {end:.3g})")
    return ("; ".join(parts) + ".") if parts else "no training steps were logged."


def evaluate_verdict(s: dict) -> str:
    base, trained = s.get("base") or {}, s.get("trained")
    if not trained:
        return "only the base policy was evaluated (no trained adapter)."
    n_base, n_trained = int(base.get("tasks") or 0), int(trained.get("tasks") or 0)
    lift = s.get("lift") or {}  # Newcombe intervals of the changes (propel.pipeline.compare.lift), when computed
    parts = [lift[k]["words"] for k in ("exact_utility", "exact_utility_lenient", "valid_rate", "utility") if k in lift]
    for key, name in (("utility", "utility (in-band share of all generations)"), ("valid_rate", "validity")):
        if key in lift:
            continue
        before, after = _num(base.get(key)), _num(trained.get(key))
        if before is not None and after is not None:
            parts.append(change(name, before, after, n_base, n_trained))
    return ("; ".join(parts) + f" (over {n_base} and {n_trained} tasks).") if parts else "no comparable numbers."


VERDICTS = {
    "label": pool_verdict,
    "probe": probe_verdict,
    "warm_start": grpo_verdict,  # a GRPO run against the gate alone
    "grpo": grpo_verdict,
    "gate_arm": grpo_verdict,  # the gate-continued arm
    "evaluate": evaluate_verdict,
}
"""The verdict of each stage's summary."""
