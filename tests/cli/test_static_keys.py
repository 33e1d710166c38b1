"""Misspelled keys refused from the classes' source before any heavy import, agreeing with jsonargparse."""

from pathlib import Path

import pytest
import yaml

from propel.cli.errors import class_keys
from propel.cli.static_keys import (
    TRAINER,
    accepted_keys,
    check_keys,
    class_nodes,
    merged_config,
    missing_class,
    nested_dataclass,
    resolve_class,
)
from propel.errors import ConfigError
from propel.testing.plain_configs import read_config_files
from tests.cli.light_run import run_light

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "configs/grpo/base.yaml"


def _shipped_classes() -> set[str]:
    found = set()
    for path in (ROOT / "configs").rglob("*.yaml"):
        data = yaml.safe_load(path.read_text()) or {}
        for section in ("model", "data"):
            found |= {cls for _, cls, _ in class_nodes(data.get(section), section)}
        for name, value in (data.get("trainer") or {}).items():  # callbacks, callbacks+, logger, strategy
            found |= {cls for _, cls, _ in class_nodes(value, f"trainer.{name}")}
    return found


def test_source_key_sets_equal_jsonargparse_for_every_shipped_class():
    """The reference is jsonargparse's own signature reading (which imports the class): for every class the shipped
    configs name under model/data that the source settles, the two key sets are equal."""
    settled = 0
    for cls in sorted(_shipped_classes()):
        keys = accepted_keys(cls)
        if keys is None:
            continue
        reference = {k.split(".", 1)[0] for k in class_keys(cls) if not k.startswith("__")}
        assert keys == reference, cls
        settled += 1
    assert settled >= 20  # GRPO, distillation, labeling, evaluation, the datamodules, domains, rewards, callbacks


def test_unknown_keys_are_refused_with_the_full_key_and_a_close_match():
    config = merged_config(
        [
            read_config_files([ROOT / "configs/grpo/base.yaml"]),
            read_config_files([BASE, ROOT / "configs/math/grpo.yaml"]),
        ],
        [("model.init_args.lrr", "1")],
    )
    with pytest.raises(
        ConfigError,
        match=r"^model.init_args.lrr: option 'lrr' is not accepted by propel.lit_modules.grpo.GRPOModule. "
        r"Did you mean: 'model.init_args.lr'\?$",
    ):
        check_keys(config)
    nested = {
        "data": {
            "class_path": "propel.datamodules.contexts.ContextDataModule",
            "init_args": {
                "domain": {
                    "class_path": "propel.domains.MathExpressionDomain",
                    "init_args": {"lenient_expresion": True},
                }
            },
        }
    }
    with pytest.raises(
        ConfigError,
        match=r"data.init_args.domain.init_args.lenient_expresion: .*"
        r"Did you mean: 'data.init_args.domain.init_args.lenient_expression'",
    ):
        check_keys(nested)
    check_keys(merged_config([read_config_files([BASE, ROOT / "configs/math/grpo.yaml"])], []))  # shipped: fine


def test_trainer_keys_equal_jsonargparse_and_a_misspelling_is_refused():
    from jsonargparse import ArgumentParser
    from lightning.pytorch import Trainer

    parser = ArgumentParser(exit_on_error=False)
    parser.add_class_arguments(Trainer, fail_untyped=False)
    assert accepted_keys(TRAINER) == {k.split(".", 1)[0] for k in parser.get_defaults().keys()}  # noqa: SIM118 (a Namespace)
    with pytest.raises(ConfigError, match=r"^trainer.max_stepz: .*Did you mean: 'trainer.max_steps'\?$"):
        check_keys(merged_config([{"trainer": {"max_steps": 2}}], [("trainer.max_stepz", "3")]))


def test_a_later_class_path_replaces_the_section_and_unknown_classes_pass():
    first = {"model": {"class_path": "propel.lit_modules.grpo.GRPOModule", "init_args": {"group_size": 4}}}
    second = {"model": {"class_path": "propel.lit_modules.labeling.LabelingModule", "init_args": {"seed": 1}}}
    assert merged_config([first, second], [])["model"]["init_args"] == {"seed": 1}
    check_keys({"model": {"class_path": "somewhere.else.Module", "init_args": {"anything": 1}}})  # not settled


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["fit", "-c", "configs/grpo/base.yaml", "-c", "configs/math/grpo.yaml", "--model.init_args.lrr=1"],
            "model.init_args.lrr: option 'lrr' is not accepted by propel.lit_modules.grpo.GRPOModule. "
            "Did you mean: 'model.init_args.lr'?",
        ),
        (
            ["fit", "-c", "grpo/base", "-c", "math/grpo", "--model.init_args.loss.betaa", "0.1"],
            "model.init_args.loss.init_args.betaa: option 'betaa' is not accepted by propel.losses.LossSpec. "
            "Did you mean: 'model.init_args.loss.init_args.beta'?",
        ),
        (
            ["predict", "-c", "math/label", "--model.init_args.domain.init_args.lenient_expresion", "true"],
            "model.init_args.domain.init_args.lenient_expresion: option 'lenient_expresion' is not accepted by "
            "propel.domains.MathExpressionDomain. Did you mean: 'model.init_args.domain.init_args.lenient_expression'?",
        ),
        (
            ["pipeline", "-c", "configs/demo.yaml", "evaluate.data.init_args.n_taks=1"],
            "pipeline config key 'evaluate.data.init_args.n_taks': option 'n_taks' is not accepted by "
            "propel.datamodules.task_pool.TaskPoolDataModule. Did you mean: 'evaluate.data.init_args.n_tasks'?",
        ),
        (
            ["pipeline", "-c", "configs/coevolution.yaml", "constrained.model.init_args.group_sise=4"],
            "pipeline config key 'constrained.model.init_args.group_sise': option 'group_sise' is not accepted by "
            "propel.lit_modules.grpo.GRPOModule. Did you mean: 'constrained.model.init_args.group_size'?",
        ),
        (  # renamed keys (propel.cli.errors.RENAMED) are answered with the new name, however unlike it is
            ["fit", "-c", "grpo/base", "-c", "agent/distill", "--model.init_args.episodes_per_context", "4"],
            "model.init_args.episodes_per_context: option 'episodes_per_context' is not accepted by "
            "propel.lit_modules.distill.TurnKLDistillModule. Did you mean: 'model.init_args.group_size'?",
        ),
        (
            ["fit", "-c", "grpo/base", "-c", "agent/distill", "--model.init_args.max_steps_without_targets", "4"],
            "model.init_args.max_steps_without_targets: option 'max_steps_without_targets' is not accepted by "
            "propel.lit_modules.distill.TurnKLDistillModule. Did you mean: 'model.init_args.max_steps_without_update'?",
        ),
    ],
)
def test_a_bad_key_fails_fast_without_heavy_imports(argv, expected):
    """The error is printed before torch, Lightning, transformers or vLLM are imported."""
    assert expected in run_light(argv, ROOT).stderr


def test_a_typo_in_a_nested_mapping_or_a_fragment_fails_fast(tmp_path):
    """A key inside a dataclass argument given as a mapping (``loss: {betaa: ...}``) and one inside a fragment file
    the config names (``domain: domain.yaml``) are refused from the source too (they took the full parser, 14-27 s
    under load)."""
    (tmp_path / "domain.yaml").write_text("class_path: propel.domains.MathExpressionDomain\ninit_args:\n  seedd: 1\n")
    (tmp_path / "fragment.yaml").write_text("data:\n  init_args:\n    domain: domain.yaml\n")
    (tmp_path / "loss.yaml").write_text("model:\n  init_args:\n    loss:\n      loss_type: dapo\n      betaa: 0.1\n")
    expected = {
        "fragment.yaml": "data.init_args.domain.init_args.seedd: option 'seedd' is not accepted by "
        "propel.domains.MathExpressionDomain",
        "loss.yaml": "model.init_args.loss.init_args.betaa: option 'betaa' is not accepted by propel.losses.LossSpec",
    }
    for name, message in expected.items():
        argv = ["fit", "-c", "grpo/base", "-c", "math/grpo", "-c", str(tmp_path / name)]
        err = run_light(argv, ROOT).stderr
        assert message in err, err[-2000:]


def test_nested_dataclass_arguments_are_read_from_the_annotation():
    assert nested_dataclass("propel.lit_modules.grpo.GRPOModule", "loss") == "propel.losses.LossSpec"
    assert nested_dataclass("propel.lit_modules.grpo.GRPOModule", "lora") == "propel.models.LoRASpec"  # a base's
    assert nested_dataclass("propel.lit_modules.grpo.GRPOModule", "rewards") is None  # a list of classes
    assert nested_dataclass("propel.lit_modules.grpo.GRPOModule", "lr") is None
    fine = merged_config(
        [read_config_files([BASE, ROOT / "configs/math/grpo.yaml"])],
        [("model.init_args.loss.beta", "0.1"), ("model.init_args.lora.r", "8"), ("model.init_args.rewards[0]", "x")],
    )
    assert fine["model"]["init_args"]["loss"] == {"beta": "0.1"} and "rewards[0]" not in fine["model"]["init_args"]
    check_keys(fine)


def test_every_typo_of_a_file_is_reported_at_once_with_a_fix_each_nested_and_in_lists_too(tmp_path):
    """A file's second typo showed only once the first was fixed, and a typo under a callback (a list, appended with
    ``callbacks+``), under a class given by its short name or in a list of rewards took the full parser (12-15 s)
    and sometimes got no suggestion: all of them now come from the source, together, before anything heavy loads,
    each with the closest accepted key or, where none is close, the keys accepted."""
    (tmp_path / "typos.yaml").write_text(
        yaml.safe_dump(
            {
                "trainer": {
                    "max_stepz": 3,
                    "callbacks+": [
                        {"class_path": "propel.callbacks.collapse.CollapseDetector", "init_args": {"windoww": 3}},
                        {"class_path": "propel.callbacks.colapse.CollapseDetector"},
                    ],
                },
                "model": {
                    "init_args": {
                        "lrr": 1e-5,
                        "rewards": [
                            "propel.rewards.EnviromentReward",
                            {"class_path": "propel.rewards.OverlongPenalty", "init_args": {"max_lenght": 384}},
                        ],
                    }
                },
                "data": {"init_args": {"env": {"class_path": "ToolEnv", "init_args": {"max_turnz": 2}}}},
            }
        )
    )
    expected = [
        "trainer.max_stepz: option 'trainer.max_stepz' is not accepted. Did you mean: 'trainer.max_steps'?",
        "trainer.callbacks[8].class_path: no module propel.callbacks.colapse. "
        "Did you mean: 'propel.callbacks.collapse.CollapseDetector'?",
        "model.init_args.rewards[0]: propel.rewards has no 'EnviromentReward'. "
        "Did you mean: 'propel.rewards.EnvironmentReward'?",
        "trainer.callbacks[7].init_args.windoww: option 'windoww' is not accepted by "
        "propel.callbacks.collapse.CollapseDetector. Accepted: ",
        "model.init_args.lrr: option 'lrr' is not accepted by propel.lit_modules.grpo.GRPOModule. "
        "Did you mean: 'model.init_args.lr'?",
        "model.init_args.rewards[1].init_args.max_lenght: option 'max_lenght' is not accepted by "
        "propel.rewards.OverlongPenalty. Did you mean: 'model.init_args.rewards[1].init_args.max_length'?",
        "data.init_args.env.init_args.max_turnz: option 'max_turnz' is not accepted by propel.envs.ToolEnv. "
        "Did you mean: 'data.init_args.env.init_args.max_turns'?",
    ]
    argv = ["fit", "-c", "grpo/base", "-c", "agent/grpo", "-c", str(tmp_path / "typos.yaml")]
    out = run_light(argv, ROOT)
    lines = out.stderr.splitlines()
    assert lines[0] == f"propel: {len(expected)} config errors (see `propel fit --help`):", out.stderr
    assert len(lines) == len(expected) + 1, out.stderr
    for line, want in zip(lines[1:], expected, strict=True):
        assert line.startswith(f"  {want}"), (line, want)
    assert "every_n_steps" in lines[4]  # CollapseDetector's keys, since none is close to 'windoww'
    assert out.seconds < 5, out.seconds  # from the source: a fraction of a second on an idle machine


def test_short_class_names_resolve_as_jsonargparse_resolves_them_and_a_near_miss_is_named():
    assert resolve_class("ToolEnv") == "propel.envs.ToolEnv"
    assert resolve_class("ModelCheckpoint") == "lightning.pytorch.callbacks.ModelCheckpoint"
    assert resolve_class("CSVLogger") == "lightning.pytorch.loggers.CSVLogger"  # Fabric has one too: the trainer's
    assert resolve_class("AdamW") == "AdamW"  # torch's: not in the readable source, left to jsonargparse
    assert missing_class("AdamW") is None and missing_class("propel.rewards.EnvironmentReward") is None
    assert missing_class("propel.tasks.ShellTasks") is None  # a re-export
    assert missing_class("somewhere.else.Thing") is None  # outside the readable packages: not settled
    assert missing_class("CollapseDetektor") == (
        "no class named 'CollapseDetektor' in propel or Lightning. "
        "Did you mean: 'propel.callbacks.collapse.CollapseDetector'?"
    )


def test_model_help_takes_a_short_class_name(monkeypatch):
    """``--model.help GRPOModule`` failed ("Expected a dot import path string") where the full path worked:
    jsonargparse resolves a short name only among subclasses already imported. A misspelled one is named at once."""
    from propel.cli.main import resolve_class_names

    argv = ["--model.help", "GRPOModule", "--data.help=ContextDataModule", "--model", "GRPOModule"]
    assert resolve_class_names(argv) == [
        "--model.help",
        "propel.lit_modules.grpo.GRPOModule",
        "--data.help=propel.datamodules.contexts.ContextDataModule",
        "--model",
        "propel.lit_modules.grpo.GRPOModule",
    ]
    with pytest.raises(ConfigError, match=r"^model.help: no class named 'GRPOModul' .*'propel.lit_modules.grpo"):
        resolve_class_names(["--model.help", "GRPOModul"])
