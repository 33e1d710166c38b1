"""Frozen reference models: a no-grad eval copy, or the LoRA policy with its adapters switched off."""

from __future__ import annotations

import contextlib
import copy


def freeze(model):
    """Put ``model`` in eval mode with every parameter frozen; returns it."""
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def frozen_copy(model):
    """A separate frozen copy (for full fine-tunes, where weights cannot be shared)."""
    return freeze(copy.deepcopy(model))


def reference_forward(model):
    """Context in which ``model`` computes the reference: adapters disabled for peft models, no copy made.

    For a plain model there is nothing to disable; pass a ``frozen_copy`` as the reference instead.
    """
    disable = getattr(model, "disable_adapter", None)
    if disable is None:
        return contextlib.nullcontext()
    return disable()
