"""Cold transfer (the PROPEL paper's §6): the GRPO policy is another model family with another tokenizer than the
probe's frozen reference. The reward reads texts, never token ids: the reference re-tokenizes each task text itself.

Policy: a tiny Qwen2-architecture model with a byte-level BPE tokenizer trained here (about 300 tokens).
Reference: the tiny Llama-architecture model with the bundled SmolLM2 tokenizer (49,152 tokens), and a probe
artifact on it.
"""

from __future__ import annotations

from pathlib import Path

import lightning.pytorch as pl
import torch

from propel.datamodules.contexts import ContextDataModule
from propel.domains import MathExpressionDomain
from propel.lit_modules.grpo import GRPOModule
from propel.losses.policy_gradient import LossSpec
from propel.models.lora import LoRASpec
from propel.probes.artifact import ProbeArtifact
from propel.probes.gate import GateSpec
from propel.probes.heads import ProbeHead
from propel.rewards.probe_reward import ProbeReward
from propel.testing.plain_configs import read_config_files

CORPUS = [
    "Problem: Tom has 3 apples and buys 4 more. How many apples does he have?\nExpression: 3 + 4\n",
    "Problem: A box holds 6 pens. How many pens are in 2 boxes?\nExpression: 6 * 2\n",
    "Problem: A train travels 60 miles per hour for 3 hours. How far does it go?\nExpression: 60 * 3\n",
] * 20


def byte_level_tokenizer():
    """A byte-level BPE tokenizer trained on ``CORPUS`` (no hub access): another vocabulary than SmolLM2's."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    special = ["<pad>", "<s>", "</s>", "<unk>"]
    trainer = trainers.BpeTrainer(
        vocab_size=320, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(CORPUS, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>"
    )


def save_qwen2_policy(out: Path) -> Path:
    """A tiny Qwen2-architecture model over ``byte_level_tokenizer``, saved as a loadable folder."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tok = byte_level_tokenizer()
    config = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    torch.manual_seed(0)
    Qwen2ForCausalLM(config).save_pretrained(out)
    tok.save_pretrained(out)
    return out


class ReferenceInputs(pl.Callback):
    """Records every token id row the reference model's embedding reads, and every text the reward scored."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, ...]] = []
        self.texts: list[str] = []
        self.reference = None

    def on_train_start(self, trainer, pl_module) -> None:
        reward = next(c for c in pl_module.reward.components if isinstance(c, ProbeReward))
        ((model, tokenizer),) = reward._references.values()  # one frozen reference, loaded apart from the policy
        self.reference = (model, tokenizer)
        pad = tokenizer.pad_token_id

        def hook(_module, args):
            for row in args[0].tolist():
                self.rows.append(tuple(i for i in row if i != pad))

        model.get_input_embeddings().register_forward_pre_hook(hook)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.texts += [s.task_text for s in pl_module.rollout_state.samples]


def test_grpo_with_a_policy_of_another_family_scores_texts_with_the_reference_tokenizer(tiny_model_dir, tmp_path):
    policy_dir = save_qwen2_policy(tmp_path / "policy")
    torch.manual_seed(0)
    artifact = tmp_path / "probe"
    ProbeArtifact(ProbeHead("linear", 64), str(tiny_model_dir), 1, "mean_full").save(artifact)
    reward = ProbeReward(artifact=str(artifact), gate=GateSpec(mode="probe_only"))  # every sample scored, valid or not
    seen = ReferenceInputs()
    pl.seed_everything(0)
    module = GRPOModule(
        model=str(policy_dir),
        rewards=[reward],
        lora=LoRASpec(r=4, alpha=8),
        group_size=2,
        max_new_tokens=6,
        lr=1e-2,
        loss=LossSpec(beta=0.04),
    )
    trainer = pl.Trainer(
        max_steps=2,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        callbacks=[seen],
    )
    trainer.fit(module, datamodule=ContextDataModule(MathExpressionDomain(), contexts_per_step=2))
    assert trainer.global_step == 2
    policy_tok, (ref_model, ref_tok) = module.tokenizer, seen.reference
    assert type(module.policy.get_base_model()).__name__ == "Qwen2ForCausalLM"
    assert type(ref_model).__name__ == "LlamaForCausalLM" and len(policy_tok) < 400 < len(ref_tok)
    assert len(seen.texts) == 8 and len(seen.rows) == 8  # 2 steps x 2 contexts x 2 samples, each read once
    # every row the reference read is the reference tokenizer's encoding of a scored text, never the policy's ids
    by_reference = {tuple(ref_tok(t)["input_ids"]) or (ref_tok.bos_token_id,) for t in seen.texts}
    by_policy = {tuple(policy_tok(t)["input_ids"]) for t in seen.texts}
    assert set(seen.rows) <= by_reference and not set(seen.rows) & by_policy
    assert reward.last_logits is not None and torch.isfinite(reward.last_logits).all()


def test_cold_transfer_config_keeps_the_probe_reference_and_swaps_the_policy():
    """``configs/math/cold_transfer.yaml``: the policy is another model, the probe's reference stays the one the
    artifact was trained on (named, not taken from the policy)."""
    from propel.cli.lightning_cli import resolve_lightning

    merged = read_config_files(["configs/grpo/base.yaml", "configs/math/grpo.yaml", "configs/math/cold_transfer.yaml"])
    config = resolve_lightning("fit", merged)
    init = config["model"]["init_args"]
    probe = next(r for r in init["rewards"] if r["class_path"].endswith("ProbeReward"))["init_args"]
    assert probe["reference_model"] == "smollm2-135m-instruct" and init["model"] != probe["reference_model"]
    assert probe["share_policy"] is False
