"""The ``propel`` command: help, config printing, one-line config errors."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.light_run import run_light

PROPEL = [sys.executable, "-m", "propel.cli"]


def _run(*args, cwd=None):
    return subprocess.run([*PROPEL, *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def test_help_lists_subcommands():
    out = _run("--help")
    assert out.returncode == 0
    for sub in ("fit", "validate", "test", "predict", "probe", "pipeline"):
        assert f"\n  {sub} " in out.stdout, out.stdout
    assert _run("--version").stdout.startswith("propel 0.")


def test_pipeline_help_names_the_demos_stages_in_its_order_and_no_step_count(capsys):
    """``propel pipeline --help`` said the demo's arms take "12 more steps" after the demo's arms became 6: the
    description names the stages in ``configs/demo.yaml``'s order and leaves the numbers to the config."""
    import yaml

    code, out, _ = _main(capsys, "pipeline", "--help")
    text = " ".join(out.split())
    stages = yaml.safe_load(Path("configs/demo.yaml").read_text())["stages"]
    where = [text.find(f"{stage} (") if stage != "evaluate" else text.find("evaluate;") for stage in stages]
    assert code == 0 and -1 not in where and where == sorted(where), (stages, where)
    assert not re.search(r"\d+ (more )?steps", text), text


def test_unknown_subcommand_suggests_the_close_one(capsys):
    code, _, err = _main(capsys, "fitt", "-c", "x.yaml")
    assert code == 2 and "Did you mean: 'fit'?" in err


def test_pipeline_without_a_config_refuses_to_start(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = _main(capsys, "pipeline")
    assert code == 2 and "needs a config" in err and "configs/demo.yaml" in err
    assert not (tmp_path / "runs").exists()


def test_broken_yaml_is_reported_before_any_heavy_import(tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("trainer: [1\n")
    out = _run("fit", "-c", str(cfg))
    assert out.returncode == 2 and "not valid YAML (line 2" in out.stderr


def _main(capsys, *args):
    from propel.cli import main

    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def test_fit_help(capsys):
    code, out, _ = _main(capsys, "fit", "--help")
    assert code == 0 and "--trainer.max_steps" in out


def test_a_class_help_takes_the_short_name_a_config_takes(capsys):
    """``--model.help GRPOModule`` failed ("Expected a dot import path string") where the full path worked."""
    code, out, err = _main(capsys, "fit", "--model.help", "GRPOModule")
    assert code == 0 and "--model.group_size" in out and "--model.loss" in out, err[-2000:]


@pytest.mark.parametrize(
    ("yaml_text", "key"),
    [
        ("trainer:\n  max_epochs: abc\n", "trainer.max_epochs"),
        ("trainer:\n  no_such_option: 1\n", "no_such_option"),
        ("model:\n  class_path: propel.nope.Missing\n", "model"),
    ],
)
def test_bad_config_is_one_line_naming_the_key(tmp_path, capsys, yaml_text, key):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(yaml_text)
    code, _, err = _main(capsys, "fit", "-c", str(cfg))
    assert code == 2
    lines = [line for line in err.splitlines() if line.startswith("propel:")]
    assert len(lines) == 1 and key in lines[0], err[-2000:]
    assert "Traceback" not in err


def test_missing_config_file(tmp_path, capsys):
    code, _, err = _main(capsys, "fit", "-c", str(tmp_path / "missing.yaml"))
    assert code == 2 and "does not exist" in err


@pytest.fixture()
def inputs_in_place(tmp_path, monkeypatch):
    """A folder holding what the shipped GRPO and probe configs read (earlier jobs' outputs are checked before the
    values a class refuses at init); ``configs/...`` finds the shipped files from it."""
    monkeypatch.chdir(tmp_path)
    for folder in ("runs/probe/artifact", "pools/math_expression"):
        (tmp_path / folder).mkdir(parents=True)
    return tmp_path


def test_probe_route_help_and_one_line_errors(capsys, inputs_in_place):
    code, out, _ = _main(capsys, "probe", "--help")
    assert code == 0 and "--sweep.split" in out and "--rvp.gate.mode" in out
    code, _, err = _main(capsys, "probe", "-c", "configs/probe/sweep.yaml", "--sweep.splitz", "x")
    lines = [line for line in err.splitlines() if line.startswith("propel:")]
    assert code == 2 and len(lines) == 1 and "splitz" in lines[0], err[-2000:]
    code, _, err = _main(capsys, "probe", "-c", "configs/probe/sweep.yaml", "--poolings", "[nope]")
    assert code == 2 and "nope" in err and "Traceback" not in err


GRPO = ("-c", "configs/grpo/base.yaml", "-c", "configs/math/grpo.yaml")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ("--model.init_args.lrr", "1"),
            "model.init_args.lrr: option 'lrr' is not accepted by propel.lit_modules.grpo.GRPOModule. "
            "Did you mean: 'model.init_args.lr'?",
        ),
        (
            ("--data.init_args.contexts_per_stepp", "3"),
            "data.init_args.contexts_per_stepp: option 'contexts_per_stepp' is not accepted by "
            "propel.datamodules.contexts.ContextDataModule. Did you mean: 'data.init_args.contexts_per_step'?",
        ),
        (("--trainer.max_stepz", "3"), "trainer.max_stepz: option 'trainer.max_stepz' is not accepted. Did you mean"),
        (("--model.init_args.group_size", "abc"), "model.init_args.group_size: expected int"),
    ],
)
def test_innermost_cause_in_one_line_with_a_close_match(capsys, args, expected):
    """jsonargparse's nested "Does not validate against any of the Union subtypes" tree ends in one line: the
    innermost cause, the full key, and the closest accepted key."""
    code, _, err = _main(capsys, "fit", *GRPO, *args, "--print_config")
    lines = [line for line in err.splitlines() if line.startswith("propel:")]
    assert code == 2 and len(lines) == 1 and expected in lines[0], err[-2000:]
    assert "Union subtypes" not in err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ("--model.init_args.group_size", "1"),
            "model.init_args.group_size: must be >= 2 (advantages are relative within a group), got 1",
        ),
        (("--model.init_args.max_new_tokens", "0"), "model.init_args.max_new_tokens: must be >= 1, got 0"),
        (("--data.init_args.contexts_per_step", "0"), "data.init_args.contexts_per_step: must be >= 1"),
    ],
)
def test_a_value_a_class_refuses_at_init_is_one_line_and_exit_2(capsys, inputs_in_place, args, expected):
    """Values that parse but that the class refuses in ``__init__`` (``group_size: 1``) used to end in a 54-line
    jsonargparse traceback with exit 1."""
    code, _, err = _main(capsys, "fit", *GRPO, *args, "--trainer.logger", "false", "--trainer.max_steps", "1")
    lines = [line for line in err.splitlines() if line.startswith("propel:")]
    assert code == 2 and len(lines) == 1 and expected in lines[0], err[-2000:]
    assert "Union subtypes" not in err and "jsonargparse" not in err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--model.init_args.lr=-1e-3",), "model.init_args.lr: must be > 0 (AdamW's learning rate), got -0.001"),
        (
            ("--trainer.max_steps=-5",),
            "trainer.max_steps: must be a non-negative integer or -1 (infinite steps). You passed in -5.",
        ),
        (
            ("--model.init_args.optimizer", "{class_path: torch.optim.SGD, init_args: {lr: -1}}"),
            "model.init_args.optimizer: refuses its settings: Invalid learning rate: -1",
        ),
    ],
)
def test_a_value_out_of_range_is_refused_as_the_config_is_read_before_the_model_loads(
    capsys, tmp_path, monkeypatch, args, expected
):
    """``lr: -1e-3`` and ``trainer.max_steps: -5`` ended in tracebacks once the model had loaded (from AdamW in
    ``configure_optimizers``, from Lightning's loop). Here the model does not exist, so a check made after loading it
    would fail on that instead; and nothing is left behind: no run folder, no W&B save folder (the default logger)."""
    monkeypatch.chdir(tmp_path)
    common = ("-c", "grpo/base", "-c", "agent/grpo", f"--model.init_args.model={tmp_path / 'no-such-model'}")
    code, _, err = _main(capsys, "fit", *common, "--trainer.default_root_dir=run", *args)
    lines = [line for line in err.splitlines() if line.startswith("propel:")]
    assert code == 2 and len(lines) == 1 and expected in lines[0], err[-2000:]
    # no traceback of the failure (in-process, Lightning's log handler may still write to an earlier test's closed
    # capture stream: logging's own "--- Logging error ---" report, not the run's)
    assert err.count("Traceback") == err.count("--- Logging error ---"), err[-3000:]
    assert not any(tmp_path.iterdir()), list(tmp_path.iterdir())


def test_bad_key_in_a_yaml_file_names_the_full_key(tmp_path, capsys):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("model:\n  init_args:\n    bogus_key: 1\n")
    code, _, err = _main(capsys, "fit", *GRPO, "-c", str(cfg), "--print_config")
    assert code == 2 and "model.init_args.bogus_key: option 'bogus_key' is not accepted by" in err, err[-2000:]


def test_nested_domain_key_gets_a_suggestion(capsys):
    args = ("--model.init_args.domain.init_args.lenient_expresion", "true", "--print_config")
    code, _, err = _main(capsys, "predict", "-c", "configs/math/label.yaml", *args)
    assert code == 2 and "Did you mean: 'model.init_args.domain.init_args.lenient_expression'?" in err, err[-2000:]


def test_a_missing_required_argument_is_named(capsys):
    code, _, err = _main(capsys, "fit", "-c", "configs/probe/fit.yaml")
    assert code == 2 and re.search(r"data\.init_args\.(features|labels)_path: required, but not given", err), err


def test_quiet_dependencies_drops_adverts_and_dependency_deprecations_only():
    """Lightning's "Tip" adverts and hardware banners and dependencies' deprecation warnings are silenced; propel's
    own messages (the ``wandb sync`` hint) and warnings stay."""
    import logging
    import warnings

    from propel.cli.quiet import quiet_dependencies

    with warnings.catch_warnings(record=True) as seen:
        quiet_dependencies()
        warnings.warn_explicit("old api", DeprecationWarning, "x.py", 1, module="torch.utils")
        warnings.warn_explicit("propel's own", FutureWarning, "y.py", 1, module="propel.rewards")
        warnings.warn(
            "Using ModelCheckpoint with manual optimization and every_n_train_steps, but ...", UserWarning, stacklevel=2
        )
        warnings.warn("a user-facing warning", UserWarning, stacklevel=2)
    assert [str(w.message) for w in seen] == ["propel's own", "a user-facing warning"]
    logger = logging.getLogger("lightning.pytorch.utilities.rank_zero")
    record = lambda text: logging.LogRecord(logger.name, logging.INFO, "", 0, text, None, None)  # noqa: E731
    assert not logger.filter(record("💡 Tip: For seamless cloud uploads, try installing litmodels"))
    assert not logger.filter(record("GPU available: False, used: False"))
    assert logger.filter(record("W&B ran offline; to upload this run: wandb sync runs/wandb/offline-run-1"))
    quiet_dependencies()
    assert sum(type(f).__name__ == "_NoAdverts" for f in logger.filters) == 1  # idempotent


def test_building_propel_cli_directly_silences_adverts():
    """Benchmarks and notebooks build ``PropelCLI`` without the ``propel`` command: the adverts stay silent."""
    code = (
        "import logging\nfrom propel.cli.lightning_cli import PropelCLI\n"
        "PropelCLI(args=['-c', 'configs/grpo/base.yaml', '-c', 'configs/math/grpo.yaml'], run=False)\n"
        "logger = logging.getLogger('lightning.pytorch.utilities.rank_zero')\n"
        "rec = logging.LogRecord(logger.name, logging.INFO, '', 0, '💡 Tip: try litmodels', None, None)\n"
        "assert not logger.filter(rec)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Tip" not in out.stdout + out.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ("fit", "-c", "grpo/base", "-c", "math/grpo"),
            "runs/probe/artifact does not exist (model.init_args.rewards[0].init_args.artifact: the probe artifact): "
            "run `propel predict -c math/label`, then `propel probe -c probe/sweep` first",
        ),
        (
            ("probe", "-c", "probe/sweep"),
            "pools/math_expression does not exist (pool: the labeled pool): run `propel predict -c math/label` first",
        ),
        (
            ("fit", "-c", "grpo/base", "-c", "swe/grpo"),
            "runs/swe/probe/artifact does not exist (model.init_args.rewards[0].init_args.artifact: the probe "
            "artifact): run `propel predict -c swe/label`, then `propel probe -c swe/probe` first",
        ),
        (
            ("test", "-c", "math/eval", "--model.init_args.adapter", "runs/grpo/adapters/step-200"),
            "runs/grpo/adapters/step-200 does not exist (model.init_args.adapter: the trained adapter): train one "
            "first",
        ),
    ],
)
def test_a_job_before_its_inputs_exist_says_what_to_run_first(tmp_path, args, expected):
    """From an empty folder, a job that reads an earlier job's output ends in one line naming the commands that
    write it, before anything heavy loads (it used to be a 20-frame traceback from the reward's setup)."""
    out = run_light(list(args), tmp_path)
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"propel: error: {expected}"), out.stderr
    assert not any(tmp_path.iterdir())  # nothing written


def test_a_run_that_fails_while_it_is_built_writes_no_config(tmp_path):
    """The resolved config.yaml is written into the run's own folder once the run starts: a run that fails while it
    is built (here: loading a model that is not there) leaves neither that file nor a shared runs/config.yaml."""
    args = [
        "fit",
        "-c",
        "grpo/base",
        "-c",
        "agent/grpo",
        f"--trainer.default_root_dir={tmp_path / 'run'}",
        f"--model.init_args.model={tmp_path / 'no-such-model'}",
        "--trainer.logger=false",
    ]
    out = _run(*args, cwd=tmp_path)
    assert out.returncode != 0
    assert not (tmp_path / "run" / "config.yaml").exists() and not (tmp_path / "runs" / "config.yaml").exists()
