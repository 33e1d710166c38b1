"""The LoRA policy base that RL and distillation trainers share: everything about the policy but the loss.

It loads the base model, adds LoRA adapters, builds the rollout engine and keeps it in sync with the policy, makes
the optimizer, runs one optimizer step over micro-batches (manual optimization: ``global_step`` counts optimizer
steps), computes span logprobs under the sampling warping (the policy's, or the reference's with the adapters
disabled) and keeps checkpoints LoRA-only. A trainer subclasses it and writes ``training_step`` with its loss.
The rollouts come from the datamodule, which declares the ``RolloutSource`` protocol (it rolls out a step's contexts:
single-turn completions or multi-turn agent episodes, scored); the latest step's scored rollouts are published as
``rollout_state`` for callbacks. One step reads top to bottom: ``training_step`` (the trainer) ->
``collect_rollout`` -> ``sync_engine`` -> the datamodule's ``rollout(engine, ...)`` -> ``engine.generate`` ->
the trainer's loss -> ``optimization_step``.

Three collaborators keep their concern out of this file: ``AsyncRollouts`` (``async_rollouts: true``: the next
batches sampled on a worker thread, at most ``max_staleness`` optimizer steps behind, under a weight lock the
optimizer step also holds), ``Ranks`` (under ``trainer.strategy: ddp`` every decision whose branches run
collectives is taken on global counts: ``ranks.sum``, ``ranks.gather_objects``) and ``UpdateGuard`` (a step that
ends without an optimizer step leaves ``global_step`` where it was: each is warned about and counted, and
``max_steps_without_update`` in a row stop the run). A rank with no rows of its own in a step where another rank has
some still joins the gradient all-reduce: ``optimization_step`` runs one zero-weighted forward for it.

Dropout is off in every forward pass of a step: sampling, the frozen old/reference logprobs and the loss forward.
LoRA dropout in the loss forward alone would make the PPO ratio ``exp(logp - old_logp)`` differ from 1 before any
update (the old logprobs come from the dropout-free policy), biasing clipping and the importance weights; so
``LoRASpec`` has no dropout setting at all (one that never acts would only mislead).
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable, Iterable
from contextlib import contextmanager, nullcontext
from dataclasses import asdict
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.utilities import rank_zero_info

from propel.engines.engine import Engine, SamplingSpec
from propel.engines.factory import check_kind, make_policy_engine
from propel.errors import ConfigError
from propel.host_memory import release_freed_memory
from propel.lit_modules.async_rollouts import AsyncRollouts
from propel.lit_modules.loss_terms import LossTerm, spans, summed_loss
from propel.lit_modules.phases import Phases
from propel.lit_modules.ranks import Ranks
from propel.lit_modules.state import RolloutState
from propel.lit_modules.update_guard import UpdateGuard
from propel.losses.logprobs import token_logprobs
from propel.models.lora import LoRASpec
from propel.models.prefix_sharing import shared_prefix_span_logits
from propel.models.span_logits import span_logits
from propel.records import Sample, Turn
from propel.rollouts.packing import PackedBatch, pack
from propel.rollouts.scorer import Scorer
from propel.rollouts.steps import ContextBatch, Rollout, RolloutSource

# An RL step is one whole optimization: a checkpoint taken after it is the state to resume from (the 8-vs-4+4 and
# kill-mid-step tests prove it), so Lightning's advice to stash pre-optimization weights does not apply here.
warnings.filterwarnings("ignore", message="Using ModelCheckpoint with manual optimization")

MicroLoss = Callable[[torch.Tensor], tuple[torch.Tensor, dict[str, float]]]


_PLAIN = (str, int, float, bool, type(None))


def _plain(value: Any) -> bool:
    if isinstance(value, _PLAIN):
        return True
    if isinstance(value, list | tuple):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain(v) for k, v in value.items())
    return False


def _same(a: Any, b: Any) -> bool:
    """Equal optimizer settings (a tensor ``lr`` included)."""
    if a is None or b is None:
        return a is b
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return torch.equal(torch.as_tensor(a), torch.as_tensor(b))
    return a == b


def save_plain_hyperparameters(module: pl.LightningModule, frame) -> None:
    """``save_hyperparameters`` over every ``__init__`` of the module's class chain (``frame``: the base's), keeping
    plain values only: objects (rewards, hint sources, settings dataclasses, an optimizer factory) break
    ``weights_only`` checkpoint loading (the run's whole config is saved beside it). No class names its subclasses'
    arguments."""
    from lightning.pytorch.utilities.parsing import collect_init_args

    init_args: dict[str, Any] = {}
    for local_args in collect_init_args(frame, []):
        init_args.update(local_args)
    module.save_hyperparameters(ignore=[k for k, v in init_args.items() if not _plain(v)], frame=frame)


def check_optimizer(optimizer: Callable | None, lr: float, weight_decay: float) -> None:
    """Refuse optimizer settings now, as the config is read, not once the model has loaded: ``lr`` and
    ``weight_decay`` of the default AdamW, or whatever the given ``optimizer`` refuses when it is built on one
    parameter (torch checks its own arguments as it builds an optimizer)."""
    if optimizer is None:
        if not lr > 0:
            raise ConfigError(f"lr must be > 0 (AdamW's learning rate), got {lr}")
        if not weight_decay >= 0:
            raise ConfigError(f"weight_decay must be >= 0, got {weight_decay}")
        return
    try:
        optimizer([torch.nn.Parameter(torch.zeros(1))])
    except (ValueError, TypeError) as err:
        raise ConfigError(f"optimizer refuses its settings: {err}") from None


class LoRAPolicyModule(pl.LightningModule):
    """A causal LM with LoRA adapters, its rollout engine and one optimizer, trained with manual optimization.

    Args:
        model: bundled alias, local folder, ``.gguf`` file or hub id of the base model.
        lora: LoRA settings (r=16, alpha=32 on all projections by default; no dropout: see the module docstring).
        max_new_tokens: completion length cap.
        temperature: sampling temperature (the trainer scores under the same warping).
        top_p: nucleus sampling threshold (1 disables).
        top_k: top-k sampling (0 disables).
        stop: stop strings; None uses the datamodule's (its scorer's or its agent environment's).
        micro_batch_size: sequences per forward/backward; gradients of the micro-batches are accumulated.
        gradient_checkpointing: recompute each decoder layer's activations during backward instead of keeping them
            (``propel.models.checkpointing``): the loss forward keeps each layer's input only, about 1/30 of the
            activations of a 30-layer model, for one more forward's compute per update; the same losses and
            gradients. For long prompts (the triage demo's ~1,700 tokens: 11 GB peak RSS without it).
        share_prompt: score the rows of a micro-batch that repeat one prompt (a group's G completions) with that prompt
            run once through the model and its KV cache repeated (``propel.models.prefix_sharing``): the same logprobs
            and gradients up to float rounding, 0.61x the update's forward + backward time on the demo's rows. Off under
            ``gradient_checkpointing`` while gradients are on (a cached forward is not recomputed, so it would keep
            the prompt's activations); False scores every row with its own full forward.
        lr: AdamW learning rate (when ``optimizer`` is not given).
        weight_decay: AdamW weight decay (when ``optimizer`` is not given).
        optimizer: callable ``params -> Optimizer`` overriding the AdamW default.
        gradient_clip_val: max gradient norm (0 disables).
        dtype: model dtype.
        engine: rollout engine: ``hf`` (``generate`` on the live policy), ``vllm`` (in-process vLLM, the LoRA
            adapter hot-loaded after every optimizer step) or ``vllm_server`` (an OpenAI-compatible vLLM server).
        engine_kwargs: engine arguments (e.g. ``{"dtype": "bfloat16"}`` for ``vllm``, ``{"base_url": ...}`` or
            ``{"launch": true}`` for ``vllm_server``).
        max_steps_without_update: training steps in a row that take no optimizer step before the run stops with an
            error (``global_step`` does not advance on them, so ``max_steps`` alone would never end the run).
        async_rollouts: sample the next batches' rollouts while this one trains (off by default; engines that are
            not the live policy only, and trainers that correct for off-policy samples: ``GRPOModule``).
        max_staleness: with ``async_rollouts``, the most optimizer steps between the weights that sampled a rollout
            and those that train on it; the worker runs ``max_staleness // optimizer steps per batch`` batches ahead.
    """

    supports_async_rollouts = False
    """Whether the trainer's loss corrects for rollouts sampled by older weights (``async_rollouts``)."""

    def __init__(
        self,
        model: str = "smollm2-135m-instruct",
        lora: LoRASpec | None = None,
        max_new_tokens: int = 128,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        stop: list[str] | None = None,
        micro_batch_size: int = 16,
        gradient_checkpointing: bool = False,
        share_prompt: bool = True,
        lr: float = 1e-5,
        weight_decay: float = 0.0,
        optimizer: Callable[[Iterable], torch.optim.Optimizer] | None = None,
        gradient_clip_val: float = 1.0,
        dtype: str = "float32",
        engine: str = "hf",
        engine_kwargs: dict[str, Any] | None = None,
        max_steps_without_update: int = 20,
        async_rollouts: bool = False,
        max_staleness: int = 1,
    ) -> None:
        super().__init__()
        save_plain_hyperparameters(self, inspect.currentframe())
        if micro_batch_size < 1:
            raise ConfigError(f"micro_batch_size must be >= 1, got {micro_batch_size}")
        if temperature < 0:
            raise ConfigError(f"temperature must be >= 0, got {temperature}")
        if max_new_tokens < 1:
            raise ConfigError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if max_steps_without_update < 1:
            raise ConfigError(f"max_steps_without_update must be >= 1, got {max_steps_without_update}")
        if max_staleness < 1:
            raise ConfigError(f"max_staleness must be >= 1 (optimizer steps), got {max_staleness}")
        if not 0 < top_p <= 1:
            raise ConfigError(f"top_p must be in (0, 1] (1 disables nucleus sampling), got {top_p}")
        if top_k < 0:
            raise ConfigError(f"top_k must be >= 0 (0 disables), got {top_k}")
        if gradient_clip_val < 0:
            raise ConfigError(f"gradient_clip_val must be >= 0 (0 disables clipping), got {gradient_clip_val}")
        check_optimizer(optimizer, lr, weight_decay)
        if async_rollouts and not self.supports_async_rollouts:
            raise ConfigError(
                f"{type(self).__name__} does not correct for rollouts sampled by older weights: turn async_rollouts off"
            )
        self.automatic_optimization = False
        self.strict_loading = False  # checkpoints hold only the LoRA weights
        self.lora_spec = lora or LoRASpec()
        self.sampling = SamplingSpec(
            n=1,
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            stop=list(stop or []),
            logprobs=True,
        )
        self._optimizer_factory = optimizer
        check_kind(engine)
        self.engine_synced_at = -1
        """The global step whose weights the engine holds (-1: not synced yet)."""
        self.policy = None
        self.tokenizer = None
        self.engine: Engine | None = None
        self.rollout_state: RolloutState | None = None
        """The latest step's scored rollouts, for callbacks (collapse detection, sample tables, probe mining)."""
        self.ranks = Ranks(self)
        """The data-parallel collectives (identity in one process)."""
        self.update_guard = UpdateGuard(max_steps_without_update)
        """Counts steps without an optimizer step; stops the run after too many in a row."""
        self.async_rollouts = AsyncRollouts(self, max_staleness) if async_rollouts else None
        """The worker sampling the next batches while one trains (``async_rollouts``), None when off."""
        self.weights_lock = self.async_rollouts.lock if self.async_rollouts is not None else nullcontext()
        self.rollout_version = 0
        """The optimizer step whose weights sampled the latest rollouts (``global_step`` unless asynchronous)."""
        self.rollout_wait_s = 0.0
        """Seconds the latest step waited for its rollouts (asynchronous rollouts: generation not hidden)."""
        self.phases = Phases()
        """Where the running step is (rollouts, grading, update) and the seconds of each: the progress display's."""

    # ----------------------------------------------------------------------------------------------- setup
    def configure_model(self) -> None:
        if self.policy is not None:  # runs once per stage; keep it idempotent
            return
        from propel.models import apply_lora, load_model

        base, self.tokenizer = load_model(self.hparams.model, dtype=self.hparams.dtype, padding_side="left")
        self.policy = apply_lora(base, self.lora_spec)
        if self._trainer is not None:
            from propel.models.fsdp import check_fsdp_units

            check_fsdp_units(self._trainer.strategy, self.policy)
        self.policy.train()
        if self.hparams.gradient_checkpointing:
            from propel.models.checkpointing import enable_activation_checkpointing

            enable_activation_checkpointing(self.policy)
        self.engine = make_policy_engine(
            self.hparams.engine,
            self.hparams.model,
            self.policy,
            self.tokenizer,
            lora_rank=self.lora_spec.r,
            **(self.hparams.engine_kwargs or {}),
        )
        self.engine_synced_at = 0
        self.setup_policy()

    def setup_policy(self) -> None:
        """Hook after the policy and engine exist (e.g. give rewards the policy as their frozen reference)."""

    @property
    def rollout_source(self) -> RolloutSource:
        """The datamodule feeding this trainer (it declares the contexts' stop strings and rolls them out)."""
        dm = getattr(self.trainer, "datamodule", None)
        if not isinstance(dm, RolloutSource):
            raise TypeError(
                f"{type(self).__name__} needs a datamodule that is a propel.rollouts.RolloutSource (`stop`, "
                f"`on_before_rollout(batch)` and `rollout(engine, batch, sampling)`), e.g. "
                f"propel.datamodules.contexts.ContextDataModule or "
                f"propel.datamodules.agent_episodes.EpisodeDataModule; got {type(dm).__name__}"
            )
        return dm

    @property
    def scorer(self) -> Scorer:
        """The single-turn scorer of the datamodule (what probe mining re-scores tasks with)."""
        scorer = getattr(self.rollout_source, "scorer", None)
        if not isinstance(scorer, Scorer):
            raise TypeError(f"the datamodule {type(self.rollout_source).__name__} has no single-turn scorer")
        return scorer

    def on_fit_start(self) -> None:
        if self.hparams.stop is None:
            self.sampling.stop = list(self.rollout_source.stop)

    def configure_callbacks(self) -> list[pl.Callback]:
        return [_StopRolloutWorker()] if self.hparams.async_rollouts else []

    def stop_rollout_worker(self, wait: bool = True) -> None:
        """Stop the async rollout worker (queued batches cancelled; ``wait`` for the one being sampled)."""
        if self.async_rollouts is not None:
            self.async_rollouts.close(wait=wait)

    def on_fit_end(self) -> None:
        self.stop_rollout_worker()
        if self.engine is not None and not self.engine_is_policy():
            self.engine.close()  # a vLLM engine holds worker processes and a KV cache
            self.engine = None

    # ------------------------------------------------------------------------------------- steps without update
    def no_update(self, reason: str, fix: str = "") -> None:
        """Say why this training step takes no optimizer step (used in the warning and the error); call it before
        returning from ``training_step`` without one."""
        self.update_guard.note(reason + (f"; {fix}" if fix else ""))

    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        self.update_guard.start(self.global_step)
        self.phases.reset()

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        self.phases.stop()
        for name, value in self.update_guard.end(self.global_step).items():
            self.log(name, value, on_step=True, batch_size=1)

    def configure_optimizers(self):
        params = [p for p in self.parameters() if p.requires_grad]
        if self._optimizer_factory is not None:
            return self._optimizer_factory(params)
        return torch.optim.AdamW(params, lr=self.hparams.lr, weight_decay=self.hparams.weight_decay)

    # --------------------------------------------------------------------------------------------- engine
    def progress(self) -> float | None:
        """``global_step / max_steps`` in [0, 1], or None without a trainer or a step budget (what schedules over
        the run read)."""
        total = getattr(self._trainer, "max_steps", -1) if self._trainer is not None else -1
        return None if total is None or total < 1 else min(self.global_step / total, 1.0)

    def engine_is_policy(self) -> bool:
        """Whether the engine samples from the live policy itself (HF generate): no sync, no importance weights."""
        from propel.engines.hf import HFEngine

        return isinstance(self.engine, HFEngine) and self.engine.model is self.policy

    def sync_engine(self) -> None:
        """Ship the policy's current weights to an engine that is not the policy itself (once per optimizer step,
        and after a resume, whose loaded adapter the engine has not seen)."""
        if self.engine_is_policy() or self.engine_synced_at == self.global_step:
            return
        self.engine.update_weights(self.policy)
        self.engine_synced_at = self.global_step

    def collect_rollout(self, batch: ContextBatch) -> Rollout:
        """This step's scored rollouts from the datamodule, sampled by an engine holding the current weights (or, with
        ``async_rollouts``, weights at most ``max_staleness`` optimizer steps old: ``rollout_version``)."""
        source = self.rollout_source
        source.on_before_rollout(batch)
        self.phases.start("rollouts", total=len(batch.contexts) * self.sampling.n, unit="samples")
        if self.async_rollouts is None:
            self.sync_engine()
            self.rollout_version, self.rollout_wait_s = self.global_step, 0.0
            rollout = source.rollout(self.engine, batch, self.sampling)
        else:
            got = self.async_rollouts.take(batch)
            self.rollout_version, self.rollout_wait_s = got.version, got.wait_s
            rollout = got.rollout
        release_freed_memory()  # the rollouts' buffers leave the resident set before the update (propel.host_memory)
        self.phases.start("grading")  # what the trainer makes of them before its update: rewards, targets
        return rollout

    def optimizer_steps_per_batch(self) -> int:
        """Optimizer steps one training step takes at most (what staleness is counted in)."""
        return 1

    @contextmanager
    def eval_mode(self):
        """Dropout off for the duration (scoring, frozen logprobs), then the previous mode back."""
        was_training = self.policy.training
        self.policy.eval()
        try:
            yield
        finally:
            self.policy.train(was_training)

    # ------------------------------------------------------------------------------------------- logprobs
    def sequence_logprobs(self, batch: PackedBatch, with_entropy: bool = False):
        """Response-token logprobs under the sampling warping; ``(B, T)`` each (and the entropy)."""
        batch = batch.to(self.device)
        t = batch.response_ids.shape[1]
        hp = self.hparams
        if hp.share_prompt and not (hp.gradient_checkpointing and torch.is_grad_enabled()):
            picked = shared_prefix_span_logits(self.policy, batch.input_ids, batch.attention_mask, batch.starts, t)
        else:
            picked = span_logits(self.policy, batch.input_ids, batch.attention_mask, batch.starts, t)
        s = self.sampling
        return token_logprobs(
            picked,
            batch.response_ids,
            temperature=s.temperature or 1.0,
            top_k=s.top_k,
            top_p=s.top_p,
            with_entropy=with_entropy,
        )

    @torch.no_grad()
    def frozen_logprobs(self, batch: PackedBatch, reference: bool) -> torch.Tensor:
        """Logprobs without grad, dropout off: the sampling policy's (old) or, adapters disabled, the reference's."""
        from propel.models import reference_forward

        out = []
        self.phases.start("update")
        with self.eval_mode():
            for rows in self.micro_batches(batch.input_ids.shape[0]):
                sub = batch.select(rows)
                if reference:
                    with reference_forward(self.policy):
                        out.append(self.sequence_logprobs(sub)[0])
                else:
                    out.append(self.sequence_logprobs(sub)[0])
        return torch.cat(out).cpu()

    # ---------------------------------------------------------------------------------------- optimization
    def micro_batches(self, n: int) -> list[torch.Tensor]:
        size = self.hparams.micro_batch_size
        return [torch.arange(i, min(i + size, n)) for i in range(0, n, size)]

    def placeholder_sample(self) -> Sample:
        """Two tokens and no trainable one: what a rank with nothing of its own to train on packs so that it still
        joins DDP's gradient all-reduce with a zero gradient. It never comes from this rank's rollouts (an
        infrastructure failure has no token ids, and a (1, 0) input cannot go through the model)."""
        tok = self.tokenizer.eos_token_id if self.tokenizer.eos_token_id is not None else 0
        return Sample("", "", prompt_ids=[tok], turns=[Turn("placeholder", "", [tok], None, False, "")])

    def _join_loss(self, rows: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
        """A zero loss through every adapter weight (the placeholder's masked logprobs): this rank's part of a step
        where only other ranks have rows."""
        batch = pack([self.placeholder_sample()], torch.zeros(1), self.tokenizer.pad_token_id)
        logp, _ = self.sequence_logprobs(batch)
        return torch.where(batch.loss_mask.to(logp.device) > 0, logp, 0.0).sum(), {}

    def optimization_step(self, n_rows: int, micro_loss: MicroLoss) -> dict[str, float]:
        """One optimizer step over rows ``0..n_rows``: the gradients of ``micro_loss(rows)`` summed over
        micro-batches (DDP syncs only on the last; dropout off), clipped, applied. Each ``micro_loss`` returns the
        micro-batch's share of the batch loss and of each statistic; the returned dict holds their sums (``loss``
        included). Under DDP a rank with no rows (``n_rows`` 0) joins the all-reduce with a zero gradient; every
        rank must call it in the same step."""
        opt = self.optimizers()
        if n_rows == 0 and self.ranks.size > 1:
            n_rows, micro_loss = 1, self._join_loss
        micro = self.micro_batches(n_rows)
        self.phases.start("update", total=len(micro), unit="micro-batch" if len(micro) == 1 else "micro-batches")
        totals: dict[str, float] = {}
        for k, rows in enumerate(micro):
            with opt.toggle_model(sync_grad=k == len(micro) - 1), self.eval_mode():  # dropout off: see the docstring
                loss, stats = micro_loss(rows)
                self.manual_backward(loss)
            release_freed_memory()  # this micro-batch's activations, before the next one's
            self.phases.advance()
            totals["loss"] = totals.get("loss", 0.0) + float(loss.detach())
            for name, value in stats.items():
                totals[name] = totals.get(name, 0.0) + value
        if self.hparams.gradient_clip_val:
            self._clip_grad_norm(opt, self.hparams.gradient_clip_val)
        with self.weights_lock:  # the async rollout worker never reads half-updated weights
            opt.step()
        opt.zero_grad(set_to_none=True)
        return totals

    def step_on_terms(self, terms: list[LossTerm]) -> dict[str, float]:
        """One optimizer step on the sum of ``terms`` (``propel.lit_modules.loss_terms``): their rows in one index
        space, cut into micro-batches, gradients summed before the one clipped update; then each term's
        ``after_step`` (every optimizer step, rows or not)."""
        placed, n_rows = spans(terms)
        totals = self.optimization_step(n_rows, summed_loss(placed))
        for term in terms:
            totals = term.after_step(totals)
        return totals

    def _clip_grad_norm(self, opt, max_norm: float) -> None:
        """Lightning's norm clipping; under FSDP, whose precision plugin refuses it (and whose own clip refuses to run
        inside the root's forward, where a manual step runs), the norm over every unit's gradient shards."""
        from lightning.pytorch.strategies import FSDPStrategy

        strategy = self.trainer.strategy
        if not isinstance(strategy, FSDPStrategy):
            self.clip_gradients(opt, gradient_clip_val=max_norm, gradient_clip_algorithm="norm")
            return
        from torch.distributed.fsdp import ShardingStrategy

        from propel.models.fsdp import clip_fsdp_grad_norm_

        kind = strategy.sharding_strategy
        if kind in (ShardingStrategy.HYBRID_SHARD, ShardingStrategy._HYBRID_SHARD_ZERO2) and strategy.world_size > 1:
            raise NotImplementedError("gradient clipping under hybrid sharding: use FULL_SHARD or SHARD_GRAD_OP")
        sharded = kind != ShardingStrategy.NO_SHARD and strategy.world_size > 1
        clip_fsdp_grad_norm_(self.trainer.model.parameters(), max_norm, sharded=sharded)

    # ---------------------------------------------------------------------------------------- checkpoints
    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Keep only the LoRA adapter weights: the base model is reloaded from ``model``."""
        checkpoint["state_dict"] = {k: v for k, v in checkpoint["state_dict"].items() if "lora_" in k}
        checkpoint["lora_spec"] = asdict(self.lora_spec)  # rebuild the adapter without the config (evaluation)
        checkpoint["steps_without_update"] = self.update_guard.state()

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self.engine_synced_at = -1  # the engine was synced to the weights before the checkpoint was loaded
        self.update_guard.load(checkpoint.get("steps_without_update", [0, 0]))
        if not any("lora_" in k for k in checkpoint.get("state_dict", {})):
            raise ValueError(f"checkpoint has no LoRA weights: it was not written by {type(self).__name__}")

    def on_train_start(self) -> None:
        """Give the optimizer this run's settings (lr, weight decay, betas, ...) after a resume: restoring the
        checkpoint's optimizer state restores its param groups' settings too, so a changed ``lr`` would be dropped
        without a word while the config and the next checkpoint claimed it. Each group takes the settings
        ``configure_optimizers`` gives now (a throwaway optimizer: no state until it steps); every change is said."""
        fresh = self.configure_optimizers()
        live = self.optimizers(use_pl_optimizer=False)
        live = live[0] if isinstance(live, list) else live
        if not isinstance(fresh, torch.optim.Optimizer) or not isinstance(live, torch.optim.Optimizer):
            return
        changed = {}
        for group, wanted in zip(live.param_groups, fresh.param_groups, strict=False):
            for key, value in wanted.items():
                if key != "params" and not _same(group.get(key), value):
                    changed[key] = f"{key} {group.get(key)!r} -> {value!r}"
                    group[key] = value
        if changed:
            rank_zero_info(f"the restored optimizer takes this run's settings: {', '.join(changed.values())}")


class _StopRolloutWorker(pl.Callback):
    """Stops the async rollout worker when fitting fails: Lightning calls a module's ``on_fit_end`` only on success,
    and a worker left sampling would keep the engine busy (and the process alive) after the error."""

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        if isinstance(pl_module, LoRAPolicyModule):
            pl_module.stop_rollout_worker(wait=False)
