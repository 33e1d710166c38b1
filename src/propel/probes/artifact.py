"""A trained probe on disk (safetensors weights + JSON recipe), loadable and usable without Lightning.

``probe.json`` holds what is needed to reproduce the features (reference model, layer, pooling, trajectory pooling,
max length), the head (arch, sizes), the feature normalization (mean/std), the decision threshold and the metrics
it was selected on; ``probe.safetensors`` holds the head's weights. ``ProbeScorer`` turns texts into logits.
``probe.json`` also records the logits' quantiles on the training pool (what the RL reward's default invalid floor is
set below) and the post-hoc calibration fit on the validation fold (what probabilities, e.g. the soft gate's, use).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import Tensor

from propel.metrics.calibration import LogitScaling
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
    logit_quantiles: dict[str, float] | None = None
    """Quantiles of the raw logits on the training pool (``propel.probes.gate.logit_quantiles``); None for
    artifacts written before they were recorded (their reward floor falls back to -1 with a warning)."""
    calibration: LogitScaling | None = None
    """Post-hoc calibration fit on the validation fold (None: probabilities are the raw sigmoid)."""
    reference: dict | None = None
    """The reference model's ``propel.probes.fingerprint.reference_fingerprint`` (weights, dtype, hidden size,
    tokenizer) at extraction; None for older artifacts (then only the width is checked at bind)."""
    source: str | None = field(default=None, compare=False)
    """Folder the artifact was loaded from (named in errors; not saved)."""

    @torch.no_grad()
    def score(self, features: Tensor) -> Tensor:
        """Logits [N] of pooled features [N, D]."""
        self.head.eval()
        return self.head(features.to(self.head.mean.device))

    def calibrated(self, logits: Tensor) -> Tensor:
        """Calibrated logits (the raw ones when no calibration is stored); the hard gate keeps the raw logit."""
        return logits if self.calibration is None else self.calibration.logits(logits)

    def probs(self, features: Tensor) -> Tensor:
        """Calibrated probabilities [N] of pooled features [N, D]."""
        return torch.sigmoid(self.calibrated(self.score(features)))

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
            "logit_quantiles": self.logit_quantiles,
            "calibration": None if self.calibration is None else self.calibration.to_dict(),
            "reference": self.reference,
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
            logit_quantiles=cfg.get("logit_quantiles"),
            calibration=LogitScaling.from_dict(cfg["calibration"]) if cfg.get("calibration") else None,
            reference=cfg.get("reference"),
            source=str(directory),
        )

    def check_model(self, model, tokenizer=None) -> None:
        """Refuse a reference model whose features this probe cannot read: another width, dtype, weights or tokenizer.

        Raises a one-line ``ConfigError`` naming the artifact and the model. The width is always checked; the rest
        only when the artifact recorded its reference (``reference``).
        """
        from propel.errors import ConfigError
        from propel.probes import fingerprint as fp
        from propel.probes.pooling import pooled_dim

        where = f"probe {self.source or self.reference_model!r}"
        name = fp.model_name(model)
        width = pooled_dim(self.pooling, fp.hidden_size(model))
        if width != self.head.input_dim:
            raise ConfigError(
                f"{where} reads {self.head.input_dim}-wide {self.pooling} features but model {name!r} gives "
                f"{width} (hidden size {fp.hidden_size(model)}): bind it to the model it was trained on "
                f"({self.reference_model})"
            )
        if not self.reference:
            return
        got = {"dtype": fp.model_dtype(model), "model": fp.model_fingerprint(model)}
        if tokenizer is not None:
            got["tokenizer"] = fp.tokenizer_fingerprint(tokenizer)
        for what, label in (("dtype", "dtype"), ("model", "weights fingerprint"), ("tokenizer", "tokenizer")):
            want = self.reference.get(what)
            if what in got and want is not None and got[what] != want:
                raise ConfigError(
                    f"{where} was trained on {self.reference_model} with {label} {want}, but model {name!r} has "
                    f"{got[what]}: bind it to that reference (load it with that dtype, or re-extract and retrain)"
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
        self.artifact.check_model(model, tokenizer)
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

    def calibrated_logits(self, items: Sequence) -> Tensor:
        """Calibrated logits [N] (what the soft gate's probability reads)."""
        return self.artifact.calibrated(self.logits(items))

    def probs(self, items: Sequence) -> Tensor:
        """Calibrated probabilities [N]."""
        return torch.sigmoid(self.calibrated_logits(items))

    @property
    def logit_quantiles(self) -> dict[str, float] | None:
        """The artifact's recorded pool quantiles (what the reward's default floor is set below)."""
        return self.artifact.logit_quantiles
