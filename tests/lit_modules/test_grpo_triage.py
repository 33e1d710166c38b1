"""GRPO on IT triage end to end through the real ``propel`` CLI: ``configs/triage/grpo.yaml`` with its six
rewards, run for two steps (a tiny random model; the bundled model under ``real_model``), leaves six reward series
in the W&B log, a sample table with one column per component and the parse verdict, and the window table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from propel.cli.lightning_cli import resolve_lightning
from propel.tasks.triage.parse import REJECTIONS
from propel.testing.plain_configs import read_config_files
from propel.testing.wandb_offline import find_run_file, wait_for_history

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs/triage/grpo.yaml"
BASE = ROOT / "configs/grpo/base.yaml"
COMPONENTS = ("format", "resolution", "grounding", "calibration", "parsimony", "repetition")


def test_triage_config_resolves_with_six_weighted_rewards():
    cfg = resolve_lightning("fit", read_config_files([BASE, CONFIG]))
    rewards = cfg["model"]["init_args"]["rewards"]
    assert [r["class_path"].rsplit(".", 1)[1] for r in rewards] == [
        "TriageFormat",
        "TriageResolution",
        "CitationGrounding",
        "TriageCalibration",
        "Parsimony",
        "RepetitionPenalty",
    ]
    assert all(r["init_args"]["weight"] == 1.0 for r in rewards)
    assert cfg["model"]["init_args"]["model"] == "smollm2-135m-instruct"
    assert cfg["data"]["init_args"]["tasks"]["class_path"] == "propel.tasks.triage.TriageTickets"


def test_seed_reproduction_overlay_pays_six_independent_components_with_dr_grpo():
    seed = ROOT / "configs/triage/seed_reproduction.yaml"
    cfg = resolve_lightning("fit", read_config_files([BASE, CONFIG, seed]))
    init = cfg["model"]["init_args"]
    assert [r["init_args"]["mode"] for r in init["rewards"]] == ["independent"] * 6
    assert [r["init_args"]["weight"] for r in init["rewards"]] == [1.0] * 6
    assert init["group_size"] == 8 and init["loss"]["loss_type"] == "dr_grpo" and cfg["trainer"]["max_steps"] == 200
    assert any(c["class_path"].endswith("TriageIntegrity") for c in cfg["trainer"]["callbacks"])
    header = seed.read_text().split("\ntrainer:")[0]
    assert "reproduces the seed" in header and "NOT the default" in header and "pays style without content" in header


@pytest.fixture
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _run(tmp_path: Path, model: str, max_new_tokens: int) -> list[dict]:
    import wandb

    from propel.cli import main

    cfg = read_config_files([BASE, CONFIG])
    trainer = cfg["trainer"]
    trainer["default_root_dir"] = str(tmp_path / "run")  # checkpoints and adapters follow it
    trainer.update(max_steps=2, accelerator="cpu", enable_progress_bar=False, enable_model_summary=False)
    trainer["logger"] = {
        "class_path": "propel.loggers.PropelWandbLogger",
        "init_args": {"save_dir": str(tmp_path / "runs"), "offline": True, "id": "triage-test"},
    }
    callbacks = [c for c in trainer["callbacks"] if "ModelCheckpoint" not in c["class_path"]]
    for c in callbacks:
        if c["class_path"].endswith("SampleTable"):
            c["init_args"]["every_n_steps"] = 1
        if c["class_path"].endswith("RewardCurves"):
            c["init_args"]["dirpath"] = str(tmp_path / "curves")
    trainer["callbacks"] = callbacks
    trainer["enable_checkpointing"] = False
    init = cfg["model"]["init_args"]
    init.update(model=model, group_size=2, max_new_tokens=max_new_tokens, micro_batch_size=2)
    init["lora"] = {"r": 4, "alpha": 8}
    cfg["data"]["init_args"]["contexts_per_step"] = 1
    path = tmp_path / "triage.yaml"
    path.write_text(json.dumps(cfg))
    main(["fit", "-c", str(path)])
    wandb.finish()
    return wait_for_history(find_run_file(tmp_path / "runs").parent, "train/reward/repetition/mean", 2)


def _check(tmp_path: Path, history: list[dict]) -> None:
    for name in COMPONENTS:
        series = [row[f"train/reward/{name}/mean"] for row in history if f"train/reward/{name}/mean" in row]
        assert len(series) == 2 and all(0.0 <= v <= 1.0 for v in series), (name, series)
    logged = ("format_raw", "parsimony_raw", "repetition_raw", "resolution_rouge_l", "resolution_coverage")
    for name in (*logged, "grounding_gold_f1"):  # logged beside the paid values, every step
        assert sum(f"train/reward/{name}/mean" in row for row in history) == 2, name
    for key in ("train/integrity/content_first/content_free_share", "train/integrity/independent/honest_total"):
        assert sum(key in row for row in history) == 2, key
    table_files = list((tmp_path / "runs").glob("**/media/table/samples_*.table.json"))
    assert table_files
    table = json.loads(table_files[0].read_text())
    assert table["columns"][6:12] == list(COMPONENTS) and "triage.reason" in table["columns"]
    reasons = [row[table["columns"].index("triage.reason")] for row in table["data"]]
    # a rejected answer (duplicate or extra keys, malformed arguments too) scores 0 on every component
    assert all(r == "ok" or r.startswith("invalid: ") or r.split(":")[0] in REJECTIONS for r in reasons), reasons
    for row in table["data"]:
        if row[table["columns"].index("triage.reason")].split(":")[0] in REJECTIONS:
            assert row[6:12] == [0.0] * 6, row
    windows = json.loads((tmp_path / "curves" / "reward_windows.json").read_text())
    assert {r["component"] for r in windows["rows"]} == {"total", *COMPONENTS}
    assert (tmp_path / "curves" / "reward_windows.md").read_text().startswith("| component |")
    assert (tmp_path / "curves" / "reward_components.png").stat().st_size > 1000


def test_triage_config_runs_two_steps_with_a_tiny_model(tmp_path, tiny_model_dir, one_thread):
    _check(tmp_path, _run(tmp_path, str(tiny_model_dir), max_new_tokens=16))


@pytest.mark.real_model
def test_triage_config_runs_two_steps_with_the_bundled_model(tmp_path, bundled_dir, one_thread):
    _check(tmp_path, _run(tmp_path, str(bundled_dir), max_new_tokens=64))
