"""A multi-turn verifiers environment nobody here wrote, as a package's ``load_environment``: verifiers' own
``GymEnv`` (its env_response steps a gym environment, its stop condition ends the episode, its rubric sums the step
rewards) over gymnasium's ``Blackjack-v1``. This module only says how a hand reads and how a reply is an action."""

from __future__ import annotations

import verifiers as vf
from gymnasium.envs.toy_text.blackjack import BlackjackEnv


def hand(obs) -> str:
    total, dealer, ace = obs
    return f"Your hand totals {total}{' with a usable ace' if ace else ''}; the dealer shows {dealer}. Hit or stick?"


def action(reply: str) -> int:
    said = reply.strip().lower()
    if said.startswith("hit"):
        return 1
    if said.startswith("stick"):
        return 0
    raise ValueError("answer hit or stick")


def load_environment(num_train_episodes: int = 40, seed: int = 0) -> vf.Environment:
    return vf.GymEnv(
        env_cls=BlackjackEnv,
        action_parser=action,
        obs_to_text=hand,
        num_train_episodes=num_train_episodes,
        num_eval_episodes=0,
        seed=seed,
        max_episode_steps=6,
        system_prompt="You play blackjack against the dealer. Answer hit or stick.",
    )
