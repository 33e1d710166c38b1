"""Misspelled keys refused from the classes' source before any heavy import, agreeing with jsonargparse."""

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from propel.cli.config_files import read_config_files
from propel.cli.errors import class_keys
from propel.cli.static_keys import TRAINER, _class_nodes, accepted_keys, check_keys, merged_config
from propel.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "configs/grpo/base.yaml"


def _shipped_classes() -> set[str]:
    found = set()
    for path in (ROOT / "configs").rglob("*.yaml"):
        data = yaml.safe_load(path.read_text()) or {}
        for section in ("model", "data"):
            found |= {cls for _, cls, _ in _class_nodes(data.get(section), section)}
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
    assert settled >= 10  # GRPO, distillation, labeling, evaluation, the datamodules, the domains, the rewards


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
            ["pipeline", "-c", "configs/demo.yaml", "evaluate.data.init_args.n_taks=1"],
            "pipeline config key 'evaluate.data.init_args.n_taks': option 'n_taks' is not accepted by "
            "propel.datamodules.task_pool.TaskPoolDataModule. Did you mean: 'evaluate.data.init_args.n_tasks'?",
        ),
        (
            ["pipeline", "-c", "configs/coevolution.yaml", "constrained.model.init_args.group_sise=4"],
            "pipeline config key 'constrained.model.init_args.group_sise': option 'group_sise' is not accepted by "
            "propel.lit_modules.grpo.GRPOModule. Did you mean: 'constrained.model.init_args.group_size'?",
        ),
    ],
)
def test_a_bad_key_fails_fast_without_heavy_imports(argv, expected):
    """The error is printed before torch, Lightning, transformers or vLLM are imported."""
    code = (
        "import sys\nfrom propel.cli import main\n"
        f"try:\n    main({argv!r})\n"
        "except SystemExit as e:\n    assert e.code == 2, e.code\n"
        "heavy = [m for m in ('torch', 'lightning', 'transformers', 'vllm') if m in sys.modules]\n"
        "assert not heavy, heavy"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert expected in out.stderr
