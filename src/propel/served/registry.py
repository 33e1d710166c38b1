"""The environments ``propel serve-env`` knows by name; any other OpenEnv environment is served by its import path."""

from __future__ import annotations

from propel.envs.openenv_schema import import_object
from propel.errors import ConfigError

ENVIRONMENTS = {
    "triage": "propel.served.triage.TriageEnvironment",
    "humaneval": "propel.served.humaneval.HumanEvalEnvironment",
}
"""Name -> import path of propel's OpenEnv environments."""


def environment_class(name: str) -> type:
    """The OpenEnv ``Environment`` class ``name`` stands for: a name of ``ENVIRONMENTS`` or an import path
    (``package.module.Class``)."""
    if name in ENVIRONMENTS:
        return import_object(ENVIRONMENTS[name])
    if "." not in name and ":" not in name:
        raise ConfigError(f"unknown environment {name!r}: one of {sorted(ENVIRONMENTS)} or an import path")
    return import_object(name)
