"""FSDP on a LoRA policy, run with torch's own FullyShardedDataParallel on CPU (gloo, one process): the plain
whole-model unit fails as it did on the H200 (bf16 base + fp32 adapters), the LoRA wrap policy trains only the
adapters, and sampling's merged-weights view still carries the adapter inside FSDP units."""

from __future__ import annotations

import pytest
import torch
import yaml

from propel.models import LoRASpec, apply_lora
from propel.models.fsdp import (
    LoRAFSDPStrategy,
    check_fsdp_units,
    clip_fsdp_grad_norm_,
    is_lora_fsdp_unit,
    lora_wrap_policy,
)
from propel.models.lora import merged_lora_view


@pytest.fixture()
def process_group(tmp_path):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def _lora_bf16(tiny_model):
    model, _ = tiny_model
    policy = apply_lora(model.to(torch.bfloat16), LoRASpec(r=4, alpha=8))
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)  # B starts at zero: make the adapter change the output
    assert {p.dtype for p in policy.parameters()} == {torch.bfloat16, torch.float32}  # peft's fp32 adapters
    return policy


def _fsdp(policy, **kwargs):
    from torch.distributed.fsdp import FullyShardedDataParallel, MixedPrecision

    bf16 = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16, buffer_dtype=torch.bfloat16)
    return FullyShardedDataParallel(
        policy, device_id=torch.device("cpu"), use_orig_params=True, mixed_precision=bf16, **kwargs
    )


def test_one_unit_for_the_whole_lora_model_fails_on_mixed_dtypes(process_group, tiny_model):
    with pytest.raises(ValueError, match="uniform dtype"):
        _fsdp(_lora_bf16(tiny_model))


def test_lora_wrap_policy_trains_the_adapters_and_keeps_the_merged_view(process_group, tiny_model):
    policy = _lora_bf16(tiny_model)
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        adapted = policy(input_ids=ids).logits.float()
        with policy.disable_adapter():
            base = policy(input_ids=ids).logits.float()
    wrapped = _fsdp(policy, auto_wrap_policy=lora_wrap_policy())
    units = [m for m in wrapped.modules() if type(m).__name__ == "FullyShardedDataParallel"]
    assert len(units) == 1 + 2 + 2 * 2 * 7  # root, 2 decoder layers, lora_A and lora_B of 7 projections each
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        inside = wrapped(input_ids=ids).logits.float()
        with merged_lora_view(wrapped.module) as merged_policy:
            merged = merged_policy(input_ids=ids).logits.float()
    assert (adapted - base).abs().max() > 0.1  # the adapter matters
    torch.testing.assert_close(inside, adapted)
    assert (merged - adapted).abs().max() < 0.1 * (adapted - base).abs().max()  # bf16 rounding of merged weights
    with torch.autocast("cpu", dtype=torch.bfloat16):
        wrapped(input_ids=ids, labels=ids).loss.backward()
    grads = {n: p.grad for n, p in wrapped.named_parameters()}
    assert all((g is not None) == ("lora_" in n) for n, g in grads.items())
    assert sum(g is not None and bool(g.abs().sum() > 0) for g in grads.values()) == 2 * 2 * 7
    # the trainers' clip under FSDP against FSDP's own norm and torch's, on the same gradients
    expected = torch.nn.utils.get_total_norm([g.float() for g in grads.values() if g is not None])
    torch.testing.assert_close(wrapped.clip_grad_norm_(1e9).float(), expected, rtol=1e-3, atol=0)
    norm = clip_fsdp_grad_norm_(wrapped.parameters(), 1e-3, sharded=False)
    assert norm == pytest.approx(float(expected), rel=1e-3)
    clipped = torch.nn.utils.get_total_norm([p.grad.float() for p in wrapped.parameters() if p.grad is not None])
    torch.testing.assert_close(clipped, torch.tensor(1e-3), rtol=1e-2, atol=0)


def test_policy_picks_decoder_layers_and_adapter_layers_only(tiny_model):
    policy = apply_lora(tiny_model[0], LoRASpec(r=4, alpha=8))
    picked = [n for n, m in policy.named_modules() if is_lora_fsdp_unit(m)]
    assert sum(n.endswith(("lora_A.default", "lora_B.default")) for n in picked) == 2 * 2 * 7
    assert sum(n.endswith(tuple(f"layers.{i}" for i in range(2))) for n in picked) == 2
    assert len(picked) == 2 + 2 * 2 * 7
    assert "auto_wrap_policy" in LoRAFSDPStrategy().kwargs


def test_the_fsdp_overlay_composes_with_the_grpo_configs(capsys):
    from propel.cli import main

    args = ["fit", "-c", "configs/grpo/base.yaml", "-c", "configs/math/grpo.yaml", "-c", "configs/grpo/fsdp.yaml",
            "--print_config"]  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        main(args)
    out = capsys.readouterr()
    assert exc.value.code in (0, None), out.err[-2000:]
    strategy = yaml.safe_load(out.out)["trainer"]["strategy"]
    assert strategy["class_path"] == "propel.models.fsdp.LoRAFSDPStrategy", strategy
    assert strategy["init_args"]["sharding_strategy"] == "FULL_SHARD", strategy


def test_a_plain_fsdp_strategy_is_refused_before_wrapping_a_mixed_dtype_policy(tiny_model):
    from lightning.pytorch.strategies import FSDPStrategy

    policy = _lora_bf16(tiny_model)
    with pytest.raises(ValueError, match=r"bfloat16 and float32 parameters .*LoRAFSDPStrategy.*configs/grpo/fsdp.yaml"):
        check_fsdp_units(FSDPStrategy(), policy)
    check_fsdp_units(LoRAFSDPStrategy(), policy)  # its own policy: separate units
    check_fsdp_units(FSDPStrategy(auto_wrap_policy=lora_wrap_policy()), policy)  # a policy the user gave
    check_fsdp_units(FSDPStrategy(), policy.to(torch.float32))  # one dtype: one unit flattens
    check_fsdp_units("ddp", policy)  # not FSDP
