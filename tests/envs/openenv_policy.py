"""Scripted policies for the guessing game (``openenv_guess``) and the echo environment ``openenv init`` generates,
and callbacks that make GRPO sample from them.

The tiny random model the tests train never writes a tool call, so every action would be malformed and the
environment's rewards never reached. A policy reads the whole prompt (as the engine renders it) and answers.
``guess_policy``: games with an even seed are played by an oracle (right at once), odd ones by bisection; games whose
seed is a multiple of 3 open with an out-of-range guess (a malformed action the environment's pydantic model rejects).
``echo_policy``: ``ECHOES`` one call each, then a turn longer than any token budget the tests give, which the rollout
cuts (``finish_reason="length"``): the echo environment never ends an episode itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from lightning.pytorch.callbacks import Callback
from openenv_guess import target

from propel.engines.scripted import ScriptedEngine
from propel.engines.tool_calls import ToolCall, format_tool_call

_TOOL = re.compile(r"<\|im_start\|>tool\n(.*?)<\|im_end\|>", re.S)


def guess_policy(prompt: str) -> str:
    seed = int(re.search(r"Game (\d+):", prompt).group(1))
    feedback = _TOOL.findall(prompt)
    guesses = [int(g) for g in re.findall(r'"guess": (\d+)', prompt)]
    if seed % 3 == 0 and not feedback:
        return format_tool_call(ToolCall("guess", {"guess": 99}))
    if seed % 2 == 0:
        return format_tool_call(ToolCall("guess", {"guess": target(seed)}))
    lo, hi = 1, 16
    for guess, said in zip(guesses, feedback, strict=False):
        if said == "higher":
            lo = guess + 1
        elif said == "lower":
            hi = guess - 1
    return format_tool_call(ToolCall("guess", {"guess": (lo + hi) // 2}))


ECHOES = ("hello", "hello, world")
RAMBLE = "and then I kept on talking " * 40
"""Far past the tests' ``max_new_tokens``: the turn is cut, never executed."""


def echo_policy(prompt: str) -> str:
    said = len(_TOOL.findall(prompt))
    if said < len(ECHOES):
        return format_tool_call(ToolCall("echo", {"message": ECHOES[said]}))
    return RAMBLE


class ScriptedPolicy(Callback):
    """Swaps the module's engine for ``ScriptedEngine(policy)`` when training starts (the policy still trains on the
    scripted tokens; the engine is then not the policy, as with vLLM). ``hook`` sees every prompt first."""

    policy: Callable[[str], str]

    def __init__(self, hook: Callable[[str], None] | None = None) -> None:
        self.hook = hook

    def script(self, prompt: str) -> str:
        if self.hook is not None:
            self.hook(prompt)
        return self.policy(prompt)

    def on_train_start(self, trainer, pl_module) -> None:
        pl_module.engine = ScriptedEngine(pl_module.tokenizer, self.script)


class ScriptedGuesser(ScriptedPolicy):
    policy = staticmethod(guess_policy)


class ScriptedEchoer(ScriptedPolicy):
    policy = staticmethod(echo_policy)
