"""Adapter folders: peft format, reloadable by ``PeftModel.from_pretrained`` and by ``load_policy`` (merged)."""

from __future__ import annotations

import os
from types import SimpleNamespace

import torch

from propel.callbacks.adapters import AdapterSaver, save_adapter
from propel.models import LoRASpec, apply_lora, load_model
from propel.models.trained_policy import load_policy, lora_rank_of


def test_saved_adapter_reloads_with_the_same_logits(tiny_model_dir, tmp_path, monkeypatch):
    model, tok = load_model(str(tiny_model_dir))
    policy = apply_lora(model, LoRASpec(r=4, alpha=8))
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.normal_(std=0.5)  # B starts at zero: make the adapter change the output
    policy.eval()
    ids = tok(["Problem: Tom has 3 apples."], return_tensors="pt")
    with torch.no_grad():
        want = policy(**ids).logits
        with policy.disable_adapter():
            base_logits = policy(**ids).logits
    assert not torch.allclose(want, base_logits, atol=1e-3)

    import propel.durable as durable

    synced: list[str] = []
    monkeypatch.setattr(durable, "fsync", lambda path: synced.append(os.path.basename(path)))
    folder = save_adapter(policy, tok, tmp_path / "step-3")
    assert {"adapter_model.safetensors", "adapter_config.json"} <= set(synced) and synced[-1] == tmp_path.name
    assert (folder / "adapter_config.json").exists() and (folder / "tokenizer_config.json").exists()
    assert not list(tmp_path.glob(".*.tmp"))

    from peft import PeftModel

    fresh, _ = load_model(str(tiny_model_dir))
    reloaded = PeftModel.from_pretrained(fresh, str(folder)).eval()
    with torch.no_grad():
        torch.testing.assert_close(reloaded(**ids).logits, want)

    merged, _ = load_policy(str(tiny_model_dir), str(folder))
    assert not hasattr(merged, "peft_config")
    with torch.no_grad():
        torch.testing.assert_close(merged(**ids).logits, want, rtol=1e-4, atol=1e-4)

    unmerged, _ = load_policy(str(tiny_model_dir), str(folder), merge=False)  # what the vLLM engines hot-load
    assert lora_rank_of(unmerged) == 4 and lora_rank_of(merged) == 0
    with torch.no_grad():
        torch.testing.assert_close(unmerged(**ids).logits, want)


def test_saver_keeps_its_interval_across_a_resume(tmp_path, monkeypatch):
    """A resumed run saves at the next multiple, not right away (the old saver kept no state and
    saved ``step-31`` after a resume at step 30 with ``every_n_steps: 25``)."""
    saved: list[int] = []

    def saver(state=None) -> AdapterSaver:
        s = AdapterSaver(dirpath=str(tmp_path), every_n_steps=25)
        if state is not None:
            s.load_state_dict(state)
        monkeypatch.setattr(s, "_save", lambda trainer, pl_module: saved.append(trainer.global_step))
        return s

    def run(s: AdapterSaver, start: int, stop: int) -> None:
        trainer = SimpleNamespace(global_step=start)
        s.on_train_start(trainer, None)
        for step in range(start + 1, stop + 1):
            trainer.global_step = step
            s.on_train_batch_end(trainer, None, None, None, 0)

    first = saver()
    run(first, 0, 30)
    assert saved == [25]
    run(saver(first.state_dict()), 30, 52)  # resumed with the callback's state
    run(saver(), 52, 60)  # resumed from a checkpoint without it (older run): global_step at start counts as seen
    assert saved == [25, 50]
