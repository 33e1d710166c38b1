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
    with pytest.raises(ValueError, match="texts"):
        ActivationExtractor(model, tok, [1], ["mean_full"]).encode(["ok", ""])


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
