"""GRPO on a LoRA policy with manual optimization: sample G completions per context, score, and update.

One training step = one batch of contexts = rollouts + ``ppo_epochs`` optimizer steps over them (so
``global_step`` counts optimizer steps). The reference model for the KL anchor is the policy with its adapters
disabled; checkpoints keep only the LoRA weights (plus optimizer and data-stream state).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import lightning.pytorch as pl
import torch

from propel.datamodules.rollouts import ContextBatch
from propel.domains.base import Domain, Task
from propel.engines.base import Completion, Engine, Prompt, SamplingSpec
from propel.engines.factory import check_kind, make_policy_engine
from propel.losses.advantages import group_advantages, zero_variance_mask
from propel.losses.logprobs import token_logprobs
from propel.losses.policy import LossSpec, policy_loss, truncated_importance_weights
from propel.models.lora import LoRASpec
from propel.rewards.base import RewardComponent, Sample
from propel.rewards.combine import CombinedReward
from propel.sandbox.base import Sandbox

# A GRPO step is one whole optimization: a checkpoint taken after it is the state to resume from (the 8-vs-4+4 and
# kill-mid-step tests prove it), so Lightning's advice to stash pre-optimization weights does not apply here.
warnings.filterwarnings("ignore", message="Using ModelCheckpoint with manual optimization")


@dataclass
class _Rollout:
    """Padded tensors for one batch of scored completions."""

    input_ids: torch.Tensor  # (B, L) prompt + completion, right-padded
    attention_mask: torch.Tensor  # (B, L)
    completion_ids: torch.Tensor  # (B, T)
    completion_mask: torch.Tensor  # (B, T)
    starts: torch.Tensor  # (B,) index in input_ids of the first completion token
    engine_logp: torch.Tensor  # (B, T), NaN where unknown
    advantages: torch.Tensor  # (B,)

    def select(self, rows: torch.Tensor) -> _Rollout:
        return _Rollout(*(getattr(self, f)[rows] for f in self.__dataclass_fields__))


class GRPOModule(pl.LightningModule):
    """Group Relative Policy Optimization for a LoRA-adapted causal LM.

    Args:
        model: bundled alias, local folder, ``.gguf`` file or hub id of the base model.
        rewards: reward components (name, weight, ``__call__(samples)``), summed with their weights.
        lora: LoRA settings (r=16, alpha=32, dropout 0.05 on all projections by default).
        loss: loss type and clipping / KL settings (``grpo``, beta 0.04, k3 by default).
        group_size: completions per context (G).
        max_new_tokens: completion length cap (also the ``dr_grpo`` constant unless the loss sets one).
        temperature: sampling temperature (the trainer scores under the same warping).
        top_p: nucleus sampling threshold (1 disables).
        top_k: top-k sampling (0 disables).
        stop: stop strings; None uses the domain's ``generator_stop``.
        scale_rewards: advantage scaling: ``group`` (GRPO), ``batch`` or ``none`` (Dr. GRPO).
        filter_zero_variance: drop groups whose rewards are all equal (no policy gradient in them).
        zero_variance_tol: reward std below which a group counts as zero-variance.
        ppo_epochs: optimizer steps over each batch of rollouts (PPO inner iterations, >= 1).
        importance_correction: reweight tokens by ``min(exp(trainer_old_logp - engine_logp), cap)`` when the engine
            is not the live policy itself (vLLM); the HF engine samples from the policy, so it is skipped there.
        importance_cap: the truncation ``cap`` above.
        micro_batch_size: sequences per forward/backward; gradients of the micro-batches are accumulated.
        lr: AdamW learning rate (when ``optimizer`` is not given).
        weight_decay: AdamW weight decay (when ``optimizer`` is not given).
        optimizer: callable ``params -> Optimizer`` overriding the AdamW default.
        gradient_clip_val: max gradient norm (0 disables).
        dtype: model dtype.
        engine: rollout engine: ``hf`` (``generate`` on the live policy), ``vllm`` (in-process vLLM, the LoRA
            adapter hot-loaded after every optimizer step) or ``vllm_server`` (an OpenAI-compatible vLLM server).
        engine_kwargs: engine arguments (e.g. ``{"dtype": "bfloat16"}`` for ``vllm``, ``{"base_url": ...}`` or
            ``{"launch": true}`` for ``vllm_server``).
        sandbox: verifier sandbox for the domain's validity checks; None starts a ``LocalSandbox`` when the domain
            needs one.
    """

    def __init__(
        self,
        model: str = "smollm2-135m-instruct",
        rewards: Sequence[RewardComponent] = (),
        lora: LoRASpec | None = None,
        loss: LossSpec | None = None,
        group_size: int = 8,
        max_new_tokens: int = 128,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        stop: list[str] | None = None,
        scale_rewards: str = "group",
        filter_zero_variance: bool = False,
        zero_variance_tol: float = 1e-6,
        ppo_epochs: int = 1,
        importance_correction: bool = True,
        importance_cap: float = 3.0,
        micro_batch_size: int = 16,
        lr: float = 1e-5,
        weight_decay: float = 0.0,
        optimizer: Callable[[Iterable], torch.optim.Optimizer] | None = None,
        gradient_clip_val: float = 1.0,
        dtype: str = "float32",
        engine: str = "hf",
        engine_kwargs: dict[str, Any] | None = None,
        sandbox: Sandbox | None = None,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(ignore=["rewards", "optimizer", "lora", "loss", "sandbox"])
        if group_size < 2:
            raise ValueError(f"group_size must be >= 2 (advantages are relative within a group), got {group_size}")
        if ppo_epochs < 1:
            raise ValueError(f"ppo_epochs must be >= 1, got {ppo_epochs}")
        if micro_batch_size < 1:
            raise ValueError(f"micro_batch_size must be >= 1, got {micro_batch_size}")
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        self.automatic_optimization = False
        self.strict_loading = False  # checkpoints hold only the LoRA weights
        self.reward = CombinedReward(list(rewards)) if rewards else None
        self.lora_spec = lora or LoRASpec()
        self.loss_spec = loss or LossSpec()
        self.sampling = SamplingSpec(
            n=group_size,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            stop=list(stop or []),
            logprobs=True,
        )
        self._optimizer_factory = optimizer
        check_kind(engine)
        self._engine_synced_at = -1  # global step whose weights the engine holds (-1: not synced yet)
        self.sandbox, self._owns_sandbox = sandbox, False
        self.policy = None
        self.tokenizer = None
        self.engine: Engine | None = None
        self.latest_samples: list[Sample] = []
        self.latest_rewards = None  # RewardBreakdown of the latest step
        self.latest_generations: list[str] = []
        self.latest_topics: list[str | None] = []

    # ----------------------------------------------------------------------------------------------- setup
    def configure_model(self) -> None:
        if self.policy is not None:  # runs once per stage; keep it idempotent
            return
        from propel.models import apply_lora, load_model

        base, self.tokenizer = load_model(self.hparams.model, dtype=self.hparams.dtype, padding_side="left")
        self.policy = apply_lora(base, self.lora_spec)
        self.policy.train()
        self.engine = make_policy_engine(
            self.hparams.engine,
            self.hparams.model,
            self.policy,
            self.tokenizer,
            lora_rank=self.lora_spec.r,
            **(self.hparams.engine_kwargs or {}),
        )
        self._engine_synced_at = 0
        for component in self.reward.components if self.reward is not None else []:
            bind = getattr(component, "bind", None)
            if bind is not None:  # e.g. a probe reward reading the policy with adapters off as its reference
                bind(self.policy, self.tokenizer, self.hparams.model)

    def on_fit_start(self) -> None:
        domain = self.domain
        if self.hparams.stop is None:
            self.sampling.stop = list(domain.generator_stop)
        if self.sandbox is None and domain.needs_sandbox:
            from propel.sandbox.local import LocalSandbox

            self.sandbox, self._owns_sandbox = LocalSandbox(max_workers=2), True

    def on_fit_end(self) -> None:
        if self.engine is not None and not self._engine_is_policy():
            self.engine.close()  # a vLLM engine holds worker processes and a KV cache
            self.engine = None
        if self._owns_sandbox and self.sandbox is not None:
            self.sandbox.close()
            self.sandbox, self._owns_sandbox = None, False

    def configure_optimizers(self):
        params = [p for p in self.parameters() if p.requires_grad]
        if self._optimizer_factory is not None:
            return self._optimizer_factory(params)
        return torch.optim.AdamW(params, lr=self.hparams.lr, weight_decay=self.hparams.weight_decay)

    @property
    def domain(self) -> Domain:
        dm = getattr(self.trainer, "datamodule", None)
        domain = getattr(dm, "domain", None)
        if not isinstance(domain, Domain):
            raise TypeError("GRPOModule needs a datamodule with a `domain` (a propel.domains.base.Domain)")
        return domain

    # -------------------------------------------------------------------------------------------- rollouts
    def _score(self, prompts: list[Prompt], groups: list[list[Completion]]) -> tuple[list[Sample], Any]:
        """Parse every completion, check the parsed tasks' validity in one batch, then compute the rewards."""
        if self.reward is None:
            raise ValueError("GRPOModule needs at least one reward component: pass rewards=[...]")
        domain = self.domain
        samples = []
        for prompt, group in zip(prompts, groups, strict=True):
            rendered = self.engine.render(prompt)
            for c in group:
                parsed = domain.parse(c.text)
                task = parsed if isinstance(parsed, Task) else None
                info = {"task_text": domain.render(task)} if task is not None else {"reason": parsed.reason}
                topic = domain.topic(task) if task is not None else None
                samples.append(
                    Sample(prompt=rendered, completion=c.text, valid=False, task=task, topic=topic, info=info)
                )
        parsed_rows = [s for s in samples if s.task is not None]
        verdicts = domain.validity([s.task for s in parsed_rows], self.sandbox) if parsed_rows else []
        for sample, verdict in zip(parsed_rows, verdicts, strict=True):
            sample.valid, sample.info["reason"] = bool(verdict.ok), verdict.reason
        was_training = self.policy.training
        self.policy.eval()  # a probe reading the policy as its reference must see no dropout
        try:
            return samples, self.reward(samples)
        finally:
            self.policy.train(was_training)

    def _tensors(self, prompts: list[Prompt], groups: list[list[Completion]], advantages: torch.Tensor) -> _Rollout:
        pad = self.tokenizer.pad_token_id
        prompt_ids = [self.engine.encode_prompt(p) for p in prompts]
        rows = [(prompt_ids[i], c) for i, group in enumerate(groups) for c in group]
        width = max(len(p) + len(c.token_ids) for p, c in rows)
        t_max = max(1, max(len(c.token_ids) for _, c in rows))
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        attn = torch.zeros((len(rows), width), dtype=torch.long)
        comp = torch.full((len(rows), t_max), pad, dtype=torch.long)
        cmask = torch.zeros((len(rows), t_max))
        elogp = torch.full((len(rows), t_max), float("nan"))
        starts = torch.zeros(len(rows), dtype=torch.long)
        for r, (p, c) in enumerate(rows):
            n, m = len(p), len(c.token_ids)
            ids[r, : n + m] = torch.tensor(p + c.token_ids)
            attn[r, : n + m] = 1
            starts[r] = n
            if m:
                comp[r, :m] = torch.tensor(c.token_ids)
                cmask[r, :m] = 1
                if c.logprobs is not None:
                    elogp[r, :m] = torch.tensor(c.logprobs)
        return _Rollout(ids, attn, comp, cmask, starts, elogp, advantages.float())

    def _logprobs(self, ro: _Rollout, with_entropy: bool = False):
        """Completion-token logprobs under the sampling warping; ``(B, T)`` each."""
        ro = _Rollout(*(getattr(ro, f).to(self.device) for f in ro.__dataclass_fields__))
        # lm_head (the largest matmul) only where completion tokens are predicted: the last `keep` positions
        first = int(ro.starts.min()) - 1
        keep = ro.input_ids.shape[1] - first
        logits = self.policy(input_ids=ro.input_ids, attention_mask=ro.attention_mask, logits_to_keep=keep).logits
        t = ro.completion_ids.shape[1]
        index = (ro.starts[:, None] - 1 - first + torch.arange(t, device=self.device)[None, :]).clamp(max=keep - 1)
        picked = logits.gather(1, index[..., None].expand(-1, -1, logits.shape[-1]))
        s = self.sampling
        temperature = s.temperature or 1.0
        return token_logprobs(
            picked, ro.completion_ids, temperature=temperature, top_k=s.top_k, top_p=s.top_p, with_entropy=with_entropy
        )

    @torch.no_grad()
    def _frozen_logprobs(self, ro: _Rollout, reference: bool) -> torch.Tensor:
        """Logprobs without grad, dropout off: the sampling policy's (old) or, adapters disabled, the reference's."""
        from propel.models import reference_forward

        was_training = self.policy.training
        self.policy.eval()
        try:
            out = []
            for rows in self._micro_batches(ro.input_ids.shape[0]):
                sub = ro.select(rows)
                if reference:
                    with reference_forward(self.policy):
                        out.append(self._logprobs(sub)[0])
                else:
                    out.append(self._logprobs(sub)[0])
        finally:
            self.policy.train(was_training)
        return torch.cat(out).cpu()

    def _engine_is_policy(self) -> bool:
        from propel.engines.hf import HFEngine

        return isinstance(self.engine, HFEngine) and self.engine.model is self.policy

    def _sync_engine(self) -> None:
        """Ship the policy's current weights to an engine that is not the policy itself (once per optimizer step,
        and after a resume, whose loaded adapter the engine has not seen)."""
        if self._engine_is_policy() or self._engine_synced_at == self.global_step:
            return
        self.engine.update_weights(self.policy)
        self._engine_synced_at = self.global_step

    def _micro_batches(self, n: int) -> list[torch.Tensor]:
        size = self.hparams.micro_batch_size
        return [torch.arange(i, min(i + size, n)) for i in range(0, n, size)]

    # ---------------------------------------------------------------------------------------------- step
    def training_step(self, batch: ContextBatch, batch_idx: int) -> None:
        dm = getattr(self.trainer, "datamodule", None)
        if hasattr(dm, "on_before_rollout"):
            dm.on_before_rollout(batch)
        hp, g = self.hparams, self.hparams.group_size
        self._sync_engine()
        start = time.perf_counter()
        groups = self.engine.generate(batch.prompts, self.sampling)
        gen_s = time.perf_counter() - start
        samples, breakdown = self._score(batch.prompts, groups)
        self.latest_samples, self.latest_rewards = samples, breakdown
        self.latest_generations = [s.completion for s in samples]
        self.latest_topics = [s.topic for s in samples]
        rewards = breakdown.total
        advantages = group_advantages(rewards, g, scale=hp.scale_rewards)
        keep = torch.ones(len(samples), dtype=torch.bool)
        if hp.filter_zero_variance:
            keep = ~zero_variance_mask(rewards, g, tol=hp.zero_variance_tol)
        lengths = torch.tensor([len(c.token_ids) for group in groups for c in group], dtype=torch.float32)
        stats = {
            **breakdown.stats("reward"),
            "valid_rate": sum(s.valid for s in samples) / len(samples),
            "completion_length": float(lengths.mean()),
            "tokens_per_s": float(lengths.sum()) / max(gen_s, 1e-9),
            "kept_fraction": float(keep.float().mean()),
        }
        if not keep.any():  # nothing to learn from this batch: no optimizer step
            self.log_dict({f"train/{k}": v for k, v in stats.items()}, on_step=True, batch_size=len(samples))
            return
        rows = torch.nonzero(keep).squeeze(-1)
        ro = self._tensors(batch.prompts, groups, advantages).select(rows)
        loss_stats = self._optimize(ro)
        stats.update(loss_stats)
        self.log("train/loss", stats.pop("loss"), on_step=True, prog_bar=True, batch_size=len(samples))
        self.log_dict({f"train/{k}": v for k, v in stats.items()}, on_step=True, batch_size=len(samples))

    def _optimize(self, ro: _Rollout) -> dict[str, float]:
        hp, spec = self.hparams, self.loss_spec
        opt = self.optimizers()
        if spec.max_completion_length is None:
            spec = LossSpec(**{**spec.__dict__, "max_completion_length": hp.max_new_tokens})
        # An engine sampling from the live policy itself (HF generate) needs no importance correction, and with one
        # PPO iteration the old policy is the current one: skip that forward pass (as TRL does).
        correct = hp.importance_correction and not self._engine_is_policy()
        old_logp = self._frozen_logprobs(ro, reference=False) if (hp.ppo_epochs > 1 or correct) else None
        ref_logp = self._frozen_logprobs(ro, reference=True) if spec.beta > 0 else None
        is_w = None
        if correct:
            is_w = truncated_importance_weights(
                old_logp, ro.engine_logp, cap=hp.importance_cap, mask=ro.completion_mask
            )
        n_seq, n_tok = ro.input_ids.shape[0], float(ro.completion_mask.sum().clamp(min=1))
        micro = self._micro_batches(n_seq)
        totals: dict[str, float] = {}
        for _ in range(hp.ppo_epochs):
            epoch: dict[str, float] = {}
            for k, rows in enumerate(micro):
                sub = ro.select(rows)
                mask = sub.completion_mask.to(self.device)
                with opt.toggle_model(sync_grad=k == len(micro) - 1):
                    logp, entropy = self._logprobs(sub, with_entropy=True)
                    out = policy_loss(
                        logp,
                        old_logp[rows].to(self.device) if old_logp is not None else logp.detach(),
                        sub.advantages.to(self.device),
                        mask,
                        spec,
                        ref_logp=ref_logp[rows].to(self.device) if ref_logp is not None else None,
                        is_weights=is_w[rows].to(self.device) if is_w is not None else None,
                        num_sequences=n_seq,
                        num_tokens=n_tok,
                    )
                    self.manual_backward(out.loss)
                weight = float(mask.sum()) / n_tok  # token-weighted average of micro-batch statistics
                epoch["loss"] = epoch.get("loss", 0.0) + float(out.loss.detach())
                for name, value in out.stats.items():
                    epoch[name] = epoch.get(name, 0.0) + weight * value
                epoch["entropy"] = epoch.get("entropy", 0.0) + float((entropy * mask).sum()) / n_tok
            if hp.gradient_clip_val:
                self.clip_gradients(opt, gradient_clip_val=hp.gradient_clip_val, gradient_clip_algorithm="norm")
            opt.step()
            opt.zero_grad(set_to_none=True)
            totals = epoch
        if not all(math.isfinite(v) for v in totals.values()):
            raise FloatingPointError(f"non-finite GRPO statistics: {totals}")
        return totals

    # ---------------------------------------------------------------------------------------- checkpoints
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Keep only the LoRA adapter weights: the base model is reloaded from ``model``."""
        checkpoint["state_dict"] = {k: v for k, v in checkpoint["state_dict"].items() if "lora_" in k}
        checkpoint["lora_spec"] = asdict(self.lora_spec)  # rebuild the adapter without the config (evaluation)

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self._engine_synced_at = -1  # the engine was synced to the weights before the checkpoint was loaded
        if not any("lora_" in k for k in checkpoint.get("state_dict", {})):
            raise ValueError("checkpoint has no LoRA weights: it was not written by GRPOModule")
