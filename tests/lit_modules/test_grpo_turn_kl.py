"""GRPO with the turn-targeted KL term, on a tiny random policy over real agent episodes (ToolEnv in bubblewrap):
with no targets it is GRPO exactly; with targets one plain-SGD update is GRPO's update plus the distillation
trainer's; a step GRPO skips still takes the turn term; the EMA teacher averages the right way round and resumes."""

from __future__ import annotations

from functools import partial

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint

from propel.datamodules.agent_episodes import EpisodeDataModule
from propel.envs import ToolEnv
from propel.errors import ConfigError
from propel.lit_modules.distill import TurnKLDistillModule
from propel.lit_modules.grpo import GRPOModule
from propel.lit_modules.grpo_turn_kl import GRPOTurnKLModule
from propel.lit_modules.turn_kl import TurnKLSpec, turn_engine_logprobs
from propel.losses.distillation import DivergenceSpec
from propel.losses.policy_gradient import LossSpec
from propel.models.lora import LoRASpec
from propel.rewards import EnvironmentReward, FunctionReward
from propel.rollouts.hints import ErrorHints, FunctionHints, Hint
from propel.tasks.shell import ShellTasks
from tests.lit_modules.turn_kl_args import with_turn_kl

LR = 0.5


def _distinct(sample) -> float:
    """A reward that varies inside a group (a random policy never solves a task)."""
    return len(set(sample.response_ids)) / 10.0


def _sgd(params):
    return torch.optim.SGD(params, lr=LR)


class Rows(Callback):
    def __init__(self):
        self.rows, self.samples = [], []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.rows.append({k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("train/")})
        self.samples.append([s.prompt_ids + s.response_ids for s in pl_module.rollout_state.samples])


def _fit(model_dir, steps, cls=GRPOTurnKLModule, tmp_path=None, ckpt_path=None, **kw):
    pl.seed_everything(0)
    common = dict(model=str(model_dir), lora=LoRASpec(r=4, alpha=8), max_new_tokens=6,
                  optimizer=_sgd, gradient_clip_val=0.0)  # fmt: skip
    if cls is TurnKLDistillModule:
        module = cls(**with_turn_kl(dict(group_size=2, control_hint=None, **common, **kw)))
    else:
        grpo = dict(rewards=[FunctionReward("distinct", _distinct)], group_size=2, loss=LossSpec(beta=0.0))
        module = cls(**with_turn_kl({**common, **grpo, **kw}))
    data = EpisodeDataModule(partial(ToolEnv, max_turns=2, command_timeout_s=2.0), ShellTasks(), contexts_per_step=1)
    rec = Rows()
    callbacks = [rec] + ([ModelCheckpoint(dirpath=tmp_path, every_n_train_steps=1, save_top_k=-1)] if tmp_path else [])
    trainer = pl.Trainer(
        max_steps=steps,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=callbacks,
        enable_checkpointing=tmp_path is not None,
    )
    trainer.fit(module, datamodule=data, ckpt_path=ckpt_path)
    return module, rec


def _lora(module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.policy.named_parameters() if "lora_" in k}


def test_no_targets_is_grpo_and_targets_add_the_distillation_update(tiny_model_dir):
    start = _start(tiny_model_dir)
    grpo, grpo_rows = _fit(tiny_model_dir, 1, cls=GRPOModule)
    none, none_rows = _fit(tiny_model_dir, 1, hints=FunctionHints(lambda s: []))
    assert none_rows.samples == grpo_rows.samples
    for k, v in _lora(grpo).items():
        assert torch.equal(v, _lora(none)[k]), k  # no target: exactly GRPO
    assert none_rows.rows[0]["train/distill/targets"] == 0.0

    kl = {"kl_coefficient": 1.0, "divergence": DivergenceSpec("forward_kl")}
    both, both_rows = _fit(tiny_model_dir, 1, hints=ErrorHints(), control_hint=None, **kl)
    alone, alone_rows = _fit(tiny_model_dir, 1, cls=TurnKLDistillModule, hints=ErrorHints(), **kl)
    assert both_rows.samples == grpo_rows.samples == alone_rows.samples  # the same episodes all three times
    row = both_rows.rows[0]
    assert row["train/distill/targets"] == 2.0 and row["train/distill/divergence"] > 0
    assert row["train/distill/loss"] == pytest.approx(row["train/distill/divergence"], rel=1e-5)  # coefficient 1
    assert row["train/loss"] == pytest.approx(grpo_rows.rows[0]["train/loss"] + row["train/distill/loss"], rel=1e-4)
    assert row["train/distill/divergence"] == pytest.approx(alone_rows.rows[0]["train/distill/divergence"], rel=1e-5)
    # plain SGD, no clipping: the combined step moves each weight by GRPO's step plus the distillation step
    moved = 0
    for k, s in start.items():
        want = s + (_lora(grpo)[k] - s) + (_lora(alone)[k] - s)
        torch.testing.assert_close(_lora(both)[k], want, rtol=1e-4, atol=1e-6, msg=k)
        moved += int(not torch.equal(_lora(both)[k], _lora(grpo)[k]))
    assert moved


def _start(model_dir) -> dict[str, torch.Tensor]:
    """The adapter's initial weights, as ``_fit`` draws them."""
    pl.seed_everything(0)
    module = GRPOModule(model=str(model_dir), lora=LoRASpec(r=4, alpha=8))
    module.configure_model()
    return _lora(module)


def test_a_step_grpo_skips_still_takes_the_turn_term(tiny_model_dir):
    module, rec = _fit(tiny_model_dir, 2, hints=ErrorHints(), rewards=[EnvironmentReward()], filter_zero_variance=True)
    assert module.global_step == 2  # every group is unsolved (zero variance): only the turn term updated
    for row in rec.rows:
        assert row["train/kept_fraction"] == 0.0 and row["train/distill/loss"] > 0
    assert any(not torch.equal(v, _start(tiny_model_dir)[k]) for k, v in _lora(module).items())


def test_ema_teacher_averages_old_weights_and_resumes(tiny_model_dir, tmp_path):
    with pytest.raises(ConfigError, match="ema_decay"):
        GRPOTurnKLModule(hints=ErrorHints(), turn_kl=TurnKLSpec(teacher="ema", ema_decay=1.0))
    start = _start(tiny_model_dir)
    one, _ = _fit(tiny_model_dir, 1, hints=ErrorHints(), teacher="ema", ema_decay=0.75)
    for k, v in _lora(one).items():  # decay weighs the old average: 0.75 * start + 0.25 * live
        torch.testing.assert_close(one.turn_term.ema[k], 0.75 * start[k] + 0.25 * v, msg=k)
    straight, rows = _fit(tiny_model_dir, 2, hints=ErrorHints(), teacher="ema", ema_decay=0.75)
    _fit(tiny_model_dir, 1, tmp_path=tmp_path, hints=ErrorHints(), teacher="ema", ema_decay=0.75)
    resumed, again = _fit(tiny_model_dir, 2, ckpt_path=str(tmp_path / "epoch=0-step=1.ckpt"), hints=ErrorHints(),
                          teacher="ema", ema_decay=0.75)  # fmt: skip
    assert again.samples == rows.samples[1:]
    for k, v in _lora(straight).items():
        torch.testing.assert_close(_lora(resumed)[k], v, msg=k)
        torch.testing.assert_close(resumed.turn_term.ema[k], straight.turn_term.ema[k], msg=k)


def test_the_distillation_trainer_keeps_its_ema_teacher_in_the_checkpoint(tiny_model_dir, tmp_path):
    """The EMA teacher's weights travel in the distillation trainer's checkpoint as in GRPO's: a run resumed after
    step 1 ends with the average of the run that did both steps at once."""
    kw = dict(
        cls=TurnKLDistillModule,
        hints=FunctionHints(lambda s: [Hint(0, "write the file")]),
        teacher="ema",
        ema_decay=0.75,
        kl_coefficient=50.0,
    )  # fmt: skip  (tiny divergences: a step that moves the adapter)
    straight, _ = _fit(tiny_model_dir, 2, **kw)
    _fit(tiny_model_dir, 1, tmp_path=tmp_path, **kw)
    resumed, _ = _fit(tiny_model_dir, 2, ckpt_path=str(tmp_path / "epoch=0-step=1.ckpt"), **kw)
    start = _start(tiny_model_dir)
    assert max(float((v - start[k]).abs().max()) for k, v in straight.turn_term.ema.items()) > 1e-4
    for k, v in straight.turn_term.ema.items():
        torch.testing.assert_close(resumed.turn_term.ema[k], v, msg=k)


def test_ema_teacher_updates_after_a_step_without_targets(tiny_model_dir):
    """The EMA teacher's time constant is in optimizer steps, so a GRPO step whose episodes named no
    turn to target still moves the average toward the live weights."""
    start = _start(tiny_model_dir)
    first_turn = FunctionReward("first_turn", lambda s: sum(s.all_turns[0].token_ids) / 1e5)  # differs per episode
    module, rows = _fit(tiny_model_dir, 1, hints=FunctionHints(lambda s: []), teacher="ema", ema_decay=0.75,
                        rewards=[first_turn])  # fmt: skip
    assert module.global_step == 1 and rows.rows[0]["train/distill/targets"] == 0.0
    live = _lora(module)
    assert any(not torch.equal(v, start[k]) for k, v in live.items())  # GRPO moved the adapter
    for k, v in live.items():
        torch.testing.assert_close(module.turn_term.ema[k], 0.75 * start[k] + 0.25 * v, msg=k)


def test_engine_logprobs_line_up_with_a_whole_sequence_target(tokenizer):
    """A vLLM-sampled episode's logprobs for the whole-sequence span: each assistant turn's own, NaN (weight 1, not
    read) on the observations between them; a turn target gets its turn's alone."""
    from propel.rollouts.hints import Hint, HintSplicer
    from tests.rollouts.test_hints import _episode

    sample, _ = _episode(tokenizer, ["ls", "echo hi", "done"], [("a.txt", {}), ("ok", {}), (None, {})])
    for i, turn in enumerate(sample.turns):
        if turn.trainable:
            turn.logprobs = [-0.1 * (i + 1)] * len(turn.token_ids)
    splicer = HintSplicer(tokenizer)
    whole = splicer.target(sample, 0, Hint(1, "x"), scope="sequence")
    got = turn_engine_logprobs(sample, whole)
    a1, o1, a2 = (sample.turns[i] for i in (2, 3, 4))
    assert got[: len(a1.token_ids)] == a1.logprobs and got[-len(a2.token_ids) :] == a2.logprobs
    assert all(v != v for v in got[len(a1.token_ids) : -len(a2.token_ids)]) and len(got) == whole.length
    single = splicer.target(sample, 0, Hint(1, "x"))
    assert turn_engine_logprobs(sample, single) == a1.logprobs
    a1.logprobs = a2.logprobs = None
    assert turn_engine_logprobs(sample, whole) is None
