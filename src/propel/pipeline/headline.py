"""The report's opening: what ran, the headline with its interval and what it means, then the caveats, in words
computed from the stage summaries (a run that shows nothing says so first, not on line 124)."""

from __future__ import annotations

from propel.pipeline.config import GATE_ARM, WARM_START
from propel.pipeline.verdicts import unfitted_reward

STRICT, LENIENT = "exact_utility", "exact_utility_lenient"


def _span(c: dict) -> str:
    return f"{c['estimate']:+.3f} [{c['low']:+.3f}, {c['high']:+.3f}]"


def _value(summary: dict, key: str) -> str:
    value, bounds = summary.get(key), (summary.get("intervals") or {}).get(key)
    if not isinstance(value, int | float):
        return "n/a"
    return f"{value:.3f}" + (f" [{bounds[0]:.3f}, {bounds[1]:.3f}]" if bounds else "")


def what_ran(summaries: dict) -> str:
    """One line per stage that ran: what it did, in its own numbers, and its minutes."""
    lines = []
    for name, s in summaries.items():
        minutes = f"{(s.get('seconds') or 0) / 60:.1f} min"
        if name in (WARM_START, GATE_ARM, "grpo", "constrained", "auxiliary"):
            against = {WARM_START: "the validity gate alone", GATE_ARM: "the validity gate alone (the arm the "
                       "trained generator is compared with)"}.get(name, "the probe stage's reward")  # fmt: skip
            steps = s.get("steps")
            lines.append(f"- `{name}`: {steps} GRPO step{'' if steps == 1 else 's'} against {against} ({minutes})")
        elif name == "label":
            lines.append(f"- `label`: {s.get('tasks')} tasks labeled by the solver, {s.get('valid')} valid under the "
                         f"strict rule, {s.get('degenerate', 0)} degenerate, {s.get('positives')} in the band "
                         f"({minutes})")  # fmt: skip
        elif name == "probe":
            reward = s.get("reward", "probe")
            ran = "no probe fitted (too few labels)" if (s.get("rivals") or {}).get("unfitted") else (
                "sweep, selection and the rivals")  # fmt: skip
            lines.append(f"- `probe`: {ran} on {s.get('rows')} valid tasks "
                         f"({s.get('positives')} in the band); reward: `{reward}` ({minutes})")  # fmt: skip
        elif name == "evaluate":
            tasks = next((v.get("tasks") for v in s.values() if isinstance(v, dict) and "tasks" in v), None)
            policies = [k for k, v in s.items() if isinstance(v, dict) and "tasks" in v]
            lines.append(f"- `evaluate`: {tasks} fresh tasks from each of {', '.join(policies)}, solved by the "
                         f"solver ({minutes})")  # fmt: skip
    return "\n".join(lines)


def headline(summaries: dict) -> list[str]:
    """The headline: the trained generator's strict yield against the gate-continued arm (else the warm start, else
    the base), with the interval of the change and what it means; the lenient yield beside it."""
    ev = summaries.get("evaluate") or {}
    found = [
        (ev[key], other)
        for key, other in (("lift_vs_gate_arm", GATE_ARM), ("lift_vs_warm_start", WARM_START), ("lift", "base"))
        if "estimate" in ((ev.get(key) or {}).get(STRICT) or {})
    ]
    if not found:
        return ["No trained generator was evaluated against another policy on the strict yield: no headline."]
    lift, other = found[0]
    change, trained, before = lift[STRICT], ev.get("trained") or {}, ev.get(other) or {}
    reward = (summaries.get("probe") or {}).get("reward", "probe")
    what = "as many more steps of the gate alone" if other == GATE_ARM else f"the {other.replace('_', ' ')}"
    if change["low"] > 0:
        meaning = f"the `{reward}` reward added strict yield beyond {what}"
    elif change["high"] < 0:
        meaning = f"the `{reward}` reward lost strict yield against {what}"
    else:
        meaning = f"no difference from {what} is shown: the interval includes 0"
    out = [
        f"**Strict yield** (a task's chance of landing in the solver's band; 0 if invalid or degenerate): trained "
        f"{_value(trained, STRICT)} against {other.replace('_', ' ')} {_value(before, STRICT)}; change "
        f"**{_span(change)}**: {meaning}."
    ]
    if LENIENT in lift and "estimate" in lift[LENIENT]:
        out.append(f"Lenient yield (degenerate tasks scored as valid, the rule before 2026-12-06), for comparison "
                   f"only: change {_span(lift[LENIENT])}.")  # fmt: skip
    return out


def caveats(summaries: dict) -> list[str]:
    """The reward that was chosen and by how much, the probe's power, validity, degeneration and diversity."""
    out = []
    probe = summaries.get("probe") or {}
    rivals = probe.get("rivals") or {}
    if rivals.get("lifts"):
        lifts = ", ".join(
            f"{k} {v['lift']:+.3f} [{v['low']:+.3f}, {v['high']:+.3f}]" for k, v in rivals["lifts"].items()
        )
        null = rivals.get("null") or {}
        p = f"; against {len(null.get('lifts') or [])} shuffled-label probes p = {null['p_value']:.2f}" if null.get(
            "p_value"
        ) is not None else ""  # fmt: skip
        out.append(f"**The reward** is `{rivals['reward']}`: held-out best-of-{rivals['k']} lift over a random valid "
                   f"pick, {lifts}{p} ({rivals['rows']} rows, {rivals['positives']} in the band: intervals this "
                   "wide cannot tell most rankers apart).")  # fmt: skip
    elif rivals.get("unfitted"):
        out.append(f"**The reward**: no probe was fitted ({rivals['skipped']}); {unfitted_reward(rivals)}.")
    elif rivals.get("skipped"):
        out.append(f"**The reward** is the probe, without rivals: {rivals['skipped']}.")
    ev = summaries.get("evaluate") or {}
    for name in ("trained", GATE_ARM):
        s = ev.get(name) or {}
        if "valid_rate" in s:
            degenerate = ", ".join(f"{k} {v}" for k, v in (s.get("degenerate") or {}).items()) or "none"
            out.append(f"**Validity of `{name}`**: strict {s['valid_rate']:.3f}, lenient "
                       f"{s.get('valid_rate_lenient', float('nan')):.3f}; degenerate tasks by reason: {degenerate}; "
                       f"top-topic share {s.get('top_topic_rate') or 0:.3f}.")  # fmt: skip
    for name in (WARM_START, "grpo", GATE_ARM):
        s = summaries.get(name) or {}
        alarms = s.get("alarms") or []
        if alarms:
            out.append(f"**Monitors of `{name}`**: {len(alarms)} alarm(s); the first: {alarms[0]}")
        elif name in summaries:
            out.append(f"**Monitors of `{name}`**: no alarm (degeneration shares within 0.2 of the start).")
    return out


def opening(summaries: dict) -> str:
    """The whole opening section: what ran, the headline, the caveats."""
    parts = ["What ran:\n", what_ran(summaries), "", *headline(summaries), "", "Caveats:", ""]
    parts += [f"- {c}" for c in caveats(summaries)]
    return "\n".join(parts) + "\n"
