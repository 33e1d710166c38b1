"""Isolated execution of model-written code: local (rlimits + bubblewrap) and Docker backends; one-shot jobs
(``Sandbox.run``) and persistent per-episode workspaces for multi-turn agents (``Sandbox.session``)."""

from __future__ import annotations

from propel.sandbox.job import Job, Limits, Outcome, Result, SandboxError
from propel.sandbox.local import LocalSandbox
from propel.sandbox.sandbox import Sandbox
from propel.sandbox.session import Session

BACKENDS = ("local", "docker")


def make_sandbox(backend: str = "local", **kwargs) -> Sandbox:
    """Build a sandbox by name: ``"local"`` (embedded default) or ``"docker"``; kwargs go to its constructor."""
    if backend == "local":
        return LocalSandbox(**kwargs)
    if backend == "docker":
        from propel.sandbox.docker import DockerSandbox

        return DockerSandbox(**kwargs)
    raise ValueError(f"sandbox backend must be one of {BACKENDS}, got {backend!r}")


def __getattr__(name: str):
    if name == "DockerSandbox":  # imported lazily: it pulls in the docker SDK
        from propel.sandbox.docker import DockerSandbox

        return DockerSandbox
    raise AttributeError(name)


__all__ = [
    "BACKENDS",
    "DockerSandbox",
    "Job",
    "Limits",
    "LocalSandbox",
    "Outcome",
    "Result",
    "Sandbox",
    "SandboxError",
    "Session",
    "make_sandbox",
]
