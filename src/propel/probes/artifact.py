"""A trained probe on disk (safetensors weights + JSON recipe), loadable and usable without Lightning.

``probe.json`` holds what is needed to reproduce the features (reference model, layer, pooling, trajectory pooling,
max length), the head (arch, sizes), the feature normalization (mean/std), the decision threshold and the metrics
it was selected on; ``probe.safetensors`` holds the head's weights. ``ProbeScorer`` turns texts into logits.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor

from propel.probes.heads import ProbeHead

WEIGHTS = "probe.safetensors"
CONFIG = "probe.json"


@dataclass
class ProbeArtifact:
    """A probe head plus the recipe for the features it reads."""

    head: ProbeHead
    reference_model: str
    layer: int
    pooling: str
    trajectory_pooling: str = "mean"
    max_length: int = 1024
    threshold: float = 0.5
    metrics: dict = field(default_factory=dict)

    @torch.no_grad()
    def score(self, features: Tensor) -> Tensor:
        """Logits [N] of pooled features [N, D]."""
        self.head.eval()
        return self.head(features.to(self.head.mean.device))

    def probs(self, features: Tensor) -> Tensor:
        return torch.sigmoid(self.score(features))

    def save(self, directory: str | Path) -> Path:
        """Write ``probe.json`` + ``probe.safetensors`` into ``directory``."""
        from safetensors.torch import save_file

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        weights = {k: v.detach().cpu().contiguous() for k, v in self.head.net.state_dict().items()}
        save_file(weights, str(directory / WEIGHTS))
        config = {
            "reference_model": self.reference_model,
            "layer": int(self.layer),
            "pooling": self.pooling,
            "trajectory_pooling": self.trajectory_pooling,
            "max_length": int(self.max_length),
            "arch": self.head.arch,
            "input_dim": int(self.head.input_dim),
            "hidden_dim": int(self.head.hidden_dim),
            "dropout": float(self.head.dropout),
            "threshold": float(self.threshold),
            "normalization": {"mean": self.head.mean.cpu().tolist(), "std": self.head.std.cpu().tolist()},
            "metrics": {k: _plain(v) for k, v in self.metrics.items()},
        }
        (directory / CONFIG).write_text(json.dumps(config, indent=1))
        return directory

    @classmethod
    def load(cls, directory: str | Path, device: str = "cpu") -> ProbeArtifact:
        """Rebuild the head from a saved folder."""
        from safetensors.torch import load_file

        directory = Path(directory)
        if not (directory / CONFIG).exists() or not (directory / WEIGHTS).exists():
            raise FileNotFoundError(
                f"probe: {directory} needs {CONFIG} and {WEIGHTS} (write it with ProbeArtifact.save)"
            )
        cfg = json.loads((directory / CONFIG).read_text())
        with torch.random.fork_rng(devices=[]):  # the random init is overwritten: leave the global RNG as it was
            head = ProbeHead(cfg["arch"], cfg["input_dim"], cfg["hidden_dim"], cfg["dropout"])
        head.net.load_state_dict(load_file(str(directory / WEIGHTS)))
        norm = cfg["normalization"]
        head.mean.copy_(torch.tensor(norm["mean"], dtype=torch.float32))
        head.std.copy_(torch.tensor(norm["std"], dtype=torch.float32))
        head.to(device).eval()
        return cls(
            head=head,
            reference_model=cfg["reference_model"],
            layer=cfg["layer"],
            pooling=cfg["pooling"],
            trajectory_pooling=cfg.get("trajectory_pooling", "mean"),
            max_length=cfg.get("max_length", 1024),
            threshold=cfg.get("threshold", 0.5),
            metrics=cfg.get("metrics", {}),
        )


def _plain(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return v


class ProbeScorer:
    """Texts or trajectories -> probe logits, through the frozen reference model the probe was trained on.

    Args:
        artifact: the probe (or a folder holding one).
        model: the reference model; loaded from ``artifact.reference_model`` when omitted. A peft policy is read
            with its adapters disabled, so it can serve as its own frozen reference.
        tokenizer: the reference model's tokenizer (loaded with the model when omitted).
        batch_size: texts per forward pass.
        device: where to load the model when it is loaded here.
    """

    def __init__(self, artifact, model=None, tokenizer=None, *, batch_size: int = 8, device: str = "cpu"):
        from propel.probes.extraction import ActivationExtractor

        self.artifact = artifact if isinstance(artifact, ProbeArtifact) else ProbeArtifact.load(artifact)
        if model is None:
            from propel.models import load_model

            model, tokenizer = load_model(self.artifact.reference_model, device=device)
        if tokenizer is None:
            raise ValueError("tokenizer: pass the reference model's tokenizer together with model")
        self.extractor = ActivationExtractor(
            model,
            tokenizer,
            [self.artifact.layer],
            [self.artifact.pooling],
            batch_size=batch_size,
            max_length=self.artifact.max_length,
            trajectory_pooling=self.artifact.trajectory_pooling,
        )
        self.key = self.extractor.keys[0]

    def features(self, items: Sequence) -> Tensor:
        """Pooled fp32 features [N, D] of texts or trajectories."""
        return self.extractor.encode(items)[self.key]

    def logits(self, items: Sequence) -> Tensor:
        """Probe logits [N] (the RL reward signal for valid tasks)."""
        return self.artifact.score(self.features(items)).cpu()

    def probs(self, items: Sequence) -> Tensor:
        return torch.sigmoid(self.logits(items))
