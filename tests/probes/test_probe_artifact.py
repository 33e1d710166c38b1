"""Probe artifacts: save/load round trip without Lightning, and plots."""

import json
import subprocess
import sys

import pytest
import torch

from propel.probes.artifact import ProbeArtifact
from propel.probes.gate import GateSpec
from propel.probes.heads import ProbeHead


@pytest.mark.parametrize("arch", ["linear", "mlp", "deep_mlp"])
def test_round_trip(tmp_path, arch):
    torch.manual_seed(0)
    head = ProbeHead(arch, 12, hidden_dim=8)
    head.set_normalization(torch.randn(12), torch.rand(12) + 0.5)
    art = ProbeArtifact(head, "smollm2-135m-instruct", 7, "mean_last_half", threshold=0.4, metrics={"val_ece": 0.05})
    art.save(tmp_path)
    cfg = json.loads((tmp_path / "probe.json").read_text())
    assert cfg["layer"] == 7 and cfg["pooling"] == "mean_last_half" and len(cfg["normalization"]["mean"]) == 12
    loaded = ProbeArtifact.load(tmp_path)
    x = torch.randn(5, 12)
    torch.testing.assert_close(loaded.score(x), art.score(x), rtol=0, atol=0)
    assert loaded.threshold == 0.4 and loaded.metrics == {"val_ece": 0.05}


def test_load_leaves_the_global_rng_alone(tmp_path):
    """A reward loading its probe inside a resumed training step must not shift the sampling RNG (exact resume)."""
    ProbeArtifact(ProbeHead("deep_mlp", 6, hidden_dim=8), "m", 1, "max").save(tmp_path)
    torch.manual_seed(3)
    state = torch.get_rng_state()
    ProbeArtifact.load(tmp_path)
    assert torch.equal(torch.get_rng_state(), state)


def test_load_and_score_without_lightning(tmp_path):
    ProbeArtifact(ProbeHead("mlp", 4, hidden_dim=8), "m", 1, "max").save(tmp_path)
    code = (
        "import sys, torch\n"
        "sys.modules['lightning'] = None; sys.modules['lightning.pytorch'] = None\n"
        "from propel.probes import ProbeArtifact\n"
        f"a = ProbeArtifact.load({str(tmp_path)!r})\n"
        "print(a.score(torch.zeros(2, 4)).shape)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "torch.Size([2])" in out.stdout


def test_missing_artifact_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="probe.json"):
        ProbeArtifact.load(tmp_path)


def test_reliability_plot_draws_the_observed_rate_per_bin(tmp_path, monkeypatch):
    """The bars are each bin's observed positive rate and the title carries the ECE (read from the saved figure)."""
    from matplotlib.figure import Figure

    from propel.metrics.calibration import reliability_bins
    from propel.probes.plots import plot_reliability

    saved = []
    real_savefig = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda fig, *a, **kw: saved.append(fig) or real_savefig(fig, *a, **kw))
    g = torch.Generator().manual_seed(0)
    probs = torch.rand(400, generator=g)
    labels = (torch.rand(400, generator=g) < probs**2).long()  # over-confident: observed rate below prediction
    path = plot_reliability(probs, labels, tmp_path / "rel.png", n_bins=5, title="probe")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (ax,) = saved[0].axes
    heights = [bar.get_height() for bar in ax.patches]
    bins = reliability_bins(probs, labels, 5)
    want = [float(a) for a, n in zip(bins.accuracy[:5], bins.count[:5], strict=True) if n > 0]
    assert heights == pytest.approx(want)
    centers = [bar.get_x() + bar.get_width() / 2 for bar in ax.patches]
    assert all(h < c for h, c in zip(heights[1:], centers[1:], strict=True))  # below the diagonal
    assert f"ECE = {bins.ece:.3f}" in ax.get_title() and bins.ece > 0.1


def _saved_for(model, tok, folder, input_dim=None, **kw):
    from propel.probes.fingerprint import hidden_size

    head = ProbeHead("linear", input_dim or hidden_size(model))
    art = ProbeArtifact(head, kw.pop("reference_model", "tiny"), 1, "last_token", **kw)
    return art.save(folder)


def test_bind_refuses_a_model_of_another_width(tiny_model, tiny_model_dir, tmp_path):
    """The mismatch surfaces at ``setup`` (bind), in one line naming the artifact and the model."""
    from propel.errors import ConfigError
    from propel.rewards import ProbeReward, RewardContext

    model, tok = tiny_model
    width = 2 * model.config.hidden_size + 1
    folder = _saved_for(model, tok, tmp_path / "wide", input_dim=width, reference_model=str(tiny_model_dir))
    reward = ProbeReward(artifact=str(folder), gate=GateSpec(mode="probe_only"))
    ctx = RewardContext(policy=model, tokenizer=tok, model_name=str(tiny_model_dir))
    with pytest.raises(ConfigError) as err:
        reward.setup(ctx)
    msg = str(err.value)
    assert "\n" not in msg and str(folder) in msg and str(tiny_model_dir) in msg
    assert f"gives {model.config.hidden_size}" in msg


def test_bind_refuses_same_width_other_weights_or_dtype(tiny_model, tiny_model_dir, tmp_path):
    from propel.errors import ConfigError
    from propel.models import load_model
    from propel.probes.artifact import ProbeScorer
    from propel.probes.fingerprint import reference_fingerprint

    model, tok = tiny_model
    ref = reference_fingerprint(model, tok)
    folder = _saved_for(model, tok, tmp_path / "p", reference=ref, reference_model=str(tiny_model_dir))
    art = ProbeArtifact.load(folder)
    assert art.reference == ref and json.loads((folder / "probe.json").read_text())["reference"]["dtype"] == "float32"
    ProbeScorer(art, model, tok)  # its own reference binds

    other, _ = load_model(str(tiny_model_dir))
    with torch.no_grad():
        other.model.layers[1].self_attn.o_proj.weight.add_(0.01)  # same width, another fine-tune
    with pytest.raises(ConfigError, match="weights fingerprint") as err:
        ProbeScorer(art, other, tok)
    assert str(folder) in str(err.value) and "\n" not in str(err.value)
    half, _ = load_model(str(tiny_model_dir), dtype="bfloat16")
    with pytest.raises(ConfigError, match="dtype float32.*bfloat16"):
        ProbeScorer(art, half, tok)


def test_artifact_without_a_reference_still_checks_width(tiny_model, tmp_path):
    from propel.probes.artifact import ProbeScorer

    model, tok = tiny_model
    art = ProbeArtifact.load(_saved_for(model, tok, tmp_path / "old"))
    assert art.reference is None
    scorer = ProbeScorer(art, model, tok)
    assert scorer.logits(["a task", ""]).shape == (2,)  # an empty text is scored, not a crash


def test_a_lora_policy_binds_as_its_own_base(tiny_model, tmp_path):
    """GRPO shares its peft policy as the frozen reference: adapters are left out of the weights fingerprint."""
    from propel.models import apply_lora
    from propel.probes.artifact import ProbeScorer
    from propel.probes.fingerprint import reference_fingerprint

    model, tok = tiny_model
    ref = reference_fingerprint(model, tok)
    art = ProbeArtifact.load(_saved_for(model, tok, tmp_path / "p", reference=ref))
    policy = apply_lora(model)
    with torch.no_grad():
        for name, param in policy.named_parameters():
            if "lora_B" in name:
                param.fill_(0.5)  # trained adapters
    assert reference_fingerprint(policy, tok) == ref
    ProbeScorer(art, policy, tok)
