"""The copy check's measure: how many words of a completion are copied from the prompt's text, robust to junk
inserted into the copy and to the copied sentences being reordered or interleaved.

A check for verbatim runs is broken by one inserted token, so a pasted article with a junk word every ~15
words passed as original. ``copied_span`` first drops the completion's words that the source does not contain (junk
of any length then breaks nothing), then finds the longest chain of words matched in order where consecutive matches
may skip up to ``skip`` words on either side (a junk word that happens to be in the source, a dropped step number).
It lies between the longest common substring (``skip=0`` on a completion made of source words) and the longest
common subsequence of the two texts.

One chain over the whole text is broken by reordering (the runbook's steps pasted in reverse order copied no more
than its longest step) and is fooled by order (an honest answer that restates four short steps in the runbook's
order chains them into one long run). ``copied_words`` therefore reads the completion and its source as clauses, the
way the content check reads an answer (``clauses.py``), and takes the larger of:

- the *quoted* words: the sum, over the completion's clauses in whatever order they come, of the source clause each
  one quotes (its chain covers at least ``QUOTE_SHARE`` of that source clause and at least ``QUOTE_WORDS`` words).
  Restating a short step ("restart chronyd") or sharing a few words with a longer one is not a quote; pasting the
  steps, in order, reversed or interleaved with junk, is;
- the longest chain within one instruction, or within a run of consecutive clauses that are not instructions (pasted
  prose: the ticket, an article's title): a chain may not cross from one instruction into the next.

On the 240 synthetic tickets the reference resolutions, which paraphrase their runbook in its order, copy at most 15
words by this measure (the free span of ``RepetitionPenalty``); the runbook's steps pasted without their numbers, in
order or reversed, the whole article pasted, or the ticket pasted back, 19 or more.
"""

from __future__ import annotations

from collections.abc import Sequence

QUOTE_SHARE = 0.8
"""A completion clause quotes a source clause when its copied span covers at least this share of it..."""
QUOTE_WORDS = 5
"""... and at least this many words."""


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
        backs = chains[max(0, i - skip - 1) : i]
        for j in positions[token]:
            length = 1
            for back in backs:
                for earlier in range(j - skip - 1, j):
                    n = back.get(earlier, 0)
                    if n >= length:  # comparisons, not max(): this loop is the copy check's hot path
                        length = n + 1
            here[j] = length
            if length > best:
                best = length
        chains.append(here)
    return best


def quoted_words(clauses: Sequence[list[str]], sources: Sequence[list[str]], skip: int = 1) -> int:
    """Words of the ``sources`` clauses that the ``clauses`` quote, summed over the clauses in whatever order they
    come (each clause counts the longest source clause it quotes).

    A chain is no longer than the source clause nor than the clause's words found in it, so a pair whose bound is
    under the quote threshold, or under the best quote already found, is not chained at all (the same sum; the copy
    check was most of a triage step's reward time)."""
    holders: dict[str, list[int]] = {}  # token -> the source clauses that contain it
    for k, source in enumerate(sources):
        for token in set(source):
            holders.setdefault(token, []).append(k)
    total = 0
    for clause in clauses:
        found = [0] * len(sources)  # the clause's words found in each source clause
        for token in clause:
            for k in holders.get(token, ()):
                found[k] += 1
        bounds = sorted(((min(len(sources[k]), n), k) for k, n in enumerate(found) if n), reverse=True)
        best = 0
        for bound, k in bounds:
            if bound <= best:
                break
            if _quote(bound, sources[k]):
                n = copied_span(clause, sources[k], skip)
                if _quote(n, sources[k]):
                    best = max(best, n)
        total += best
    return total


def _quote(n: int, source: list[str]) -> bool:
    return n >= QUOTE_WORDS and n >= QUOTE_SHARE * len(source)


def instruction_runs(clauses: Sequence[list[str]], instructions: Sequence[bool]) -> list[list[str]]:
    """The stretches a copied chain may not cross: each instruction alone, consecutive non-instructions (pasted prose)
    joined (``instructions[i]``: whether ``clauses[i]`` is an instruction)."""
    runs: list[list[str]] = []
    for i, (clause, said) in enumerate(zip(clauses, instructions, strict=True)):
        if runs and not said and not instructions[i - 1]:
            runs[-1] = runs[-1] + clause
        else:
            runs.append(list(clause))
    return runs


def copied_words(
    clauses: Sequence[list[str]], instructions: Sequence[bool], sources: Sequence[list[str]], skip: int = 1
) -> int:
    """The copy measure: the quoted words (``quoted_words``) or the longest chain within one of the
    ``instruction_runs``, the larger."""
    source = [t for s in sources for t in s]
    vocabulary = set(source)
    chain = 0
    for run in instruction_runs(clauses, instructions):  # one with no more source words than the best cannot beat it
        if sum(token in vocabulary for token in run) > chain:
            chain = max(chain, copied_span(run, source, skip))
    return max(chain, quoted_words(clauses, sources, skip))
