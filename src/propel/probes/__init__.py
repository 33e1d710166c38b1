"""Activation probes: extraction and pooling on a frozen reference, caching, heads, sweep, selection, artifacts.

Light imports only here (no Lightning): ``propel.probes.sweep`` trains its heads as one ``ProbeBank`` under one
Lightning ``fit`` for the whole sweep (``bank``, ``training``, ``classifier``); ``propel.lit_modules.probe_training``
drives the same objective over a datamodule. ``gate`` is the exact RL reward.
"""

from propel.probes.artifact import ProbeArtifact, ProbeScorer
from propel.probes.cache import ActivationCache, extract_to_cache, load_features, save_features_file
from propel.probes.extraction import ActivationExtractor, feature_key, hidden_states_at
from propel.probes.gate import PROBE_MODES, GateSpec, gated_reward
from propel.probes.heads import ARCHS, ProbeHead
from propel.probes.pooling import POOLINGS, TRAJECTORY_POOLINGS, pool, pool_turns
from propel.probes.selection import rvp, select_probe

__all__ = [
    "ARCHS",
    "POOLINGS",
    "PROBE_MODES",
    "TRAJECTORY_POOLINGS",
    "ActivationCache",
    "ActivationExtractor",
    "ProbeArtifact",
    "ProbeHead",
    "ProbeScorer",
    "extract_to_cache",
    "feature_key",
    "GateSpec",
    "gated_reward",
    "hidden_states_at",
    "load_features",
    "pool",
    "pool_turns",
    "rvp",
    "save_features_file",
    "select_probe",
]
