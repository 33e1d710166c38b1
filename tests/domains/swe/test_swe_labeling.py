"""The SWE chain into a labeling pool: a scripted generator episode and procedural bugs become tasks,
``BugValidator`` checks them, three scripted repair episodes per valid bug run in fresh sandbox sessions, and the
rows (solve counts, band labels) land in the resumable Parquet pool. The parse repo, local (bubblewrap) backend."""

from __future__ import annotations

import itertools
import json

import pytest
from lightning.pytorch import Trainer

from propel.callbacks.pool_writer import PoolWriter
from propel.datamodules.task_pool import TaskPoolDataModule
from propel.domains.swe.checkout import checkout
from propel.domains.swe.domain import SweDomain, bug_record, episode_bug, resolve_repos
from propel.domains.swe.repos import REPOS, SPLITS, get_repo
from propel.domains.swe.tool_episodes import generator_context
from propel.domains.trials import SolverSpec
from propel.engines.engine import SamplingSpec
from propel.engines.scripted import ScriptedEngine
from propel.engines.tool_calls import ToolCall, format_tool_call
from propel.envs import ToolEnv
from propel.errors import ConfigError
from propel.lit_modules.labeling import LabelingModule
from propel.pools import read_pool
from propel.rollouts import AgentSolver
from propel.rollouts.episode_runner import EpisodeRunner
from propel.testing.plain_configs import read_config_files

SUBMIT = format_tool_call(ToolCall("submit", {}))
INJECT = "sed -i 's/return self.converter(string)$/return self.converter(string[::-1])/' parse.py"


def _turns(prompt: str) -> int:
    return prompt.count("<|im_start|>assistant") - 1


def test_splits_are_repo_disjoint_and_cover_the_registry():
    names = [n for split in SPLITS.values() for n in split]
    assert len(names) == len(set(names)) and set(names) == set(REPOS)
    assert resolve_repos("eval") == list(SPLITS["eval"]) and resolve_repos(["parse"]) == ["parse"]
    with pytest.raises(ConfigError, match="unknown SWE repo"):
        resolve_repos(["nope"])


def test_parse_refuses_what_is_not_a_bug_record():
    domain = SweDomain(["parse"])
    assert domain.parse("a diff in prose").reason == "not_a_bug_record"
    assert domain.parse(bug_record("toolz", "x")).reason == "unknown_repo"
    task = domain.parse(bug_record("parse", "--- a\n"))
    assert task.data == {"repo": "parse", "diff": "--- a\n"}


def test_scripted_generator_and_solver_fill_a_pool(swe_repo, sandbox, tokenizer, tiny_model_dir, tmp_path):
    profile, root, _ = swe_repo("parse")

    # a generator episode (ToolEnv, scripted: inject with sed, submit) recorded as an episodes file
    def generator(prompt: str) -> str:
        return format_tool_call(ToolCall("bash", {"command": INJECT})) if _turns(prompt) == 0 else SUBMIT

    gen = generator_context(profile, root)
    runner = EpisodeRunner(ScriptedEngine(tokenizer, generator), lambda: ToolEnv(max_turns=3), sandbox, concurrency=1)
    (([episode],), _) = runner.run([gen], SamplingSpec(n=1, max_new_tokens=256))
    episodes = tmp_path / "episodes.jsonl"
    episodes.write_text(episode_bug(gen, episode.artifacts["files"]) + "\n")

    # the solver: trial k of each bug reverts parse.py when k % 3 == 0, else submits at once (rounds keep the order)
    clean = (checkout(get_repo("parse")) / "parse.py").read_text()
    counter = itertools.count()

    def solver(prompt: str) -> str:
        if _turns(prompt) > 0:
            return SUBMIT
        if next(counter) % 3 == 0:
            return format_tool_call(ToolCall("write_file", {"path": "parse.py", "content": clean}))
        return SUBMIT

    domain = SweDomain(["parse"], episodes=str(episodes))
    contexts = domain.contexts(2)
    assert [c.id for c in contexts] == [f"swe-episode-{gen.id}", "swe-0-parse-0"] and contexts[0].group == "parse"

    module = LabelingModule(
        domain,
        generator=str(tiny_model_dir),
        solver=SolverSpec(n_trials=3, band=(1, 2), max_new_tokens=20_000),
        solver_agent=AgentSolver(lambda: ToolEnv(max_turns=3, max_collect_chars=400_000), 3, max_context_tokens=None),
        sandbox=sandbox,
    )
    module.engines[str(tiny_model_dir)] = ScriptedEngine(tokenizer, solver)  # never asked to generate here
    out = tmp_path / "pool"
    trainer = Trainer(accelerator="cpu", logger=False, enable_progress_bar=False, callbacks=[PoolWriter(str(out))])
    data = TaskPoolDataModule(domain, pool_dir=str(out), n_tasks=2, batch_size=2)
    trainer.predict(module, datamodule=data, return_predictions=False)

    pool = read_pool(out).set_index("id")
    row = pool.loc[f"swe-episode-{gen.id}"]
    assert row["valid"] and row["reason"] == "ok" and row["group"] == "parse" and row["domain"] == "swe"
    task = json.loads(row["task"])["data"]
    assert "string[::-1]" in task["diff"] and task["failing"] and task["changed"] == ["parse.py"]
    assert list(row["grades"]) == [True, False, False] and row["solve_count"] == 1 and row["label"] == 1
    assert domain.repair_reasons["tests_failing"] >= 2  # the idle trials
    procedural = pool.loc["swe-0-parse-0"]
    if procedural["valid"]:
        assert len(procedural["grades"]) == 3 and procedural["solve_count"] == sum(procedural["grades"])
    else:
        assert procedural["grades"] is None and procedural["reason"] != "ok"

    trainer = Trainer(accelerator="cpu", logger=False, enable_progress_bar=False, callbacks=[PoolWriter(str(out))])
    data = TaskPoolDataModule(domain, pool_dir=str(out), n_tasks=2, batch_size=2)
    trainer.predict(module, datamodule=data, return_predictions=False)  # a rerun resumes: nothing left to label
    assert data.skipped == 2 and len(read_pool(out)) == 2


def test_the_shipped_config_resolves():
    """configs/swe/label.yaml parses with the CLI's own parser: the SWE domain, n=3 repair episodes, band 1..2."""
    from pathlib import Path

    from propel.cli.lightning_cli import resolve_lightning

    root = Path(__file__).resolve().parents[3]
    cfg = resolve_lightning("predict", read_config_files([root / "configs/swe/label.yaml"]))
    init = cfg["model"]["init_args"]
    assert init["domain"]["class_path"] == "propel.domains.swe.domain.SweDomain"
    assert init["domain"]["init_args"]["repos"] == "probe_train"
    assert init["solver"]["n_trials"] == 3 and list(init["solver"]["band"]) == [1, 2]
    assert init["solver_agent"]["init_args"]["env"]["class_path"] == "propel.envs.ToolEnv"
