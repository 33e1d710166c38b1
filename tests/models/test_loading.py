"""Model loading: alias, folder, GGUF file, hub id errors."""

from __future__ import annotations

import time

import pytest
import torch

from propel.errors import ModelNotFoundError
from propel.models import load_model, resolve_model_dir
from propel.models.bundled import bundled_gguf_path


def test_folder_loads_with_left_padding_and_pad_token(tiny_model_dir):
    model, tok = load_model(str(tiny_model_dir))
    assert tok.pad_token is not None and tok.padding_side == "left"
    assert not model.training
    batch = tok(["hello", "a much longer prompt here"], return_tensors="pt", padding=True)
    assert batch["attention_mask"][0, 0] == 0  # left padded
    assert model(**batch).logits.shape[:2] == batch["input_ids"].shape


def test_dtype_is_applied_and_checked(tiny_model_dir):
    model, _ = load_model(str(tiny_model_dir), dtype="bfloat16")
    assert next(model.parameters()).dtype == torch.bfloat16
    with pytest.raises(ValueError, match="dtype"):
        load_model(str(tiny_model_dir), dtype="float8")


def test_missing_paths_raise_clear_errors(tmp_path):
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        resolve_model_dir(str(tmp_path / "nope.gguf"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelNotFoundError, match="config.json"):
        resolve_model_dir(str(tmp_path / "empty"))


def test_unreachable_hub_id_fails_fast_with_instructions():
    start = time.monotonic()
    with pytest.raises(ModelNotFoundError, match="hf download"):
        load_model("nonexistent-org/nonexistent-model")
    assert time.monotonic() - start < 15  # no minutes of hub retries


def test_bundled_alias_resolves_to_converted_folder(bundled_dir):
    assert resolve_model_dir("smollm2-135m-instruct") == str(bundled_dir)
    assert (bundled_dir / "model.safetensors").exists() and (bundled_dir / "tokenizer.json").exists()


@pytest.mark.real_model
def test_gguf_file_path_converts_and_matches_alias(tmp_path, monkeypatch, real_model):
    monkeypatch.setenv("PROPEL_CACHE", str(tmp_path))
    model, _ = load_model(str(bundled_gguf_path("smollm2-135m-instruct")))
    ref, _ = real_model
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, ref(ids).logits)


@pytest.mark.real_model
def test_bundled_model_answers_greedily(real_model):
    model, tok = real_model
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    inputs = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    out = model.generate(**inputs, max_new_tokens=16, do_sample=False)
    answer = tok.decode(out[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    assert "Paris" in answer
