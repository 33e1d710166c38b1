"""One GRPO optimizer step end to end in propel and in TRL 1.16's ``GRPOTrainer``: same LoRA weights, same rollouts.

Loss parity vs. step parity. ``tests/losses/test_losses_policy.py`` shows that propel's ``policy_loss`` equals TRL's
``_compute_loss`` (value and gradient, to 1e-12 in float64) on logprob tensors handed to both. A step holds more:
the token layout (TRL left-pads prompts and right-pads completions, propel right-pads whole sequences), the logprob
forward under the sampling temperature (TRL's fused LM head, propel's span logits), the reference forward with the
adapters off, the group advantages, micro-batching and gradient accumulation (each trainer normalises every
micro-batch its own way), propel's shared prompt (``share_prompt``: a group's prompt runs once for its rows, checked
to have acted), gradient clipping, the optimizer and its learning-rate schedule. Here both trainers take a
whole step on the tiny model from identical LoRA weights (A and B random: the policy is not the reference, so the KL
anchor has a gradient, and lora_A gets one too) over the same 2 prompts x G = 4 completions (fixed token ids of 2 to
12 tokens, half ending in EOS) with the same rewards; the gradient each optimizer receives and the LoRA weights
after its step are compared.

Feeding the same rollouts. propel: a ``RolloutSource`` datamodule whose ``rollout`` returns the recorded samples
instead of asking the engine (which stays the HF engine on the live policy, as in a normal run: no importance
correction). TRL: ``GRPOTrainer(rollout_func=...)``, its public (experimental) hook for custom generation, returning
the recorded prompt and completion ids. It replaces only the generation call; TRL's own
``_generate_and_score_completions`` still pads, calls the reward function, computes advantages and reference
logprobs, and its own loop shuffles, splits into accumulation micro-batches, clips and steps. (Overriding a private
method such as ``_generate_single_turn`` would do the same with more coupling to TRL's internals.)

Settings matched (TRL ``GRPOConfig`` = propel): ``loss_type`` = ``loss.loss_type`` (``grpo``, ``dr_grpo``,
``dapo``); ``beta`` = ``loss.beta`` (0 and 0.04); ``epsilon`` / ``epsilon_high`` / ``delta`` = ``loss.eps_low`` /
the resolved ``eps_high`` / the resolved ``dual_clip`` (propel's ``dapo`` defaults 0.28 and 3 are passed to TRL,
whose defaults are ``epsilon`` and off); ``scale_rewards`` = the resolved ``scale_rewards`` (``group``, ``none`` for
``dr_grpo``, ``batch``); ``max_completion_length`` = ``max_new_tokens`` (the ``dr_grpo`` constant); ``temperature``
0.7 = ``temperature`` (top_p 1, top_k off); ``num_generations`` = ``group_size``; ``num_iterations`` = ``ppo_epochs``
(1 and 2); ``per_device_train_batch_size`` x ``gradient_accumulation_steps`` = ``micro_batch_size`` x micro-batches
= 8 sequences (1 and 2 micro-batches); ``learning_rate`` 1e-3 = ``lr`` with ``lr_scheduler_type="constant"`` and no
warmup; AdamW betas (0.9, 0.999) and eps 1e-8 (both defaults; TRL's default optimizer is the fused
``adamw_torch_fused``, propel's ``torch.optim.AdamW``: the same update); ``weight_decay`` 0.01 = ``weight_decay``
(HF exempts biases and norms, of which LoRA has none); ``max_grad_norm`` 0.2 = ``gradient_clip_val`` 0.2 (below the
gradient norms here, 0.29 to 0.74, so clipping acts in both); float32 on CPU (``bf16=False``); no dropout; and
``use_bias_correction_kl=False``.

Where they differ by design (docs/guide/trl.md): TRL 1.16 defaults ``use_bias_correction_kl=True``, multiplying each
token's KL by the differentiable ratio ``exp(logp - old_logp)``: its value is 1 on the first iteration but its
gradient adds ``KL * grad(logp)``, while propel's KL anchor is the plain k3 estimator (TRL with the flag off, and
TRL before the flag existed); ``test_trl_default_kl_bias_correction_changes_the_step`` measures it (gradients 8e-3
apart, relative to their largest entry). And TRL scores completions under the temperature alone, propel under
top-k / top-p too (the distribution the engine sampled from): with ``top_p=0.9`` the gradients were 3e-3 apart.

What the tolerances mean. AdamW's first update is ``lr * g / (|g| + eps)`` per weight, ~``lr * sign(g)`` wherever
``|g| >> eps``: the weights after one step say little about the gradient's scale (a loss off by a factor of 2 gives
the same first step), and near ``g = 0`` the step magnifies a float32 difference ``d`` of the gradient into
``lr * eps * d / (|g| + eps)**2``. So the comparison has three parts:

* the clipped gradients (where a wrong normalisation, advantage, KL term or clip shows at full size): max abs
  difference <= 1e-5 of the largest entry; measured 0.9e-6 to 1.8e-6 (2e-8 absolute; the step-2 gradient of the
  two-iteration case, where the ratio is no longer 1, included);
* each trainer's weights equal AdamW (the settings above, in float64) applied to its own gradients, to float32
  rounding (<= 2e-7; measured <= 3.7e-8): the optimizer, its settings and the schedule are the same;
* the post-step weights on the 99.8% to 99.9% of the 8704 LoRA weights whose gradient is at least 1e-6 (100 eps) at
  every step (1e-5 for a run of two steps, ``CONDITIONED_LATER``) agree to <= 2e-7; measured 1.5e-8 to 4.5e-8, at
  most 4.5e-5 of the update (1.0e-3 a step). Over all weights the largest difference is 1.2e-7 to 1.0e-5 (at most 1%
  of the update), at weights with |g| < 1e-6 (in the ``dapo`` case a gradient entry of 1.73e-8 in propel and 1.81e-8
  in TRL: its weights end 1.0e-5 apart).

Each case prints its numbers (``pytest -s``). The 5 tests take 3 to 6 s each on 2 busy CPU cores (one thread), 32 s
for the file with the fixtures and imports.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import lightning.pytorch as pl
import pytest
import torch

from propel.datamodules.stream import ContextStreamDataModule
from propel.lit_modules.grpo import GRPOModule
from propel.losses.policy_gradient import LossSpec
from propel.models import load_model, prefix_sharing
from propel.models.lora import LoRASpec, peft_lora_config
from propel.records import Context, Prompt, Sample, Turn
from propel.rewards import FunctionReward
from propel.rollouts.steps import Rollout

PROMPTS = ["Word: alpha\n", "Spell the word river backwards, then count its letters:\n"]
G = 4
SEQUENCES = len(PROMPTS) * G
LORA = LoRASpec(r=4, alpha=8)
MAX_NEW_TOKENS = 12
TEMPERATURE = 0.7
LR = 1e-3
WEIGHT_DECAY = 0.01
CLIP = 0.2
GRAD_TOL = 1e-5
"""Max abs gradient difference, as a fraction of the largest gradient entry."""
ROUNDING = 2e-7
"""Max abs difference of LoRA weights (|w| < 0.5) that float32 rounding explains: a few ulps, 2e-4 of ``LR``."""
CONDITIONED = 1e-6
"""|gradient| above which AdamW's step is well conditioned: 100 x its eps (see the module docstring)."""
CONDITIONED_LATER = 1e-5
"""The same for a run of several steps: from the second step AdamW's step is ``lr * m / sqrt(v)`` with ``m`` and ``v``
mixing the gradients of both steps, which moves by up to about ``lr * d / |g|`` for a float32 difference ``d`` of one
gradient, not ``lr * eps * d / |g|**2``: 10 x the first step's bound reads 97.6% of the weights (measured 7.2e-8
there, and 4.5e-7 at |g| >= 1e-6 on an AVX-512 CPU, 2026-12-07)."""


@dataclass(frozen=True)
class Case:
    loss_type: str
    beta: float
    accumulation: int = 1
    """Micro-batches per optimizer step (TRL's gradient_accumulation_steps)."""
    iterations: int = 1
    """Optimizer steps over the rollouts (TRL's num_iterations, propel's ppo_epochs)."""
    scale_rewards: str | None = None


CASES = {
    "grpo-kl": Case("grpo", 0.04),
    "dr_grpo-accumulated": Case("dr_grpo", 0.0, accumulation=2),
    "dapo-kl-accumulated-batch-std": Case("dapo", 0.04, accumulation=2, scale_rewards="batch"),
    "grpo-kl-two-iterations": Case("grpo", 0.04, iterations=2),
}


@dataclass
class Rollouts:
    """The recorded rollouts both trainers get: each prompt's token ids, its G completions' ids, each one's reward."""

    prompt_ids: dict[str, list[int]]
    completions: dict[str, list[list[int]]]
    rewards: dict[tuple[int, ...], float]


@pytest.fixture(scope="module")
def rollouts(tokenizer) -> Rollouts:
    g = torch.Generator().manual_seed(0)
    prompt_ids = {p: tokenizer(p, add_special_tokens=False)["input_ids"] for p in PROMPTS}
    completions, rewards = {}, {}
    for p in PROMPTS:
        completions[p] = []
        for k in range(G):
            ids = torch.randint(200, 5000, (int(torch.randint(2, MAX_NEW_TOKENS + 1, (1,), generator=g)),), generator=g)
            ids = ids.tolist()
            if k % 2 == 0:
                ids[-1] = tokenizer.eos_token_id  # stopped at EOS; the others end without it (cut off)
            completions[p].append(ids)
            rewards[tuple(ids)] = float(torch.randn((), generator=g))
    assert len(rewards) == SEQUENCES  # distinct completions: the reward is looked up by token ids
    return Rollouts(prompt_ids, completions, rewards)


@pytest.fixture(scope="module")
def trl(require):
    """TRL: skipped without it locally, failed under CI=true (before propel's half of a test runs)."""
    return require("trl")


@pytest.fixture
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# ------------------------------------------------------------------------------------------------------- propel
class _Prompts:
    def contexts(self, n: int, seed: int = 0) -> list[Context]:
        return [Context(id=f"p{i}", prompt=Prompt(text=p)) for i, p in enumerate(PROMPTS)]


class RecordedRollouts(ContextStreamDataModule):
    """A ``RolloutSource`` whose rollout is the recorded completions (the engine is not asked to sample)."""

    stop = ()

    def __init__(self, recorded: Rollouts, tokenizer) -> None:
        super().__init__(_Prompts(), contexts_per_step=len(PROMPTS))
        self.recorded, self.tokenizer = recorded, tokenizer

    def rollout(self, engine, batch, sampling) -> Rollout:
        assert sampling.n == G
        groups = []
        for context in batch.contexts:
            prompt = context.prompt.text
            group = []
            for ids in self.recorded.completions[prompt]:
                text = self.tokenizer.decode(ids, skip_special_tokens=True)
                turn = Turn("assistant", text, list(ids), [0.0] * len(ids), True, "stop")
                ids_in = list(self.recorded.prompt_ids[prompt])
                group.append(Sample(prompt, text, context=context, prompt_ids=ids_in, turns=[turn]))
            groups.append(group)
        return Rollout(groups)


class _Gradients(pl.Callback):
    """The LoRA gradients each optimizer step receives (after clipping)."""

    def __init__(self) -> None:
        self.steps: list[dict[str, torch.Tensor]] = []

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        self.steps.append(lora_tensors(pl_module.policy, grad=True))


def lora_tensors(model, grad: bool = False) -> dict[str, torch.Tensor]:
    return {n: (p.grad if grad else p).detach().clone() for n, p in model.named_parameters() if "lora_" in n}


def propel_step(model_dir, recorded: Rollouts, case: Case):
    """propel's step from random LoRA weights: (start weights, weights after, each step's gradients, the module)."""
    module = GRPOModule(
        model=str(model_dir),
        rewards=[FunctionReward("recorded", lambda s: recorded.rewards[tuple(s.response_ids)])],
        lora=LORA,
        loss=LossSpec(loss_type=case.loss_type, beta=case.beta),
        group_size=G,
        scale_rewards=case.scale_rewards,
        ppo_epochs=case.iterations,
        max_new_tokens=MAX_NEW_TOKENS,
        temperature=TEMPERATURE,
        micro_batch_size=SEQUENCES // case.accumulation,
        lr=LR,
        weight_decay=WEIGHT_DECAY,
        gradient_clip_val=CLIP,
    )
    module.configure_model()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in module.policy.named_parameters():
            if "lora_" in name:  # B too (peft starts it at 0): the policy is not the reference
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
    start = lora_tensors(module.policy)
    grads = _Gradients()
    trainer = pl.Trainer(
        max_steps=case.iterations,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        callbacks=[grads],
    )
    trainer.fit(module, datamodule=RecordedRollouts(recorded, module.tokenizer))
    assert trainer.global_step == case.iterations
    return start, lora_tensors(module.policy), grads.steps, module


# ---------------------------------------------------------------------------------------------------------- TRL
def trl_step(trl, model_dir, recorded: Rollouts, case: Case, module: GRPOModule, start, out_dir, **overrides):
    """TRL's step on the same rollouts from ``start``: (weights after, each step's gradients after clipping)."""
    from datasets import Dataset  # a TRL dependency
    from transformers import TrainerCallback

    def rollout_func(prompts, trainer):
        # The sampler repeats each prompt G times, in dataset order: hand back the recorded completions in turn.
        assert prompts == [p for p in PROMPTS for _ in range(G)], prompts
        seen: dict[str, int] = {}
        out = {"prompt_ids": [], "completion_ids": [], "logprobs": []}
        for p in prompts:
            k = seen[p] = seen.get(p, -1) + 1
            ids = recorded.completions[p][k]
            out["prompt_ids"].append(list(recorded.prompt_ids[p]))
            out["completion_ids"].append(list(ids))
            out["logprobs"].append([0.0] * len(ids))  # not read: no vLLM importance correction
        return out

    def recorded_reward(prompts, completions, completion_ids, **kwargs):
        return [recorded.rewards[tuple(ids)] for ids in completion_ids]

    spec = module.loss_spec
    settings = dict(
        loss_type=spec.loss_type,
        beta=spec.beta,
        epsilon=spec.eps_low,
        epsilon_high=spec.high,
        delta=spec.clip_c,
        use_bias_correction_kl=False,
        scale_rewards=module.scale_rewards,
        num_generations=G,
        num_iterations=case.iterations,
        max_completion_length=MAX_NEW_TOKENS,
        temperature=TEMPERATURE,
        per_device_train_batch_size=SEQUENCES // case.accumulation,
        gradient_accumulation_steps=case.accumulation,
        max_steps=case.iterations,
        learning_rate=LR,
        lr_scheduler_type="constant",
        weight_decay=WEIGHT_DECAY,
        max_grad_norm=CLIP,
    )
    settings.update(overrides)
    args = trl.GRPOConfig(
        output_dir=str(out_dir),
        use_cpu=True,
        bf16=False,
        shuffle_dataset=False,
        gradient_checkpointing=False,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        seed=0,
        **settings,
    )
    steps: list[dict[str, torch.Tensor]] = []
    model, tokenizer = load_model(str(model_dir))

    class Gradients(TrainerCallback):
        def on_pre_optimizer_step(self, args, state, control, **kwargs):
            steps.append(lora_tensors(trainer.model, grad=True))

    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=recorded_reward,
        args=args,
        train_dataset=Dataset.from_list([{"prompt": p} for p in PROMPTS]),
        processing_class=tokenizer,
        peft_config=peft_lora_config(LORA),
        rollout_func=rollout_func,
        callbacks=[Gradients()],
    )
    assert lora_tensors(trainer.model).keys() == start.keys()  # the same peft names: the weights copy one to one
    with torch.no_grad():
        for name, p in trainer.model.named_parameters():
            if name in start:
                p.copy_(start[name])
    trainer.train()
    assert trainer.state.global_step == case.iterations
    return lora_tensors(trainer.model), steps


def adamw(start: dict[str, torch.Tensor], steps: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """``torch.optim.AdamW``'s steps from ``start`` over each step's gradients, in float64 (the settings above)."""
    out = {}
    for n, p in start.items():
        p = p.double().clone()
        m = torch.zeros_like(p)
        v = torch.zeros_like(p)
        for t, grads in enumerate(steps, 1):
            g = grads[n].double()
            p = p * (1 - LR * WEIGHT_DECAY)
            m = 0.9 * m + 0.1 * g
            v = 0.999 * v + 0.001 * g * g
            p = p - LR / (1 - 0.9**t) * m / ((v / (1 - 0.999**t)).sqrt() + 1e-8)
        out[n] = p.float()
    return out


def max_abs(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor] | None = None) -> float:
    return max(float((a[n] - (b[n] if b is not None else 0)).abs().max()) for n in a)


def norm(tensors: dict[str, torch.Tensor]) -> float:
    return float(torch.sqrt(sum((t.double() ** 2).sum() for t in tensors.values())))


# -------------------------------------------------------------------------------------------------------- tests
@pytest.mark.parametrize("name", list(CASES))
def test_one_step_matches_trl(trl, tiny_model_dir, rollouts, tmp_path, monkeypatch, one_thread, name):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is experimental in TRL 1.16
    case = CASES[name]
    began = time.perf_counter()
    shared = []  # propel scores each group's 4 rows with their prompt run once (share_prompt, on by default)
    group_logits = prefix_sharing._group_span_logits
    monkeypatch.setattr(prefix_sharing, "_group_span_logits", lambda *a: shared.append(1) or group_logits(*a))
    start, ours, our_grads, module = propel_step(tiny_model_dir, rollouts, case)
    assert shared, "propel's step never shared a prompt"
    theirs, their_grads = trl_step(trl, tiny_model_dir, rollouts, case, module, start, tmp_path / "trl")
    assert len(our_grads) == len(their_grads) == case.iterations
    for step, (mine, other) in enumerate(zip(our_grads, their_grads, strict=True)):
        scale = max_abs(mine)
        assert norm(mine) == pytest.approx(CLIP, rel=1e-5) and norm(other) == pytest.approx(CLIP, rel=1e-5)  # clipped
        grad_diff = max_abs(mine, other)
        print(f"{name} step {step + 1}: max |grad diff| {grad_diff:.2e} of max |grad| {scale:.2e}")
        assert grad_diff <= GRAD_TOL * scale, (step, grad_diff, scale)
    # Each trainer's weights are AdamW's step (lr, betas, eps, weight decay, constant lr) from its own gradients ...
    for weights, grads in ((ours, our_grads), (theirs, their_grads)):
        assert max_abs(weights, adamw(start, grads)) <= ROUNDING
    # ... so where that step is well conditioned (|g| >= 100 eps at every step) the two agree to float32 rounding.
    bound, least = (CONDITIONED, 0.99) if case.iterations == 1 else (CONDITIONED_LATER, 0.97)
    conditioned = {n: torch.stack([g[n].abs() for g in our_grads]).amin(0) >= bound for n in ours}
    share = sum(int(c.sum()) for c in conditioned.values()) / sum(c.numel() for c in conditioned.values())
    there = max(float((ours[n] - theirs[n])[c].abs().max()) for n, c in conditioned.items())
    update, everywhere = max_abs(ours, start), max_abs(ours, theirs)
    print(
        f"{name}: max |weight diff| {there:.1e} on the {share:.2%} of weights with |g| >= {bound:g}, "
        f"{everywhere:.1e} on all; update {update:.2e} (TRL's {max_abs(theirs, start):.2e}); "
        f"{time.perf_counter() - began:.1f} s"
    )
    assert share > least and there <= ROUNDING
    assert update == pytest.approx(case.iterations * LR, rel=0.05)  # AdamW moves a weight by ~lr a step


def test_trl_default_kl_bias_correction_changes_the_step(
    trl, tiny_model_dir, rollouts, tmp_path, monkeypatch, one_thread
):
    """TRL 1.16's default ``use_bias_correction_kl=True`` weights each token's KL by the ratio, whose gradient is not
    0 even where its value is 1: with ``beta > 0`` that step is not propel's (the comparison above can see it)."""
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    case = CASES["grpo-kl"]
    start, ours, our_grads, module = propel_step(tiny_model_dir, rollouts, case)
    theirs, their_grads = trl_step(
        trl, tiny_model_dir, rollouts, case, module, start, tmp_path / "trl", use_bias_correction_kl=True
    )
    grad_diff, scale = max_abs(our_grads[0], their_grads[0]), max_abs(our_grads[0])
    print(
        f"use_bias_correction_kl=True: max |grad diff| {grad_diff:.2e} of {scale:.2e}, "
        f"max |weight diff| {max_abs(ours, theirs):.1e}"
    )
    assert grad_diff > 100 * GRAD_TOL * scale
