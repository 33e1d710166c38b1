"""Rollout engines: HF generate (default), vLLM in-process, vLLM server."""

from propel.engines.base import Completion, Engine, Prompt, SamplingSpec

__all__ = ["Completion", "Engine", "Prompt", "SamplingSpec"]
