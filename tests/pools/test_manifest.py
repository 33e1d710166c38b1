"""The settings manifest of a pool folder: written once, matched on resume, a mismatch refused in one line."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from propel.domains.trials import SolverSpec
from propel.errors import ConfigError
from propel.pools.io import write_part
from propel.pools.manifest import MANIFEST, check_manifest, fingerprint, run_settings


class _Domain:
    def __init__(self, lenient: bool, batch_size: int = 8):
        self.lenient, self.batch_size, self._cache = lenient, batch_size, object()


def _module(adapter=None, seed=0, lenient=True, batch_size=8, n_trials=8):
    hparams = {"generator": "m", "adapter": adapter, "seed": seed, "engine_kwargs": {"port": 1}, "dtype": "float32"}
    return SimpleNamespace(
        hparams=hparams, domain=_Domain(lenient, batch_size), solver=SolverSpec(n_trials=n_trials), solver_agent=None
    )


def test_written_once_then_matched(tmp_path):
    settings = run_settings(_module(), data_seed=1)
    assert check_manifest(tmp_path, settings) is True
    assert json.loads((tmp_path / MANIFEST).read_text())["context_seed"] == 1
    assert check_manifest(tmp_path, run_settings(_module(), data_seed=1)) is False


@pytest.mark.parametrize(
    ("changed", "key"),
    [
        ({"seed": 3}, "seed: 0 -> 3"),
        ({"lenient": False}, "domain.lenient: True -> False"),
        ({"n_trials": 4}, "solver.n_trials: 8 -> 4"),
    ],
)
def test_result_settings_are_refused_in_one_line(tmp_path, changed, key):
    check_manifest(tmp_path, run_settings(_module(), 1))
    with pytest.raises(ConfigError) as err:
        check_manifest(tmp_path, run_settings(_module(**changed), 1), "output_dir")
    assert key in str(err.value) and "\n" not in str(err.value) and str(tmp_path) in str(err.value)


def test_throughput_settings_do_not_count(tmp_path):
    check_manifest(tmp_path, run_settings(_module(batch_size=8), 1))
    check_manifest(tmp_path, run_settings(_module(batch_size=64), 1))  # no error
    module = _module()
    module.hparams["engine_kwargs"] = {"port": 2}
    check_manifest(tmp_path, run_settings(module, 1))


def test_an_adapter_retrained_in_place_is_another_adapter(tmp_path):
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_model.safetensors").write_bytes(b"weights v1")
    pool = tmp_path / "pool"
    check_manifest(pool, run_settings(_module(adapter=str(adapter)), 1))
    first = fingerprint(adapter)
    (adapter / "adapter_model.safetensors").write_bytes(b"weights v2")
    assert fingerprint(adapter) != first
    with pytest.raises(ConfigError, match="adapter_sha256"):
        check_manifest(pool, run_settings(_module(adapter=str(adapter)), 1))


def test_a_folder_from_before_manifests_is_adopted_with_a_warning(tmp_path):
    write_part(tmp_path, [], rank=0)
    with pytest.warns(UserWarning, match="cannot be checked"):
        assert check_manifest(tmp_path, run_settings(_module(), 1)) is True


def test_a_manifest_from_before_the_budget_took_one_spelling_still_matches(tmp_path):
    """Pools labeled when the labeling module spelled its budget ``generator_max_new_tokens`` (and its temperature
    ``generator_temperature``) resume under the GRPO module's spelling; a changed value is still refused."""
    module = _module()
    module.hparams.update(max_new_tokens=64, temperature=1.0)
    settings = run_settings(module, 1)
    old = {("generator_" + k if k in ("max_new_tokens", "temperature") else k): v for k, v in settings.items()}
    (tmp_path / MANIFEST).write_text(json.dumps(old))
    assert check_manifest(tmp_path, settings) is False
    module.hparams["max_new_tokens"] = 32
    with pytest.raises(ConfigError, match="max_new_tokens: 64 -> 32"):
        check_manifest(tmp_path, run_settings(module, 1))
