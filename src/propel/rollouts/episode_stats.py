"""Per-step statistics of agent episodes: turns, tool errors, finish reasons, infrastructure failures, segments."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from propel.envs.agent_env import FINISH_REASONS
from propel.records import Sample


def _tokens(sample: Sample) -> int:
    """The tokens of an episode's training rows: each segment's prompt and turns (a step-wise episode packs one row
    per segment; an append-only one is its single row)."""
    return sum(len(seg.prompt_ids) + len(seg.response_ids) for seg in [*sample.segments, sample])


def episode_stats(samples: Sequence[Sample]) -> dict[str, float]:
    """Means over the step's episodes (empty for single-turn rollouts, which carry no ``finish_reason``)."""
    episodes = [s for s in samples if "finish_reason" in s.info]
    if not episodes:
        return {}
    n = len(episodes)
    observations = [t for s in episodes for t in s.all_turns if not t.trainable]
    reasons = Counter(s.info["finish_reason"] for s in episodes)
    stats = {
        "episode/turns": sum(s.info.get("turns", 0) for s in episodes) / n,
        "episode/tool_error_rate": sum(bool(t.info.get("error")) for t in observations) / max(1, len(observations)),
        "episode/solved_rate": sum(bool(s.artifacts.get("verifier", {}).get("passed")) for s in episodes) / n,
        "episode/infra_failures": float(sum(s.infra_error is not None for s in episodes)),
        "episode/length_tokens": sum(_tokens(s) for s in episodes) / n,
        "episode/segments": sum(len(s.segments) + 1 for s in episodes) / n,  # > 1: step-wise (template not append-only)
    }
    stats.update({f"episode/finish_{r}": reasons.get(r, 0) / n for r in FINISH_REASONS})
    return stats
