"""The GPU recipes in ``configs/gpu/`` compose with the templates they overlay and parse with the CLI's own parser
(every class_path, key and value checked; no model is downloaded, nothing runs), and each has a memory estimate."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
RECIPES = {
    "grpo_math_4b_colocated": ("fit", "configs/grpo/base.yaml", "configs/math/grpo.yaml"),
    "grpo_math_4b_server": ("fit", "configs/grpo/base.yaml", "configs/math/grpo.yaml"),
    "label_math_4b_qwen3b": ("predict", "configs/math/label.yaml"),
    "label_math_4b_qwen7b": ("predict", "configs/math/label.yaml"),
}


def test_every_gpu_config_is_checked_here():
    assert sorted(p.stem for p in (ROOT / "configs/gpu").glob("*.yaml")) == sorted(RECIPES)


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_gpu_config_parses_on_its_templates(capsys, name):
    from propel.cli import main

    command, *templates = RECIPES[name]
    args = [command, *(a for t in templates for a in ("-c", t)), "-c", f"configs/gpu/{name}.yaml", "--print_config"]
    with pytest.raises(SystemExit) as exc:
        main(args)
    out = capsys.readouterr()
    assert exc.value.code in (0, None), out.err[-2000:]
    cfg = yaml.safe_load(out.out)
    init = cfg["model"]["init_args"]
    assert init["dtype"] == "bfloat16" and init["engine_kwargs"]["dtype"] == "bfloat16"
    if command == "fit":
        assert init["model"] == "Qwen/Qwen3.5-4B" and init["lora"] == {
            "r": 16, "alpha": 32, "target_modules": init["lora"]["target_modules"]
        }  # fmt: skip
        assert len(init["lora"]["target_modules"]) == 7 and cfg["trainer"]["precision"] == "bf16-mixed"
    else:
        assert init["generator"] == "Qwen/Qwen3.5-4B" and init["solver"]["model"].startswith("Qwen/Qwen2.5-")
        assert init["solver"]["n_trials"] == 8 and list(init["solver"]["band"]) == [1, 3]


def test_memory_table_has_a_row_per_recipe_gpu():
    out = subprocess.run(
        [sys.executable, "benchmarks/gpu_memory.py"], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert out.returncode == 0, out.stderr
    rows = [line.split(" | ") for line in out.stdout.splitlines()[2:]]
    assert sorted({r[0].strip("| ") for r in rows}) == sorted(RECIPES)
    totals = {(r[0].strip("| "), r[1]): float(r[-1].strip(" |")) for r in rows}
    assert 30 < totals[("grpo_math_4b_colocated", "each trainer GPU")] < 80  # fits an 80 GB H100
    assert totals[("grpo_math_4b_server", "each trainer GPU")] < totals[("grpo_math_4b_colocated", "each trainer GPU")]
