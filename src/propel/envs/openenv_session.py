"""One OpenEnv episode's connection, in-process or to a server, behind one small interface.

Both kinds return OpenEnv's wire format (``serialize_observation``: the observation's own fields, ``reward``,
``done``), and both reset with only the arguments the environment's ``reset`` names (OpenEnv's server drops the
others; the in-process kind applies its rule, ``accepted_kwargs``), so the adapter cannot tell them apart and a
trajectory is the same either way. The server kind speaks OpenEnv's WebSocket protocol through OpenEnv's own client:
its HTTP ``/step`` builds a fresh environment per request, so only the WebSocket keeps a multi-step episode. Three
outcomes are kept apart, because they mean different things for training: an action the environment's pydantic model
rejects (``ActionRejected``: the policy's doing, shown to it), a connection that cannot be opened or is lost
(``LostServer``: infrastructure, the episode is left out of the group statistics), and an environment that raises
(propagated: the rollout marks it as an infrastructure failure).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import time
import typing
from dataclasses import dataclass
from typing import Any

from propel.envs.openenv_schema import validation_reason


class ActionRejected(Exception):
    """The environment's action model refused the arguments; ``reason`` is the line the model is shown."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class LostServer(Exception):
    """The server could not be reached, or the connection broke or timed out mid-episode."""


@dataclass
class StepOut:
    """One observation in OpenEnv's wire format."""

    fields: dict[str, Any]
    """The observation's own fields (``done``, ``reward`` and ``metadata`` left out, as OpenEnv's server does)."""
    reward: float | None
    done: bool

    @classmethod
    def from_wire(cls, payload: dict[str, Any]) -> StepOut:
        reward = payload.get("reward")
        return cls(
            dict(payload.get("observation") or {}), None if reward is None else float(reward), bool(payload["done"])
        )


def openenv_missing(err: ImportError) -> ImportError:
    """The one-line install hint for a missing ``openenv-core``."""
    return ImportError(
        f"OpenEnv support needs openenv-core ({err}): pip install -e '.[openenv]' (from propel's checkout) && "
        "pip install --no-deps openenv-core==0.3.0 (scripts/setup.sh does both)"
    )


class InProcessSession:
    """An OpenEnv ``Environment`` instance in this process, one per episode."""

    def __init__(self, env_cls: type, env_kwargs: dict[str, Any]) -> None:
        try:
            from openenv.core.env_server.serialization import serialize_observation
        except ImportError as e:
            raise openenv_missing(e) from e
        self._serialize = serialize_observation
        self.env = env_cls(**env_kwargs)
        self.action_cls = action_class(env_cls)

    def reset(self, **kwargs: Any) -> StepOut:
        return StepOut.from_wire(self._serialize(self.env.reset(**accepted_kwargs(self.env.reset, kwargs))))

    def step(self, arguments: dict[str, Any]) -> StepOut:
        from pydantic import ValidationError

        try:
            action = self.action_cls.model_validate(arguments)
        except ValidationError as e:
            raise ActionRejected(validation_reason(e.errors())) from None
        return StepOut.from_wire(self._serialize(self.env.step(action)))

    def close(self) -> None:
        self.env.close()


def accepted_kwargs(fn: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The ``kwargs`` that ``fn``'s signature names (all of them when it takes ``**kwargs``): the rule OpenEnv's
    server applies before it calls ``reset``, so an environment whose ``reset`` takes no ``seed`` or ``episode_id``
    (the one ``openenv init`` generates) runs in-process exactly as it does served."""
    parameters = inspect.signature(fn).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return dict(kwargs)
    return {k: v for k, v in kwargs.items() if k in parameters}


def action_class(env_cls: type) -> type:
    """The ``Action`` subclass an ``Environment`` class is declared with (``Environment[MyAction, ...]``), else the
    annotation of its ``step``'s ``action``."""
    from openenv.core.env_server.types import Action

    return _declared(env_cls, Action, lambda: typing.get_type_hints(env_cls.step).get("action"))


def observation_class(env_cls: type) -> type:
    """The ``Observation`` subclass an ``Environment`` class is declared with, else its ``step``'s return annotation."""
    from openenv.core.env_server.types import Observation

    return _declared(env_cls, Observation, lambda: typing.get_type_hints(env_cls.step).get("return"))


def _declared(env_cls: type, base: type, annotation) -> type:
    for klass in env_cls.__mro__:
        for generic in getattr(klass, "__orig_bases__", ()):
            for arg in typing.get_args(generic):
                if isinstance(arg, type) and issubclass(arg, base) and arg is not base:
                    return arg
    hint = annotation()
    if isinstance(hint, type) and issubclass(hint, base) and hint is not base:
        return hint
    raise TypeError(
        f"{env_cls.__name__} names no {base.__name__} subclass (declare it as Environment[MyAction, MyObservation, "
        "State] or annotate step(self, action: MyAction) -> MyObservation)"
    )


def server_schema(url: str, timeout_s: float, retries: int, backoff_s: float) -> dict[str, Any]:
    """The server's action JSON schema (``GET /schema``), asked ``retries`` more times while it does not answer."""
    import urllib.request

    base = url.rstrip("/").replace("ws://", "http://", 1).replace("wss://", "https://", 1)
    last: BaseException | None = None
    for attempt in range(retries + 1):
        if attempt:
            time.sleep(backoff_s * 2 ** (attempt - 1))
        try:
            with urllib.request.urlopen(base + "/schema", timeout=timeout_s) as response:
                return json.loads(response.read())["action"]
        except (OSError, ValueError, KeyError) as e:
            last = e
    raise LostServer(f"no action schema from {base}/schema after {retries + 1} attempts: {type(last).__name__}: {last}")


class ServerSession:
    """One WebSocket session with an OpenEnv server (OpenEnv's client), opened with retries.

    Args:
        url: the server's base URL (``http://127.0.0.1:8000``; ``ws://`` works too).
        connect_timeout_s: limit of one connection attempt.
        message_timeout_s: limit of one reply (a server that hangs past it counts as lost).
        retries: further attempts to connect and reset when the server is unreachable (restarting, say), with
            ``backoff_s`` doubling between them. A connection lost after the reset is not retried: the server's
            episode went with it.
    """

    def __init__(
        self, url: str, connect_timeout_s: float, message_timeout_s: float, retries: int, backoff_s: float
    ) -> None:
        try:
            import websockets.exceptions
            from openenv.core.generic_client import GenericEnvClient
        except ImportError as e:
            raise openenv_missing(e) from e

        class Client(GenericEnvClient):
            """OpenEnv's client, keeping the server's error record (its code and pydantic errors) whole."""

            async def _send_and_receive(self, message: dict[str, Any]) -> dict[str, Any]:
                await self._send(message)
                response = await self._receive()
                if response.get("type") == "error":
                    raise _ServerError(response.get("data") or {})
                return response

        self._make = lambda: Client(url, connect_timeout_s=connect_timeout_s, message_timeout_s=message_timeout_s)
        self._lost = (OSError, asyncio.TimeoutError, websockets.exceptions.WebSocketException)
        self.url, self.retries, self.backoff_s = url, retries, backoff_s
        self._client = None

    def reset(self, **kwargs: Any) -> StepOut:
        last: BaseException | None = None
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            self.close()
            try:
                self._client = self._make().sync()
                return _out(self._client.reset(**kwargs))
            except self._lost as e:
                last = e
            except _ServerError as e:
                if e.code not in ("CAPACITY_REACHED", "SESSION_ERROR"):
                    raise RuntimeError(f"the OpenEnv server refused the reset: {e}") from None
                last = e
        self.close()
        raise LostServer(f"{self.url}: no episode after {self.retries + 1} attempts: {type(last).__name__}: {last}")

    def step(self, arguments: dict[str, Any]) -> StepOut:
        try:
            result = self._client.step(arguments)
        except self._lost as e:
            raise LostServer(f"{self.url}: connection lost mid-episode: {type(e).__name__}: {e}") from e
        except _ServerError as e:
            if e.code == "VALIDATION_ERROR":
                raise ActionRejected(validation_reason(e.data.get("errors") or [])) from None
            raise RuntimeError(f"the OpenEnv environment failed on the server: {e}") from None
        return _out(result)

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):  # closing a dead connection must not fail the episode twice
                client.close()


def _out(result: Any) -> StepOut:
    """OpenEnv's client ``StepResult`` (observation fields, reward, done) as a ``StepOut``."""
    return StepOut.from_wire({"observation": result.observation, "reward": result.reward, "done": result.done})


class _ServerError(Exception):
    """An error record from the server (``{"message", "code", ...}``)."""

    def __init__(self, data: dict[str, Any]) -> None:
        super().__init__(f"{data.get('message', 'error')} (code: {data.get('code', 'UNKNOWN')})")
        self.data, self.code = data, str(data.get("code", ""))
