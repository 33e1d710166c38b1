"""What one probe sweep is: its grid and training recipe (``SweepSpec``), the starting policy's sample its RVP reads
(``RVPSample``), and the fixed columns of a run's record (``RUN_COLUMNS``).

``propel.probes.sweep`` runs it; ``propel.probes.sweep_run`` trains one run of it; ``propel.probes.sweep_resume``
decides which finished runs a rerun keeps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from propel.metrics.calibration import CALIBRATIONS
from propel.metrics.classification import METRIC_NAMES
from propel.probes.gate import GateSpec, gated_reward, logit_quantiles
from propel.probes.heads import ARCHS
from propel.probes.selection import rvp
from propel.probes.splits import BALANCES
from propel.probes.training import LoopSpec

BASELINE_ARCH = "logreg_sklearn"
CELL = ["layer", "pooling", "arch", "balance"]
CALIBRATED = ("ece_calibrated", "ece_excess")
"""Per split: ECE after post-hoc calibration, and its excess over a calibrated probe's on as many rows."""
RUN_COLUMNS = [
    "key",
    *CELL,
    "seed",
    "fold",
    "epochs",
    "n_train",
    *(f"{split}_{name}" for split in ("val", "test") for name in (*METRIC_NAMES, "loss", *CALIBRATED)),
    "calibration_scale",
    "calibration_bias",
    "rvp_overall",
    "rvp_within",
    "seconds",
]
"""The fixed header of ``runs.csv``: every run (baseline rows too) is written against it, NaN where it has no value."""


@dataclass
class SweepSpec:
    """The grid and the training recipe (defaults: the PROPEL paper's probe recipe, App. 14: AdamW lr 1e-3, weight
    decay 1e-2, batch 64, up to 50 epochs, early-stopping patience 5)."""

    archs: Sequence[str] = ("linear", "mlp")
    """Head architectures (``linear``, ``mlp``, ``deep_mlp``)."""
    balances: Sequence[str] = ("downsample",)
    """Class-imbalance handling (``downsample``, ``weighted``, ``none``)."""
    seeds: Sequence[int] = (0, 1, 2)
    """Training seeds per cell (init, shuffling, downsampling); cell metrics are their mean."""
    split: str = "random"
    """``random`` 80/10/10, ``stratified_kfold`` (small pools) or ``group_kfold``. In the k-fold modes fold
    ``test_fold`` is the test set of every run and is never used for selection; validation rotates over the other
    ``n_folds - 1`` folds, and a cell's metrics are the mean over those runs and seeds."""
    n_folds: int = 5
    """Folds for ``stratified_kfold`` / ``group_kfold`` (>= 3: train, validation and the outer test fold)."""
    test_fold: int = 0
    """k-fold modes: the outer fold held out of every run and of selection (the held-out numbers' rows)."""
    split_seed: int = 0
    """Seed of the random / stratified split (fixed across training seeds)."""
    loop: LoopSpec = field(default_factory=LoopSpec)
    """Epochs, patience, batch size, early-stopping metric."""
    lr: float = 1e-3
    weight_decay: float = 1e-2
    hidden_dim: int = 256
    dropout: float = 0.1
    standardize: bool = True
    """Standardize features with train-split statistics."""
    logistic_baseline: bool = True
    """Add a scikit-learn logistic-regression row per (feature, balance) for comparison (never selected)."""
    num_threads: int | None = 1
    """torch intra-op threads while training (tiny heads run fastest on one thread; None leaves it as is)."""
    max_ece: float = 0.1
    """Calibration limit for selection: validation ECE after post-hoc calibration beyond what a perfectly calibrated
    probe with the same probabilities shows on as many rows (``val_ece_excess``: ``val_ece_calibrated`` minus
    ``propel.metrics.calibration.calibrated_ece``). On a fold of ~30 rows the raw value of a calibrated, informative
    probe is about 0.2, so a raw limit would keep only near-constant probes."""
    calibration: str = "platt"
    """Post-hoc calibration fit on the validation fold: ``platt`` (scale and bias) or ``temperature`` (scale only);
    the table reports ECE before (``*_ece``) and after (``*_ece_calibrated``)."""
    tie_tolerance: float = 0.01
    """Balanced-accuracy gap within which RVP breaks the tie."""

    def __post_init__(self):
        bad = [a for a in self.archs if a not in ARCHS] + [b for b in self.balances if b not in BALANCES]
        if bad:
            raise ValueError(f"sweep: unknown arch/balance {bad}; archs from {ARCHS}, balances from {BALANCES}")
        if self.calibration not in CALIBRATIONS:
            raise ValueError(f"sweep: calibration must be one of {CALIBRATIONS}, got {self.calibration!r}")


@dataclass
class RVPSample:
    """Features of a fixed sample of the starting policy's generations, for RVP under the exact RL reward.

    ``gate`` is the GRPO run's ``ProbeReward`` gate (the pipeline copies the object), so the probe is selected on the
    reward the policy will be trained with.
    """

    features: Mapping[str, Tensor]
    """``feature_key -> [num_contexts * G, D]``, grouped by context (G consecutive rows per context)."""
    valid: Tensor
    """``[num_contexts * G]`` validity of each generation."""
    group_size: int
    """G, samples per context."""
    gate: GateSpec = field(default_factory=GateSpec)
    """The reward's gate; a None floor is each candidate's default floor (``default_floor`` of its logits on the
    training pool), as ``ProbeReward`` sets it."""

    def rewards(self, key: str, module, pool: Tensor | None = None) -> Tensor:
        """The RL reward of every generation under ``module``'s logits on feature block ``key``.

        ``pool``: the training pool's features, whose logits set the default floor when the gate has none.
        """
        with torch.no_grad():
            logits = module(self.features[key])
            if self.gate.mode == "soft_gate" and getattr(module, "calibration", None) is not None:
                logits = module.calibration.logits(logits)  # the soft gate reads calibrated probabilities
            quantiles = None if pool is None or self.gate.floor is not None else logit_quantiles(module(pool))
            floor = self.gate.floor_for([quantiles], ["sweep candidate"])
        return gated_reward(logits, self.valid, self.gate, floor)

    def score(self, key: str, module, pool: Tensor | None = None) -> tuple[float, float]:
        """``(overall, within)`` RVP of ``module`` on feature block ``key``."""
        return rvp(self.rewards(key, module, pool).reshape(-1, self.group_size))


def parse_key(key: str) -> tuple[int, str]:
    layer, pooling = key[len("layer") :].split("/", 1)
    return int(layer), pooling
