"""The copy check's measure: the longest span of a completion copied, in order, from the prompt's text, robust to
junk inserted into the copy.

A check for verbatim runs is broken by one inserted token, so a pasted article with a junk word every ~15
words passed as original. ``copied_span`` first drops the completion's words that the source does not contain (junk
of any length then breaks nothing), then finds the longest chain of words matched in order where consecutive matches
may skip up to ``skip`` words on either side (a junk word that happens to be in the source, a dropped step number).
It lies between the longest common substring (``skip=0`` on a completion made of source words) and the longest
common subsequence of the two texts. On the synthetic tickets the reference resolutions, which paraphrase their
runbook, copy at most 13 words by this measure; the runbook's steps pasted without their numbers copy 23 or more.
"""

from __future__ import annotations


def copied_span(tokens: list[str], source: list[str], skip: int = 1) -> int:
    """Length of the longest in-order chain of ``tokens`` found in ``source``, ignoring tokens the source lacks and
    letting consecutive matches skip up to ``skip`` tokens of either sequence."""
    positions: dict[str, list[int]] = {}
    for j, token in enumerate(source):
        positions.setdefault(token, []).append(j)
    kept = [t for t in tokens if t in positions]
    chains: list[dict[int, int]] = []  # chains[i][j]: the longest chain ending with kept[i] matched to source[j]
    best = 0
    for i, token in enumerate(kept):
        here = {}
        for j in positions[token]:
            length = 1
            for back in chains[max(0, i - skip - 1) : i]:
                for dj in range(1, skip + 2):
                    length = max(length, back.get(j - dj, 0) + 1)
            here[j] = length
            best = max(best, length)
        chains.append(here)
    return best
