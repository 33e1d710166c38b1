"""Rollouts as padded training tensors: the prompt, then every token after it with a per-token loss mask.

The response region (``response_ids``, ``(B, T)``) holds all tokens after the prompt: assistant turns (``loss_mask``
1) and environment observations (``loss_mask`` 0), with ``turn_index`` naming the turn each token belongs to (-1 for
padding), so a loss can be restricted to assistant tokens or to one turn. A single-turn rollout is one assistant turn:
``loss_mask`` is then the completion mask. A step-wise episode (``Sample.segments``) becomes one row per segment, each
with the episode's advantage; ``turn_index`` then counts the episode's turns across its segments, and ``episode``
names the sample each row came from, so a loss can weigh the episode as one sequence (``episode_tokens``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import torch

from propel.records import Sample


@dataclass
class PackedBatch:
    """Padded tensors for a batch of rollouts."""

    input_ids: torch.Tensor  # (B, L) prompt + response, right-padded
    attention_mask: torch.Tensor  # (B, L)
    response_ids: torch.Tensor  # (B, T) every token after the prompt
    loss_mask: torch.Tensor  # (B, T) float: 1 on trainable (assistant) tokens
    turn_index: torch.Tensor  # (B, T) long: index into the sample's turns, -1 on padding
    starts: torch.Tensor  # (B,) index in input_ids of the first response token
    engine_logp: torch.Tensor  # (B, T) the engine's logprobs, NaN where unknown
    advantages: torch.Tensor  # (B,)
    episode: torch.Tensor  # (B,) long: index of the packed sample (episode) the row belongs to

    @property
    def num_episodes(self) -> int:
        """Samples packed: an episode of k step-wise segments counts once."""
        return int(self.episode.unique().numel())

    def episode_tokens(self) -> torch.Tensor:
        """``(B,)`` the trainable tokens of each row's whole episode (summed over its segments). Call it on the whole
        batch: on a selection of rows it counts only the rows selected."""
        per_row = self.loss_mask.sum(1)
        totals = torch.zeros(int(self.episode.max()) + 1, dtype=per_row.dtype).index_add_(0, self.episode, per_row)
        return totals[self.episode]

    def select(self, rows: torch.Tensor) -> PackedBatch:
        return PackedBatch(*(getattr(self, f.name)[rows] for f in fields(self)))

    def to(self, device) -> PackedBatch:
        return PackedBatch(*(getattr(self, f.name).to(device) for f in fields(self)))

    def turn_mask(self, turn: int) -> torch.Tensor:
        """``(B, T)`` float mask of the trainable tokens of turn ``turn`` (e.g. the hinted turn in distillation)."""
        return self.loss_mask * (self.turn_index == turn)


def pack(samples: Sequence[Sample], advantages: torch.Tensor, pad_id: int) -> PackedBatch:
    """Lay out ``samples`` (prompt ids + turns) as right-padded tensors; ``advantages`` is one float per sample.
    Rows are the samples' segments in order (one per sample unless an episode went step-wise)."""
    rows, row_adv, first_turn, episode = [], [], [], []
    for e, (s, a) in enumerate(zip(samples, advantages.tolist(), strict=True)):
        offset = 0
        for segment in [*s.segments, s]:
            rows.append(segment)
            row_adv.append(a)
            first_turn.append(offset)
            episode.append(e)
            offset += len(segment.turns)
    samples, advantages = rows, torch.tensor(row_adv)
    width = max(len(s.prompt_ids) + len(s.response_ids) for s in samples)
    t_max = max(1, max(len(s.response_ids) for s in samples))
    b = len(samples)
    ids = torch.full((b, width), pad_id, dtype=torch.long)
    attn = torch.zeros((b, width), dtype=torch.long)
    resp = torch.full((b, t_max), pad_id, dtype=torch.long)
    mask = torch.zeros((b, t_max))
    turn_index = torch.full((b, t_max), -1, dtype=torch.long)
    elogp = torch.full((b, t_max), float("nan"))
    starts = torch.zeros(b, dtype=torch.long)
    for r, s in enumerate(samples):
        n, response = len(s.prompt_ids), s.response_ids
        m = len(response)
        ids[r, : n + m] = torch.tensor(s.prompt_ids + response, dtype=torch.long)
        attn[r, : n + m] = 1
        starts[r] = n
        at = 0
        for k, turn in enumerate(s.turns):
            span = slice(at, at + len(turn.token_ids))
            if turn.token_ids:
                resp[r, span] = torch.tensor(turn.token_ids, dtype=torch.long)
                turn_index[r, span] = first_turn[r] + k
                mask[r, span] = float(turn.trainable)
                if turn.logprobs is not None:
                    elogp[r, span] = torch.tensor(turn.logprobs)
            at = span.stop
    return PackedBatch(ids, attn, resp, mask, turn_index, starts, elogp, advantages.float(), torch.tensor(episode))
