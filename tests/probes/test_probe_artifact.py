"""Probe artifacts: save/load round trip without Lightning, and plots."""

import json
import subprocess
import sys

import pytest
import torch

from propel.probes.artifact import ProbeArtifact
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


def test_reliability_plot(tmp_path):
    from propel.probes.plots import plot_reliability

    probs = torch.rand(200, generator=torch.Generator().manual_seed(0))
    labels = (torch.rand(200) < probs).long()
    path = plot_reliability(probs, labels, tmp_path / "rel.png", title="probe")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
