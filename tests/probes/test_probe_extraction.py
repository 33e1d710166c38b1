"""Early-stop extraction vs a plain ``output_hidden_states=True`` forward, on the tiny model."""

import pytest
import torch
from test_probe_pooling import reference_pool

from propel.probes.extraction import ActivationExtractor, decoder_parts, hidden_states_at, position_ids_from_mask
from propel.probes.pooling import POOLINGS

TEXTS = [
    "Problem: Tom has 3 apples and buys 4 more. How many apples does he have?",
    "x",
    "def f(x):\n    return x * 2 + 1",
    "A somewhat longer text, so that the batch needs padding on one side or the other side.",
]


@pytest.mark.parametrize("side", ["left", "right"])
def test_hidden_states_match_output_hidden_states(tiny_model, side):
    model, tok = tiny_model
    tok.padding_side = side
    batch = tok(TEXTS, return_tensors="pt", padding=True)
    mask = batch["attention_mask"]
    with torch.no_grad():
        ref = model(**batch, position_ids=position_ids_from_mask(mask), output_hidden_states=True).hidden_states
    depth = len(decoder_parts(model)[1])
    got = hidden_states_at(model, batch["input_ids"], mask, range(depth + 1))
    for layer in range(depth + 1):  # the last layer carries the final norm, as in HF
        torch.testing.assert_close(got[layer][mask.bool()], ref[layer][mask.bool()])


@pytest.mark.parametrize("side", ["left", "right"])
def test_every_pooling_matches_unpadded_forward(tiny_model, side):
    """Batched, padded, early-stopped features == pooling each text's own unpadded HF forward."""
    model, tok = tiny_model
    tok.padding_side = side
    layers = [0, 1, 2]
    ex = ActivationExtractor(model, tok, layers, POOLINGS, batch_size=3)
    feats = ex.encode(TEXTS)
    for i, text in enumerate(TEXTS):
        ids = tok(text, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            hs = model(input_ids=ids, output_hidden_states=True).hidden_states
        for layer in layers:
            for p in POOLINGS:
                want = reference_pool(hs[layer][0].float(), p)
                torch.testing.assert_close(feats[f"layer{layer}/{p}"][i], want, rtol=1e-4, atol=1e-5)


def test_layers_above_the_deepest_do_not_run(tiny_model):
    model, tok = tiny_model
    _, blocks, norm = decoder_parts(model)
    calls = []
    handles = [
        blocks[1].register_forward_hook(lambda *a: calls.append("layer1")),
        norm.register_forward_hook(lambda *a: calls.append("norm")),
    ]
    try:
        batch = tok(TEXTS, return_tensors="pt", padding=True)
        out = hidden_states_at(model, batch["input_ids"], batch["attention_mask"], [1])
    finally:
        for h in handles:
            h.remove()
    assert calls == [] and set(out) == {1}
    # hooks are removed afterwards: a normal forward still works and runs every layer
    with torch.no_grad():
        model(**batch)


class TupleLayer(torch.nn.Module):
    """A decoder layer returning ``(hidden,)`` like older HF models do."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, *args, **kwargs):
        return (self.inner(*args, **kwargs),)


def test_tuple_returning_decoder_layer(tiny_model):
    model, tok = tiny_model
    batch = tok(TEXTS[:2], return_tensors="pt", padding=True)
    want = hidden_states_at(model, batch["input_ids"], batch["attention_mask"], [1])[1]
    blocks = decoder_parts(model)[1]
    blocks[0] = TupleLayer(blocks[0])
    got = hidden_states_at(model, batch["input_ids"], batch["attention_mask"], [1])[1]
    torch.testing.assert_close(got, want)


def test_trajectories_pool_turns(tiny_model):
    model, tok = tiny_model
    ex = ActivationExtractor(model, tok, [2], ["mean_full"], trajectory_pooling="max")
    per_turn = ex.encode(TEXTS)["layer2/mean_full"]
    traj = ex.encode([TEXTS[:3], TEXTS[3:]])["layer2/mean_full"]
    torch.testing.assert_close(traj[0], per_turn[:3].amax(0))
    torch.testing.assert_close(traj[1], per_turn[3])


def test_bad_inputs_are_named(tiny_model):
    model, tok = tiny_model
    with pytest.raises(ValueError, match="layers"):
        ActivationExtractor(model, tok, [9], ["mean_full"])
    with pytest.raises(ValueError, match="poolings"):
        ActivationExtractor(model, tok, [1], ["median"])


def test_empty_text_is_read_as_one_special_token(tiny_model):
    """An empty completion (first token EOS, or a stop string) gets the feature of the lone BOS/EOS token."""
    model, tok = tiny_model
    ex = ActivationExtractor(model, tok, [1, 2], ["last_token", "mean_full"])
    assert tok("")["input_ids"] == []  # the bundled tokenizer turns "" into no tokens at all
    got = ex.encode(["", TEXTS[0], ""])
    lone = ex.encode_ids([[ex.empty_id]])
    special = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
    assert ex.empty_id == special
    for key in ex.keys:
        torch.testing.assert_close(got[key][0], lone[key][0])
        torch.testing.assert_close(got[key][2], lone[key][0])
        assert torch.isfinite(got[key]).all() and not torch.allclose(got[key][1], got[key][0])


def test_long_texts_are_truncated_from_the_left(tiny_model):
    """``last_token`` reads the text's real last token: texts sharing a long prefix keep different endings."""
    model, tok = tiny_model
    prefix = " ".join(f"word{i}" for i in range(40))
    texts = [prefix + " the answer is seven", prefix + " so we stop here now"]
    ids = [tok(t)["input_ids"] for t in texts]
    assert ids[0][:12] == ids[1][:12] and len(ids[0]) > 12  # right truncation at 12 would make them identical
    ex = ActivationExtractor(model, tok, [2], ["last_token", "first_last_concat"], max_length=12)
    got = ex.encode(texts)
    want = ex.encode_ids([row[-12:] for row in ids])
    for key in ex.keys:
        torch.testing.assert_close(got[key], want[key])
    assert not torch.allclose(got["layer2/last_token"][0], got["layer2/last_token"][1])


@pytest.mark.real_model
def test_real_model_matches_hf_hidden_states(real_model):
    """SmolLM2-135M: a middle layer and the last (normed) layer equal HF's hidden_states, early-stopped."""
    model, tok = real_model
    batch = tok(TEXTS[:3], return_tensors="pt", padding=True)
    mask = batch["attention_mask"]
    depth = len(decoder_parts(model)[1])
    with torch.no_grad():
        ref = model(**batch, position_ids=position_ids_from_mask(mask), output_hidden_states=True).hidden_states
    got = hidden_states_at(model, batch["input_ids"], mask, [depth // 2, depth])
    for layer, h in got.items():
        torch.testing.assert_close(h[mask.bool()], ref[layer][mask.bool()])


def test_peft_policy_is_read_with_adapters_off(tiny_model):
    """A LoRA policy with trained (non-zero) adapters still yields the frozen base model's features."""
    from propel.models import apply_lora

    model, tok = tiny_model
    want = ActivationExtractor(model, tok, [2], ["mean_full"]).encode(TEXTS)["layer2/mean_full"]
    policy = apply_lora(model).eval()
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.normal_(std=0.5)
    got = ActivationExtractor(policy, tok, [2], ["mean_full"]).encode(TEXTS)["layer2/mean_full"]
    torch.testing.assert_close(got, want)
    with torch.no_grad():  # and the adapters do change the policy's own forward
        on = policy(**tok(TEXTS[:1], return_tensors="pt"), output_hidden_states=True).hidden_states[2].mean(1)[0]
    assert not torch.allclose(on, want[0], atol=1e-3)
