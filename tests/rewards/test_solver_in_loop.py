"""Solver-in-the-loop reward: band membership of realized solve counts, and the trial counter.

A domain whose tasks say how many of the solver's attempts succeed, and a deterministic scripted solver that answers
"right" on exactly that many attempts: the realized solve counts are known, so the reward is too. The attempts go
through ``propel.domains.trials.solver_trials`` (engine call + ``domain.grade``), as in labeling.
"""

from __future__ import annotations

import re

import pytest

from propel.domains.interface import Domain, ParseFailure, Verdict
from propel.domains.trials import SolverSpec, Trials
from propel.engines.scripted import ScriptedEngine
from propel.errors import ConfigError
from propel.records import Context, Prompt, Sample, Task
from propel.rewards.combine import CombinedReward
from propel.rewards.reward import RewardComponent, RewardContext
from propel.rewards.solver_in_loop import SolverInLoopReward


class KnownSolves(Domain):
    """Tasks ``solves=k``: the scripted solver gets attempts 0..k-1 right."""

    name = "known_solves"
    needs_sandbox = False

    def contexts(self, n, seed=0):
        return [Context(id=f"c{i}", prompt=Prompt(text="write a task")) for i in range(n)]

    def parse(self, completion):
        m = re.fullmatch(r"solves=(\d+)", completion.strip())
        return Task(self.name, {"solves": int(m.group(1))}) if m else ParseFailure("no_task")

    def validity(self, tasks, sandbox):
        return [Verdict(True, "ok") for _ in tasks]

    def solver_prompt(self, task):
        return Prompt(text=f"Solve task {task.data['solves']}:")

    def grade(self, task, completions, sandbox):
        return [c.strip() == "right" for c in completions]

    def topic(self, task):
        return "count"


class PerAttempt(ScriptedEngine):
    """A deterministic solver: attempt ``j`` of a task with ``solves=k`` answers "right" iff ``j < k``."""

    def generate(self, prompts, sampling):
        self.calls.append(len(prompts))
        out = []
        for prompt in prompts:
            k = int(re.search(r"Solve task (\d+)", self.render(prompt)).group(1))
            out.append([self._completion("right" if j < k else "wrong", sampling) for j in range(sampling.n)])
        return out


SOLVES = [0, 1, 2, 3, 4, 8, 3]


def _samples() -> list[Sample]:
    domain = KnownSolves()
    out = [Sample("p", f"solves={k}", valid=True, task=domain.parse(f"solves={k}")) for k in SOLVES]
    out.insert(2, Sample("p", "garbage", valid=False))
    out.append(Sample("p", "x", valid=False))
    return out


def test_reward_is_band_membership_of_known_solve_counts_and_trials_are_counted(tokenizer):
    engine = PerAttempt(tokenizer, script=lambda _: "")
    sil = SolverInLoopReward(KnownSolves(), SolverSpec(n_trials=8, band=(1, 3), max_new_tokens=4), engine=engine)
    assert isinstance(sil, RewardComponent)
    samples = _samples()
    r = sil(samples)
    want_valid = [1.0 if 1 <= k <= 3 else 0.0 for k in SOLVES]
    want = want_valid[:2] + [-1.0] + want_valid[2:] + [-1.0]
    assert r.tolist() == want
    assert [s.info.get("sil_solve_count") for s in samples if s.valid] == SOLVES
    assert engine.calls == [len(SOLVES)]  # one batched solver call per step
    assert sil.step_stats()["trials"] == 8 * len(SOLVES) and sil.trials_total == 8 * len(SOLVES)

    out = CombinedReward([sil])(samples[:3])  # a second step: 2 valid tasks
    stats = out.stats()
    assert stats["reward/sil/trials"] == 16 and stats["reward/sil/trials_total"] == 8 * len(SOLVES) + 16
    assert stats["reward/sil/trials_per_task"] == 8
    assert stats["reward/sil/solver_tokens"] > 0

    none_valid = sil([Sample("p", "x", valid=False)])
    assert none_valid.tolist() == [-1.0] and sil.step_stats()["trials"] == 0
    assert engine.calls == [len(SOLVES), 2]  # no solver call when no task is valid


def test_band_and_trial_count_follow_the_solver_spec(tokenizer):
    engine = PerAttempt(tokenizer, script=lambda _: "")
    sil = SolverInLoopReward(KnownSolves(), SolverSpec(n_trials=4, band=(4, 4)), engine=engine, floor=-2.0)
    r = sil(_samples())
    # with 4 attempts, solves=k succeeds min(k, 4) times; the band is "all 4"
    want_valid = [1.0 if min(k, 4) == 4 else 0.0 for k in SOLVES]
    assert r.tolist() == want_valid[:2] + [-2.0] + want_valid[2:] + [-2.0]
    assert sil.trials_total == 4 * len(SOLVES) and sil.floor == -2.0


def test_injected_trial_runner_and_setup(tokenizer):
    """Any runner with ``LabelingModule.run_trials``'s shape (samples -> Trials) can replace the engine."""
    seen = []

    def run_trials(samples):
        seen.extend(s.task.data["solves"] for s in samples)
        return [Trials([True] * s.task.data["solves"] + [False] * (8 - s.task.data["solves"]), 0) for s in samples]

    sil = SolverInLoopReward(KnownSolves(), run_trials=run_trials)
    sil.setup(RewardContext(model_name=None))  # nothing to build
    assert sil(_samples())[:2].tolist() == [0.0, 1.0] and seen == SOLVES
    assert sil.trials_total == 8 * len(SOLVES)


def test_floor_must_be_the_worst_outcome_and_engine_needs_a_model():
    with pytest.raises(ConfigError, match="below 0"):
        SolverInLoopReward(KnownSolves(), floor=0.0)
    with pytest.raises(ConfigError, match="solver.model"):
        SolverInLoopReward(KnownSolves()).setup(RewardContext())
    assert SolverInLoopReward(KnownSolves()).floor == -1.0  # what RewardFloorCheck compares valid rewards with


def test_engine_is_built_from_the_policy_base_model_at_setup(tiny_model_dir):
    sil = SolverInLoopReward(KnownSolves(), SolverSpec(n_trials=2, band=(1, 2), max_new_tokens=2))
    sil.setup(RewardContext(model_name=str(tiny_model_dir)))
    try:
        assert sil.engine is not None and sil.run_trials is not None
        r = sil([Sample("p", "solves=1", valid=True, task=Task("known_solves", {"solves": 1}))])
        assert r.tolist() in ([0.0], [1.0]) and sil.trials_total == 2  # a real (random tiny) model solved twice
    finally:
        sil.close()
    assert sil.engine is None
