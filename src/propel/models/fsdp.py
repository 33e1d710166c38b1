"""FSDP for a LoRA policy: wrapping units that each hold one dtype.

peft keeps LoRA adapters in fp32 above a bf16 base (so small updates are not rounded away), and FSDP flattens each
unit's parameters into one tensor of one dtype. Wrapping the whole model as one unit fails with "Must flatten
tensors with uniform dtype" (seen on an H200 with Lightning's plain ``FSDPStrategy``: docs/gpu.md). The policy
here makes every decoder layer a unit (HF's ``GradientCheckpointingLayer``, the block HF itself shards and
checkpoints) and, inside it, every ``nn.Linear`` whose weights are all trainable (peft's ``lora_A`` and ``lora_B``
layers; a unit must be a module with a forward, since FSDP gathers a unit's weights in its forward hook), so the
frozen bf16 base weights and the fp32 adapters land in different units. Full fine-tuning (every weight trainable)
wants a plain ``FSDPStrategy`` with a decoder-layer policy instead: this one would make each linear layer a unit.
"""

from __future__ import annotations

from lightning.pytorch.strategies import FSDPStrategy


def is_lora_fsdp_unit(module) -> bool:
    """Whether ``module`` gets its own FSDP unit: a decoder layer, or a linear layer of trainable weights only."""
    from torch import nn
    from transformers.modeling_layers import GradientCheckpointingLayer

    if isinstance(module, GradientCheckpointingLayer):
        return True
    if not isinstance(module, nn.Linear):
        return False
    params = list(module.parameters())
    return bool(params) and all(p.requires_grad for p in params)


def clip_fsdp_grad_norm_(parameters, max_norm: float, sharded: bool) -> float:
    """Scale the gradients of ``parameters`` (an FSDP model's, ``use_orig_params=True``) to total norm <= ``max_norm``;
    return the norm before clipping.

    FSDP's own ``clip_grad_norm_`` asserts its root is idle, but Lightning runs a manual-optimization step inside the
    root's forward (``training_step``), so the trainers clip here: with ``sharded`` (FULL_SHARD or SHARD_GRAD_OP on
    several ranks) each rank holds a disjoint shard of every gradient and the squared norms are summed over ranks;
    without it every rank holds the whole gradient.
    """
    import torch
    import torch.distributed as dist

    parameters = list(parameters)
    grads = [p.grad for p in parameters if p.grad is not None]
    norm = torch.nn.utils.get_total_norm(grads)
    if sharded:
        squared = norm.float().square()
        dist.all_reduce(squared)
        norm = squared.sqrt()
    torch.nn.utils.clip_grads_with_norm_(parameters, max_norm, norm)
    return float(norm)


def check_fsdp_units(strategy, model) -> None:
    """Refuse, before FSDP wraps ``model``, a plain ``FSDPStrategy`` with no auto-wrap policy over parameters of
    several dtypes: the whole model would be one unit, which FSDP cannot flatten (a LoRA policy in bf16 holds peft's
    fp32 adapters). The error names the strategy that works instead of the one FSDP raises mid-setup."""
    if not isinstance(strategy, FSDPStrategy) or strategy.kwargs.get("auto_wrap_policy") is not None:
        return
    dtypes = sorted({str(p.dtype).removeprefix("torch.") for p in model.parameters()})
    if len(dtypes) > 1:
        raise ValueError(
            f"FSDP without an auto-wrap policy makes the whole model one unit, and FSDP flattens a unit into one "
            f"dtype, but this policy holds {' and '.join(dtypes)} parameters (peft keeps LoRA adapters in float32 over "
            f"the base): use trainer.strategy: {{class_path: propel.models.fsdp.LoRAFSDPStrategy}} "
            f"(-c configs/grpo/fsdp.yaml), or give FSDPStrategy an auto_wrap_policy"
        )


def lora_wrap_policy():
    """The auto-wrap policy for a LoRA policy model (``torch.distributed.fsdp.wrap.CustomPolicy``)."""
    from torch.distributed.fsdp.wrap import CustomPolicy

    return CustomPolicy(is_lora_fsdp_unit)


class LoRAFSDPStrategy(FSDPStrategy):
    """Lightning's ``FSDPStrategy`` with ``lora_wrap_policy`` as its auto-wrap policy unless one is given.

    In a config: ``trainer.strategy: {class_path: propel.models.fsdp.LoRAFSDPStrategy}`` (every other
    ``FSDPStrategy`` argument as its ``init_args``).
    """

    def __init__(self, *args, auto_wrap_policy=None, **kwargs) -> None:
        super().__init__(*args, auto_wrap_policy=auto_wrap_policy or lora_wrap_policy(), **kwargs)
