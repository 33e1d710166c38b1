"""Single-turn rollouts: one engine call for a batch of contexts, then the scorer's verdict.

``generate_tasks`` is the one "generate -> parse -> validity" used by GRPO, labeling, evaluation and the probe job.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from propel.engines.engine import Engine, SamplingSpec
from propel.records import Context, Sample, Turn
from propel.rollouts.scorer import Scorer
from propel.rollouts.steps import Rollout


def sample_single_turn(engine: Engine, contexts: Sequence[Context], sampling: SamplingSpec) -> list[list[Sample]]:
    """``sampling.n`` unscored samples per context (one assistant turn each, token ids and logprobs kept)."""
    groups = engine.generate([c.prompt for c in contexts], sampling)
    out = []
    for ctx, group in zip(contexts, groups, strict=True):
        rendered, prompt_ids = engine.render(ctx.prompt), engine.encode_prompt(ctx.prompt)
        out.append(
            [
                Sample(
                    prompt=rendered,
                    completion=c.text,
                    context=ctx,
                    prompt_ids=list(prompt_ids),
                    turns=[Turn("assistant", c.text, list(c.token_ids), c.logprobs, True, c.finish_reason)],
                )
                for c in group
            ]
        )
    return out


def generate_tasks(
    scorer: Scorer, engine: Engine, contexts: Sequence[Context], sampling: SamplingSpec
) -> list[list[Sample]]:
    """Sample ``sampling.n`` completions per context and let ``scorer`` score them all in one batch."""
    groups = sample_single_turn(engine, contexts, sampling)
    scorer.score([s for group in groups for s in group])
    return groups


def scored_rollout(scorer: Scorer, engine: Engine, contexts: Sequence[Context], sampling: SamplingSpec) -> Rollout:
    """``generate_tasks`` as one RL step's ``Rollout``, timed (generation, then the scorer's scoring)."""
    start = time.perf_counter()
    groups = sample_single_turn(engine, contexts, sampling)
    generated = time.perf_counter()
    scorer.score([s for group in groups for s in group])
    end = time.perf_counter()
    return Rollout(groups, {"generation_s": generated - start, "environment_s": end - generated, "wall_s": end - start})
