"""Adversarial probe mining: candidates, real solver trials on mined tasks, Parquet rows, untouched training RNG,
resume state, and the auxiliary probe's training pool."""

from __future__ import annotations

from types import SimpleNamespace

import lightning.pytorch as pl
import pandas as pd
import pytest
import torch
from lightning.pytorch.callbacks import Callback

from propel.callbacks.adversarial import AdversarialProbeMining
from propel.datamodules.contexts import ContextDataModule
from propel.domains.interface import Domain, ParseFailure, Verdict
from propel.domains.trials import SolverSpec
from propel.errors import ConfigError
from propel.lit_modules.grpo import GRPOModule
from propel.lit_modules.state import RolloutState
from propel.losses.policy_gradient import LossSpec
from propel.models.lora import LoRASpec
from propel.pools import MINED_SCHEMA, read_pool, write_part
from propel.pools.auxiliary import adversarial_pool
from propel.probes.gate import GateSpec
from propel.records import Context, Prompt, Sample, Task
from propel.rewards import FunctionReward, RewardBreakdown
from propel.rewards.probe_reward import ProbeReward
from propel.rollouts.scorer import GeneratorScorer


class CountDomain(Domain):
    """A completion is a task when non-blank, valid when longer than one character; the solver "solves" a task
    exactly ``len(text) % 5`` times whatever it answers, so every solve count is known in advance."""

    name, needs_sandbox = "count", False

    def contexts(self, n: int, seed: int = 0) -> list[Context]:
        return [Context(id=f"{seed}-{i}", prompt=Prompt(text=f"Item {seed % 7 + i}:")) for i in range(n)]

    def parse(self, completion: str):
        text = completion.strip()
        return Task(self.name, {"text": text}) if text else ParseFailure("blank")

    def validity(self, tasks, sandbox=None) -> list[Verdict]:
        return [Verdict(len(t.data["text"]) > 1, "ok") for t in tasks]

    def render(self, task) -> str:
        return task.data["text"]

    def solver_prompt(self, task):
        return Prompt(text=task.data["text"])

    def grade(self, task, completions, sandbox=None) -> list[bool]:
        k = len(task.data["text"]) % 5
        assert all(isinstance(c, str) for c in completions)  # real solver outputs arrive here
        return [j < k for j in range(len(completions))]

    def topic(self, task) -> str:
        return task.data["text"][:1]


def probe_score(sample) -> float:
    """A stand-in probe logit: +2 for an even-length completion, -2 for an odd one."""
    return 2.0 if len(sample.completion) % 2 == 0 else -2.0


class Seen(Callback):
    """Records each step's samples and probe scores (runs before the mining callback)."""

    def __init__(self):
        self.steps: dict[int, tuple[list, torch.Tensor]] = {}
        self.losses: list[float] = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        step = trainer.global_step
        state = pl_module.rollout_state
        self.steps[step] = (list(state.samples), state.rewards.components["probe"].clone())
        self.losses.append(float(trainer.callback_metrics["train/loss"]))


def _fit(model_dir, steps, callbacks, rewards=None):
    pl.seed_everything(0)
    module = GRPOModule(
        model=str(model_dir),
        rewards=rewards or [FunctionReward("probe", probe_score)],
        lora=LoRASpec(r=4, alpha=8),
        group_size=4,
        max_new_tokens=4,
        lr=1e-2,
        loss=LossSpec(beta=0.04),
    )
    trainer = pl.Trainer(
        max_steps=steps,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        callbacks=callbacks,
    )
    trainer.fit(module, datamodule=ContextDataModule(CountDomain(), contexts_per_step=2))
    return trainer


def _miner(model_dir, out, **kw):
    solver = SolverSpec(model=str(model_dir), n_trials=4, band=(1, 2), max_new_tokens=3)
    args = dict(output_dir=str(out), every_n_steps=1, component="probe", solver=solver, max_per_round=3)
    args.update(kw)
    return AdversarialProbeMining(**args)


def test_mining_writes_solver_labeled_rows_without_touching_training(tiny_model_dir, tmp_path):
    seen, miner = Seen(), _miner(tiny_model_dir, tmp_path / "mined")
    trainer = _fit(tiny_model_dir, 3, [seen, miner])
    rows = read_pool(tmp_path / "mined")
    assert len(rows) > 0 and rows["id"].is_unique and set(rows["step"]) <= {1, 2, 3}
    mined_before: set[str] = set()
    for step in sorted(seen.steps):
        samples, scores = seen.steps[step]
        eligible = {s.completion.strip() for s, x in zip(samples, scores, strict=True) if s.valid and x >= 0}
        eligible -= mined_before
        texts = {Task.from_json(t).data["text"] for t in rows[rows["step"] == step]["task"]}
        assert texts <= eligible and len(texts) == min(3, len(eligible))
        mined_before |= texts
    texts = [Task.from_json(t).data["text"] for t in rows["task"]]
    assert len(set(texts)) == len(texts)  # a task text is mined once per run
    counts = [len(t) % 5 for t in texts]
    assert rows["solve_count"].tolist() == counts and all(len(g) == 4 for g in rows["grades"])
    assert rows["label"].tolist() == [int(1 <= c <= 2) for c in counts]
    assert (rows["probe_logit"] == 2.0).all() and rows["valid"].all() and (rows["solver_tokens"] > 0).all()
    assert miner.totals["mined"] == len(rows) and miner.totals["false_positives"] == int((rows["label"] == 0).sum())
    assert "mining/candidates" in trainer.callback_metrics
    assert (tmp_path / "mined" / "summary.json").exists()
    assert set(miner.state_dict()["mined_texts"]) == set(texts)

    plain = Seen()
    _fit(tiny_model_dir, 3, [plain])
    assert plain.losses == seen.losses  # mining samples under a forked RNG: training is the same without it


def test_candidates_filter_rank_dedupe_and_skip_mined():
    miner = AdversarialProbeMining(output_dir="unused", min_prob=0.5, max_per_round=2)
    task = Task("count", {"text": "x"})
    samples = [
        Sample("p", "aa", valid=True, task=task, info={"task_text": "aa"}),
        Sample("p", "bb", valid=False, task=task, info={"task_text": "bb"}),  # invalid
        Sample("p", "cc", valid=True, task=task, info={"task_text": "cc"}),
        Sample("p", "aa", valid=True, task=task, info={"task_text": "aa"}),  # duplicate text
        Sample("p", "dd", valid=True, task=task, info={"task_text": "dd"}),  # below min_prob
        Sample("p", "ee", valid=True, task=task, info={"task_text": "ee"}),
    ]
    scores = torch.tensor([0.5, 9.0, 3.0, 4.0, -0.1, 1.0])
    assert miner.candidates(samples, scores) == [(3, 4.0), (2, 3.0)]
    miner.load_state_dict({"mined_texts": ["aa"], "totals": {}})
    assert miner.candidates(samples, scores) == [(2, 3.0), (5, 1.0)]


def test_bad_arguments_and_unknown_component(tiny_model_dir, tmp_path):
    with pytest.raises(ConfigError, match="min_prob"):
        AdversarialProbeMining(min_prob=1.0)
    with pytest.raises(ConfigError, match="band"):
        AdversarialProbeMining(solver=SolverSpec(n_trials=4, band=(1, 5)))
    with pytest.raises(ConfigError, match="every_n_steps"):
        AdversarialProbeMining(every_n_steps=0)
    with pytest.raises(ConfigError, match="'aux' is not a reward component"):
        _fit(tiny_model_dir, 1, [_miner(tiny_model_dir, tmp_path, component="aux")])


def _row(i: str, label, valid=True, **extra) -> dict:
    row = dict(id=i, group="g", domain="count", context="{}", completion=i, task=Task("count", {"text": i}).to_json())
    row.update(valid=valid, reason="ok", grades=[True, False], solve_count=1, label=label, topic="t", n_trials=2)
    row.update(solver_tokens=3, **extra)
    return row


def test_adversarial_pool_joins_positives_and_false_positives(tmp_path):
    write_part(tmp_path / "orig", [_row("p1", 1), _row("p2", 1), _row("n1", 0), _row("bad", None, valid=False)])
    mined = [_row("mined-1-0", 0, probe_logit=2.0, step=1), _row("mined-1-1", 1, probe_logit=1.0, step=1)]
    write_part(tmp_path / "mined", mined, MINED_SCHEMA)
    counts = adversarial_pool(tmp_path / "orig", tmp_path / "mined", tmp_path / "aux")
    assert {k: counts[k] for k in ("positives", "false_positives", "topic_negatives", "rows")} == {
        "positives": 2,
        "false_positives": 1,
        "topic_negatives": 0,
        "rows": 3,
    }
    pool = read_pool(tmp_path / "aux")
    assert dict(zip(pool["id"], pool["label"], strict=True)) == {"p1": 1, "p2": 1, "mined-1-0": 0}
    with pytest.raises(FileExistsError):
        adversarial_pool(tmp_path / "orig", tmp_path / "mined", tmp_path / "aux")
    counts = adversarial_pool(tmp_path / "orig", tmp_path / "mined", tmp_path / "aux2", keep_negatives=True)
    assert counts["rows"] == 4 and isinstance(read_pool(tmp_path / "aux2"), pd.DataFrame)
    write_part(tmp_path / "none", [_row("mined-2-0", 1, probe_logit=1.0, step=2)], MINED_SCHEMA)
    with pytest.raises(ValueError, match="no mined false positives"):
        adversarial_pool(tmp_path / "orig", tmp_path / "none", tmp_path / "aux3")


# ---------------------------------------------------------------------------------------------- mining defects
def test_soft_gate_mining_compares_logits_not_probabilities(tiny_model_dir, tmp_path):
    """Under ``soft_gate`` the reward is a probability; mining still cuts on the probe's logit
    (``min_prob`` 0.5 = logit 0) and the ``probe_logit`` column holds logits."""

    def probe(texts):
        return torch.tensor([2.0 if len(t) % 2 == 0 else -2.0 for t in texts])

    reward = ProbeReward(probe=probe, text="completion", name="probe", gate=GateSpec(mode="soft_gate", floor=0.0))
    seen, miner = Seen(), _miner(tiny_model_dir, tmp_path / "mined", max_per_round=16)
    _fit(tiny_model_dir, 3, [seen, miner], rewards=[reward])
    rows = read_pool(tmp_path / "mined")
    assert len(rows) > 0 and (rows["probe_logit"] == 2.0).all()
    assert all(len(c) % 2 == 0 for c in rows["completion"])  # no odd-length (logit -2, p = 0.12) task is mined
    odd = [s for samples, _ in seen.steps.values() for s in samples if s.valid and len(s.completion) % 2]
    assert odd  # there were valid tasks the probe scored below 0.5 (before the fix they were mined too)
    p = torch.cat([scores for _, scores in seen.steps.values()])
    assert ((p > 0) & (p < 1)).any()  # the reward itself held probabilities


def _state(texts: list[str], scores: list[float]) -> RolloutState:
    ctx = Context(id="c", prompt=Prompt(text="Item 1:"))
    samples = [
        Sample("p", t, valid=True, task=Task("count", {"text": t}), info={"task_text": t}, context=ctx) for t in texts
    ]
    s = torch.tensor(scores)
    return RolloutState(step=0, samples=samples, rewards=RewardBreakdown(total=s, components={"probe": s}))


def test_a_step_without_update_mines_once_and_ids_never_collide(tiny_model_dir, tmp_path, monkeypatch):
    """A step that takes no optimizer step repeats ``global_step``; mining happens once per
    interval crossing, and two rounds at the same step write distinct ids, so no row is lost."""
    module = GRPOModule(model=str(tiny_model_dir), rewards=[FunctionReward("probe", probe_score)])
    module.log_dict = lambda *a, **k: None
    miner = _miner(tiny_model_dir, tmp_path / "mined", every_n_steps=2)
    mined_at = []
    monkeypatch.setattr(miner, "mine", lambda pl_module, samples, picked, step: mined_at.append(step) or [])
    trainer = SimpleNamespace(global_step=0, is_global_zero=True)
    miner.on_train_start(trainer, module)
    for step in (1, 2, 2, 2, 3, 5, 5, 6):  # 2 repeats (no update); 5 jumps over 4 (ppo_epochs > 1)
        trainer.global_step = step
        module.rollout_state = _state([f"task {step}"], [3.0])
        miner.on_train_batch_end(trainer, module, None, None, 0)
    assert mined_at == [2, 5, 6]
    resumed = _miner(tiny_model_dir, tmp_path / "mined", every_n_steps=2)
    resumed.load_state_dict(miner.state_dict())
    monkeypatch.setattr(resumed, "mine", lambda pl_module, samples, picked, step: mined_at.append(step) or [])
    trainer.global_step = 6
    resumed.on_train_batch_end(trainer, module, None, None, 0)  # the resumed run's first step repeats step 6
    assert mined_at == [2, 5, 6]

    fake = SimpleNamespace(
        scorer=GeneratorScorer(CountDomain()), device=torch.device("cpu"), hparams=SimpleNamespace(model="unused")
    )
    real = _miner(tiny_model_dir, tmp_path / "real")
    for texts in (["abcd", "efgh"], ["ijkl", "mnop"]):  # two rounds at the same global_step
        state = _state(texts, [2.0, 1.0])
        rows = real.mine(fake, state.samples, real.candidates(state.samples, state.rewards.total), step=4)
        write_part(tmp_path / "real", rows, MINED_SCHEMA)
    pool = read_pool(tmp_path / "real")
    assert len(pool) == 4 and pool["id"].is_unique and set(pool["step"]) == {4}


def test_candidates_take_what_the_monitors_flag_first_whatever_the_probe_says():
    from propel.domains import MathExpressionDomain
    from propel.rollouts.scorer import GeneratorScorer

    domain = MathExpressionDomain(strict=False)  # a lenient run: degenerate tasks stay valid, the monitors flag them
    texts = [
        " There are 12 cats. How many cats?\nExpression: 12",  # degenerate (answer stated), probe says no
        " 3 boxes hold 7 pens each. How many pens?\nExpression: 3 * 7",  # honest, probe says yes
        " 4 boxes hold 9 pens each. How many pens?\nExpression: 4 * 9",  # honest, probe says no
    ]
    samples = [Sample("p", t) for t in texts]
    GeneratorScorer(domain).score(samples)
    miner = AdversarialProbeMining(min_prob=0.5, max_per_round=8)
    picked = miner.candidates(samples, torch.tensor([-3.0, 2.0, -2.0]))
    assert [i for i, _ in picked] == [0, 1]
