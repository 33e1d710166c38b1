"""The pool folder a labeling or evaluation run resumes from is the folder it writes, whatever the config file's
interpolations said before a command-line override moved the output."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from propel.callbacks.pool_writer import PoolWriter
from propel.datamodules.task_pool import TaskPoolDataModule
from propel.domains import MathExpressionDomain
from propel.errors import ConfigError


def _attach(dm, module, callbacks=()):
    dm.trainer = SimpleNamespace(lightning_module=module, callbacks=list(callbacks))
    return dm


def test_pool_dir_follows_the_written_folder_and_a_stale_one_is_refused(tmp_path):
    evaluation = SimpleNamespace(output_dir=tmp_path / "trained")
    dm = _attach(TaskPoolDataModule(MathExpressionDomain()), evaluation)
    assert dm._written_folder() == tmp_path / "trained"
    labeling = SimpleNamespace()  # a labeling module writes through its PoolWriter callback
    dm = _attach(TaskPoolDataModule(MathExpressionDomain()), labeling, [PoolWriter(str(tmp_path / "pool"))])
    assert dm._written_folder() == tmp_path / "pool"
    # the file's ${model.init_args.output_dir} was resolved before --model.init_args.output_dir moved the output
    stale = _attach(TaskPoolDataModule(MathExpressionDomain(), pool_dir=str(tmp_path / "base")), evaluation)
    with pytest.raises(ConfigError, match=r"pool_dir .*base.* is not the folder this run writes .*trained"):
        stale.setup("test")
