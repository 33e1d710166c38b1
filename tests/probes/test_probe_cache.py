"""Activation cache: keyed folders, shard-by-shard resume after a kill, and feature files."""

import pytest
import torch

from propel.cli import stops
from propel.probes.cache import ActivationCache, extract_to_cache, load_features, save_features_file
from propel.probes.extraction import ActivationExtractor

TEXTS = [f"Problem {i}: what is {i} + {i * 3}?" + " more" * (i % 4) for i in range(7)]


class Killed(KeyboardInterrupt):
    """A stop signal's exception, as ``propel.cli.stops`` raises it."""


def test_cache_resumes_from_last_finished_chunk(tiny_model, tmp_path):
    model, tok = tiny_model
    ex = ActivationExtractor(model, tok, [1, 2], ["last_token", "mean_full"], batch_size=2)
    full = ex.encode(TEXTS)

    calls = {"n": 0}
    real_encode = ex.encode

    def dying_encode(items, on_batch=None):  # the extraction gets killed while doing the third chunk
        calls["n"] += 1
        if calls["n"] == 3:
            raise Killed
        return real_encode(items, on_batch=on_batch)

    ex.encode = dying_encode
    stops.reset()
    with pytest.raises(Killed):
        extract_to_cache(ex, TEXTS, model_id="tiny", cache_root=tmp_path, chunk_size=3, progress=False)
    (folder,) = tmp_path.iterdir()
    assert stops.notes == [stops.Note(f"the activation cache holds 2 of 3 shards of 3 rows in {folder}", True)]
    stops.reset()
    assert sorted(p.name for p in folder.glob("shard_*.pt")) == ["shard_00000.pt", "shard_00001.pt"]
    with pytest.raises(RuntimeError, match="incomplete"):
        ActivationCache(folder).load("layer1/last_token")

    ex.encode = real_encode
    seen = []
    ex.encode = lambda items, on_batch=None: seen.append(len(items)) or real_encode(items, on_batch=on_batch)
    cache = extract_to_cache(ex, TEXTS, model_id="tiny", cache_root=tmp_path, chunk_size=3, progress=False)
    assert seen == [1]  # chunks 0 and 1 (rows 0-5) were kept; only the last chunk (1 row) was computed
    assert cache.complete and cache.ids == [str(i) for i in range(7)]
    for key in ex.keys:
        torch.testing.assert_close(cache.load(key), full[key], rtol=1e-5, atol=1e-6)
    # a complete cache is returned without any work, under the same key
    seen.clear()
    again = extract_to_cache(ex, TEXTS, model_id="tiny", cache_root=tmp_path, chunk_size=3, progress=False)
    assert seen == [] and again.root == cache.root


def test_cache_key_changes_with_data_and_layers(tiny_model, tmp_path):
    model, tok = tiny_model
    a = extract_to_cache(
        ActivationExtractor(model, tok, [1], ["max"]), TEXTS[:2], model_id="m", cache_root=tmp_path, progress=False
    )
    b = extract_to_cache(
        ActivationExtractor(model, tok, [1], ["max"]), TEXTS[1:3], model_id="m", cache_root=tmp_path, progress=False
    )
    c = extract_to_cache(
        ActivationExtractor(model, tok, [2], ["max"]), TEXTS[:2], model_id="m", cache_root=tmp_path, progress=False
    )
    assert len({a.root, b.root, c.root}) == 3


def test_load_features_from_cache_and_file(tiny_model, tmp_path):
    model, tok = tiny_model
    ex = ActivationExtractor(model, tok, [1], ["mean_full", "max"])
    cache = extract_to_cache(ex, TEXTS, model_id="tiny", cache_root=tmp_path / "c", ids=list("abcdefg"), progress=False)
    ids, x, info = load_features(cache.root, "layer1/max")
    assert ids == list("abcdefg") and x.shape == (7, 64) and info["model_id"] == "tiny"
    with pytest.raises(ValueError, match="layer and pooling"):
        load_features(cache.root)
    path = save_features_file(tmp_path / "f.pt", ids, {"layer1/max": x}, model_id="tiny")
    ids2, x2, info2 = load_features(path)
    assert ids2 == ids and torch.equal(x2, x) and info2["key"] == "layer1/max"


def test_cache_key_changes_with_weights_dtype_and_tokenizer(tiny_model, tiny_model_dir, tmp_path):
    """Same name, texts and settings, but other weights, dtype or tokenizer: never the same cache folder."""
    from propel.models import load_model

    model, tok = tiny_model

    def root(m, t):
        ex = ActivationExtractor(m, t, [1], ["max"])
        return extract_to_cache(ex, TEXTS[:3], model_id="m", cache_root=tmp_path, progress=False).root

    base = root(model, tok)
    assert root(model, tok) == base
    other, _ = load_model(str(tiny_model_dir))
    with torch.no_grad():
        other.model.layers[0].mlp.down_proj.weight.mul_(1.5)  # a fine-tune that leaves the embeddings alone
    half, _ = load_model(str(tiny_model_dir), dtype="bfloat16")
    tok2 = load_model(str(tiny_model_dir))[1]
    tok2.add_tokens(["<extra_token_for_the_test>"])
    roots = {base, root(other, tok), root(half, tok), root(model, tok2)}
    assert len(roots) == 4
    meta = ActivationCache(base).meta["reference"]
    assert meta["dtype"] == "float32" and meta["hidden_size"] == model.config.hidden_size


def test_complete_cache_returns_the_ids_asked_for(tiny_model, tmp_path):
    model, tok = tiny_model
    ex = ActivationExtractor(model, tok, [1], ["max"])
    first = extract_to_cache(ex, TEXTS[:3], model_id="m", cache_root=tmp_path, ids=["a", "b", "c"], progress=False)
    again = extract_to_cache(ex, TEXTS[:3], model_id="m", cache_root=tmp_path, ids=["x", "y", "z"], progress=False)
    assert first.root == again.root and again.ids == ["x", "y", "z"]
    assert ActivationCache(again.root).ids == ["x", "y", "z"]
    ids, x, _ = load_features(again.root, "layer1/max")
    assert ids == ["x", "y", "z"] and torch.equal(x, first.load("layer1/max"))
