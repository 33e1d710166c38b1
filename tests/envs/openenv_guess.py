"""An OpenEnv environment written for the tests: guess a number from 1 to ``high`` in at most ``max_guesses``.

Plain OpenEnv (``Environment[GuessAction, GuessObservation, State]``), nothing of propel: the adapter must drive it as
it would any third-party environment. Every turn has a reward that depends on the guess (1 when right, minus the
distance over ``high`` otherwise), so turn rewards can be compared value by value. The opening observation names
the game's seed, which lets a scripted test policy play the oracle on chosen games.
"""

from __future__ import annotations

import random

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field


class GuessAction(Action):
    """Guess the hidden number."""

    guess: int = Field(ge=1, le=16, description="your guess")


class GuessObservation(Observation):
    feedback: str = ""


def target(seed: int, high: int = 16) -> int:
    """The number a game with this seed hides."""
    return random.Random(seed).randint(1, high)


def turn_reward(guess: int, hidden: int, high: int = 16) -> float:
    return 1.0 if guess == hidden else -abs(guess - hidden) / high


class GuessEnvironment(Environment[GuessAction, GuessObservation, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, high: int = 16, max_guesses: int = 4) -> None:
        super().__init__()
        self.high, self.max_guesses = high, max_guesses
        self._state = State()
        self._target = 0

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs) -> GuessObservation:
        seed = 0 if seed is None else seed
        self._target = target(seed, self.high)
        self._state = State(episode_id=episode_id, step_count=0)
        return GuessObservation(feedback=f"Game {seed}: I picked a number from 1 to {self.high}. Guess it.")

    def step(self, action: GuessAction, timeout_s: float | None = None, **kwargs) -> GuessObservation:
        self._state.step_count += 1
        reward = turn_reward(action.guess, self._target, self.high)
        if action.guess == self._target:
            return GuessObservation(feedback="right", reward=reward, done=True)
        hint = "higher" if action.guess < self._target else "lower"
        return GuessObservation(feedback=hint, reward=reward, done=self._state.step_count >= self.max_guesses)

    @property
    def state(self) -> State:
        return self._state
