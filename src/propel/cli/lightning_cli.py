"""propel's LightningCLI (fit / validate / test / predict over YAML in omegaconf+ mode), and running it in-process.

The pipeline runs its Lightning stages through it: the very parser a user runs by hand
(``propel <subcommand> -c config.yaml``). In ``omegaconf+`` mode ``${...}`` is resolved once every file and flag is
merged, so a base file's ``${trainer.default_root_dir}/checkpoints`` follows the root an overlay or a flag sets.
``fit`` resumes from the run folder's ``last.ckpt`` by default and compares the settings with the checkpoint's
(``propel.cli.resume``); every checkpoint carries the run's config for that comparison (``SaveConfig``).
"""

from __future__ import annotations

import contextvars
import gc
import io
import re
import shlex
import signal
import sys
import warnings
from contextlib import redirect_stdout
from pathlib import Path

import yaml
from jsonargparse import ArgumentError, set_parsing_settings
from lightning.pytorch import LightningDataModule, LightningModule
from lightning.pytorch.cli import LightningCLI, SaveConfigCallback
from lightning.pytorch.utilities import rank_zero_only, rank_zero_warn
from lightning.pytorch.utilities.exceptions import MisconfigurationException, SIGTERMException

from propel.cli import resume, stops
from propel.cli.config_files import config_values
from propel.cli.errors import explain, init_error
from propel.cli.quiet import quiet_dependencies
from propel.cli.resume import flat_keys
from propel.errors import ConfigError
from propel.host_memory import release_freed_memory

DEFAULT_LOGGER = {
    "class_path": "propel.loggers.PropelWandbLogger",
    "init_args": {"project": "propel", "save_dir": "runs"},
}
DEFAULT_PROGRESS = {"class_path": "propel.callbacks.progress.StepProgress"}
"""The progress display every run gets unless its config names a progress bar or turns it off; named by class path
as configs name classes (the command sits below the callbacks it builds)."""


class SaveConfig(SaveConfigCallback):
    """LightningCLI's ``config.yaml`` writer, writing into the run's own folder (``trainer.default_root_dir``) once
    the run has started, and putting the run's config into every checkpoint (``resume.CONFIG_KEY``): what a resume
    compares its settings with, and the record of the values in use.

    Lightning writes it into the logger's ``save_dir`` as the trainer is set up: every run from one folder replaced
    one shared ``runs/config.yaml``, a run that failed while it was built included. Here a run without a
    ``default_root_dir`` of its own writes no file (its checkpoints still carry the config), and a run folder whose
    ``config.yaml`` is the run's own ``-c`` file (the pipeline's stages) keeps it as written."""

    def __init__(self, *args, given: list[str] = (), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.given = {Path(p).resolve() for p in given}
        """The run's ``-c`` files: never replaced by the resolved config."""

    def setup(self, trainer, pl_module, stage: str) -> None:
        """Nothing yet: the file is written when the run starts (``_save``)."""

    def _save(self, trainer) -> None:
        if self.already_saved or not trainer.is_global_zero:
            return
        self.already_saved = True
        root = self.config.get("trainer.default_root_dir")
        if root is None:
            return
        path = Path(root) / self.config_filename
        if path.resolve() in self.given:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        self.parser.save(self.config, str(path), skip_none=False, overwrite=True, multifile=self.multifile)

    def on_train_start(self, trainer, pl_module) -> None:
        self._save(trainer)

    def on_validation_start(self, trainer, pl_module) -> None:
        self._save(trainer)

    def on_test_start(self, trainer, pl_module) -> None:
        self._save(trainer)

    def on_predict_start(self, trainer, pl_module) -> None:
        self._save(trainer)

    def on_save_checkpoint(self, trainer, pl_module, checkpoint: dict) -> None:
        if not hasattr(self, "_text"):
            self._text = self.parser.dump(self.config, skip_none=False)
        checkpoint[resume.CONFIG_KEY] = self._text


@rank_zero_only
def say(line: str) -> None:
    """One line for the user on stderr (rank 0 only: every rank of a multi-process run parses the same config)."""
    print(line, file=sys.stderr, flush=True)


class PropelCLI(LightningCLI):
    """LightningCLI with propel's defaults: class paths for model and data, W&B logger, omegaconf interpolation;
    ``fit`` resumes by default (``propel.cli.resume``)."""

    finished = False
    """``fit`` found its checkpoint already at ``max_steps``: nothing is built or run."""
    _plan_lines: list[str] = []
    """What ``fit`` says about its checkpoint as it starts (``resume.Plan.lines``)."""

    def __init__(self, args=None, run: bool = True):
        quiet_dependencies()
        argv = sys.argv[1:] if args is None else list(args) if isinstance(args, list | tuple) else []
        # Configs write ${trainer.x} from the config's root; under a subcommand the root is ``fit.``: jsonargparse
        # rewrites such absolute interpolations as relative ones when it loads a file.
        set_parsing_settings(omegaconf_absolute_to_relative_paths=True)
        super().__init__(
            LightningModule,
            LightningDataModule,
            subclass_mode_model=True,
            subclass_mode_data=True,
            parser_kwargs={"parser_mode": "omegaconf+", "exit_on_error": False},
            trainer_defaults={"logger": DEFAULT_LOGGER},
            save_config_callback=SaveConfig,
            save_config_kwargs={"overwrite": True, "given": [value for _, value in config_values(argv)]},
            auto_configure_optimizers=False,
            args=args,
            run=run,
        )

    def instantiate_trainer(self, **kwargs):
        """The trainer, with propel's progress display (``propel.callbacks.progress.StepProgress``: steps of
        ``max_steps`` and the phase inside a step; plain lines without a terminal) unless the config names a
        progress bar of its own or turns it off."""
        from lightning.pytorch.callbacks.progress import ProgressBar
        from lightning.pytorch.cli import instantiate_class

        trainer = {**self._get(self.config_init, "trainer", default={}), **kwargs}
        given = trainer.get("callbacks") or []
        given = list(given) if isinstance(given, list | tuple) else [given]
        if trainer.get("enable_progress_bar") is not False and not any(isinstance(c, ProgressBar) for c in given):
            kwargs["callbacks"] = [*given, instantiate_class((), DEFAULT_PROGRESS)]
        try:
            return super().instantiate_trainer(**kwargs)
        except (MisconfigurationException, ValueError, TypeError) as err:
            raise ConfigError(trainer_error(str(err))) from None

    def parse_arguments(self, parser, args) -> None:
        """Parse as LightningCLI does; a bad key or value raises a one-line ``ConfigError`` with jsonargparse's
        innermost cause, the full key and the closest accepted key."""
        try:
            super().parse_arguments(parser, args)
        except ArgumentError as err:
            raise ConfigError(explain(str(err), lambda: self._known_keys(args))) from None

    def instantiate_classes(self) -> None:
        """Build the classes as LightningCLI does; a value a class refuses in ``__init__`` (``group_size: 1``)
        raises a one-line ``ConfigError`` naming the key instead of jsonargparse's nested traceback."""
        if self.finished:
            return
        try:
            super().instantiate_classes()
        except (ValueError, TypeError) as err:
            raise ConfigError(init_error(str(err))) from None

    def _known_keys(self, args) -> list[str]:
        """The keys of the subcommand being parsed (``trainer.max_steps``, ``model``, ...), for suggestions."""
        argv = sys.argv[1:] if args is None else list(args) if isinstance(args, (list, tuple)) else []
        parsers = getattr(self, "_subcommand_parsers", {})
        parser = next((parsers[a] for a in argv if a in parsers), self.parser)
        try:
            return list(parser.get_defaults().keys())
        except Exception:  # noqa: BLE001 (suggestions only)
            return []

    def _run_subcommand(self, subcommand: str) -> None:
        for line in self._plan_lines:  # once the config has built: a bad config still ends with its one line
            say(line)
        if not self.finished:
            super()._run_subcommand(subcommand)

    def _parse_ckpt_path(self) -> None:
        """``fit``: which checkpoint to continue from and what the resume changes (``propel.cli.resume``), said once.
        The other subcommands evaluate a checkpoint as it was trained: Lightning puts its saved hyperparameters over
        the config, and every value it replaces is named (a changed ``--model.init_args.lr`` would be ignored
        without a word, open upstream)."""
        sub = self.config.get("subcommand")
        if sub == "fit":
            config = self.config[sub]
            plain = yaml.safe_load(self._parser(sub).dump(config, skip_none=False))
            decision = resume.plan(plain, config.get("ckpt_path"))
            config.ckpt_path = decision.ckpt_path
            self.finished, self._plan_lines = decision.finished, decision.lines
            return
        before = flat_keys(self.config[sub].get("model")) if sub else {}
        super()._parse_ckpt_path()
        if not sub:
            return
        after = flat_keys(self.config[sub].get("model"))
        changed = [
            f"model.{k}: {before[k]!r} -> {after[k]!r}" for k in sorted(before) if k in after and before[k] != after[k]
        ]
        if changed:
            rank_zero_warn(
                f"resuming from {self.config[sub].get('ckpt_path')}: the checkpoint's hyperparameters replace the "
                f"config's ({'; '.join(changed)}). A resumed run continues as it was; start a new run to change them."
            )


def trainer_error(message: str) -> str:
    """One line for a value Lightning's ``Trainer`` refuses as it is built (``max_steps: -5``): its own message under
    the key it names (`` `max_steps` must be ...`` -> ``trainer.max_steps: must be ...``)."""
    import inspect

    from lightning.pytorch import Trainer

    text = " ".join(message.split())
    names = set(inspect.signature(Trainer.__init__).parameters)
    for match in re.finditer(r"`(?:Trainer\()?(\w+)", text):
        if match.group(1) in names:
            rest = text.replace(f"`{match.group(1)}` ", "", 1) if text.startswith(f"`{match.group(1)}`") else text
            return f"trainer.{match.group(1)}: {rest.replace('`', '')}"
    return f"trainer: {text.replace('`', '')}"


def _cli(args: list[str]) -> None:
    with warnings.catch_warnings():  # the pipeline's own argv is not this stage's: that is intended here
        warnings.filterwarnings("ignore", message="LightningCLI's args parameter is intended")
        PropelCLI(args=args)


def run_lightning(subcommand: str, config: Path, extra_args: list[str] | None = None) -> None:
    """``propel <subcommand> -c config [extra_args]`` in this process, leaving nothing of the run alive for the next.

    The pipeline runs its stages one after another in one process, and each stage's model must be gone before the
    next loads its own. Two things outlived a run: jsonargparse leaves its parser in a context variable
    (``subclass_arg_parser``; parser -> CLI -> trainer -> model), and W&B's service connection keeps a copy of the
    context it started in. So the run gets its own copy of the context, W&B's service is shut down after it (the
    next run starts its own), and the freed memory is collected and handed back: after the demo's warm start, 1.3
    GB stayed resident before, 0.7 GB after (the bundled model's weights were still held).
    """
    stopped = False
    try:
        contextvars.copy_context().run(_cli, [subcommand, "-c", str(config), *(extra_args or [])])
    except SIGTERMException:  # Lightning's own handler stopped it (a script's fit; ``propel`` raises ``Stopped``)
        stopped = True
    finally:
        if "wandb" in sys.modules:
            try:
                sys.modules["wandb"].teardown()
            except Exception as error:  # the run itself is over: a service that will not stop must not fail it
                rank_zero_warn(f"W&B's service did not shut down after the run ({error}); its memory may stay held")
        gc.collect()  # the trainer, model and callbacks reference each other: only a collection frees them
        release_freed_memory()
    if stopped:  # the script's last line says what is on disk, and it exits as a stopped process, not with 0
        print(stops.summary(signal.SIGTERM, shlex.join([Path(sys.executable).name, *sys.argv])), file=sys.stderr)
        raise SystemExit(stops.exit_code(signal.SIGTERM))


def resolve_lightning(subcommand: str, config: dict) -> dict:
    """The complete config ``propel <subcommand>`` would run ``config`` with (every default filled in), as its
    ``--print_config`` prints it. A bad key or value raises the CLI's one-line ``ConfigError``."""
    return resolve_lightning_args(subcommand, ["-c", yaml.safe_dump(config, sort_keys=False)])


class _Build(PropelCLI):
    """Parses a config with the command's own parser and builds its model and datamodule, nothing else: no seed, no
    checkpoint, no trainer, no run."""

    complete: dict = {}
    """The parsed config with every default filled in, as ``--print_config`` prints it."""

    def parse_arguments(self, parser, args) -> None:
        """Parse as the command does, without its closing pass over the parsed values (building the model and
        datamodule checks them; an unknown key or a value of the wrong type fails as the values are read)."""
        try:
            self.config = parser.parse_args(args, _skip_validation=True)
        except ArgumentError as err:
            raise ConfigError(explain(str(err), lambda: self._known_keys(args))) from None

    def _parse_ckpt_path(self) -> None:
        """A config being checked has no checkpoint to read."""

    def _set_seed(self) -> None:
        """Checking a config seeds nothing."""

    def instantiate_classes(self) -> None:
        from jsonargparse import Namespace

        sub = self.config["subcommand"]
        parser, config = self._parser(sub), self.config[sub]
        self.complete = yaml.safe_load(parser.dump(config, skip_none=False, skip_validation=True))  # parsed: valid
        try:
            parser.instantiate_classes(Namespace(model=config.get("model"), data=config.get("data")))
        except (ValueError, TypeError) as err:
            raise ConfigError(init_error(str(err))) from None

    def _run_subcommand(self, subcommand: str) -> None:
        """Nothing runs."""


def build_lightning(subcommand: str, config: dict) -> dict:
    """``resolve_lightning`` and the config's model and datamodule built (no weights load: that happens in
    ``configure_model`` or as the run starts), from one parse: a bad key, a bad value or a value a class refuses in
    ``__init__`` raises the CLI's one-line ``ConfigError``. Returns the complete config."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="LightningCLI's args parameter is intended")
        cli = _Build(args=[subcommand, "-c", yaml.safe_dump(config, sort_keys=False)])
    return cli.complete


def resolve_lightning_args(subcommand: str, args: list[str]) -> dict:
    """``resolve_lightning`` for command-line arguments (``-c`` files and flags, composed as the run composes them)."""
    out = io.StringIO()
    with redirect_stdout(out):
        try:
            _cli([subcommand, *args, "--print_config"])
        except SystemExit as done:
            if done.code not in (0, None):
                raise
    return yaml.safe_load(out.getvalue())
