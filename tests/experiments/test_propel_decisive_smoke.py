"""``experiments/propel_decisive/run.py`` in seconds: the paired analysis finds a planted difference and none where
there is none, decides by the pre-registered margin, is reproduced from its rows, and the warm-start pipeline runs
it composes are the demo's with their own seed. The measured tables are the experiment's own (its ``results/``)."""

from __future__ import annotations

import json

import numpy as np
import pytest


def _rows(exp, effects: dict[str, float], units, n_contexts=32, samples=4, noise=0.01):
    rng = np.random.default_rng(0)
    base_u = rng.uniform(0.0, 0.2, n_contexts)
    rows = []
    for w, s in units:
        for arm, effect in effects.items():
            policy = exp.unit_policy(w, s, arm)
            if any(r["policy"] == policy for r in rows):
                continue
            for c in range(n_contexts):
                for k in range(samples):
                    y = float(np.clip(base_u[c] + effect + rng.normal(0, noise), 0, 1))
                    rows.append({"policy": policy, "context": f"c{c:02d}", "k": k, "valid": True, "lenient": True,
                                 "reason": "ok", "topic": "money", "u": y, "strict_yield": y, "lenient_yield": y,
                                 "task": None})  # fmt: skip
    return rows


def test_planted_differences_are_found_and_decided_by_the_margin(experiment_module):
    exp = experiment_module("propel_decisive/run")
    units = [(w, s) for w in (0, 1) for s in (1, 2, 3)]
    effects = {"warm": 0.0, "gate": 0.0, "propel": 0.05, "zero_fit": 0.0, "features": 0.049, "text": 0.001,
               "shuffled": 0.0, "oracle": 0.1}  # fmt: skip
    a = exp.analyse(_rows(exp, effects, units), units)
    c = a["contrasts"]
    assert c["propel-zero_fit"]["decision"] == "superior" and c["propel-zero_fit"]["mean"] == pytest.approx(
        0.05, abs=0.01
    )
    assert "equivalent" in c["propel-features"]["decision"]  # 0.001 apart: resolved, and below the margin
    assert c["oracle-gate"]["decision"] == "superior" and c["gate-warm"]["units"] == len(units)
    lo, hi = c["propel-gate"]["bootstrap95"]
    assert lo < 0.05 < hi
    assert exp.decision((-0.05, 0.01)) == "inconclusive" and exp.decision((-0.05, -0.01)) == "inferior"
    assert exp.decision((-0.01, 0.015)) == "equivalent within 0.02"


def test_the_analysis_is_reproduced_from_its_rows(experiment_module, tmp_path):
    exp = experiment_module("propel_decisive/run")
    units = [(0, 1), (0, 2)]
    rows = _rows(exp, {arm: 0.0 for arm in (*exp.ARMS, "warm")}, units)
    summary = {"date": "x", "commit": "x", "planned_units": 10, "probes": {}, "analysis": exp.analyse(rows, units)}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    exp.write_rows(tmp_path / "rows.csv", rows)
    assert json.dumps(exp.reanalyse(tmp_path / "rows.csv"), sort_keys=True) == json.dumps(
        summary["analysis"], sort_keys=True
    )
    text = (tmp_path / "report.md").read_text()  # written from the verified summary
    assert text == exp.report(summary)
    assert "PARTIAL: the pre-registered design has 10 units" in text and "| propel-zero_fit | 2 |" in text
    primary = summary["analysis"]["contrasts"]["propel-zero_fit"]
    cells = " | ".join(f"{d:+.4f}" for d in primary["per_unit"])
    assert "| policy | ws0 s1 | ws0 s2 |" in text and f"| propel-zero_fit (primary) | {cells} | " in text
    # an arm missing from a unit (a run with --arms): a dash in its cells, the other unit's difference in place
    analysis = exp.analyse([r for r in rows if r["policy"] != "ws0-s1-text"], units)
    table = "\n".join(exp.unit_table(analysis))
    (d,) = analysis["contrasts"]["propel-text"]["per_unit"]
    y = analysis["policies"]["ws0-s2-text"]["strict_yield"]
    assert f"| text | - | {y:.4f} |" in table and f"| propel-text | - | {d:+.4f} |" in table


def test_each_warm_start_is_the_demos_pipeline_with_its_own_seed(experiment_module, tmp_path):
    from propel.pipeline.stage_configs import load_pipeline_config

    exp = experiment_module("propel_decisive/run")
    args = exp.parse_args(["--workdir", str(tmp_path)])
    cfg = load_pipeline_config("configs/demo_full.yaml", exp.pipeline_overrides(args, 1))
    assert cfg.stages == ["warm_start", "label", "probe"] and cfg.seed == 1
    assert cfg.configs["warm_start"]["trainer"]["max_steps"] == exp.WARM_STEPS
    from propel.losses.policy_gradient import LossSpec

    model = cfg.configs["warm_start"]["model"]["init_args"]
    assert model["lr"] == 3.0e-4 and LossSpec(**(model["loss"] or {})).beta == 0.04  # the pre-registered warm start
    assert cfg.configs["label"]["data"]["init_args"]["n_tasks"] == 300
    assert cfg.configs["probe"]["rivals"]["shuffles"] == 20
    assert [r["class_path"] for r in exp.reward_config("gate", {})] == ["propel.rewards.ValidityReward"]
    assert exp.reward_config("features", {"features": "f"})[0]["init_args"]["artifact"] == "f"


def test_an_arm_continues_its_warm_start_under_the_seed_the_checkpoint_was_made_with(
    experiment_module, tmp_path, monkeypatch
):
    """The resume refuses a seed_everything other than the checkpoint's: an arm of warm start 1 sets 1 (the overlay
    once set 0 for every warm start, and warm start 1's first arm stopped there); the context stream is the unit's."""
    import yaml

    exp = experiment_module("propel_decisive/run")
    args = exp.parse_args(["--workdir", str(tmp_path)])
    calls = []

    def fake_fit(subcommand, config, files):  # what the arm's `propel fit` is given; its last adapter appears
        calls.append(files)
        root = tmp_path / "ws1" / "seed3" / "gate"
        (root / "adapters" / f"step-{exp.WARM_STEPS + args.steps}").mkdir(parents=True)

    monkeypatch.setattr("propel.cli.lightning_cli.run_lightning", fake_fit)
    exp.train(args, 1, tmp_path / "ws1", 3, "gate", {})
    overlay = yaml.safe_load((tmp_path / "ws1" / "seed3" / "gate" / "overlay.yaml").read_text())
    assert overlay["seed_everything"] == 1 and overlay["data"]["init_args"]["seed"] == 3
    assert calls[0][-1] == str(tmp_path / "ws1" / "warm_start" / "checkpoints" / "last.ckpt")


def test_the_unit_budget_stops_before_the_next_warm_starts_stages(experiment_module, tmp_path, monkeypatch):
    """``--max-units``: all arms of a unit before the next, and no next warm start once the budget is spent (a
    session's budget is not spent on a warm start no unit of it will use)."""
    exp = experiment_module("propel_decisive/run")
    prepared, trained = [], []

    def prepare(args, w):
        ws = tmp_path / f"ws{w}"
        (ws / "warm_start").mkdir(parents=True, exist_ok=True)
        (ws / "warm_start" / "summary.json").write_text(json.dumps({"adapter": f"ws{w}/adapter"}))
        prepared.append(w)
        return ws

    def evaluate(args, policy, adapter, solver):  # the same planted rows under each policy's name
        return [{**r, "policy": policy} for r in _rows(exp, {"warm": 0.0}, [(0, 1)])]

    monkeypatch.setattr("propel.engines.factory.make_engine", lambda *a, **k: None)
    monkeypatch.setattr(exp, "prepare", prepare)
    monkeypatch.setattr(exp, "evaluate", evaluate)
    monkeypatch.setattr(exp, "reward_artifacts", lambda ws, s, args: {})
    monkeypatch.setattr(exp, "train", lambda args, w, ws, s, arm, artifacts: trained.append((ws.name, s, arm)) or "a")
    summary = exp.main(["--workdir", str(tmp_path / "work"), "--max-units", "1"])
    assert prepared == [0]  # warm start 1 is not prepared
    assert trained == [("ws0", 1, arm) for arm in exp.ARMS]  # every arm of the one unit
    assert summary["planned_units"] == 10 and (tmp_path / "work" / "report.md").exists()


def test_a_new_session_continues_from_the_committed_rows(experiment_module, tmp_path, monkeypatch):
    """The work folder lives in one checkout: a rerun with ``--out`` keeps every committed policy, runs only the
    missing arms, and refuses a warm start that, prepared again, no longer gives its committed samples."""
    exp = experiment_module("propel_decisive/run")
    prepared, trained, shift = [], [], {"warm": 0.0}

    def prepare(args, w):
        ws = tmp_path / "work" / f"ws{w}"
        (ws / "warm_start").mkdir(parents=True, exist_ok=True)
        (ws / "warm_start" / "summary.json").write_text(json.dumps({"adapter": "a"}))
        prepared.append(w)
        return ws

    def evaluate(args, policy, adapter, solver):
        effect = shift["warm"] if policy.endswith("-warm") else 0.01 * len(policy)
        return [{**r, "policy": policy} for r in _rows(exp, {"warm": effect}, [(0, 1)])]

    monkeypatch.setattr("propel.engines.factory.make_engine", lambda *a, **k: None)
    monkeypatch.setattr(exp, "prepare", prepare)
    monkeypatch.setattr(exp, "evaluate", evaluate)
    monkeypatch.setattr(exp, "reward_artifacts", lambda ws, s, args: {"x": "y"})
    monkeypatch.setattr(exp, "train", lambda args, w, ws, s, arm, artifacts: trained.append((s, arm)) or "a")
    out = tmp_path / "results"
    first = exp.main(["--workdir", str(tmp_path / "work"), "--out", str(out), "--max-units", "1"])
    (tmp_path / "work").rename(tmp_path / "lost")  # a new session: the work folder is gone, the results are not
    trained.clear()
    second = exp.main(["--workdir", str(tmp_path / "work"), "--out", str(out), "--max-units", "2"])
    assert trained == [(2, arm) for arm in exp.ARMS] and prepared == [0, 0]
    assert second["analysis"]["units"] == [[0, 1], [0, 2]]
    assert second["analysis"]["policies"]["ws0-s1-gate"] == first["analysis"]["policies"]["ws0-s1-gate"]
    exp.reanalyse(out / "rows.csv")
    (tmp_path / "work").rename(tmp_path / "lost2")
    shift["warm"] = 0.05  # prepared again, the warm start now samples other tasks
    with pytest.raises(SystemExit, match="does not give its committed samples"):
        exp.main(["--workdir", str(tmp_path / "work"), "--out", str(out), "--max-units", "3"])
    with pytest.raises(SystemExit, match="other settings"):
        exp.main(["--workdir", str(tmp_path / "w"), "--out", str(out), "--steps", "6"])


def test_a_session_stopped_in_a_partly_done_unit_keeps_its_committed_arms(experiment_module, tmp_path, monkeypatch):
    """A unit's first arms are committed, then a new session is stopped while it trains the next arm: the saves it
    made on the way (each earlier unit re-saved as complete) still hold the committed arms, so the session after it
    does not train them again."""
    exp = experiment_module("propel_decisive/run")
    trained, stop_at = [], {"n": None}

    def prepare(args, w):
        ws = tmp_path / "work" / f"ws{w}"
        (ws / "warm_start").mkdir(parents=True, exist_ok=True)
        (ws / "warm_start" / "summary.json").write_text(json.dumps({"adapter": "a"}))
        return ws

    def train(args, w, ws, s, arm, artifacts):
        if stop_at["n"] is not None and len(trained) == stop_at["n"]:
            raise KeyboardInterrupt  # Ctrl-C while this arm trains
        trained.append((s, arm))
        return "a"

    monkeypatch.setattr("propel.engines.factory.make_engine", lambda *a, **k: None)
    monkeypatch.setattr(exp, "prepare", prepare)
    rows = _rows(exp, {"warm": 0.0}, [(0, 1)])
    monkeypatch.setattr(exp, "evaluate", lambda args, policy, adapter, solver: [{**r, "policy": policy} for r in rows])
    monkeypatch.setattr(exp, "reward_artifacts", lambda ws, s, args: {"x": "y"})
    monkeypatch.setattr(exp, "train", train)
    out, n = tmp_path / "results", len(exp.ARMS)
    argv = ["--workdir", str(tmp_path / "work"), "--out", str(out), "--max-units", "2"]
    stop_at["n"] = n + 3  # unit 1 whole, unit 2's first three arms
    with pytest.raises(KeyboardInterrupt):
        exp.main(argv)
    partial = {exp.unit_policy(0, 2, arm) for arm in exp.ARMS[:3]}
    assert partial <= {r["policy"] for r in exp.read_rows(out / "rows.csv")}
    (tmp_path / "work").rename(tmp_path / "lost1")  # a new session, stopped in its first arm
    trained.clear()
    stop_at["n"] = 0
    with pytest.raises(KeyboardInterrupt):
        exp.main(argv)
    assert partial <= {r["policy"] for r in exp.read_rows(out / "rows.csv")}
    (tmp_path / "work").rename(tmp_path / "lost2")  # the next session runs to the end: the three are not trained again
    trained.clear()
    stop_at["n"] = None
    assert exp.main(argv)["analysis"]["units"] == [[0, 1], [0, 2]]
    assert trained == [(2, arm) for arm in exp.ARMS[3:]]
