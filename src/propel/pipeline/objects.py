"""Build objects from ``class_path``/``init_args`` specs, the same shape LightningCLI configs use."""

from __future__ import annotations

import importlib
from typing import Any

from propel.errors import ConfigError


def instantiate(spec: Any, field: str = "value") -> Any:
    """Recursively instantiate ``{"class_path": ..., "init_args": {...}}`` dicts; other values pass through."""
    if isinstance(spec, dict) and "class_path" in spec:
        module_name, _, attr = str(spec["class_path"]).rpartition(".")
        try:
            cls = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError, ValueError) as err:
            raise ConfigError(f"{field}.class_path: cannot import {spec['class_path']!r} ({err})") from None
        args = {k: instantiate(v, f"{field}.init_args.{k}") for k, v in (spec.get("init_args") or {}).items()}
        try:
            return cls(**args)
        except TypeError as err:
            raise ConfigError(f"{field}.init_args: {err}") from None
    if isinstance(spec, dict):
        return {k: instantiate(v, f"{field}.{k}") for k, v in spec.items()}
    if isinstance(spec, list):
        return [instantiate(v, field) for v in spec]
    return spec
