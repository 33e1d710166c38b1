"""A verifiers environment (``load_environment()``, the format prime-rl and SkyRL train on), loaded once per process.

``load`` imports the environment's module by its id, as verifiers does (``vf-reverse-text`` -> ``vf_reverse_text``;
a dotted module path works too), or calls ``module:function`` for a loader under another name, and caches the result
per (id, arguments): every task source, episode and reward of a run shares one environment object. Its coroutines
(``setup_state``, ``env_response``, stop conditions, async reward functions) all run on one event loop in a daemon
thread (``run``), as verifiers runs them on one loop, so what an environment keeps across calls (locks, clients) stays
on the loop that made it, whichever trainer thread asks.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import threading
from collections.abc import Coroutine
from typing import Any

from propel.errors import ConfigError

VERSION = "0.3.1"
"""The verifiers release propel's adapter is written and tested against (its classic API: ``verifiers.legacy``)."""
_cache: dict[str, Any] = {}
_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def verifiers_missing(err: ImportError) -> ConfigError:
    """The one-line error for a run that needs verifiers where it is not installed."""
    return ConfigError(
        f"verifiers environments need the verifiers package ({err}); install it with "
        f"`pip install -e .[verifiers] && pip install --no-deps verifiers=={VERSION}` (scripts/setup.sh does)"
    )


def load(env: str, env_args: dict[str, Any] | None = None) -> Any:
    """The environment ``env`` built with ``env_args`` (cached: the same object for the same id and arguments).

    Args:
        env: an environment id (the installed module exposing ``load_environment``, as ``vf.load_environment``
            takes it) or ``module:function`` (a loader under another name).
        env_args: keyword arguments of the loader.
    """
    if not isinstance(env, str) or not env.strip():
        raise ConfigError(f"a verifiers environment is named by its id or 'module:function', got {env!r}")
    args = dict(env_args or {})
    key = f"{env}\0{json.dumps(args, sort_keys=True, default=repr)}"
    with _lock:
        if key not in _cache:
            _cache[key] = _build(env, args)
        return _cache[key]


def _build(env: str, args: dict[str, Any]) -> Any:
    try:
        import verifiers as vf

        vf.Environment  # noqa: B018 - the classic API loads on first touch: a missing dependency shows here
    except (ImportError, AttributeError) as e:
        raise verifiers_missing(ImportError(str(e))) from e
    module, sep, function = env.partition(":")
    try:
        if sep:
            loader = getattr(importlib.import_module(module), function)
            built = loader(**args)
        else:
            built = vf.load_environment(env, **args)
    except (ImportError, AttributeError, TypeError, ValueError, RuntimeError) as e:  # verifiers wraps a loader's own
        raise ConfigError(f"cannot load verifiers environment {env!r}: {e} (is its package installed?)") from e
    if not isinstance(built, vf.Environment):
        raise ConfigError(f"verifiers environment {env!r} loaded a {type(built).__name__}, not a vf.Environment")
    return built


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coro`` on the environments' event loop (started on first use) and return its result."""
    global _loop
    with _lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="propel-verifiers-loop", daemon=True).start()
    return asyncio.run_coroutine_threadsafe(coro, _loop).result()
