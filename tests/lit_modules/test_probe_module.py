"""ProbeModule under a real Lightning Trainer with EarlyStopping, and the artifact it exports."""

import pytest
import torch
from lightning.pytorch import Trainer
from lightning.pytorch.callbacks import EarlyStopping

from propel.datamodules.activations import ActivationDataModule
from propel.lit_modules.probe_training import ProbeModule
from propel.metrics.classification import binary_metrics
from propel.probes.artifact import ProbeArtifact
from propel.testing.probe_data import write_synthetic


def trainer(**kw):
    return Trainer(
        max_epochs=50,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[EarlyStopping("val/balanced_accuracy", mode="max", patience=5)],
        **kw,
    )


@pytest.mark.parametrize("arch", ["linear", "deep_mlp"])
def test_fit_learns_signal_and_exports(tmp_path, arch):
    feats, labels = write_synthetic(tmp_path, n=2000)
    dm = ActivationDataModule(str(feats), str(labels), layer=1, pooling="mean_full", balance="weighted")
    module = ProbeModule(arch=arch, export_dir=str(tmp_path / "probe"))
    t = trainer()
    t.fit(module, datamodule=dm)
    assert module.head.input_dim == 16
    assert module._pos_weight == pytest.approx(dm.pos_weight)  # "auto" took the datamodule's weight
    torch.testing.assert_close(module.head.mean, dm.feature_mean)  # standardized with train-split stats
    res = t.test(module, datamodule=dm, verbose=False)[0]
    assert res["test/balanced_accuracy"] > 0.75 and res["test/auroc"] > 0.8
    x, y, solve = (torch.cat(parts) for parts in zip(*dm.test_dataloader(), strict=True))
    module.eval()
    with torch.no_grad():
        want = binary_metrics(module(x), y, solve)
    for name in ("accuracy", "balanced_accuracy", "f1", "auroc", "ece", "spearman"):
        assert res[f"test/{name}"] == pytest.approx(want[name], abs=1e-5), name  # logged = recomputed on test rows

    art = ProbeArtifact.load(tmp_path / "probe")
    assert (art.layer, art.pooling, art.reference_model, art.head.arch) == (1, "mean_full", "synthetic", arch)
    with torch.no_grad():
        torch.testing.assert_close(art.score(x), module(x))


def test_noise_features_stay_near_chance(tmp_path):
    feats, labels = write_synthetic(tmp_path, n=2000)
    dm = ActivationDataModule(str(feats), str(labels), layer=2, pooling="last_token")
    module = ProbeModule(arch="linear")
    t = trainer()
    t.fit(module, datamodule=dm)
    res = t.test(module, datamodule=dm, verbose=False)[0]
    assert res["test/balanced_accuracy"] < 0.7


def test_bad_args():
    with pytest.raises(ValueError, match="arch"):
        ProbeModule(arch="transformer")
    with pytest.raises(ValueError, match="pos_weight"):
        ProbeModule(pos_weight="balanced")


def test_shares_the_sweep_objective():
    """ProbeModule builds on propel.probes.classifier: same init under a seed, same loss, metrics and optimizer."""
    from propel.probes.classifier import ProbeClassifier

    torch.manual_seed(0)
    module = ProbeModule(arch="mlp", input_dim=8, hidden_dim=16, pos_weight=2.0)
    torch.manual_seed(0)
    core = ProbeClassifier("mlp", 8, hidden_dim=16, pos_weight=2.0)
    for (k, a), (k2, b) in zip(module.state_dict().items(), core.state_dict().items(), strict=True):
        assert k == k2 and torch.equal(a, b)
    x, y, solve = torch.randn(32, 8), (torch.rand(32) > 0.5).float(), torch.randint(0, 9, (32,)).float()
    module.eval(), core.eval()
    with torch.no_grad():
        assert module.metrics(module(x), y, solve) == core.metrics(core(x), y, solve)
    assert type(module.configure_optimizers()) is type(core.configure_optimizers())


def test_fit_yaml_through_propel_cli(tmp_path, monkeypatch):
    """``propel fit -c configs/probe/fit.yaml`` with a features file + Parquet pool writes a loadable artifact."""
    from pathlib import Path

    from propel import cli  # a broken CLI import must fail this test, not skip it

    config = Path(__file__).resolve().parents[2] / "configs" / "probe" / "fit.yaml"
    feats, labels = write_synthetic(tmp_path / "data", n=600)
    monkeypatch.chdir(tmp_path)
    cli.main(
        [
            "fit",
            "-c",
            str(config),
            f"--data.init_args.features_path={feats}",
            f"--data.init_args.labels_path={labels}",
            "--data.init_args.layer=1",
            "--data.init_args.pooling=mean_full",
            "--trainer.max_epochs=3",
            "--trainer.logger=false",
            "--trainer.enable_progress_bar=false",
            "--trainer.enable_checkpointing=false",
        ]
    )
    art = ProbeArtifact.load(tmp_path / "runs" / "probe" / "artifact")
    assert art.layer == 1 and art.reference_model == "synthetic"
    # the recorded validation metrics are those of the exported (best-epoch) head on the config's validation rows
    dm = ActivationDataModule(str(feats), str(labels), layer=1, pooling="mean_full", balance="downsample")
    x, y, solve = (torch.cat(parts) for parts in zip(*dm.val_dataloader(), strict=True))
    got = binary_metrics(art.score(x), y, solve)
    for name in ("balanced_accuracy", "auroc", "ece"):
        assert art.metrics[f"val_{name}"] == pytest.approx(got[name], abs=1e-5), name
