"""Policy losses against TRL 1.16's real ``GRPOTrainer._compute_loss`` on identical inputs (values and gradients)."""

from __future__ import annotations

import re
import types
from collections import defaultdict
from pathlib import Path

import pytest
import torch

from propel.losses.policy_gradient import LossSpec, policy_loss, truncated_importance_weights


@pytest.fixture(scope="module")
def trl_grpo(require):
    """TRL's GRPO trainer module: only the parity tests need it (skipped without TRL locally, failed under CI)."""
    return require("trl.trainer.grpo_trainer")


class _Accelerator:
    num_processes = 1

    @staticmethod
    def gather(x):
        return x

    gather_for_metrics = gather

    @staticmethod
    def reduce(x, reduction="sum"):
        return x


class _TRLLossHarness:
    """The attributes TRL's ``_compute_loss`` reads; logprobs are handed in instead of running a model forward."""

    def __init__(self, spec: LossSpec, logp: torch.Tensor, max_completion_length: int, use_is: bool):
        self.loss_type = spec.loss_type
        self.epsilon_low, self.epsilon_high = spec.eps_low, spec.high
        self.beta = spec.beta
        self.args = types.SimpleNamespace(use_bias_correction_kl=False, delta=spec.clip_c)
        self.top_entropy_quantile = 1.0
        self.off_policy_mask_threshold = None
        self.importance_sampling_level = "token"
        self.use_vllm = use_is
        self.vllm_importance_sampling_correction = use_is
        self.model = types.SimpleNamespace(training=True)
        self.current_gradient_accumulation_steps = 1
        self.max_completion_length = max_completion_length
        self.accelerator = _Accelerator()
        self._entropy_bonus_enabled = False
        self.aux_loss_enabled = False
        self._metrics = {"train": defaultdict(list)}
        self.args.steps_per_generation = 1
        self._logp = logp

    def _get_per_token_logps_and_entropies(self, model, *args, **kwargs):
        return self._logp, torch.zeros_like(self._logp), None


def _batch(seed: int, b: int = 6, t: int = 7):
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(b, t, generator=g, dtype=torch.float64) * 3
    logp = (old + 0.6 * torch.randn(b, t, generator=g, dtype=torch.float64)).clamp(max=-1e-3)
    ref = old + 0.3 * torch.randn(b, t, generator=g, dtype=torch.float64)
    engine = old + 0.4 * torch.randn(b, t, generator=g, dtype=torch.float64)
    adv = torch.randn(b, generator=g, dtype=torch.float64)
    lengths = torch.randint(1, t + 1, (b,), generator=g)
    mask = (torch.arange(t)[None, :] < lengths[:, None]).to(torch.float64)
    return logp, old, ref, engine, adv, mask


def _trl_loss(trl_grpo, spec, logp, old, ref, adv, mask, is_weights, max_len):
    leaf = logp.clone().requires_grad_(True)
    harness = _TRLLossHarness(spec, leaf, max_len, is_weights is not None)
    b = logp.shape[0]
    inputs = {
        "prompt_ids": torch.zeros(b, 1, dtype=torch.long),
        "prompt_mask": torch.ones(b, 1, dtype=torch.long),
        "completion_ids": torch.zeros_like(mask, dtype=torch.long),
        "completion_mask": mask,
        "advantages": adv,
        "old_per_token_logps": old,
        "ref_per_token_logps": ref,
        "num_items_in_batch": mask.sum(),
    }
    if is_weights is not None:
        inputs["importance_sampling_ratio"] = is_weights
    loss = trl_grpo.GRPOTrainer._compute_loss(harness, None, inputs)
    loss.backward()
    return loss.detach(), leaf.grad, harness._metrics["train"]


@pytest.mark.parametrize("loss_type", ["grpo", "dr_grpo", "dapo"])
@pytest.mark.parametrize("beta", [0.0, 0.04])
@pytest.mark.parametrize("use_is", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_matches_trl(trl_grpo, loss_type, beta, use_is, seed):
    logp, old, ref, engine, adv, mask = _batch(seed)
    spec = LossSpec(loss_type=loss_type, beta=beta, max_completion_length=9)
    is_w = truncated_importance_weights(old, engine, cap=3.0, mask=mask) if use_is else None
    want, want_grad, metrics = _trl_loss(trl_grpo, spec, logp, old, ref, adv, mask, is_w, 9)

    leaf = logp.clone().requires_grad_(True)
    out = policy_loss(leaf, old, adv, mask, spec, ref_logp=ref, is_weights=is_w)
    out.loss.backward()
    torch.testing.assert_close(out.loss.detach(), want, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(leaf.grad, want_grad, rtol=1e-12, atol=1e-12)
    assert out.stats["clip_fraction"] == pytest.approx(metrics["clip_ratio/region_mean"][0], abs=1e-12)
    assert out.stats["clip_low"] == pytest.approx(metrics["clip_ratio/low_mean"][0], abs=1e-12)
    if beta:
        assert out.stats["kl"] == pytest.approx(metrics["kl"][0], abs=1e-12)


def test_dapo_dual_clip_bounds_negative_advantage_loss():
    logp = torch.tensor([[0.0, 0.0]], dtype=torch.float64)
    old = torch.log(torch.tensor([[0.1, 0.9]], dtype=torch.float64))  # ratios 10 and ~1.11
    adv = torch.tensor([-1.0], dtype=torch.float64)
    mask = torch.ones(1, 2, dtype=torch.float64)
    leaf = logp.clone().requires_grad_(True)
    out = policy_loss(leaf, old, adv, mask, LossSpec(loss_type="dapo", beta=0.0))
    out.loss.backward()
    assert out.loss.item() == pytest.approx((3.0 + 1 / 0.9) / 2)  # first token capped at c * |A| = 3
    assert leaf.grad[0, 0].item() == 0.0 and leaf.grad[0, 1].item() != 0.0
    assert out.stats["dual_clip_fraction"] == pytest.approx(0.5)


def test_first_inner_iteration_gradient_is_advantage_weighted_logprob_gradient():
    """With old = logp.detach() the ratio is 1 and the grpo gradient is -A * grad(logp) / (len * B)."""
    logp, _, _, _, adv, mask = _batch(3)
    leaf = logp.clone().requires_grad_(True)
    policy_loss(leaf, logp, adv, mask, LossSpec(beta=0.0)).loss.backward()
    want = -adv[:, None] * mask / mask.sum(-1, keepdim=True) / logp.shape[0]
    torch.testing.assert_close(leaf.grad, want)


def test_micro_batches_sum_to_full_batch_gradient():
    logp, old, ref, _, adv, mask = _batch(4, b=8)
    for loss_type in ("grpo", "dr_grpo", "dapo"):
        spec = LossSpec(loss_type=loss_type)
        full = logp.clone().requires_grad_(True)
        policy_loss(full, old, adv, mask, spec, ref_logp=ref).loss.backward()
        parts = logp.clone().requires_grad_(True)
        for sl in (slice(0, 3), slice(3, 8)):
            policy_loss(
                parts[sl], old[sl], adv[sl], mask[sl], spec, ref_logp=ref[sl], num_sequences=8, num_tokens=mask.sum()
            ).loss.backward()
        torch.testing.assert_close(parts.grad, full.grad)


def test_truncated_importance_weights():
    trainer = torch.tensor([[0.0, 0.0, 0.0]])
    engine = torch.tensor([[0.0, -5.0, float("nan")]])
    w = truncated_importance_weights(trainer, engine, cap=3.0)
    torch.testing.assert_close(w, torch.tensor([[1.0, 3.0, 1.0]]))
    w = truncated_importance_weights(torch.tensor([[-1.0]]), torch.tensor([[-0.5]]))
    assert w.item() == pytest.approx(float(torch.exp(torch.tensor(-0.5))))


@pytest.mark.parametrize(
    "kwargs",
    [{"loss_type": "ppo"}, {"kl_estimator": "k4"}, {"dual_clip": 1.1, "loss_type": "dapo"}, {"beta": -1.0}],
)
def test_bad_spec_is_rejected(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        LossSpec(**kwargs)


def test_beta_needs_ref_logp():
    logp, old, _, _, adv, mask = _batch(0)
    with pytest.raises(ValueError, match="ref_logp"):
        policy_loss(logp, old, adv, mask, LossSpec(beta=0.04))


def test_dev_extra_pins_the_trl_these_tests_read(trl_grpo):
    """The parity tests call TRL 1.16 internals (``_compute_loss`` and the attributes it reads), so
    the dev extra pins exactly that release and the installed one is it."""
    from importlib.metadata import version

    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    dev = re.search(r"^dev = \[(.*)\]$", pyproject, re.M).group(1)
    assert re.findall(r'"trl([^"]*)"', dev) == ["==1.16.0"] and version("trl") == "1.16.0"
