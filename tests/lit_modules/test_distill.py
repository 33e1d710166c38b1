"""Turn-targeted KL distillation on a tiny random policy: the loss reads turn t's logits only, an empty hint gives
exactly zero loss and gradient, only LoRA weights move, and a resumed run equals a straight one."""

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
from propel.losses.distillation import DivergenceSpec, masked_mean, token_divergence
from propel.models.lora import LoRASpec
from propel.rollouts.hints import ErrorHints, FunctionHints, Hint
from propel.tasks.shell import ShellTasks
from tests.lit_modules.turn_kl_args import with_turn_kl
from tests.rollouts.test_hints import _episode


def _module(model_dir, hints, **kw):
    module = TurnKLDistillModule(
        **with_turn_kl(dict(hints=hints, model=str(model_dir), lora=LoRASpec(r=4, alpha=8), **kw))
    )
    module.configure_model()
    return module


def test_the_loss_reads_turn_t_only_and_an_empty_hint_is_exactly_zero(tiny_model_dir, tokenizer):
    sample, _ = _episode(tokenizer, ["ls", "echo hi", "done"], [("a.txt", {}), ("ok", {}), (None, {})])
    module = _module(tiny_model_dir, FunctionHints(lambda s: [Hint(2, "write the file"), Hint(0, "look first")]))
    targets = module.turn_term.targets([sample])
    assert [(t.turn, t.length) for t in targets] == [(2, len(sample.turns[4].token_ids)), (0, 2)]
    head = module.policy.get_output_embeddings()
    seen = []

    def keep(mod, args, out):
        if out.requires_grad:  # the student's pass, not the teacher's
            out.retain_grad()
            seen.append(out)

    hook = head.register_forward_hook(keep)
    lengths = [t.length for t in targets]
    with module.eval_mode():
        with torch.no_grad():
            teacher = module.turn_term.turn_logits([t.teacher_ids for t in targets], lengths, "teacher")
        student = module.turn_term.turn_logits([t.student_ids for t in targets], lengths, "student")
    hook.remove()
    div = token_divergence(student, teacher, DivergenceSpec())
    loss = masked_mean(div, module.turn_term.mask(lengths))
    assert loss > 0
    loss.backward()
    grad = seen[-1].grad.abs().sum(-1)  # (rows, kept positions): the student's logits
    width = max(len(t.student_ids) for t in targets)
    for row, t in enumerate(targets):  # a kept position predicts token (position + offset); only turn t's count
        first = width - grad.shape[1]
        predicted = torch.arange(grad.shape[1]) + first + 1
        inside = (predicted >= len(t.student_ids) - t.length) & (predicted < len(t.student_ids))
        assert grad[row][inside].min() > 0 and grad[row][~inside].max() == 0, row

    empty = _module(tiny_model_dir, FunctionHints(lambda s: [Hint(1, "")]))
    assert empty.turn_term.targets([sample]) == []  # no target, so no loss term and no gradient at all
    target = empty.turn_term.splicer.target(sample, 0, Hint(1, ""))
    assert target.teacher_ids == target.student_ids
    with empty.eval_mode(), torch.no_grad():
        teacher = empty.turn_term.turn_logits([target.teacher_ids], [target.length], "teacher")
        student = empty.turn_term.turn_logits([target.student_ids], [target.length], "student")
    assert token_divergence(student, teacher, DivergenceSpec()).abs().max().item() == 0.0  # dropout off: identical


class Steps(Callback):
    def __init__(self):
        self.rows, self.samples = [], []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.rows.append({k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("train/")})
        self.samples.append(pl_module.rollout_state.samples)


def _fit(model_dir, steps, tmp_path=None, ckpt_path=None, save=False, **kw):
    pl.seed_everything(0)
    # a random model never writes a valid call: with ErrorHints, turn 0 is always targeted
    settings = {"divergence": DivergenceSpec("jsd", beta=0.5, top_k=64), "hints": ErrorHints(), **kw}
    module = TurnKLDistillModule(
        **with_turn_kl(
            dict(
                model=str(model_dir),
                lora=LoRASpec(r=4, alpha=8),
                kl_coefficient=1.0,
                group_size=2,
                max_new_tokens=6,
                lr=1e-2,
                **settings,
            )
        )
    )
    data = EpisodeDataModule(partial(ToolEnv, max_turns=2, command_timeout_s=2.0), ShellTasks(), contexts_per_step=1,
                             execute_cut_turns=True)  # a random model's turns are all cut: run them  # fmt: skip
    rec = Steps()
    callbacks = [rec] + ([ModelCheckpoint(dirpath=tmp_path, every_n_train_steps=1, save_top_k=-1)] if save else [])
    trainer = pl.Trainer(max_steps=steps, accelerator="cpu", logger=False, enable_progress_bar=False,
                         enable_model_summary=False, callbacks=callbacks, enable_checkpointing=save)  # fmt: skip
    trainer.fit(module, datamodule=data, ckpt_path=ckpt_path)
    return module, rec


def test_distillation_trains_lora_only_and_resumes_exactly(tiny_model_dir, tmp_path):
    base = {k: v.clone() for k, v in _module(tiny_model_dir, ErrorHints()).policy.state_dict().items()}
    module, rec = _fit(tiny_model_dir, 2)
    assert len(rec.rows) == 2
    for row, temperature in zip(rec.rows, (1.0, 0.8), strict=True):  # the schedule, stepped over max_steps
        assert row["train/distill/targets"] == 2 and row["train/distill/temperature"] == pytest.approx(temperature)
        assert row["train/distill/divergence"] > 0 and row["train/distill/control_divergence"] > 0
        assert torch.isfinite(torch.tensor(row["train/loss"]))
    after = module.policy.state_dict()
    moved = [k for k in base if not torch.equal(base[k], after[k])]
    assert moved and all("lora_" in k for k in moved)  # base weights untouched
    _, first = _fit(tiny_model_dir, 1, tmp_path, save=True)
    resumed_module, resumed = _fit(tiny_model_dir, 2, ckpt_path=str(tmp_path / "epoch=0-step=1.ckpt"))
    straight = [[s.prompt_ids + s.response_ids for s in step] for step in rec.samples]
    again = [[s.prompt_ids + s.response_ids for s in step] for step in first.samples + resumed.samples]
    assert straight == again
    for (name, p), (_, q) in zip(module.policy.named_parameters(), resumed_module.policy.named_parameters(),
                                 strict=True):  # fmt: skip
        torch.testing.assert_close(p, q, msg=name)


def test_on_policy_phased_hints_and_rollback(tiny_model_dir):
    """On-policy targets are fresh student samples; ``hint_share`` phases targets in; a step past ``max_drift`` is
    marked and, with ``rollback``, undone (the adapter ends where it started)."""
    pl.seed_everything(0)  # the adapter's initial weights, as _fit draws them
    start = {k: v.clone() for k, v in _module(tiny_model_dir, ErrorHints()).policy.state_dict().items()}
    module, rec = _fit(tiny_model_dir, 2, on_policy=True, divergence=DivergenceSpec("reverse_kl"),
                       hint_share=(0.5, 1.0), max_drift=0.0, rollback=True)  # fmt: skip
    assert [r["train/distill/targets_used"] for r in rec.rows] == [1.0, 2.0]  # ceil(0.5 * 2), ceil(0.75 * 2)
    for row in rec.rows:
        assert row["train/distill/drift"] > 0 and row["train/distill/unstable"] == 1.0
        assert row["train/distill/rolled_back"] == 1.0 and row["train/distill/divergence"] > 0
    end = module.policy.state_dict()
    assert all(torch.equal(start[k], end[k]) for k in start)  # every step undone


def test_importance_weights_for_an_engine_that_is_not_the_policy(tiny_model_dir, tokenizer):
    from propel.engines.scripted import ScriptedEngine
    from propel.losses.logprobs import token_logprobs
    from propel.rollouts.hints import TurnTarget

    module = _module(tiny_model_dir, ErrorHints(), on_policy=True, importance_cap=3.0)
    module.engine = ScriptedEngine(tokenizer, lambda p: "x")  # stands in for vLLM: not the live policy
    ids = tokenizer("hello there friend", add_special_tokens=False)["input_ids"]
    prompt = module.turn_term.splicer.splice(list(range(1, 5)) + module.turn_term.splicer.header_ids, "")
    with torch.no_grad():
        student = module.turn_term.turn_logits([prompt + ids], [len(ids)], "student")
    own, _ = token_logprobs(student, torch.tensor([ids]))
    mask = module.turn_term.mask([len(ids)])
    same = TurnTarget(0, 0, "h", prompt + ids, prompt + ids, len(ids), own[0].tolist())
    torch.testing.assert_close(module.turn_term.importance([same], student, mask), mask)  # ratio 1
    lower = TurnTarget(0, 0, "h", prompt + ids, prompt + ids, len(ids), (own[0] - 5.0).tolist())
    assert torch.equal(module.turn_term.importance([lower], student, mask), 3.0 * mask)  # exp(5) capped at 3


def test_importance_weights_are_per_sample(tiny_model_dir, tokenizer):
    """A target without engine logprobs (e.g. a turn whose logprobs the engine did not return) gets
    weight 1 on its own tokens; the other targets of the same micro-batch keep their correction."""
    from propel.engines.scripted import ScriptedEngine
    from propel.losses.logprobs import token_logprobs
    from propel.rollouts.hints import TurnTarget

    module = _module(tiny_model_dir, ErrorHints(), on_policy=True, importance_cap=3.0)
    module.engine = ScriptedEngine(tokenizer, lambda p: "x")  # stands in for vLLM: not the live policy
    prompt = module.turn_term.splicer.splice(list(range(1, 5)) + module.turn_term.splicer.header_ids, "")
    short = tokenizer("hello there", add_special_tokens=False)["input_ids"]
    long = tokenizer("hello there my friend", add_special_tokens=False)["input_ids"]
    rows, lengths = [prompt + long, prompt + short], [len(long), len(short)]
    with torch.no_grad():
        student = module.turn_term.turn_logits(rows, lengths, "student")
    own, _ = token_logprobs(student[:1], torch.tensor([long]))
    mask = module.turn_term.mask(lengths)
    known = TurnTarget(0, 0, "h", rows[0], rows[0], len(long), (own[0] - 5.0).tolist())  # exp(5) capped at 3
    unknown = TurnTarget(1, 0, "h", rows[1], rows[1], len(short), None)
    weights = module.turn_term.importance([known, unknown], student, mask)
    assert weights is not None
    assert torch.equal(weights[0], 3.0 * mask[0]) and torch.equal(weights[1][mask[1].bool()], torch.ones(len(short)))


def test_teachers_live_base_and_external(tiny_model_dir, tokenizer):
    """With the adapter moved away from zero: ``base`` (adapters off), ``external`` (the same base model loaded
    apart) and ``ema`` (the average, still at the initial adapter) give the base model's logits; ``live`` gives the
    adapted policy's."""
    sample, _ = _episode(tokenizer, ["ls", "done"], [("a.txt", {}), (None, {})])
    hints = FunctionHints(lambda s: [Hint(1, "write the file")])
    logits = {}
    for teacher in ("live", "base", "ema", "external"):
        torch.manual_seed(0)
        extra = {"teacher_model": str(tiny_model_dir)} if teacher == "external" else {}
        module = _module(tiny_model_dir, hints, teacher=teacher, **extra)
        with torch.no_grad():
            for name, p in module.policy.named_parameters():
                if "lora_B" in name:
                    p.normal_(0, 0.5)
        (target,) = module.turn_term.targets([sample])
        with module.eval_mode(), torch.no_grad():
            logits[teacher] = module.turn_term.turn_logits([target.teacher_ids], [target.length], "teacher")
    torch.testing.assert_close(logits["base"], logits["external"])
    torch.testing.assert_close(logits["ema"], logits["base"])  # the average starts at the initial (zero-B) adapter
    assert not torch.allclose(logits["live"], logits["base"])
    for name, p in module.policy.named_parameters():  # the EMA teacher's pass put the live weights back
        if "lora_B" in name:
            assert p.abs().sum() > 0, name


def test_held_out_drift_set_is_fixed_at_the_first_step_and_kept_in_checkpoints(tiny_model_dir, tmp_path):
    """Only every other episode is targeted; the drift is measured on turns of the first step's untargeted episodes,
    the same ids every step and after a resume."""
    seen = []

    def every_other(sample):
        seen.append(sample)
        return [Hint(0, "write the file")] if len(seen) % 2 else []

    module, rec = _fit(tiny_model_dir, 1, tmp_path, save=True, hints=FunctionHints(every_other), drift_set="held_out",
                       drift_rows=4)  # fmt: skip
    held = list(module._held_out)
    first = rec.samples[0]
    untargeted = first[1].prompt_ids + first[1].response_ids
    assert held and all(untargeted[: len(ids)] == ids for ids, _ in held)  # rows of the untargeted episode
    assert rec.rows[0]["train/distill/drift"] >= 0 and rec.rows[0]["train/distill/targets"] == 1.0
    resumed, again = _fit(tiny_model_dir, 2, ckpt_path=str(tmp_path / "epoch=0-step=1.ckpt"),
                          hints=FunctionHints(every_other), drift_set="held_out", drift_rows=4)  # fmt: skip
    assert resumed._held_out == held and "train/distill/drift" in again.rows[0]


def test_steps_without_targets_use_the_policy_base_guard(tiny_model_dir):
    """A step with nothing to target takes no optimizer step; the base warns, counts and stops
    after ``max_steps_without_update`` in a row."""
    from propel.errors import PropelError

    with pytest.warns(UserWarning, match="no turn to target"), pytest.raises(PropelError, match="2 training step"):
        _fit(tiny_model_dir, 5, hints=FunctionHints(lambda s: []), max_steps_without_update=2)


def test_sequence_scope_reads_every_assistant_token_from_turn_t_and_no_observation(tiny_model_dir, tokenizer):
    """The whole-sequence baseline: the same hinted teacher context, the divergence on turns t.. of the episode; the
    observations between them get no gradient, the turns before t are context only."""
    sample, _ = _episode(tokenizer, ["ls", "echo hi", "done"], [("a.txt", {}), ("ok", {}), (None, {})])
    module = _module(tiny_model_dir, FunctionHints(lambda s: [Hint(1, "write the file")]), scope="sequence")
    (target,) = module.turn_term.targets([sample])
    a1, o1, a2 = (sample.turns[i].token_ids for i in (2, 3, 4))
    assert target.student_ids[-target.length :] == a1 + o1 + a2 and list(target.covered) == [1, 2]
    assert target.mask == [1] * len(a1) + [0] * len(o1) + [1] * len(a2)
    assert target.scored == len(a1) + len(a2) and module.turn_term.turn_tokens([target]) == target.scored
    turn = _module(tiny_model_dir, FunctionHints(lambda s: [Hint(1, "write the file")])).turn_term.targets([sample])[0]
    assert turn.teacher_ids[: len(turn.teacher_ids) - turn.length] == target.teacher_ids[: -target.length]

    head = module.policy.get_output_embeddings()
    seen = []

    def keep(mod, args, out):
        if out.requires_grad:  # the student's pass
            out.retain_grad()
            seen.append(out)

    hook = head.register_forward_hook(keep)
    loss, _ = module.turn_term.turn_kl_loss([target], float(target.scored))
    hook.remove()
    loss.backward()
    grad = seen[-1].grad.abs().sum(-1)[0]  # the student's kept positions: position j predicts token first + j + 1
    first = len(target.student_ids) - grad.shape[0]
    predicted = torch.arange(grad.shape[0]) + first + 1
    span = len(target.student_ids) - target.length
    read = torch.zeros(grad.shape[0], dtype=torch.bool)
    for j, p in enumerate(predicted.tolist()):
        read[j] = span <= p < len(target.student_ids) and bool(target.mask[p - span])
    assert read.sum() == target.scored and grad[read].min() > 0 and grad[~read].max() == 0

    with pytest.raises(ConfigError, match="scope"):
        _module(tiny_model_dir, ErrorHints(), scope="sequence", on_policy=True)
    with pytest.raises(ConfigError, match="scope"):
        _module(tiny_model_dir, ErrorHints(), scope="episode")
