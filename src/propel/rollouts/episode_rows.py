"""An episode as rows of exact token ids with each token's assistant turn: what per-turn measurements read.

A per-turn quantity over a whole episode (the drift of each turn from the start, a KL anchor on the turns that are
not targeted) needs one forward over the episode, not one per turn: the ids are the episode's own (its prompt, then
every turn as generated or appended), and each token is labelled with the assistant turn it belongs to (counted from
0 over the episode, as ``Hint.turn`` counts) or -1 for the prompt and observations. A step-wise episode
(``Sample.segments``) gives one row per segment, each with the ids the model saw in that segment.
"""

from __future__ import annotations

from dataclasses import dataclass

from propel.records import Sample


@dataclass(frozen=True)
class EpisodeRow:
    """One segment's token ids and, per token, its assistant turn (-1: prompt or observation); it ends with the
    segment's last assistant token."""

    ids: list[int]
    turns: list[int]

    @property
    def first(self) -> int:
        """Position of the row's first assistant token."""
        return next(i for i, k in enumerate(self.turns) if k >= 0)

    @property
    def length(self) -> int:
        """Tokens from the first assistant token to the row's end (the span a forward reads)."""
        return len(self.ids) - self.first


def episode_rows(sample: Sample) -> list[EpisodeRow]:
    """The episode's rows, one per segment holding an assistant token, oldest first."""
    rows, k = [], -1
    for segment in [*sample.segments, sample]:
        ids, turns = list(segment.prompt_ids), [-1] * len(segment.prompt_ids)
        for turn in segment.turns:
            k += turn.trainable
            ids += turn.token_ids
            turns += [k if turn.trainable else -1] * len(turn.token_ids)
        while turns and turns[-1] < 0:  # a trailing observation predicts nothing the measurements read
            ids.pop(), turns.pop()
        if turns:
            rows.append(EpisodeRow(ids, turns))
    return rows
