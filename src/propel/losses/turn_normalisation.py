"""How the turn-targeted KL term's token sums become a loss: which count divides them.

The term sums a per-token divergence over the tokens it reads (turn t's, or turn t's to the end) and, with an anchor,
a KL to the start over the episode's other assistant turns. Dividing by the term's own token count (today's
``per_target_token``) makes each token's weight depend on how many tokens the arm reads: a turn-only arm puts
``|t .. end| / |t|`` times the weight on turn t's tokens that the same divergence from t to the end does, so arms
that differ in scope also differ in step size. The other two divide by a count that does not depend on the scope:
``per_episode_token`` by the targeted episodes' assistant tokens (a token-level mean over whole episodes, as DAPO
averages over all tokens of a batch) and ``constant`` by a fixed number of tokens per targeted episode (Dr. GRPO's
``max_new_tokens``-style constant). Every count is the step's global one (every rank's), so the update is the one
a single process would take.
"""

from __future__ import annotations

from dataclasses import dataclass

from propel.errors import ConfigError

NORMALISATIONS = ("per_target_token", "per_episode_token", "constant")


@dataclass(frozen=True)
class TurnNorm:
    """A step's divisors of the turn term's and the anchor's token sums, and the token counts their logged means use
    (every divisor at least 1, as ``masked_mean`` divides)."""

    target_tokens: float
    """Tokens the turn term reads in the step (the logged divergence is a mean over these)."""
    anchor_tokens: float
    """Tokens the anchor reads in the step (the logged anchor KL is a mean over these)."""
    target: float
    """The turn term's token sum is divided by this in the loss."""
    anchor: float
    """The anchor's token sum is divided by this in the loss."""

    @classmethod
    def of(
        cls,
        kind: str,
        target_tokens: float,
        anchor_tokens: float = 0.0,
        episode_tokens: float = 0.0,
        episodes: float = 0.0,
        constant: float | None = None,
    ) -> TurnNorm:
        """The divisors for normalisation ``kind`` from the step's global counts.

        Args:
            kind: ``per_target_token`` (each sum over its own tokens: the turn term's mean over turn t's tokens,
                the anchor's over the other turns'), ``per_episode_token`` (both sums over the targeted episodes'
                assistant tokens) or ``constant`` (both over ``constant`` tokens per targeted episode).
            target_tokens: tokens the turn term reads.
            anchor_tokens: tokens the anchor reads.
            episode_tokens: assistant tokens of the targeted episodes (each episode once, however many targets).
            episodes: targeted episodes.
            constant: tokens per episode (``constant`` only), e.g. ``max_new_tokens`` times the turns per episode.
        """
        if kind == "per_target_token":
            target, anchor = target_tokens, anchor_tokens
        elif kind == "per_episode_token":
            target = anchor = episode_tokens
        elif kind == "constant":
            if constant is None:
                raise ConfigError("normalisation 'constant' needs normalisation_constant (tokens per episode)")
            target = anchor = constant * episodes
        else:
            raise ConfigError(f"normalisation must be one of {NORMALISATIONS}, got {kind!r}")
        return cls(target_tokens, anchor_tokens, max(float(target), 1.0), max(float(anchor), 1.0))
