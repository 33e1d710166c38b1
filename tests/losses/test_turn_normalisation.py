"""The turn-KL term's divisors by name: the term's own tokens and the anchor's (``per_target_token``), the targeted
episodes' assistant tokens for both (``per_episode_token``), the constant per targeted episode (``constant``); never
below 1; a constant is required exactly when named."""

from __future__ import annotations

import pytest

from propel.errors import ConfigError
from propel.losses.turn_normalisation import NORMALISATIONS, TurnNorm


def test_each_normalisation_divides_by_the_count_it_names():
    counts = dict(target_tokens=6.0, anchor_tokens=10.0, episode_tokens=30.0, episodes=2.0, constant=64.0)
    got = {kind: TurnNorm.of(kind, **counts) for kind in NORMALISATIONS}
    assert (got["per_target_token"].target, got["per_target_token"].anchor) == (6.0, 10.0)
    assert (got["per_episode_token"].target, got["per_episode_token"].anchor) == (30.0, 30.0)
    assert (got["constant"].target, got["constant"].anchor) == (128.0, 128.0)
    assert all((n.target_tokens, n.anchor_tokens) == (6.0, 10.0) for n in got.values())  # the logged means' counts
    empty = TurnNorm.of("per_episode_token", 0.0)
    assert (empty.target, empty.anchor) == (1.0, 1.0)  # a step without targets divides by 1, as masked_mean does


def test_a_constant_is_needed_with_constant_and_names_are_checked():
    with pytest.raises(ConfigError, match="normalisation_constant"):
        TurnNorm.of("constant", 6.0, episodes=1.0)
    with pytest.raises(ConfigError, match="normalisation must be one of"):
        TurnNorm.of("per_token", 6.0)
