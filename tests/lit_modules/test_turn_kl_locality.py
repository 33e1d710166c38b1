"""The turn-KL term's locality guards and normalisation on a tiny random policy: the anchor weight at 0 (the default)
is today's loss bit for bit; the anchor is the KL to the start on the other assistant turns and nothing else; each
normalisation's gradient on turn t is the named divisor's; the proximal variant reads the rollout's logprobs and
clips; GRPO's term takes the same rows."""

from __future__ import annotations

import pytest
import torch

from propel.errors import ConfigError
from propel.lit_modules.distill import TurnKLDistillModule
from propel.lit_modules.grpo_turn_kl import GRPOTurnKLModule
from propel.lit_modules.turn_kl import TurnKLSpec
from propel.lit_modules.turn_kl_loss import TurnKLLoss
from propel.losses.distillation import DivergenceSpec, masked_mean, token_divergence
from propel.losses.logprobs import token_logprobs
from propel.losses.turn_normalisation import NORMALISATIONS
from propel.models.lora import LoRASpec
from propel.models.reference import reference_forward
from propel.rollouts.hints import FunctionHints, Hint
from propel.rollouts.steps import Rollout
from tests.lit_modules.turn_kl_args import with_turn_kl
from tests.rollouts.test_hints import _episode

HINT = FunctionHints(lambda s: [Hint(1, "write the file")])


def _module(model_dir, cls=TurnKLDistillModule, moved: bool = False, **kw):
    """A module on the tiny model; ``moved``: the adapter's B drawn away from 0 (the policy is not its start)."""
    torch.manual_seed(0)
    module = cls(**with_turn_kl(dict(hints=HINT, model=str(model_dir), lora=LoRASpec(r=4, alpha=8), **kw)))
    module.configure_model()
    if moved:
        with torch.no_grad():
            for name, p in module.policy.named_parameters():
                if "lora_B" in name:
                    p.normal_(0, 0.3)
    return module


def _sample(tokenizer):
    """Three assistant turns with observations between them; the hint names turn 1."""
    sample, _ = _episode(tokenizer, ["ls", "echo hi there", "done"], [("a.txt", {}), ("ok", {}), (None, {})])
    return sample


def _spy(module) -> dict[str, torch.Tensor]:
    """Keeps the student's span logits (with their gradient) of each ``turn_logits`` call the loss makes."""
    seen: dict[str, torch.Tensor] = {}
    inner = module.turn_term.turn_logits

    def spy(rows, lengths, which):
        out = inner(rows, lengths, which)
        if out.requires_grad:
            out.retain_grad()
            seen["student"] = out
        return out

    module.turn_term.turn_logits = spy
    return seen


def test_the_defaults_are_todays_term_and_anchor_weight_0_is_todays_loss_bit_for_bit(tiny_model_dir, tokenizer):
    spec = TurnKLSpec()
    assert (spec.anchor_weight, spec.normalisation, spec.proximal) == (0.0, "per_target_token", False)
    sample = _sample(tokenizer)
    module = _module(tiny_model_dir, moved=True, anchor_weight=0.0, divergence=DivergenceSpec("jsd", top_k=32))
    targets = module.turn_term.targets([sample])
    assert module.turn_term.anchor_rows([sample], targets) == []  # weight 0: no anchor rows, no forward
    norm = module.turn_term.turn_norm([sample], targets, [])
    params = [p for p in module.policy.parameters() if p.requires_grad]
    loss, stats = module.turn_term.turn_kl_loss(targets, norm)
    got = torch.autograd.grad(loss, params)

    # today's term, written out: kl_coefficient * mean divergence over the target tokens, control logged beside it
    n_tok, lengths = float(sum(t.scored for t in targets)), [t.length for t in targets]
    with module.eval_mode():
        with torch.no_grad():
            teacher = module.turn_term.turn_logits([t.teacher_ids for t in targets], lengths, "teacher")
        student = module.turn_term.turn_logits([t.student_ids for t in targets], lengths, "student")
    div = token_divergence(student, teacher, module.turn_kl.divergence, module.turn_term.temperature())
    want = module.turn_kl.kl_coefficient * masked_mean(div, module.turn_term.target_mask(targets), n_tok)
    assert torch.equal(loss, want)
    for a, b in zip(got, torch.autograd.grad(want, params), strict=True):
        assert torch.equal(a, b)
    assert stats["distill/divergence"] == float(masked_mean(div.detach(), module.turn_term.target_mask(targets), n_tok))
    assert set(stats) == {"distill/divergence", "distill/control_divergence"}


def test_the_anchor_is_the_kl_to_the_start_on_the_other_assistant_turns_only(tiny_model_dir, tokenizer):
    sample = _sample(tokenizer)
    frozen = _module(tiny_model_dir, anchor_weight=1.0, kl_coefficient=1.0, control_hint=None)
    targets = frozen.turn_term.targets([sample])
    (anchor,) = frozen.turn_term.anchor_rows([sample], targets)
    a0, o0, a1, o1, a2 = (sample.turns[i].token_ids for i in range(5))
    assert anchor.mask == [1] * len(a0) + [0] * (len(o0) + len(a1) + len(o1)) + [1] * len(a2)  # not t, no observation
    loss, stats = frozen.turn_term.turn_kl_loss([anchor], frozen.turn_term.turn_norm([sample], targets, [anchor]))
    assert loss.item() == 0.0 and stats["distill/anchor"] == 0.0  # a student at its start: no anchor at all

    module = _module(tiny_model_dir, moved=True, anchor_weight=0.5, kl_coefficient=2.0, control_hint=None)
    norm = module.turn_term.turn_norm([sample], targets, [anchor])
    assert (norm.target_tokens, norm.anchor_tokens) == (len(a1), len(a0) + len(a2))
    seen = _spy(module)
    loss, stats = module.turn_term.turn_kl_loss([anchor], norm)
    loss.backward()
    # the value: KL(start || now) per anchor token, times kl_coefficient * anchor_weight, from a forward of its own
    ids = torch.tensor([anchor.ids])
    with module.eval_mode(), torch.no_grad():
        now = module.policy(input_ids=ids).logits[0, -anchor.length - 1 : -1]
        with reference_forward(module.policy):
            start = module.policy(input_ids=ids).logits[0, -anchor.length - 1 : -1]
    kl = token_divergence(now, start, DivergenceSpec("forward_kl"))
    want = (kl * torch.tensor(anchor.mask)).sum() / sum(anchor.mask)
    assert stats["distill/anchor"] == pytest.approx(float(want), rel=1e-5) and float(want) > 0
    assert loss.item() == pytest.approx(2.0 * 0.5 * float(want), rel=1e-5)
    grad = seen["student"].grad[0].abs().sum(-1)  # per position of the anchor's span
    read = torch.tensor(anchor.mask, dtype=torch.bool)
    assert grad[read].min() > 0 and grad[~read].max() == 0  # turn t and the observations pass no gradient

    with pytest.raises(ConfigError, match="anchor_weight"):
        TurnKLSpec(anchor_weight=-1.0)


@pytest.mark.parametrize("kind", NORMALISATIONS)
def test_each_normalisation_weighs_turn_t_by_the_divisor_it_names(kind, tiny_model_dir, tokenizer):
    """The gradient on turn t's logits is ``kl_coefficient`` times the gradient of the summed divergence over the
    named divisor: turn t's own tokens (``per_target_token``: a turn-only arm and a t-to-end arm divide by different
    counts, so the same turn gets different steps), the episode's assistant tokens, or the constant (both arms the
    same)."""
    sample = _sample(tokenizer)
    a0, a1, a2 = (len(sample.turns[i].token_ids) for i in (0, 2, 4))
    constant = 40.0 if kind == "constant" else None
    grads, divisors = {}, {}
    for scope in ("turn", "sequence"):
        module = _module(tiny_model_dir, scope=scope, normalisation=kind, normalisation_constant=constant,
                         kl_coefficient=3.0, control_hint=None)  # fmt: skip
        targets = module.turn_term.targets([sample])
        norm = module.turn_term.turn_norm([sample], targets, [])
        seen = _spy(module)
        loss, _ = module.turn_term.turn_kl_loss(targets, norm)
        loss.backward()
        student = seen["student"]
        with module.eval_mode(), torch.no_grad():
            teacher = module.turn_term.turn_logits([targets[0].teacher_ids], [targets[0].length], "teacher")
        leaf = student.detach().clone().requires_grad_(True)
        token_divergence(leaf[:, :a1], teacher[:, :a1], DivergenceSpec()).sum().backward()  # turn t's summed KL
        grads[scope], divisors[scope] = student.grad[0, :a1], norm.target
        torch.testing.assert_close(grads[scope] * norm.target, 3.0 * leaf.grad[0, :a1], rtol=1e-5, atol=1e-9)
    named = {"per_target_token": (a1, a1 + a2), "per_episode_token": (a0 + a1 + a2,) * 2, "constant": (40.0, 40.0)}
    assert (divisors["turn"], divisors["sequence"]) == named[kind]
    ratio = named[kind][1] / named[kind][0]  # how much harder the turn-only arm steps on turn t
    torch.testing.assert_close(grads["turn"], ratio * grads["sequence"], rtol=1e-4, atol=1e-9)
    with pytest.raises(ConfigError, match="normalisation_constant"):
        TurnKLSpec(normalisation="constant")


def test_the_proximal_variant_reads_the_rollout_logprobs_and_clips(tiny_model_dir, tokenizer):
    """With the rollout's logprobs e (2.72) times below the policy's, every token's ratio is past 1 + 0.2: tokens
    the teacher prefers (advantage > 0) are clipped and pass no gradient, the others pass theirs; without rollout
    logprobs the ratio is 1 and nothing is clipped."""
    sample = _sample(tokenizer)
    module = _module(tiny_model_dir, moved=True, proximal=True, kl_coefficient=1.0, control_hint=None)
    (bare,) = module.turn_term.targets([sample])
    assert bare.engine_logprobs is None  # the hand-built episode carries no logprobs
    tokens = torch.tensor([bare.student_ids[-bare.length :]])
    with module.eval_mode(), torch.no_grad():
        student = module.turn_term.turn_logits([bare.student_ids], [bare.length], "student")
        teacher = module.turn_term.turn_logits([bare.teacher_ids], [bare.length], "teacher")
    own, _ = token_logprobs(student, tokens, temperature=module.sampling.temperature or 1.0)
    sample.turns[2].logprobs = (own[0] - 1.0).tolist()
    (target,) = module.turn_term.targets([sample])
    assert target.engine_logprobs == sample.turns[2].logprobs
    advantage = (torch.log_softmax(teacher, -1) - torch.log_softmax(student, -1)).gather(-1, tokens[..., None])[0, :, 0]
    seen = _spy(module)
    loss, stats = module.turn_term.turn_kl_loss([target], float(target.length))
    loss.backward()
    grad = seen["student"].grad[0].abs().sum(-1)
    up = advantage > 0
    assert up.any() and (~up).any()
    assert grad[up].max() == 0 and grad[~up].min() > 0
    assert stats["distill/clipped_fraction"] == pytest.approx(float(up.float().mean()))
    assert stats["distill/advantage"] == pytest.approx(float(advantage.mean()), rel=1e-4)
    assert stats["distill/divergence"] > 0  # the divergence is still logged
    _, on_policy = module.turn_term.turn_kl_loss([bare], float(bare.length))
    assert on_policy["distill/clipped_fraction"] == 0.0
    with pytest.raises(ConfigError, match="proximal_clip"):
        TurnKLSpec(proximal_clip=1.0)


def test_grpo_takes_the_anchor_rows_and_the_same_divisors(tiny_model_dir, tokenizer):
    sample = _sample(tokenizer)
    kw = dict(anchor_weight=1.0, normalisation="per_episode_token", control_hint=None)
    module = _module(tiny_model_dir, cls=GRPOTurnKLModule, rewards=[], **kw)
    term = TurnKLLoss(module.turn_term)
    stats = term.collect(Rollout([[sample]]))
    assert term.rows() == 2 and stats["distill/target_tokens"] == len(sample.turns[2].token_ids)
    distill = _module(tiny_model_dir, **kw)
    targets = distill.turn_term.targets([sample])
    anchors = distill.turn_term.anchor_rows([sample], targets)
    assert term.targets == targets and term.anchors == anchors
    assert term.norm == distill.turn_term.turn_norm([sample], targets, anchors)


@pytest.mark.parametrize("cls", [TurnKLDistillModule, GRPOTurnKLModule])
def test_the_term_reads_the_trainers_spec_and_hints_where_the_trainer_keeps_them(tiny_model_dir, tokenizer, cls):
    """A spec or hint source set on the trainer after it was built is the one its turn term uses (the scope
    experiment swaps the hint source per arm, the guards benchmark the spec per case)."""
    sample = _sample(tokenizer)
    kw = {"rewards": []} if cls is GRPOTurnKLModule else {}
    module = _module(tiny_model_dir, cls=cls, **kw)
    assert [t.turn for t in module.turn_term.targets([sample])] == [1]
    module.hints = FunctionHints(lambda s: [Hint(2, "check the output")])
    assert [t.turn for t in module.turn_term.targets([sample])] == [2]
    module.turn_kl = TurnKLSpec(anchor_weight=1.0, control_hint=None)
    assert module.turn_term.spec.anchor_weight == 1.0
    assert module.turn_term.anchor_rows([sample], module.turn_term.targets([sample]))  # the new spec's anchor
