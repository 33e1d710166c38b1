"""``propel serve-env <name>``: an OpenEnv environment behind OpenEnv's own server (FastAPI + uvicorn), on loopback
unless told otherwise.

The app is OpenEnv's ``create_fastapi_app``: ``/reset``, ``/step``, ``/state``, ``/schema``, ``/health`` and the
``/ws`` WebSocket that keeps one environment per session (its HTTP ``/step`` builds a fresh environment per request, so
multi-step clients use the WebSocket). The listening socket is bound before the server starts and its address printed
as the first line of output (``serving <name> on http://HOST:PORT``), so ``--port 0`` picks a free port that a
caller can read back.
"""

from __future__ import annotations

import argparse
import functools
import json
import socket
import sys
from typing import Any

from propel.envs.openenv_session import action_class, observation_class, openenv_missing
from propel.served.registry import ENVIRONMENTS, environment_class

LOOPBACK = "127.0.0.1"


def build_app(name: str, env_kwargs: dict[str, Any] | None = None, max_sessions: int = 64):
    """OpenEnv's FastAPI app for environment ``name`` (a registered name or an import path); every WebSocket
    session builds its own instance with ``env_kwargs``."""
    try:
        from openenv.core.env_server.http_server import create_fastapi_app
    except ImportError as e:
        raise openenv_missing(e) from e
    env_cls = environment_class(name)
    factory = functools.partial(env_cls, **(env_kwargs or {})) if env_kwargs else env_cls
    return create_fastapi_app(
        factory, action_class(env_cls), observation_class(env_cls), max_concurrent_envs=max_sessions
    )


def serve(
    name: str,
    host: str = LOOPBACK,
    port: int = 8000,
    env_kwargs: dict[str, Any] | None = None,
    max_sessions: int = 64,
    log_level: str = "warning",
) -> None:
    """Serve ``name`` until interrupted (Ctrl-C or SIGTERM)."""
    import uvicorn

    app = build_app(name, env_kwargs, max_sessions)
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    print(f"serving {name} on http://{shown}:{bound}", flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level=log_level))
    server.run(sockets=[sock])


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="propel serve-env",
        description="Serve an OpenEnv environment with OpenEnv's server (WebSocket /ws for multi-step episodes).",
    )
    parser.add_argument(
        "name", help=f"one of {', '.join(sorted(ENVIRONMENTS))}, or an import path package.module.Class"
    )
    parser.add_argument("--host", default=LOOPBACK, help="address to listen on (default: loopback only)")
    parser.add_argument("--port", type=int, default=8000, help="port (0: a free one, printed on the first line)")
    parser.add_argument("--env-kwargs", default="{}", help="JSON object of the environment's constructor arguments")
    parser.add_argument("--max-sessions", type=int, default=64, help="concurrent WebSocket sessions (episodes)")
    parser.add_argument("--log-level", default="warning", help="uvicorn's log level")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        env_kwargs = json.loads(args.env_kwargs)
    except json.JSONDecodeError as e:
        raise SystemExit(f"propel serve-env: --env-kwargs is not JSON: {e}") from None
    if not isinstance(env_kwargs, dict):
        raise SystemExit("propel serve-env: --env-kwargs must be a JSON object")
    serve(args.name, args.host, args.port, env_kwargs, args.max_sessions, args.log_level)


if __name__ == "__main__":
    main()
