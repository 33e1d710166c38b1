"""Probe heads (linear, MLP, deep MLP) with built-in feature standardization: plain torch, no Lightning.

The same ``ProbeHead`` is trained by ``ProbeModule`` and the sweep, and rebuilt by ``ProbeArtifact.load``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

ARCHS = ("linear", "mlp", "deep_mlp")


def build_net(arch: str, input_dim: int, hidden_dim: int = 256, dropout: float = 0.1) -> nn.Sequential:
    """The scoring network: features [B, D] -> one logit [B, 1]."""
    if input_dim < 1:
        raise ValueError(f"input_dim must be >= 1, got {input_dim}")
    if arch == "linear":
        return nn.Sequential(nn.Linear(input_dim, 1))
    if arch == "mlp":
        return nn.Sequential(nn.Linear(input_dim, hidden_dim), nn.GELU(), nn.Dropout(dropout), nn.Linear(hidden_dim, 1))
    if arch == "deep_mlp":
        return nn.Sequential(
            nn.Linear(input_dim, hidden_dim),
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(hidden_dim, hidden_dim),
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(hidden_dim, hidden_dim // 2),
            nn.GELU(),
            nn.Dropout(dropout),
            nn.Linear(hidden_dim // 2, 1),
        )
    raise ValueError(f"arch: unknown {arch!r}; choose from {', '.join(ARCHS)}")


class ProbeHead(nn.Module):
    """Standardize features with fixed train-split statistics, then score them: [B, D] -> logits [B].

    ``mean``/``std`` are buffers (identity until ``set_normalization``), so they travel with the weights.
    """

    def __init__(self, arch: str, input_dim: int, hidden_dim: int = 256, dropout: float = 0.1):
        super().__init__()
        self.arch, self.input_dim, self.hidden_dim, self.dropout = arch, input_dim, hidden_dim, dropout
        self.net = build_net(arch, input_dim, hidden_dim, dropout)
        self.register_buffer("mean", torch.zeros(input_dim))
        self.register_buffer("std", torch.ones(input_dim))

    def set_normalization(self, mean: Tensor | None, std: Tensor | None, eps: float = 1e-6) -> None:
        """Use these statistics (None resets to identity); tiny stds are clamped so constant features stay finite."""
        self.mean.copy_(torch.zeros(self.input_dim) if mean is None else mean.float())
        self.std.copy_(torch.ones(self.input_dim) if std is None else std.float().clamp(min=eps))

    def forward(self, features: Tensor) -> Tensor:
        if features.ndim != 2 or features.shape[1] != self.input_dim:
            raise ValueError(f"features: expected [batch, {self.input_dim}], got {tuple(features.shape)}")
        x = (features.float() - self.mean) / self.std
        return self.net(x).squeeze(-1)


def feature_stats(features: Tensor) -> tuple[Tensor, Tensor]:
    """Per-dimension mean and (population) std of a train split, for ``ProbeHead.set_normalization``."""
    f = features.float()
    return f.mean(0), f.std(0, correction=0)
