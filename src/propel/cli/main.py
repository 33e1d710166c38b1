"""The ``propel`` command: LightningCLI (fit / validate / test / predict) over YAML configs in omegaconf+ mode, plus
the commands other packages register under the ``propel.commands`` entry-point group: propel's own ``probe`` (the
probe job), ``pipeline`` (every PROPEL stage in order), ``serve-env`` (an OpenEnv environment behind OpenEnv's
server) and ``configs`` (the shipped configs copied out to edit), and any a user's package adds. The command sits on
a low floor (it knows how a YAML becomes objects, not what the objects are), so the jobs above it are found through
their entry points, never imported here by name.

This module imports nothing heavy: ``propel --help``, ``propel --version`` and the checks a config file can fail
without its classes (a missing file, broken YAML, a misspelled key, an earlier job's output that is not there yet)
answer in well under a second; torch and Lightning load only once a subcommand runs. Every ``-c`` value is a path
or the name of a shipped config (``-c grpo/base``: ``propel.paths.config_path``), so an installed wheel runs its
configs from any folder. Ctrl-C, a SIGTERM (``kill``, SLURM, container runtimes) or SLURM's early warning stop every
subcommand the same way (``propel.cli.stops``): through every ``finally`` and Lightning's graceful shutdown, where a
training run writes its ``last.ckpt`` (``propel.callbacks.last_checkpoint``); the last line says what was written
and what rerunning the same command does.
"""

from __future__ import annotations

import contextlib
import difflib
import shlex
import signal
import sys
import threading
from pathlib import Path

from propel import __version__
from propel.cli import stops
from propel.errors import ConfigError, PropelError

__all__ = ["main", "subcommands"]

LIGHTNING = {
    "fit": "train: GRPO (-c grpo/base -c math/grpo, after `probe`), agents: GRPO and turn-targeted distillation "
    "(-c grpo/base -c agent/grpo), a probe",
    "validate": "run a LightningModule's validation loop on a config",
    "test": "evaluate a task generator with real solver trials (-c math/eval)",
    "predict": "collect and label a task pool with solver trials (-c math/label)",
}
"""The LightningCLI subcommands, with their one-line help."""
ENTRY_POINTS = "propel.commands"
"""The entry-point group of the other subcommands (``name = "package.module:function"``, the function takes argv)."""
HELP = {
    "probe": "labeled pool (after `predict`) -> activations -> probe sweep -> probe artifact (-c probe/sweep)",
    "pipeline": "every PROPEL stage in order (label, probe, grpo, evaluate) and a report (-c demo)",
    "serve-env": "an OpenEnv environment behind OpenEnv's server on loopback: propel serve-env triage (or humaneval)",
    "configs": "copy the shipped configs into a folder to edit them: propel configs [DEST] (default ./configs)",
}
"""One-line help of propel's own registered commands (``--help`` must not import them to describe them)."""
CONFIG_FILES = ("probe", "pipeline")
"""Registered commands whose ``-c`` values name config files (resolved by name, and checked here for ``probe``)."""


def commands() -> dict:
    """The registered subcommands: ``{name: entry point}`` (``importlib.metadata``, nothing imported yet)."""
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=ENTRY_POINTS)}


def subcommands() -> dict[str, str]:
    """Every ``propel`` subcommand with its one-line help (the top-level ``--help`` lists exactly these)."""
    registered = {name: HELP.get(name, f"from {ep.value}") for name, ep in sorted(commands().items())}
    return {**LIGHTNING, **registered}


EXIT_SIGTERM = stops.exit_code(signal.SIGTERM)
"""Exit status after a SIGTERM (the shell's convention for a process ended by signal 15; 130 after Ctrl-C)."""
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals that stop every subcommand (SLURM's SIGUSR1 is taken during training: ``LastCheckpoint``)."""


def usage() -> str:
    """The top-level help: what propel is and every subcommand in one line each."""
    listed = subcommands()
    width = max(len(name) for name in listed)
    lines = [
        "usage: propel <subcommand> -c CONFIG.yaml [--key value ...]",
        "       propel --help | --version",
        "",
        "propel: PyTorch Lightning trainers for RL on language models (PROPEL probe-reward task generators, GRPO).",
        "",
        "subcommands:",
        *(f"  {name:<{width}}  {text}" for name, text in listed.items()),
        "",
        "`propel <subcommand> --help` lists a subcommand's options. A config is a path or a shipped config's name",
        "(`-c grpo/base -c math/grpo`); `propel configs` copies the shipped ones out to edit (see README.md).",
    ]
    return "\n".join(lines)


def resolve_config_names(argv: list[str]) -> list[str]:
    """``argv`` with each ``-c``/``--config`` value that names a shipped config (``grpo/base``,
    ``configs/grpo/base.yaml`` outside a checkout) given as its path; files and inline YAML as given."""
    from propel.cli.config_files import config_values
    from propel.paths import config_path

    out = list(argv)
    for i, value in config_values(argv):
        out[i] = ("--config=" if out[i].startswith("--config=") else "") + str(config_path(value))
    return out


CLASS_FLAGS = ("--model", "--data")
"""Flags whose value is a class (``--model GRPOModule``), besides every ``--<key>.help``."""


def resolve_class_names(argv: list[str]) -> list[str]:
    """``argv`` with the short class name given to ``--<key>.help`` (``--model.help GRPOModule``), ``--model`` or
    ``--data`` as its import path, found in the source (``propel.cli.static_keys.resolve_class``): jsonargparse
    resolves a short name only among the subclasses already imported, so ``--model.help GRPOModule`` failed where
    the same name in a config worked. Other values, and names the source does not settle, as given."""
    from propel.cli.static_keys import missing_class, resolve_class

    out = list(argv)
    for i, arg in enumerate(argv):
        key, eq, value = arg.partition("=")
        if not key.startswith("--") or not (key.endswith(".help") or key in CLASS_FLAGS):
            continue
        at = i if eq else i + 1
        if not eq and (at >= len(argv) or argv[at].startswith("-")):
            continue
        name = resolve_class(value if eq else argv[at])
        why = missing_class(name) if key.endswith(".help") else None
        if why is not None:  # a misspelled name: said now, not after Lightning has loaded
            raise ConfigError(f"{key[2:]}: {why}")
        out[at] = f"{key}={name}" if eq else name
    return out


def _check_config_files(argv: list[str]) -> list[dict]:
    """Every ``-c``/``--config`` file exists and is a YAML mapping (a one-line ``ConfigError`` otherwise), before
    any heavy import; their contents in order, with the fragments they name inlined (``domain: domain.yaml``). Inline
    YAML strings are left to the parser."""
    import yaml

    from propel.cli.config_files import config_values, inline_fragments

    loaded = []
    for _, value in config_values(argv):
        path = Path(value)
        if not path.is_file():
            raise ConfigError(
                f"config file does not exist: {value} (neither a file nor a shipped config such as grpo/base; "
                "`propel configs` copies the shipped ones out)"
            )
        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
            raise ConfigError(f"config file {value}: not valid YAML{where}: {getattr(err, 'problem', err)}") from None
        if data is not None and not isinstance(data, dict):
            raise ConfigError(f"config file {value}: expected a mapping of keys, got {type(data).__name__}")
        with contextlib.suppress(yaml.YAMLError, OSError):  # a broken fragment: the full parser reports it
            data = inline_fragments(data or {}, path)
        loaded.append(data or {})
    return loaded


def _overrides(argv: list[str]) -> list[tuple[str, str]]:
    """``(key, value)`` of each ``--key value`` / ``--key=value`` flag (``-c`` files aside)."""
    out = []
    for i, arg in enumerate(argv):
        if arg.startswith("--") and not arg.startswith("--config"):
            key, eq, value = arg[2:].partition("=")
            out.append((key, value if eq else (argv[i + 1] if i + 1 < len(argv) else "")))
    return out


def _check_lightning(argv: list[str], files: list[dict]) -> None:
    """Refuse a misspelled trainer key or init argument under ``model``/``data`` from the classes' source
    (``propel.cli.static_keys``; what the source does not settle is left to the full parser), then an earlier
    job's output the run reads that is not there (``propel.cli.prerequisites``), before the heavy imports."""
    from propel.cli import prerequisites
    from propel.cli.static_keys import check_keys, merged_config

    flags = [(k, v) for k, v in _overrides(argv) if k.startswith(("model.", "data.", "trainer."))]
    config = merged_config(files, flags)
    check_keys(config)
    if "--print_config" not in argv and not any(a.startswith("--print_config=") for a in argv):
        prerequisites.check(prerequisites.lightning_inputs(config))


def _check_probe(argv: list[str], files: list[dict]) -> None:
    """The probe job's labeled pool exists (``propel.cli.prerequisites``)."""
    from propel.cli import prerequisites

    config: dict = {}
    for data in files:
        config.update(data)
    config.update((k, v) for k, v in _overrides(argv) if k in prerequisites.PROBE_INPUTS)
    if "--print_config" not in argv:
        prerequisites.check(prerequisites.probe_inputs(config))


def _run(argv: list[str]) -> None:
    from propel.cli.quiet import quiet_dependencies

    command = argv[0]
    quiet_dependencies()
    checked = "-h" not in argv and "--help" not in argv
    if command in LIGHTNING or command in CONFIG_FILES:
        argv = [command, *resolve_config_names(argv[1:])]
    if command in LIGHTNING:
        argv = [command, *resolve_class_names(argv[1:])]
    if command not in LIGHTNING:
        if checked and command == "probe":
            _check_probe(argv[1:], _check_config_files(argv[1:]))
        commands()[command].load()(argv[1:])
        return
    if checked:
        _check_lightning(argv[1:], _check_config_files(argv[1:]))
    from propel.cli.lightning_cli import PropelCLI

    PropelCLI(args=argv)


def main(args=None) -> None:
    """Entry point of the ``propel`` console script."""
    argv = sys.argv[1:] if args is None else list(args)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        raise SystemExit(0 if argv else 2)
    if argv[0] in ("-V", "--version"):
        print(f"propel {__version__}")
        raise SystemExit(0)
    if argv[0] not in LIGHTNING and argv[0] not in commands():
        hint = difflib.get_close_matches(argv[0], list(subcommands()), n=1)
        hint = f" Did you mean: {hint[0]!r}?" if hint else ""
        print(f"propel: error: unknown subcommand {argv[0]!r}.{hint} (see `propel --help`)", file=sys.stderr)
        raise SystemExit(2)
    previous = _catch_stop_signals()
    stops.reset()
    try:
        _run(argv)
    except (KeyboardInterrupt, SystemExit):  # Lightning ends an interrupted run with exit(1) after its shutdown
        if stops.received:
            print(_stopped(argv, stops.received[0]), file=sys.stderr)
            raise SystemExit(stops.exit_code(stops.received[0])) from None
        raise
    except ConfigError as err:
        see = f"(see `propel {argv[0]} --help`)"
        problems = getattr(err, "problems", None) or [_one_line(err)]
        if len(problems) == 1:
            print(f"propel: config error: {problems[0]}  {see}", file=sys.stderr)
        else:  # every problem found, one line each (ConfigErrors)
            lines = [f"propel: {len(problems)} config errors {see}:", *(f"  {p}" for p in problems)]
            print("\n".join(lines), file=sys.stderr)
        raise SystemExit(2) from None
    except PropelError as err:
        print(f"propel: error: {_one_line(err)}", file=sys.stderr)
        raise SystemExit(2) from None
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _catch_stop_signals() -> dict:
    """Route the stop signals to ``stops.on_signal`` (main thread only); the handlers they replace. A SIGINT that is
    ignored (a background job of a non-interactive shell) stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    previous = {}
    for signum in STOP_SIGNALS:
        if signum == signal.SIGINT and signal.getsignal(signum) is signal.SIG_IGN:
            continue
        previous[signum] = signal.signal(signum, stops.on_signal)
    return previous


def _stopped(argv: list[str], signum: int) -> str:
    if argv[0] == "serve-env":  # a server has nothing to resume
        return f"propel: serve-env stopped by {signal.Signals(signum).name}"
    return stops.summary(signum, f"propel {shlex.join(argv)}")


def _one_line(err: BaseException) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return " ".join(lines) if lines else type(err).__name__
