"""The ``propel`` command: LightningCLI (fit / validate / test / predict) over YAML configs in omegaconf+ mode, plus
the commands other packages register under the ``propel.commands`` entry-point group: propel's own ``probe`` (the
probe job), ``pipeline`` (every PROPEL stage in order) and ``serve-env`` (an OpenEnv environment behind OpenEnv's
server), and any a user's package adds. The command sits on a low floor (it knows how a YAML becomes objects, not
what the objects are), so the jobs above it are found through their entry points, never imported here by name.

This module imports nothing heavy: ``propel --help``, ``propel --version`` and the checks a config file can fail
without its classes (a missing file, broken YAML) answer in well under a second; torch and Lightning load only
once a subcommand runs. Ctrl-C, a SIGTERM (``kill``, SLURM, container runtimes) or SLURM's early warning stop every
subcommand the same way (``propel.cli.stops``): through every ``finally`` and Lightning's graceful shutdown, where a
training run writes its ``last.ckpt`` (``propel.callbacks.last_checkpoint``); the last line says what was written
and what rerunning the same command does.
"""

from __future__ import annotations

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
    "fit": "train: GRPO (configs/grpo/base.yaml + configs/math/grpo.yaml), agents: GRPO and turn-targeted distillation "
    "(configs/agent/), a probe",
    "validate": "run a LightningModule's validation loop on a config",
    "test": "evaluate a task generator with real solver trials (configs/math/eval.yaml)",
    "predict": "collect and label a task pool with solver trials (configs/math/label.yaml)",
}
"""The LightningCLI subcommands, with their one-line help."""
ENTRY_POINTS = "propel.commands"
"""The entry-point group of the other subcommands (``name = "package.module:function"``, the function takes argv)."""
HELP = {
    "probe": "labeled pool -> activations -> probe sweep -> selected probe artifact (configs/probe/sweep.yaml)",
    "pipeline": "every PROPEL stage in order (label, probe, grpo, evaluate) and a report (configs/demo.yaml)",
    "serve-env": "an OpenEnv environment behind OpenEnv's server on loopback: propel serve-env triage (or humaneval)",
}
"""One-line help of propel's own registered commands (``--help`` must not import them to describe them)."""
CONFIG_FILES = ("probe",)
"""Registered commands whose ``-c`` files are checked here before anything heavy loads."""


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
        "`propel <subcommand> --help` lists a subcommand's options; configs live in configs/ (see README.md).",
    ]
    return "\n".join(lines)


def _check_config_files(argv: list[str]) -> list[dict]:
    """Every ``-c``/``--config`` file exists and is a YAML mapping (a one-line ``ConfigError`` otherwise), before
    any heavy import; their contents in order. Inline YAML strings (text with a newline or ``: ``) are left to the
    parser."""
    import yaml

    loaded = []
    for i, arg in enumerate(argv):
        if arg in ("-c", "--config") and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--config="):
            value = arg.split("=", 1)[1]
        else:
            continue
        if "\n" in value or ": " in value:
            continue
        path = Path(value)
        if not path.is_file():
            raise ConfigError(f"config file does not exist: {value}")
        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
            raise ConfigError(f"config file {value}: not valid YAML{where}: {getattr(err, 'problem', err)}") from None
        if data is not None and not isinstance(data, dict):
            raise ConfigError(f"config file {value}: expected a mapping of keys, got {type(data).__name__}")
        loaded.append(data or {})
    return loaded


def _check_keys(argv: list[str], files: list[dict]) -> None:
    """Refuse a misspelled trainer key or init argument under ``model``/``data`` from the classes' source, before
    the heavy imports (``propel.cli.static_keys``); what the source does not settle is left to the full
    parser."""
    from propel.cli.static_keys import check_keys, merged_config

    overrides = []
    for i, arg in enumerate(argv):
        if arg.startswith(("--model.", "--data.", "--trainer.")):
            key, eq, value = arg[2:].partition("=")
            overrides.append((key, value if eq else (argv[i + 1] if i + 1 < len(argv) else "")))
    check_keys(merged_config(files, overrides))


def _run(argv: list[str]) -> None:
    from propel.cli.quiet import quiet_dependencies

    command = argv[0]
    quiet_dependencies()
    checked = "-h" not in argv and "--help" not in argv
    if command not in LIGHTNING:
        if checked and command in CONFIG_FILES:
            _check_config_files(argv[1:])
        commands()[command].load()(argv[1:])
        return
    if checked:
        _check_keys(argv[1:], _check_config_files(argv[1:]))
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
        print(f"propel: config error: {_one_line(err)}  (see `propel {argv[0]} --help`)", file=sys.stderr)
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
