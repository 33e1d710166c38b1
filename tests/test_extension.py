"""A user extends propel with new files only: a task source (with the scorer of its answers), a reward and a trainer,
in a package of their own, run by ``propel fit`` from a YAML that names them. Nothing in propel is edited, registered
or subclassed beyond the documented bases (``TaskSource``, ``Scorer``, ``Reward``, ``LoRAPolicyModule``)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import torch
import yaml

ROOT = Path(__file__).resolve().parents[1]

FILES = {
    "word_tasks.py": '''
        """A task source: say a word that starts with a given letter; the scorer marks every non-empty answer valid."""
        from propel.records import Context, Prompt, TaskSource
        from propel.rollouts.scorer import Scorer


        class LetterWords(TaskSource):
            def __init__(self, letters: str = "abc") -> None:
                self.letters = letters

            def contexts(self, n, seed=0):
                out = []
                for i in range(n):
                    letter = self.letters[(seed + i) % len(self.letters)]
                    prompt = Prompt(messages=[{"role": "user", "content": f"Say a word that starts with {letter}."}])
                    out.append(Context(id=f"w-{seed}-{i}", prompt=prompt, group=letter, data={"letter": letter}))
                return out


        class AnyAnswer(Scorer):
            needs_sandbox = False

            def score(self, samples):
                for s in samples:
                    s.valid = bool(s.completion.strip())
                    s.topic = s.context.group
                    s.info["reason"] = "ok" if s.valid else "empty"
        ''',
    "letter_reward.py": '''
        """A reward: the share of the answer's words that start with the asked letter."""
        import torch

        from propel.rewards.reward import Reward


        class StartsWithLetter(Reward):
            name = "letter"

            def __call__(self, samples):
                def share(s):
                    words = s.completion.lower().split()
                    return sum(w.startswith(s.context.data["letter"]) for w in words) / max(len(words), 1)

                return torch.tensor([share(s) for s in samples], dtype=torch.float32)
        ''',
    "reinforce.py": '''
        """A trainer: REINFORCE with the group mean as baseline, on the policy base's rollout and optimizer step."""
        from collections.abc import Sequence

        from propel.lit_modules.lora_policy import LoRAPolicyModule
        from propel.rewards.reward import Reward
        from propel.rewards.combine import CombinedReward
        from propel.rollouts.packing import pack


        class Reinforce(LoRAPolicyModule):
            def __init__(self, rewards: Sequence[Reward] = (), group_size: int = 2, **kwargs):
                super().__init__(**kwargs)
                self.reward = CombinedReward(list(rewards))
                self.sampling.n = group_size
                self.group_size = group_size

            def training_step(self, batch, batch_idx):
                samples = self.collect_rollout(batch).samples
                rewards = self.reward(samples).total
                grouped = rewards.view(-1, self.group_size)
                advantages = (grouped - grouped.mean(1, keepdim=True)).flatten()
                packed = pack(samples, advantages, self.tokenizer.pad_token_id)
                n_tok = max(float(packed.loss_mask.sum()), 1.0)

                def micro_loss(rows):
                    sub = packed.select(rows)
                    logp, _ = self.sequence_logprobs(sub)
                    mask = sub.loss_mask.to(self.device)
                    loss = -(logp * sub.advantages.to(self.device)[:, None] * mask).sum() / n_tok
                    return loss, {}

                totals = self.optimization_step(packed.input_ids.shape[0], micro_loss)
                self.log("train/loss", totals["loss"], on_step=True, batch_size=len(samples))
                self.log("train/reward/mean", float(rewards.mean()), on_step=True, batch_size=len(samples))
        ''',
}


def test_a_task_source_a_reward_and_a_trainer_from_new_files_only(tmp_path, tiny_model_dir, monkeypatch):
    from propel.cli import main

    package = tmp_path / "myext"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, text in FILES.items():
        (package / name).write_text(textwrap.dedent(text).lstrip())
    monkeypatch.syspath_prepend(str(tmp_path))
    config = {
        "trainer": {
            "default_root_dir": str(tmp_path / "run"),
            "max_steps": 2,
            "accelerator": "cpu",
            "logger": False,
            "enable_progress_bar": False,
            "enable_model_summary": False,
        },
        "model": {
            "class_path": "myext.reinforce.Reinforce",
            "init_args": {
                "model": str(tiny_model_dir),
                "rewards": ["myext.letter_reward.StartsWithLetter"],
                "group_size": 2,
                "max_new_tokens": 6,
                "lr": 1e-3,
            },
        },
        "data": {
            "class_path": "propel.datamodules.contexts.SingleTurnDataModule",
            "init_args": {
                "tasks": {"class_path": "myext.word_tasks.LetterWords", "init_args": {"letters": "ab"}},
                "scorer": "myext.word_tasks.AnyAnswer",
                "contexts_per_step": 2,
            },
        },
    }
    path = tmp_path / "ext.yaml"
    path.write_text(yaml.safe_dump(config))
    main(["fit", "-c", str(ROOT / "configs/grpo/base.yaml"), "-c", str(path)])
    last = torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", weights_only=False)
    assert last["global_step"] == 2  # two optimizer steps of the user's trainer
    assert any("lora" in k for k in last["state_dict"])  # LoRA-only checkpoint, written by the base's hook
    assert (tmp_path / "run" / "adapters").is_dir()  # the base config's AdapterSaver saw a LoRAPolicyModule
