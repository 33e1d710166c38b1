"""Policy-gradient losses, group advantages and KL estimators (pure tensor functions)."""

from propel.losses.advantages import group_advantages, zero_variance_mask
from propel.losses.kl import KL_ESTIMATORS, kl_estimate
from propel.losses.policy_gradient import (
    LOSS_TYPES,
    LossSpec,
    PolicyLossOutput,
    policy_loss,
    truncated_importance_weights,
)

__all__ = [
    "KL_ESTIMATORS",
    "LOSS_TYPES",
    "LossSpec",
    "PolicyLossOutput",
    "group_advantages",
    "kl_estimate",
    "policy_loss",
    "truncated_importance_weights",
    "zero_variance_mask",
]
