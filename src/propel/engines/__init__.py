"""Rollout engines: HF generate (default), vLLM in-process, vLLM server."""

from propel.engines.engine import Completion, Engine, SamplingSpec

__all__ = ["Completion", "Engine", "SamplingSpec"]
