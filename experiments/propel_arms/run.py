"""Does GRPO against the probe beat GRPO against the validity gate alone? PROPEL's arms, several seeds each.

The offline ranking test (``experiments/probe_ranking/run.py``, ``docs/experiments/probe_ranking/``) found that on
the demo's math domain the probe's top pick of a group's valid tasks beats a random valid pick by +0.063 [+0.034,
+0.095] in band utility. This asks whether that survives RL: the same GRPO run (the demo's: LoRA on the bundled
model, group 8, 2 contexts per step, 64 new tokens, lr 1e-4; 12 steps, the most 12 runs fit in about 80 min at ~26 s
a step on 2 CPU cores) trained with each reward, on the same context stream within a seed:

- ``gate``: 1 for a valid task, the floor otherwise (``ValidityReward``): is the probe worth more than validity?
- ``propel``: the hard-gated probe logit (``ProbeReward``), the probe trained as PROPEL trains it on the ranking
  run's labeled groups (sampled in-band labels; layer x pooling x arch chosen on a grouped inner split by AUROC).
- ``shuffled``: the same probe architecture and cell trained on shuffled labels, its own pool logit quantiles:
  does the probe's *information* matter, or any within-valid reward variance?
- ``oracle``: the exact band utility ``P(1 <= Bin(8, p) <= 3)`` of each valid task (``ExactUtilityReward``): the
  ceiling any predictor of the label can reach (solver-in-the-loop without its sampling noise).
- ``base``: the untrained generator (evaluated once; every seed's arms are compared with it).

Pre-registered analysis (fixed before the runs; the numbers are printed, never chosen afterwards):
- **Primary endpoint: yield** = the mean over evaluation samples of ``u`` for a valid task that is not a copy of an
  in-context example, 0 otherwise: the expected in-band tasks per generated sample, what a user buys. Evaluation:
  ``--eval-contexts`` fixed contexts (their own seed) x ``--eval-samples`` samples at temperature 1 and the training
  token budget; a completion cut at the limit is invalid (``Domain.cut_completions_invalid``); ``u`` is exact
  (teacher forcing with the frozen base model as solver), so the endpoint has no trial-sampling noise.
- **Secondary**: validity, mean ``u`` among valid tasks, copies, and per step of training the share of advantage
  variance that comes from within-valid reward differences (``train/adv_share_within_valid``) against validity.
- **Contrasts**: propel - gate (the claim), propel - shuffled (information, not variance), oracle - gate (the room
  there is), gate - base. Per seed, the paired difference of the two arms' endpoints (same evaluation contexts and
  sampling seeds); the mean over seeds with a t interval over seeds, and a bootstrap over seeds and, within them,
  evaluation contexts.
- **Power**: the evaluation's own noise is small (per-sample sd of the yield about 0.1, so 256 samples give a
  standard error near 0.006 per arm and seed); what limits the design is the run-to-run sd of a paired difference,
  unknown before the runs. With 3 seeds a difference of about 3.1 times that sd has 80% power ((t(0.975, 2) + t(0.8,
  2)) / sqrt(3)); the report prints the observed sd and the detectable difference at the seeds run.
- **Stopping rule**: every arm x seed runs ``--steps`` steps; the analysis runs once all are evaluated; a seed is
  never dropped or added after looking.

**The warm-started design** (``--warm-start-steps``, ``make exp-propel-warm``). In the first run every arm started
from the base generator at 25% validity, so the gate's floor made most of the advantage variance (the within-valid
share was 2.5-4%) and no reward could show what it adds among valid tasks. Here one gate-only run of 24 steps at lr
3e-4 (validity 0.8-1.0 in its last steps) is the start of every arm of every seed: its LoRA weights, optimizer state,
random state and stream position; a seed is then its own context stream. Fixed before the arms ran: 4 seeds x
(gate, propel, oracle) x 12 steps, the same endpoint, contrasts and stopping rule as above, plus ``gate - warm`` and
``propel - warm``; the shuffled-label arm runs (same seeds) only if ``propel - gate``'s t interval excludes zero,
since it asks where a measured gain comes from. With 4 seeds a paired difference of (t(0.975, 3) + t(0.8, 3)) / 2 =
2.1 times the seed sd has 80% power; at the first run's seed sd of about 0.01 that is about 0.02 in yield.
(``propel - gate`` excluded zero, so the shuffled arm ran next on the same seeds; see
``docs/experiments/propel_arms_warm``.)

Stages write under ``--workdir`` and resume: ``probes/`` (the two probe artifacts), ``<seed>/<arm>/`` (each GRPO
run: config, checkpoints, adapters, CSV metrics; a cut run resumes from ``last.ckpt``), ``eval/<seed>-<arm>.jsonl``
(the evaluation samples), then ``summary.json``, ``report.md`` and ``rows.csv`` (one row per evaluation sample),
copied to ``--out``. ``--from-rows <rows.csv>`` recomputes the analysis from committed rows.

    make exp-propel     # 3 seeds x 4 arms x 12 steps + 13 evaluations: about 90 min on an idle 2-core machine
    make exp-propel-warm  # 1 warm start + 4 seeds x 4 arms x 12 steps + 18 evaluations: about 150 min
    python experiments/propel_arms/run.py --from-rows docs/experiments/propel_arms/rows.csv
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import json
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import torch
import yaml

from propel.domains.exact_trials import band_utility, solve_probabilities
from propel.engines.engine import SamplingSpec
from propel.engines.factory import make_engine
from propel.metrics.intervals import t_interval
from propel.pipeline.stages import csv_metrics, csv_trainer_overlay, latest_adapter
from propel.records import Task
from propel.rollouts.scorer import GeneratorScorer
from propel.rollouts.single_turn import generate_tasks

ROOT = Path(__file__).resolve().parents[2]


def _ranking_driver():
    """The ranking experiment's driver (``experiments/probe_ranking/run.py``): its groups, labels and probe fit."""
    path = ROOT / "experiments" / "probe_ranking" / "run.py"
    spec = importlib.util.spec_from_file_location("probe_ranking_run", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ranking = _ranking_driver()
ARMS = ("gate", "propel", "shuffled", "oracle")
CONTRASTS = (
    ("propel", "gate"),
    ("propel", "shuffled"),
    ("oracle", "gate"),
    ("gate", "base"),
    ("propel", "base"),
    ("gate", "warm"),
    ("propel", "warm"),
)
FIXED = ("base", "warm")  # policies evaluated once (no seed): the untrained generator and the warm start
EVAL_SEED = 10_000
SOLVER = {"n_trials": ranking.N_TRIALS, "band": list(ranking.BAND), "max_new_tokens": 8, "temperature": 1.0}


# ------------------------------------------------------------------------------------------------ probes
def probes(args, work: Path) -> dict[str, str]:
    """``probes/propel`` and ``probes/shuffled``: artifacts ``ProbeReward`` loads, fit on the ranking run's valid
    tasks (run first, resumably, if its workdir lacks them) with the sampled in-band label, and shuffled labels."""
    out = {name: work / "probes" / name for name in ("propel", "shuffled")}
    if all((p / "probe.json").exists() for p in out.values()):
        return {k: str(v) for k, v in out.items()}
    rank_dir = Path(args.ranking_workdir)
    if not (rank_dir / "features.pt").exists():
        ranking.main(
            ["--contexts", str(args.ranking_contexts), "--workdir", str(rank_dir), "--layers", *map(str, args.layers)]
        )
    tasks = [r for r in ranking._jsonl(rank_dir / "tasks.jsonl") if r["valid"]]
    exact = {r["id"]: r["p"] for r in ranking._jsonl(rank_dir / "exact.jsonl")}
    saved = torch.load(rank_dir / "features.pt")
    ids = [ranking._id(r) for r in tasks]
    if saved["ids"] != ids:
        raise SystemExit(f"{rank_dir}/features.pt does not match its tasks.jsonl: delete the folder and rerun")
    feats = saved["features"]
    lo, hi = ranking.BAND
    y = np.array([lo <= ranking.label_count(i, exact[i], 0) <= hi for i in ids], dtype=np.float32)
    groups = np.array([r["group"] for r in tasks])
    rng = np.random.default_rng(args.seed)
    shuffled = rng.permutation(y)
    val_groups = set(rng.choice(sorted(set(groups)), size=max(1, len(set(groups)) // 5), replace=False))
    va, fit = np.isin(groups, list(val_groups)), ~np.isin(groups, list(val_groups))
    key, arch, best = ranking.select_cell(feats, sorted(feats), fit, va, y, args.seed)
    layer, pooling = int(key.split("/")[0].removeprefix("layer")), key.split("/")[1]
    from propel.probes.gate import logit_quantiles

    x = feats[key].float()
    for name, labels in (("propel", y), ("shuffled", shuffled)):
        module = ranking._fit_probe(x[fit], torch.tensor(labels[fit]), x[va], torch.tensor(labels[va]), arch, args.seed)
        artifact = module.to_artifact(reference_model=ranking.MODEL, layer=layer, pooling=pooling)
        with torch.no_grad():
            artifact.logit_quantiles = logit_quantiles(module(x))
        artifact.metrics = {
            "cell": f"{key}/{arch}",
            "inner_auroc": float(best),
            "rows": len(y),
            "positives": int(labels.sum()),
        }
        artifact.save(out[name])
    print(f"probes: {key}/{arch} (inner AUROC {best:.3f}), {int(y.sum())}/{len(y)} positives", flush=True)
    return {k: str(v) for k, v in out.items()}


# ------------------------------------------------------------------------------------------------ training
def reward_config(arm: str, artifacts: dict[str, str], domain: dict) -> list[dict]:
    if arm == "gate":
        return [{"class_path": "propel.rewards.ValidityReward"}]
    if arm in ("propel", "shuffled"):
        return [{"class_path": "propel.rewards.probe_reward.ProbeReward", "init_args": {"artifact": artifacts[arm]}}]
    if arm == "oracle":
        return [
            {
                "class_path": "propel.rewards.exact_utility.ExactUtilityReward",
                "init_args": {"domain": domain, "solver": SOLVER},
            }
        ]
    raise SystemExit(f"unknown arm {arm!r}; choose from {ARMS}")


def arm_overlay(
    args, arm: str, seed: int, artifacts: dict[str, str], root: Path, *, steps: int, lr: float, warm: bool = False
) -> dict:
    """What the arm sets on top of ``configs/grpo/base.yaml`` + ``configs/math/grpo.yaml``. ``seed`` is the context
    stream's; a run continuing the warm start keeps its global seed (the resume restores its random state)."""
    domain = yaml.safe_load((ROOT / "configs" / "math" / "domain.yaml").read_text())
    return {
        "seed_everything": 0 if warm else seed,
        "trainer": csv_trainer_overlay(root, steps),
        "model": {
            "init_args": {
                "lr": lr,
                "micro_batch_size": 16,  # as every committed run (the demo config's 4 came later; same gradients)
                "max_new_tokens": args.max_new_tokens,
                "group_size": args.group_size,
                "rewards": reward_config(arm, artifacts, domain),
            }
        },
        "data": {"init_args": {"contexts_per_step": args.contexts_per_step, "seed": seed}},
    }


def warm_start(args, work: Path) -> Path | None:
    """With ``--warm-start-steps`` W: one gate-only run (seed 0, ``--warm-start-lr``) of W steps, the checkpoint every
    arm of every seed continues from (its LoRA weights, optimizer state, random state and stream position; each seed
    then reads its own context stream). Its adapter is evaluated as the ``warm`` policy."""
    if not args.warm_start_steps:
        return None
    root = work / "warm"
    start = root / "start.ckpt"
    if not start.exists():
        config = arm_overlay(args, "gate", 0, {}, root, steps=args.warm_start_steps, lr=args.warm_start_lr)
        _fit(root, config, args.warm_start_steps, "the warm start (gate)", init=None)
        shutil.copy(root / "checkpoints" / "last.ckpt", start)
    return start


def train(args, arm: str, seed: int, artifacts: dict[str, str], work: Path, init: Path | None) -> str:
    """One arm's GRPO run, from scratch or continuing the warm start ``init``; its final adapter."""
    steps = args.steps + (args.warm_start_steps if init else 0)
    config = arm_overlay(args, arm, seed, artifacts, work / str(seed) / arm, steps=steps, lr=args.lr, warm=bool(init))
    return _fit(work / str(seed) / arm, config, steps, f"seed {seed} {arm}", init=init)


def _fit(root: Path, config: dict, steps: int, what: str, init: Path | None) -> str:
    """``propel fit`` with ``config`` as the overlay (resumed from ``last.ckpt`` when cut short, from ``init`` when
    it starts; skipped when its final adapter exists); the final adapter."""
    from propel.cli.lightning_cli import run_lightning

    final = root / "adapters" / f"step-{steps}"
    if final.exists():
        return str(final)
    overlay = root / "overlay.yaml"
    root.mkdir(parents=True, exist_ok=True)
    if overlay.exists() and yaml.safe_load(overlay.read_text()) != config:
        raise SystemExit(f"{root} was started with other settings: delete it to train {what} again")
    overlay.write_text(yaml.safe_dump(config, sort_keys=False))
    last = root / "checkpoints" / "last.ckpt"
    resume = last if last.exists() else init
    t0 = time.monotonic()
    extra = ["-c", str(ROOT / "configs/math/grpo.yaml"), "-c", str(overlay)]
    run_lightning("fit", ROOT / "configs/grpo/base.yaml", [*extra, *(["--ckpt_path", str(resume)] if resume else [])])
    adapter = latest_adapter(root / "adapters")
    if adapter is None or Path(adapter) != final:
        raise SystemExit(f"{what} did not save its step-{steps} adapter under {root}")
    print(f"train: {what} done in {time.monotonic() - t0:.0f}s", flush=True)
    return adapter


# ------------------------------------------------------------------------------------------------ evaluation
def evaluate(args, name: str, adapter: str | None, solver, work: Path) -> list[dict]:
    """``eval/<name>.jsonl``: ``--eval-samples`` tasks per fixed evaluation context from the policy (the base model
    with ``adapter``), each valid one's exact p and u from the frozen base solver."""
    path = work / "eval" / f"{name}.jsonl"
    if path.exists():
        return ranking._jsonl(path)
    from propel.models.trained_policy import load_policy

    domain = ranking.DOMAINS["math"]["build"]()
    shots = ranking.DOMAINS["math"]["shots"]()
    model, tokenizer = load_policy(ranking.MODEL, adapter)  # the adapter merged in: plain HF generation
    model.eval()
    engine = make_engine("hf", ranking.MODEL, model=model, tokenizer=tokenizer)
    contexts = domain.contexts(args.eval_contexts, seed=EVAL_SEED)
    sampling = SamplingSpec(n=args.eval_samples, max_new_tokens=args.max_new_tokens, temperature=1.0)
    rows = []
    for start in range(0, len(contexts), args.chunk):
        chunk = contexts[start : start + args.chunk]
        torch.manual_seed(EVAL_SEED + start)  # the same sampling stream for every policy: paired samples
        with GeneratorScorer(domain) as scorer:
            sampling.stop = list(scorer.stop)
            groups = generate_tasks(scorer, engine, chunk, sampling)
        for ctx, group in zip(chunk, groups, strict=True):
            for k, s in enumerate(group):
                valid = bool(s.valid)
                rows.append(
                    {
                        "policy": name,
                        "context": ctx.id,
                        "k": k,
                        "valid": valid,
                        "reason": s.info.get("reason", ""),
                        "copy": bool(valid and s.task.data["problem"].strip() in shots),
                        "task": s.task.to_json() if valid else None,
                    }
                )
    valid = [r for r in rows if r["valid"]]
    ps = solve_probabilities(domain, [Task.from_json(r["task"]) for r in valid], solver, temperature=1.0)
    for r, p in zip(valid, ps, strict=True):
        r["p"], r["u"] = p, band_utility(p, ranking.N_TRIALS, ranking.BAND)
    for r in rows:
        r.setdefault("p", None)
        r.setdefault("u", 0.0)
        r["yield"] = r["u"] if r["valid"] and not r["copy"] else 0.0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"eval {name}: {len(valid)}/{len(rows)} valid, yield {np.mean([r['yield'] for r in rows]):.4f}", flush=True)
    return rows


# ------------------------------------------------------------------------------------------------ analysis
def _policy(seed: int | None, arm: str) -> str:
    return arm if arm in FIXED else f"{seed}-{arm}"


def _per_context(rows: list[dict], policy: str, contexts: list[str]) -> np.ndarray:
    """The policy's mean yield per evaluation context, in ``contexts`` order."""
    by = {c: [] for c in contexts}
    for r in rows:
        if r["policy"] == policy:
            by[r["context"]].append(r["yield"])
    return np.array([np.mean(by[c]) for c in contexts])


def _iv(interval) -> list[float] | None:
    return None if interval is None else [float(interval.low), float(interval.high)]


def analyse(rows: list[dict], seeds: list[int], arms: list[str]) -> dict:
    contexts = sorted({r["context"] for r in rows})
    fixed = [f for f in FIXED if any(r["policy"] == f for r in rows)]
    policies = {}
    for arm in [*fixed, *arms]:
        for seed in [None] if arm in FIXED else seeds:
            name = _policy(seed, arm)
            mine = [r for r in rows if r["policy"] == name]
            valid = [r for r in mine if r["valid"]]
            policies[name] = {
                "samples": len(mine),
                "yield": float(np.mean([r["yield"] for r in mine])),
                "valid_rate": len(valid) / len(mine),
                "u_valid": float(np.mean([r["u"] for r in valid])) if valid else None,
                "copies": sum(r["copy"] for r in mine),
            }
    per = {name: _per_context(rows, name, contexts) for name in policies}
    contrasts = {}
    for a, b in CONTRASTS:
        if a not in [*fixed, *arms] or b not in [*fixed, *arms]:
            continue
        diffs = np.array([per[_policy(s, a)].mean() - per[_policy(s, b)].mean() for s in seeds])
        mat = np.stack([per[_policy(s, a)] - per[_policy(s, b)] for s in seeds])  # seeds x contexts

        sd = float(diffs.std(ddof=1)) if len(diffs) > 1 else None
        contrasts[f"{a}-{b}"] = {
            "per_seed": diffs.tolist(),
            "mean": float(diffs.mean()),
            "t95": _iv(t_interval(diffs)) if len(diffs) > 1 else None,
            "bootstrap95": _hierarchical_bootstrap(mat) if len(seeds) > 1 else None,
            "seed_sd": sd,
            "detectable_80": _detectable(sd, len(seeds)),
        }
    return {"policies": policies, "contrasts": contrasts, "contexts": len(contexts), "seeds": seeds}


def _hierarchical_bootstrap(mat: np.ndarray, n: int = 2000, seed: int = 0) -> list[float]:
    """95% percentile interval of the mean paired difference, resampling seeds (rows) and, within the resample,
    evaluation contexts (columns) with replacement."""
    rng = np.random.default_rng(seed)
    reps = [
        mat[rng.integers(0, mat.shape[0], mat.shape[0])][:, rng.integers(0, mat.shape[1], mat.shape[1])].mean()
        for _ in range(n)
    ]
    return [float(np.percentile(reps, 2.5)), float(np.percentile(reps, 97.5))]


def _detectable(sd: float | None, n: int) -> float | None:
    """The paired difference a two-sided 5% t test over ``n`` seeds detects with 80% power at seed sd ``sd``."""
    if sd is None or n < 2:
        return None
    from scipy.stats import t

    return float((t.ppf(0.975, n - 1) + t.ppf(0.8, n - 1)) * sd / np.sqrt(n))


def training_curves(work: Path, seeds: list[int], arms: list[str]) -> dict:
    """Per arm: mean over seeds and steps of the training validity, reward and within-valid advantage share."""
    out = {}
    for arm in arms:
        keys = {"valid_rate": "train/valid_rate", "adv_share_within_valid": "train/adv_share_within_valid"}
        vals = {k: [] for k in keys}
        for seed in seeds:
            metrics = csv_metrics(work / str(seed) / arm)
            for k, col in keys.items():
                vals[k] += [v for v in metrics.get(col, []) if v == v]
        out[arm] = {k: (float(np.mean(v)) if v else None) for k, v in vals.items()}
    return out


def _fmt(x, digits=3) -> str:
    return "n/a" if x is None else f"{x:+.{digits}f}"


def report(summary: dict) -> str:
    a = summary["analysis"]
    lines = [
        "# Does GRPO against the probe beat GRPO against the validity gate alone?",
        "",
        f"Measured {summary['date']} at commit {summary['commit']}: {len(a['seeds'])} seeds x "
        f"{len(summary['arms'])} arms x {summary['settings']['steps']} GRPO steps; each policy evaluated on "
        f"{a['contexts']} fixed contexts x {summary['settings']['eval_samples']} samples "
        "(`python experiments/propel_arms/run.py`, design and pre-registered analysis in its header).",
        *_warm_line(summary["settings"]),
        "",
        "## Per policy",
        "",
        "| policy | yield (in-band tasks per sample) | valid | mean u of valid | copies |",
        "|---|---|---|---|---|",
    ]
    for name, p in a["policies"].items():
        u = "n/a" if p["u_valid"] is None else f"{p['u_valid']:.3f}"
        lines.append(f"| {name} | {p['yield']:.4f} | {p['valid_rate']:.3f} | {u} | {p['copies']} |")
    lines += [
        "",
        "## Paired contrasts (per seed, same evaluation contexts and sampling seeds)",
        "",
        "| contrast | per seed | mean | 95% t over seeds | 95% bootstrap (seeds, contexts) | seed sd "
        "| detectable (80%) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, c in a["contrasts"].items():
        per = ", ".join(f"{d:+.4f}" for d in c["per_seed"])
        t95 = "n/a" if c["t95"] is None else f"[{c['t95'][0]:+.4f}, {c['t95'][1]:+.4f}]"
        bs = "n/a" if c["bootstrap95"] is None else f"[{c['bootstrap95'][0]:+.4f}, {c['bootstrap95'][1]:+.4f}]"
        lines.append(
            f"| {name} | {per} | {c['mean']:+.4f} | {t95} | {bs} | {_fmt(c['seed_sd'], 4)} | "
            f"{_fmt(c['detectable_80'], 4)} |"
        )
    curves = summary.get("training", {})
    if curves:
        lines += [
            "",
            "## During training (mean over seeds and steps)",
            "",
            "| arm | valid rate | within-valid share of advantage variance |",
            "|---|---|---|",
        ]
        for arm, c in curves.items():
            lines.append(f"| {arm} | {_fmt(c['valid_rate'])} | {_fmt(c['adv_share_within_valid'])} |")
    lines += ["", "## Verdict", "", summary["verdict"], ""]
    return "\n".join(lines)


def _warm_line(settings: dict) -> list[str]:
    w = settings.get("warm_start_steps") or 0
    if not w:
        return []
    return [
        "",
        f"Every arm continues one gate-only run of {w} steps (lr {settings['warm_start_lr']:g}; its adapter is the "
        "`warm` policy): each arm's steps count from there, on its seed's context stream.",
    ]


def verdict(a: dict) -> str:
    def says(name: str, what: str) -> str:
        c = a["contrasts"].get(name)
        if c is None or c["t95"] is None:
            return f"{what}: not measured."
        lo, hi = c["t95"]
        sign = "higher" if lo > 0 else "lower" if hi < 0 else "not distinguishable from zero"
        power = _fmt(c["detectable_80"], 4)
        return f"{what}: {c['mean']:+.4f} [{lo:+.4f}, {hi:+.4f}] ({sign}; detectable at 80% power: {power})."

    return " ".join(
        [
            says("propel-gate", "PROPEL minus gate alone"),
            says("propel-shuffled", "PROPEL minus a probe on shuffled labels"),
            says("oracle-gate", "The oracle (exact utility) minus gate alone"),
            says("gate-base", "Gate alone minus the untrained generator"),
            *([says("gate-warm", "Gate alone minus the warm start")] if "gate-warm" in a["contrasts"] else []),
        ]
    )


COLUMNS = ("policy", "context", "k", "valid", "reason", "copy", "p", "u", "yield", "problem", "expression")


def write_rows(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        for r in rows:
            data = Task.from_json(r["task"]).data if r["task"] else {}
            w.writerow(
                {**{k: r.get(k) for k in COLUMNS}, "problem": data.get("problem"), "expression": data.get("expression")}
            )


def read_rows(path: Path) -> list[dict]:
    out = []
    for r in csv.DictReader(path.open()):
        out.append(
            {
                **r,
                "k": int(r["k"]),
                "valid": r["valid"] == "True",
                "copy": r["copy"] == "True",
                "u": float(r["u"]),
                "yield": float(r["yield"]),
            }
        )
    return out


def reanalyse(path: Path) -> dict:
    """Every number of the committed summary recomputed from its rows (refused where one differs)."""
    summary = json.loads((path.parent / "summary.json").read_text())
    analysis = analyse(read_rows(path), summary["analysis"]["seeds"], summary["arms"])
    if json.dumps(analysis, sort_keys=True) != json.dumps(summary["analysis"], sort_keys=True):
        raise SystemExit(f"the rows in {path} do not reproduce {path.parent / 'summary.json'}")
    print(f"{path}: every number of summary.json reproduced")
    return analysis


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--workdir", default="runs/experiments/propel_arms")
    p.add_argument("--out", default=None, help="copy summary.json, report.md and rows.csv here")
    p.add_argument("--ranking-workdir", default="runs/experiments/probe_ranking")
    p.add_argument("--ranking-contexts", type=int, default=160)
    p.add_argument("--layers", type=int, nargs="+", default=[6, 12, 18, 24])
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument(
        "--warm-start-steps",
        type=int,
        default=0,
        help="first train one gate-only run this long; every arm continues from it (validity near 1: the probe then "
        "carries the within-valid signal)",
    )
    p.add_argument("--warm-start-lr", type=float, default=3e-4)
    p.add_argument("--group-size", type=int, default=8)
    p.add_argument("--contexts-per-step", type=int, default=2)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--eval-contexts", type=int, default=64)
    p.add_argument("--eval-samples", type=int, default=4)
    p.add_argument("--chunk", type=int, default=16)
    p.add_argument("--seed", type=int, default=0, help="the probes' split and label shuffle")
    p.add_argument("--from-rows", default=None, help="recompute the analysis from a committed rows.csv")
    return p.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.from_rows:
        return reanalyse(Path(args.from_rows))
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout
    artifacts = probes(args, work) if {"propel", "shuffled"} & set(args.arms) else {}
    solver = make_engine("hf", ranking.MODEL)
    rows = evaluate(args, "base", None, solver, work)
    init = warm_start(args, work)
    if init is not None:
        warm = work / "warm" / "adapters" / f"step-{args.warm_start_steps}"
        rows += evaluate(args, "warm", str(warm), solver, work)
    for seed in args.seeds:
        for arm in args.arms:
            adapter = train(args, arm, seed, artifacts, work, init)
            rows += evaluate(args, _policy(seed, arm), adapter, solver, work)
    analysis = analyse(rows, args.seeds, args.arms)
    summary = {
        "date": time.strftime("%Y-%m-%d"),
        "commit": commit.strip(),
        "settings": {k: v for k, v in vars(args).items()},
        "arms": args.arms,
        "probes": {k: json.loads((Path(v) / "probe.json").read_text()).get("metrics") for k, v in artifacts.items()},
        "training": training_curves(work, args.seeds, args.arms),
        "analysis": analysis,
        "verdict": verdict(analysis),
    }
    (work / "summary.json").write_text(json.dumps(summary, indent=1))
    (work / "report.md").write_text(report(summary))
    write_rows(work / "rows.csv", rows)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        for name in ("summary.json", "report.md", "rows.csv"):
            shutil.copy(work / name, out / name)
    print(report(summary))
    return summary


if __name__ == "__main__":
    main()
