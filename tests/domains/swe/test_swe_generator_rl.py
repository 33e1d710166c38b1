"""The SWE generator's RL rollouts: bug-injection episodes in clean checkouts, each episode's bug
(the diff of the files it left) checked by ``BugValidator`` in the sandbox, so the probe reward's validity gate reads
what the episode really made. Scripted generator on the parse repo, local (bubblewrap) backend."""

from __future__ import annotations

import itertools
import json
from functools import partial

import pytest
import torch

from propel.datamodules.agent_episodes import EpisodeDataModule
from propel.domains.math import MathExpressionDomain
from propel.domains.swe import SweDomain
from propel.engines.engine import SamplingSpec
from propel.engines.scripted import ScriptedEngine
from propel.engines.tool_calls import ToolCall, format_tool_call
from propel.envs import ToolEnv
from propel.errors import ConfigError
from propel.probes.gate import GateSpec
from propel.rewards import CombinedReward, OverlongPenalty, ProbeReward
from propel.rollouts.steps import ContextBatch
from propel.tasks.swe import BugInjectionTasks
from propel.testing.plain_configs import read_config_files

SUBMIT = format_tool_call(ToolCall("submit", {}))
INJECT = "sed -i 's/return self.converter(string)$/return self.converter(string[::-1])/' parse.py"
BREAK = "echo 'def (' >> parse.py"


def test_tasks_are_clean_checkouts_drawn_by_seed(swe_repo):
    swe_repo("parse")
    tasks = BugInjectionTasks(["parse", "inflection"])
    a, b = tasks.contexts(4, seed=3), tasks.contexts(4, seed=3)
    assert [c.id for c in a] == [c.id for c in b] and len({c.id for c in a}) == 4
    assert {c.data["repo"] for c in a} <= {"parse", "inflection"} and all(c.group == c.data["repo"] for c in a)
    parse = next(c for c in a if c.data["repo"] == "parse")
    assert "parse.py" in parse.data["files"] and "parse.py" in parse.data["collect"]
    assert "inject" in parse.prompt.messages[0]["content"].lower()
    with pytest.raises(ConfigError, match="unknown SWE repo"):
        BugInjectionTasks(["nope"])
    # evaluation draws the same episodes from the domain (generate=true), and only then
    generating = SweDomain(["parse", "inflection"], procedural=False, generate=True)
    assert [c.id for c in generating.contexts(4, seed=3)] == [c.id for c in a]
    with pytest.raises(ConfigError, match="generate=true takes its bugs from a generator agent"):
        SweDomain(["parse"], generate=True)  # procedural is on by default


def test_episode_bugs_are_checked_and_gate_the_probe_reward(swe_repo, sandbox, tokenizer):
    swe_repo("parse")
    # four episodes of one context: a real bug, no edit at all, a syntax error, a bug then more turns
    plans = [[INJECT], [], [BREAK], [INJECT, "ls"]]
    data = EpisodeDataModule(
        partial(ToolEnv, max_turns=4, command_timeout_s=30.0),
        BugInjectionTasks(["parse"]),
        contexts_per_step=1,
        sandbox=sandbox,
        concurrency=1,  # one episode after another: the script's counter follows them in order
        domain=SweDomain(["parse"]),
    )
    batch = ContextBatch(index=0, contexts=data.tasks.contexts(1, seed=0))
    engine = ScriptedEngine(tokenizer, _sequential(plans))
    ((bug, empty, broken, longer),) = data.rollout(engine, batch, SamplingSpec(n=4, max_new_tokens=128)).groups

    assert bug.valid and bug.info["reason"] == "ok" and bug.topic == "parse:parse.py"
    assert bug.task.data["failing"] and "+        return self.converter(string[::-1])" in bug.info["task_text"]
    assert json.loads(bug.artifacts["task_completion"])["repo"] == "parse"
    assert (empty.valid, empty.info["reason"]) == (False, "empty_diff")
    assert (broken.valid, broken.info["reason"]) == (False, "suite_broken")
    assert longer.valid and len(longer.assistant_texts) == 3

    # the reward: the probe's logit on the episode's assistant turns when the bug is valid, the floor otherwise
    seen = []

    def probe(items):
        seen.extend(items)
        return torch.tensor([float(len(turns)) for turns in items])

    reward = CombinedReward(
        [ProbeReward(probe=probe, text="turns", gate=GateSpec(floor=-3.0)), OverlongPenalty(max_length=10_000)]
    )
    total = reward([bug, empty, broken, longer]).total
    assert total.tolist() == [2.0, -3.0, -3.0, 3.0]
    assert seen == [bug.assistant_texts, longer.assistant_texts]  # only valid bugs are scored, as trajectories


def _sequential(plans):
    """A script for episodes run one after another: episode k runs ``plans[k]`` (bash commands), then submits."""
    state = {"episode": 0}

    def script(prompt: str) -> str:
        turns = prompt.count("<|im_start|>assistant") - 1
        plan = plans[state["episode"]]
        if turns < len(plan):
            return format_tool_call(ToolCall("bash", {"command": plan[turns]}))
        state["episode"] += 1
        return SUBMIT

    return script


def test_a_single_turn_domain_cannot_score_episodes():
    from propel.lit_modules.labeling import LabelingModule
    from propel.rollouts import AgentEpisodes

    with pytest.raises(ConfigError, match="single-turn"):
        EpisodeDataModule(ToolEnv, BugInjectionTasks(["parse"]), domain=MathExpressionDomain())
    with pytest.raises(ConfigError, match="not written by agent episodes"):
        LabelingModule(MathExpressionDomain(), generator_agent=AgentEpisodes(ToolEnv))


def test_the_swe_grpo_config_trains_a_step(swe_repo, tiny_model_dir, tmp_path, monkeypatch):
    """``propel fit -c configs/grpo/base.yaml -c configs/swe/grpo.yaml`` at tiny scale: episodes in parse checkouts,
    each bug checked, the probe reward gated; a random policy injects no bug, so every episode is invalid
    (``empty_diff``) and gets the floor, and the step's trajectories record why."""
    from propel.cli import main
    from propel.rollouts.trajectories import read_trajectories
    from tests.cli.test_cli_grpo import ROOT, probe_artifact

    swe_repo("parse")
    monkeypatch.chdir(tmp_path)  # the config reads runs/swe/probe/artifact and writes under runs/swe
    probe_artifact(tmp_path / "runs" / "swe" / "probe" / "artifact", tiny_model_dir)
    main(
        [
            "fit",
            "-c",
            str(ROOT / "configs" / "grpo" / "base.yaml"),
            "-c",
            str(ROOT / "configs" / "swe" / "grpo.yaml"),
            f"--model.init_args.model={tiny_model_dir}",
            "--model.init_args.group_size=2",
            "--model.init_args.max_new_tokens=8",
            "--data.init_args.tasks.init_args.repos=[parse]",
            "--data.init_args.domain.init_args.repos=[parse]",
            "--data.init_args.contexts_per_step=1",
            "--data.init_args.env.init_args.max_turns=1",
            "--trainer.max_steps=1",
            "--trainer.logger=false",
        ]
    )
    (path,) = sorted((tmp_path / "runs" / "swe" / "trajectories").glob("*.parquet"))
    samples = read_trajectories(path)
    assert len(samples) == 2 and all(s.context.data["repo"] == "parse" for s in samples)
    assert [(s.valid, s.info["reason"]) for s in samples] == [(False, "empty_diff")] * 2
    assert (tmp_path / "runs" / "swe" / "checkpoints" / "last.ckpt").exists()


def _evaluate(out, tiny_model_dir, tokenizer, sandbox, revert_every: int):
    """``propel test``'s module on parse: the generator agent injects INJECT, each repair trial k reverts parse.py
    when k % revert_every == 0 (else submits at once)."""
    import lightning.pytorch as pl

    from propel.datamodules.task_pool import TaskPoolDataModule
    from propel.domains.swe.checkout import checkout
    from propel.domains.swe.repos import get_repo
    from propel.domains.trials import SolverSpec
    from propel.lit_modules.evaluation import EvaluationModule
    from propel.rollouts import AgentEpisodes, AgentSolver

    clean = (checkout(get_repo("parse")) / "parse.py").read_text()
    repairs = itertools.count()

    def script(prompt: str) -> str:
        turns = prompt.count("<|im_start|>assistant") - 1
        if "inject ONE" in prompt:  # the generator
            return format_tool_call(ToolCall("bash", {"command": INJECT})) if turns == 0 else SUBMIT
        if turns == 0 and next(repairs) % revert_every == 0:
            return format_tool_call(ToolCall("write_file", {"path": "parse.py", "content": clean}))
        return SUBMIT

    domain = SweDomain(["parse"], procedural=False, generate=True)
    env = partial(ToolEnv, max_turns=3, command_timeout_s=30.0, max_collect_chars=400_000)
    module = EvaluationModule(
        domain,
        generator=str(tiny_model_dir),
        output_dir=str(out),
        solver=SolverSpec(n_trials=3, band=(1, 2), max_new_tokens=20_000),
        max_new_tokens=20_000,
        generator_agent=AgentEpisodes(env, concurrency=2, max_context_tokens=None),
        solver_agent=AgentSolver(env, concurrency=3, max_context_tokens=None),
        sandbox=sandbox,
    )
    module.engines[str(tiny_model_dir)] = ScriptedEngine(tokenizer, script)  # generator and solver
    trainer = pl.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.test(module, datamodule=TaskPoolDataModule(domain, pool_dir=str(out), n_tasks=2, seed=1, batch_size=2))
    return module.summary


def test_evaluation_runs_the_generator_agent_and_reports_bug_sizes(
    swe_repo, sandbox, tokenizer, tiny_model_dir, tmp_path
):
    from propel.pipeline.compare import compare_dirs
    from propel.pools import read_pool

    swe_repo("parse")
    base = _evaluate(tmp_path / "base", tiny_model_dir, tokenizer, sandbox, revert_every=3)
    pool = read_pool(tmp_path / "base")
    assert len(pool) == 2 and pool["id"].str.startswith("swe-gen-1-parse-").all() and pool["valid"].all()
    task = json.loads(pool["task"].iloc[0])["data"]
    assert task["turns"][0].startswith("<tool_call>") and "string[::-1]" in task["diff"]  # the episode's own turns
    assert base["valid_rate"] == 1.0 and base["solve_count_hist"] == [0, 2, 0, 0] and base["utility"] == 1.0
    assert base["diff_lines_mean"] == 2.0 and base["failing_tests_mean"] == len(task["failing"]) > 0
    assert base["intervals"]["diff_lines_mean"] == [2.0, 2.0]

    trained = _evaluate(tmp_path / "trained", tiny_model_dir, tokenizer, sandbox, revert_every=1)
    assert trained["solve_count_hist"] == [0, 0, 0, 2] and trained["utility"] == 0.0  # every repair solves
    text = compare_dirs(tmp_path / "base", tmp_path / "trained", tmp_path / "compare")
    assert "| diff_lines_mean | 2 [2, 2] | 2 [2, 2] | +0 [+0, +0] |" in text
    assert "| utility |" in text and "failing_tests_mean" in text


def test_the_shipped_probe_and_eval_configs_resolve():
    """configs/swe/probe.yaml builds its ProbeJob (trajectories, repo folds); configs/swe/eval.yaml parses with the
    CLI's own parser (the generator agent on the held-out repos, n=3 repair episodes)."""

    from propel.cli.lightning_cli import resolve_lightning
    from propel.jobs.probe_job import parse_probe
    from tests.cli.test_cli_grpo import ROOT

    job = parse_probe(["-c", str(ROOT / "configs/swe/probe.yaml")])
    assert job.sweep.split == "group_kfold" and job.sweep.n_folds == len(job.domain.repos) == 4
    assert job.trajectory_pooling == "mean" and job.rvp.contexts == 0
    cfg = resolve_lightning("test", read_config_files([ROOT / "configs/swe/eval.yaml"]))
    init = cfg["model"]["init_args"]
    assert init["domain"]["init_args"]["repos"] == "eval" and init["domain"]["init_args"]["generate"] is True
    assert init["generator_agent"]["class_path"] == "propel.rollouts.AgentEpisodes"
    assert init["solver"]["n_trials"] == 3 and list(init["solver"]["band"]) == [1, 2]
