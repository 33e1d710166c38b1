"""The per-turn drift matrix on a tiny policy where the answer is known: a student at its start has zero drift on every
turn, bit for bit; an update that by construction changes only what one token of turn t predicts moves turn t alone,
by exactly the KL a separate forward gives. In a run: the held-aside episodes are never trained on, every step logs
the matrix and writes it to the run folder, and the drift check reads its off-target cell (nats per token), rolling
a step back when it is past ``max_drift``."""

from __future__ import annotations

import json
from functools import partial

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint

from propel.datamodules.agent_episodes import EpisodeDataModule
from propel.envs.scripted_chat import ScriptedChatEnv
from propel.lit_modules.distill import TurnKLDistillModule
from propel.lit_modules.turn_drift import HeldAside, measure_drift
from propel.losses.distillation import DivergenceSpec, token_divergence
from propel.models.lora import LoRASpec
from propel.models.reference import reference_forward
from propel.rollouts.episode_rows import episode_rows
from propel.rollouts.hints import FunctionHints, Hint
from propel.tasks.conventions import ConventionChats
from tests.lit_modules.turn_kl_args import with_turn_kl
from tests.rollouts.test_hints import _episode


def _module(model_dir, **kw):
    torch.manual_seed(0)
    hints = FunctionHints(lambda s: [Hint(1, "write the file")])
    module = TurnKLDistillModule(
        **with_turn_kl(dict(hints=hints, model=str(model_dir), lora=LoRASpec(r=4, alpha=8), **kw))
    )
    module.configure_model()
    return module


def _bigram(module, token: int, coordinate: int = 0) -> None:
    """Make the base a per-position function of its input token (attention's output projection zeroed), with one
    embedding coordinate that only ``token`` has; then point layer 0's MLP adapter at that coordinate. The update
    changes the hidden state, and so the prediction, only at positions whose input is ``token``."""
    base = module.policy.get_base_model()
    with torch.no_grad():
        for layer in base.model.layers:
            layer.self_attn.o_proj.base_layer.weight.zero_()
        embed = base.get_input_embeddings().weight
        embed[:, coordinate] = 0.0
        embed[token, coordinate] = 3.0


def _confine(module, coordinate: int = 0) -> None:
    up = module.policy.get_base_model().model.layers[0].mlp.up_proj
    with torch.no_grad():
        up.lora_A["default"].weight.zero_()
        up.lora_A["default"].weight[:, coordinate] = 1.0
        up.lora_B["default"].weight.normal_(0, 1.0)


def test_a_frozen_student_has_zero_drift_and_a_confined_update_moves_only_its_turn(tiny_model_dir, tokenizer):
    sample, _ = _episode(tokenizer, ["ls", "zebra crossing", "done"], [("a.txt", {}), ("ok", {}), (None, {})])
    module = _module(tiny_model_dir)
    turn_t = sample.turns[2].token_ids
    everything = [i for row in episode_rows(sample) for i in row.ids]
    assert everything.count(turn_t[0]) == 1 and len(turn_t) >= 2  # turn t's first token occurs nowhere else
    held = [HeldAside(episode_rows(sample), module.turn_term.splicer.target(sample, 0, Hint(1, "write the file")))]
    _bigram(module, turn_t[0])

    start = measure_drift(module.turn_term, held)  # the adapter starts at zero: the student is its start
    assert start.kl == [[0.0, 0.0, 0.0]] and start.tokens == [[len(sample.turns[i].token_ids) for i in (0, 2, 4)]]
    assert [start.cell(s) for s in ("before", "at", "after", "off_target")] == [0.0] * 4
    assert start.gain == 0.0 and start.target_now == start.target_start  # (no attention: the hint changes nothing)

    _confine(module)
    moved = measure_drift(module.turn_term, held)
    assert moved.cell("before") == 0.0 and moved.cell("after") == 0.0 and moved.cell("off_target") == 0.0
    assert moved.cell("at") > 1e-3 and moved.offsets() == {-1: 0.0, 0: moved.cell("at"), 1: 0.0}
    # turn t's drift is the KL(start || now) one forward of the whole episode gives on turn t's tokens
    (row,) = episode_rows(sample)
    ids = torch.tensor([row.ids])
    with module.eval_mode(), torch.no_grad():
        now = module.policy(input_ids=ids).logits[0, :-1]
        with reference_forward(module.policy):
            was = module.policy(input_ids=ids).logits[0, :-1]
    kl = token_divergence(now, was, DivergenceSpec("forward_kl"))
    on_t = torch.tensor([k == 1 for k in row.turns[1:]])
    assert moved.kl[0][1] == pytest.approx(float(kl[on_t].sum()), rel=1e-5)
    assert moved.cell("at") == pytest.approx(float(kl[on_t].mean()), rel=1e-5)
    logged = moved.logged()
    assert {"drift/before", "drift/at", "drift/after", "drift/t-1", "drift/t", "drift/t+1", "drift/gain"} <= set(logged)


class Rows(Callback):
    def __init__(self):
        self.rows, self.start = [], {}

    def on_train_start(self, trainer, pl_module):
        self.start = {k: v.detach().clone() for k, v in pl_module.policy.state_dict().items() if "lora_" in k}

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.rows.append({k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("train/")})


def _fit(model_dir, root, steps=2, ckpt_path=None, save=False, **kw):
    """Scripted four-turn conversations (every episode reaches every turn); the hint names each one's target turn;
    the teacher is the base model with the hint (fixed)."""
    pl.seed_everything(0)
    hints = FunctionHints(lambda s: [Hint(s.context.data["target_turn"], "Our team's tag is [cedar].")])
    module = TurnKLDistillModule(**with_turn_kl(dict(
        hints=hints, model=str(model_dir), lora=LoRASpec(r=4, alpha=8), group_size=2, max_new_tokens=3, lr=5e-2,
        kl_coefficient=1.0, control_hint=None, **{"teacher": "base", "drift_episodes": 1, **kw})))  # fmt: skip
    data = EpisodeDataModule(partial(ScriptedChatEnv), ConventionChats(turns=4), contexts_per_step=1,
                             execute_cut_turns=True)  # fmt: skip
    rec = Rows()
    callbacks = [rec] + ([ModelCheckpoint(dirpath=root / "ckpt", every_n_train_steps=1, save_top_k=-1)] if save else [])
    trainer = pl.Trainer(max_steps=steps, accelerator="cpu", logger=False, enable_progress_bar=False,
                         enable_model_summary=False, callbacks=callbacks, enable_checkpointing=save,
                         default_root_dir=str(root))  # fmt: skip
    trainer.fit(module, datamodule=data, ckpt_path=ckpt_path)
    return module, rec


def test_the_run_logs_and_writes_the_matrix_and_the_check_reads_it(tiny_model_dir, tmp_path):
    module, rec = _fit(tiny_model_dir, tmp_path / "run", save=True)
    (held,) = module._held_aside
    first = [json.loads(line) for line in (tmp_path / "run" / "turn_drift.jsonl").read_text().splitlines()]
    assert [r["step"] for r in first] == [0, 1, 2]  # the start, then every step
    assert first[0]["drift/off_target"] == first[0]["drift/at"] == 0.0 and first[0]["drift/gain"] == 0.0
    assert first[0]["target_turns"] == [held.target.turn] and len(first[0]["matrix"][0]) == 4
    assert rec.rows[0]["train/distill/targets"] == 2.0 and rec.rows[0]["train/distill/targets_used"] == 1.0  # 1 aside
    for row, line in zip(rec.rows, first[1:], strict=True):
        assert row["train/drift/off_target"] == pytest.approx(line["drift/off_target"], rel=1e-6)
        assert line["drift/at"] > 0
        assert row["train/drift/t"] == pytest.approx(line["drift/at"], rel=1e-6)  # the logger keeps float32
        assert row["train/drift/gain"] == pytest.approx(line["drift/gain"], rel=1e-6)
        # a fixed teacher (base + hint): the gain is the target turn's divergence at the start minus now
        want = first[0]["drift/target_divergence"] - line["drift/target_divergence"]
        assert line["drift/gain"] == pytest.approx(want, rel=1e-6, abs=1e-9)
        assert row["train/distill/unstable"] == 0.0 and not line["rolled_back"]  # no max_drift: never unstable
        assert "train/distill/drift" not in row  # the step's own change is not measured beside the matrix

    ckpt = tmp_path / "run" / "ckpt" / "epoch=0-step=2.ckpt"
    resumed, again = _fit(tiny_model_dir, tmp_path / "resumed", steps=3, ckpt_path=str(ckpt))
    assert [h.state() for h in resumed._held_aside] == [held.state()]  # the same episode, from the checkpoint

    assert [r["train/distill/targets_used"] for r in again.rows] == [2.0]  # nothing set aside again
    # a check past max_drift rolls every step back: the adapter ends at its start, the matrix said why
    module, rec = _fit(tiny_model_dir, tmp_path / "rollback", max_drift=1e-9, rollback=True)
    lines = [json.loads(line) for line in (tmp_path / "rollback" / "turn_drift.jsonl").read_text().splitlines()]
    for row, line in zip(rec.rows, lines[1:], strict=True):
        assert line["drift/off_target"] > 1e-9 and line["rolled_back"] and row["train/distill/rolled_back"] == 1.0
    end = module.policy.state_dict()
    assert rec.start and all(torch.equal(v, end[k]) for k, v in rec.start.items())


def test_a_rollback_takes_back_the_ema_teachers_update_with_the_step(tiny_model_dir, tmp_path):
    """The EMA teacher updates after every optimizer step (``TurnKLLoss.after_step``); a step the drift check undoes
    takes that update back with the adapter's: when every step is rolled back, the average is still the start."""
    module, rec = _fit(tiny_model_dir, tmp_path / "ema", max_drift=1e-9, rollback=True, teacher="ema", ema_decay=0.5)
    assert rec.rows and all(r["train/distill/rolled_back"] == 1.0 for r in rec.rows)
    ema = module.turn_term.ema
    assert ema and set(ema) <= set(rec.start)
    assert all(torch.equal(ema[k], rec.start[k]) for k in ema)
    kept, _ = _fit(tiny_model_dir, tmp_path / "kept", teacher="ema", ema_decay=0.5)  # no check: the steps stay
    assert any(not torch.equal(kept.turn_term.ema[k], rec.start[k]) for k in ema)
