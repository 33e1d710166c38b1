"""Does the activation probe buy strict yield over its cheapest rivals at this scale? PROPEL's decisive experiment.

PRE-REGISTRATION (written 2026-12-06, before any run of this script; changed only by appending dated amendments)

Setting: generator = frozen reference = solver = the bundled SmolLM2-135M-Instruct; the math word-problem domain of
the demo (``configs/math/domain.yaml``: few-shot generator and solver) under **strict validity** (a degenerate task,
``propel.domains.math.degeneracy``, is invalid in training, labeling and evaluation). GRPO as the demo runs it:
LoRA r16, group 8, 2 contexts per step, 64 new tokens, lr 1e-4.

Units. ``W`` independent warm starts (``--warm-starts``, default 2): each is its own pipeline run
(``[warm_start, label, probe]`` of ``configs/demo.yaml`` with ``seed = w``): 24 gate-only steps at lr 3e-4, then
``--label-tasks`` (300) of its tasks labeled by the solver (exact solve probabilities), then the probe stage (sweep,
selection, and the rivals cross-fitted on the same folds). Every arm of warm start ``w`` continues its checkpoint for
12 steps on context stream ``s`` (``--seeds``, default 1..5): a unit is a (warm start, seed) pair; within a unit
every arm sees the same context stream and every policy is evaluated on the same 64 contexts x 4 samples (one
sampling seed): paired.

Arms (the reward each continuation trains on; every one hard-gated by strict validity with the same floor rule):
``gate`` (the validity gate alone), ``propel`` (the probe stage's probe, whatever the competition chose),
``zero_fit`` (the domain's unfitted rule: prefer the smaller answer), ``features`` (logistic regression on the cheap
task features), ``text`` (TF-IDF + logistic regression), ``shuffled`` (the probe's cell trained on labels permuted
with the unit's own permutation), ``oracle`` (the exact band utility: the ceiling).

Endpoint (primary): **strict yield** = mean over the 256 evaluation samples of ``u`` (the exact chance that 8 solver
trials land 1..3 solves) for a strictly valid task, 0 otherwise. Secondary: lenient yield (degenerate tasks scored
by their ``u``), strict validity, degenerate share by reason, top-topic share, distinct templates.

Contrasts, per unit the paired difference of two arms' strict yields: **primary: propel - zero_fit** (the cheapest
rival, fixed now); secondary: propel - features, propel - text, propel - gate, propel - shuffled, oracle - gate,
gate - warm start. Estimate: the mean over units, with a 95% t interval over units and a hierarchical bootstrap
(warm starts, seeds within them, evaluation contexts within those) beside it.

Margin and decisions: delta = 0.02 strict yield (about a fifth of the warm starts' expected strict yield; smaller
gains are not worth an activation pass per task). For each contrast: superior if the t interval's lower end > 0,
inferior if its upper end < 0, equivalent if it lies within [-delta, +delta], else inconclusive.

Power: the earlier design's seed SD of a paired difference was 0.07 (lenient yield, one warm start); strict yields
are smaller, so its SD is taken as at most 0.03. With 10 units a difference of (t(0.975, 9) + t(0.8, 9)) x 0.03 /
sqrt(10) = 0.030 has 80% power; equivalence within 0.02 needs the SD at most about 0.02. The report prints the
observed SD and the detectable difference.

Stopping rule: every arm of every unit runs its 12 steps; units are run warm start by warm start, seed by seed, all
arms of a unit before the next; the analysis reads complete units only and never drops or adds one after looking.
If the budget ends early, the committed partial result says how many units it holds and is labelled partial.

Attempts before this one: none of this script. Earlier designs (``docs/experiments/propel_arms*``) used the lenient
rule and one warm start; their reanalysis under the strict rule is ``experiments/strict_validity``.

Amendment, 2026-12-07 (a file rename; the design is unchanged): ``configs/demo.yaml`` became the half-size demo
that ``make demo`` runs in under 20 minutes; the setting above is now ``configs/demo_full.yaml``, which this script
reads.

Amendment, 2026-12-07, second (procedure; the design is unchanged): the work folder lives in one session's checkout
only, so a session prepares its warm start again and continues from the rows committed in ``--out`` (a policy whose
rows are there is not run again; results are written after every policy). A warm start prepared again must give its
committed probe-stage text exactly and its 256 evaluation samples (tasks, validity) with yields within 1e-4 (the
solver's teacher-forced solve probabilities differ in the 6th digit from one CPU to another), or the run stops. Warm
start 0 prepared again on 2026-12-07 (another CPU: AVX-512) gave both (largest yield gap 6.6e-6).

Amendment, 2026-12-07, third (procedure; the design is unchanged): an arm continuing warm start ``w`` sets
``seed_everything: w``, the seed its checkpoint was made with; it set 0 for every warm start, which warm start 1's first
arm refused at its start ("cannot resume ... with seed_everything: 1 -> 0": a resumed run continues the checkpoint's
random state, so another seed would change nothing). For warm start 0 the setting is what it was; no arm of warm
start 1 had trained before the change.

    python experiments/propel_decisive/run.py --workdir runs/experiments/propel_decisive \\
        --out experiments/propel_decisive/results                  # resumes: finished runs are skipped
    python experiments/propel_decisive/run.py --from-rows experiments/propel_decisive/results/rows.csv
                                                              # checks every number; writes report.md from them
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import torch
import yaml

ROOT = Path(__file__).resolve().parents[2]
ARMS = ("gate", "propel", "zero_fit", "features", "text", "shuffled", "oracle")
RIVAL_ARMS = ("zero_fit", "features", "text")
PRIMARY = ("propel", "zero_fit")
CONTRASTS = (
    PRIMARY,
    ("propel", "features"),
    ("propel", "text"),
    ("propel", "gate"),
    ("propel", "shuffled"),
    ("oracle", "gate"),
    ("gate", "warm"),
)
MARGIN = 0.02
WARM_STEPS, STEPS, LR = 24, 12, 1e-4
EVAL_SEED, EVAL_CONTEXTS, EVAL_SAMPLES = 20_000, 64, 4
N_TRIALS, BAND = 8, (1, 3)


def domain_config() -> dict:
    return yaml.safe_load((ROOT / "configs" / "math" / "domain.yaml").read_text())


def build_domain():
    from propel.domains.math.expression_domain import MathExpressionDomain

    return MathExpressionDomain(**(domain_config().get("init_args") or {}))


# ------------------------------------------------------------------------------------------ warm starts
def pipeline_overrides(args, w: int) -> list[str]:
    """The pipeline run of warm start ``w``: the demo's warm start, labels and probe stage, with its own seed."""
    return [
        f"workdir={Path(args.workdir) / f'ws{w}'}",
        f"seed={w}",
        "stages=[warm_start,label,probe]",
        f"label.data.init_args.n_tasks={args.label_tasks}",
        f"probe.rivals.shuffles={args.shuffles}",
    ]


def prepare(args, w: int) -> Path:
    """Warm start ``w`` with its labels and probe stage (resumes: a finished stage is skipped)."""
    from propel.pipeline.run import run_pipeline
    from propel.pipeline.stage_configs import load_pipeline_config

    root = Path(args.workdir) / f"ws{w}"
    if not (root / "probe" / "summary.json").exists():
        run_pipeline(load_pipeline_config("configs/demo_full.yaml", pipeline_overrides(args, w)))
    return root


def reward_artifacts(ws: Path, seed: int, args) -> dict[str, str]:
    """The reward folder of each ranked arm: the probe, each rival fitted on the whole pool, and the probe's cell on
    labels shuffled with this unit's permutation (``ws/rewards/...``; made once)."""
    from propel.pools.io import read_pool
    from propel.probes.gate import logit_quantiles
    from propel.probes.rivals import fit_rival
    from propel.records import Task

    out = {"propel": str(ws / "probe" / "probe_artifact")}
    frame = read_pool(ws / "label" / "pool")
    valid = frame[frame["valid"].astype(bool) & frame["label"].notna()]
    domain = build_domain()
    tasks = [Task.from_json(t) for t in valid["task"]]
    texts = [domain.probe_input(t) for t in tasks]
    labels = valid["label"].astype(int).to_numpy()
    for kind in RIVAL_ARMS:
        folder = ws / "rewards" / kind
        if not (folder / "ranker.json").exists():
            ranker = fit_rival(kind, domain, tasks, texts, labels, seed=0)
            scores = ranker.score(tasks if ranker.reads == "task" else texts)
            ranker.logit_quantiles = logit_quantiles(torch.as_tensor(scores, dtype=torch.float32))
            ranker.save(folder)
        out[kind] = str(folder)
    out["shuffled"] = shuffled_probe(ws, seed)
    return out


def shuffled_probe(ws: Path, seed: int) -> str:
    """The probe stage's selected cell refit on labels permuted with ``seed``'s permutation, as an artifact."""
    from propel.pools.io import read_pool
    from propel.probes.cache import ActivationCache
    from propel.probes.data import align_labels
    from propel.probes.gate import logit_quantiles
    from propel.probes.sweep import split_indices
    from propel.probes.sweep_run import train_run
    from propel.probes.sweep_spec import SweepSpec, parse_key

    folder = ws / "rewards" / f"shuffled-{seed}"
    if (folder / "probe.json").exists():
        return str(folder)
    probe = json.loads((ws / "probe" / "summary.json").read_text())
    config = yaml.safe_load((ws / "probe" / "config.yaml").read_text())
    sweep = SweepSpec(**{k: v for k, v in (config.get("sweep") or {}).items() if k != "loop"})
    cache = ActivationCache(next((ws / "probe" / "cache").iterdir()))
    sel = probe["selected"]
    rows = align_labels(cache.ids, read_pool(ws / "label" / "pool"))
    perm = np.random.default_rng(10_000 + seed).permutation(len(rows.ids))
    shuffled = type(rows)(rows.rows, rows.labels[torch.as_tensor(perm)], rows.solve_counts, rows.groups, rows.ids)
    x = cache.load(sel["key"])[torch.as_tensor(rows.rows, dtype=torch.long)].float()
    module, _ = train_run(x, shuffled, split_indices(shuffled, sweep), sweep, sel["arch"], sel["balance"], seed)
    layer, pooling = parse_key(sel["key"])
    artifact = module.to_artifact(reference_model=config["reference_model"], layer=layer, pooling=pooling)
    with torch.no_grad():
        artifact.logit_quantiles = logit_quantiles(module(x))
    artifact.save(folder)
    return str(folder)


# ------------------------------------------------------------------------------------------ training
def reward_config(arm: str, artifacts: dict[str, str]) -> list[dict]:
    if arm == "gate":
        return [{"class_path": "propel.rewards.ValidityReward"}]
    if arm == "oracle":
        solver = {"n_trials": N_TRIALS, "band": list(BAND), "max_new_tokens": 8, "temperature": 1.0}
        init = {"domain": domain_config(), "solver": solver}
        return [{"class_path": "propel.rewards.exact_utility.ExactUtilityReward", "init_args": init}]
    return [{"class_path": "propel.rewards.probe_reward.ProbeReward", "init_args": {"artifact": artifacts[arm]}}]


def train(args, w: int, ws: Path, seed: int, arm: str, artifacts: dict[str, str]) -> str:
    """One arm's continuation of warm start ``w`` (its folder ``ws``) on context stream ``seed``; its final adapter
    (skipped if done, resumed from its own ``last.ckpt`` when cut short)."""
    from propel.cli.lightning_cli import run_lightning
    from propel.pipeline.stages import csv_trainer_overlay, latest_adapter

    root = ws / f"seed{seed}" / arm
    steps = WARM_STEPS + args.steps
    final = root / "adapters" / f"step-{steps}"
    if final.exists():
        return str(final)
    overlay = {
        # the warm start's own seed: a resume keeps the checkpoint's random state (refusing another seed); the
        # context stream is the unit's seed (data.seed)
        "seed_everything": w,
        "trainer": csv_trainer_overlay(root, steps),
        "model": {"init_args": {"lr": LR, "max_new_tokens": 64, "rewards": reward_config(arm, artifacts)}},
        "data": {"init_args": {"contexts_per_step": 2, "seed": seed}},
    }
    root.mkdir(parents=True, exist_ok=True)
    path = root / "overlay.yaml"
    if path.exists() and yaml.safe_load(path.read_text()) != overlay:
        raise SystemExit(f"{root} was started with other settings: delete it to train again")
    path.write_text(yaml.safe_dump(overlay, sort_keys=False))
    last = root / "checkpoints" / "last.ckpt"
    start = last if last.exists() else ws / "warm_start" / "checkpoints" / "last.ckpt"
    files = ["-c", str(ROOT / "configs/math/grpo.yaml"), "-c", str(path), "--ckpt_path", str(start)]
    t0 = time.monotonic()
    run_lightning("fit", ROOT / "configs/grpo/base.yaml", files)
    if latest_adapter(root / "adapters") != str(final):
        raise SystemExit(f"{ws.name} seed {seed} {arm} did not save its step-{steps} adapter")
    print(f"train: {ws.name} seed {seed} {arm} in {time.monotonic() - t0:.0f}s", flush=True)
    return str(final)


# ------------------------------------------------------------------------------------------ evaluation
def evaluate(args, name: str, adapter: str | None, solver) -> list[dict]:
    """``eval/<name>.jsonl``: 64 fixed contexts x 4 samples from the policy, each lenient-valid task's exact u."""
    from propel.domains.exact_trials import band_utility, solve_probabilities
    from propel.domains.interface import lenient_valid
    from propel.engines.engine import SamplingSpec
    from propel.engines.factory import make_engine
    from propel.models.trained_policy import load_policy
    from propel.records import Task
    from propel.rollouts.scorer import GeneratorScorer
    from propel.rollouts.single_turn import generate_tasks

    path = Path(args.workdir) / "eval" / f"{name}.jsonl"
    if path.exists():
        return [json.loads(line) for line in path.read_text().splitlines()]
    domain = build_domain()
    model, tokenizer = load_policy("smollm2-135m-instruct", adapter)
    engine = make_engine("hf", "smollm2-135m-instruct", model=model, tokenizer=tokenizer)
    contexts = domain.contexts(args.eval_contexts, seed=EVAL_SEED)
    rows = []
    for start in range(0, len(contexts), 16):
        chunk = contexts[start : start + 16]
        torch.manual_seed(EVAL_SEED + start)  # the same sampling stream for every policy: paired samples
        with GeneratorScorer(domain) as scorer:
            sampling = SamplingSpec(n=EVAL_SAMPLES, max_new_tokens=64, temperature=1.0, stop=list(scorer.stop))
            groups = generate_tasks(scorer, engine, chunk, sampling)
        for ctx, group in zip(chunk, groups, strict=True):
            for k, s in enumerate(group):
                reason = s.info.get("reason", "")
                rows.append({
                    "policy": name, "context": ctx.id, "k": k, "valid": bool(s.valid), "reason": reason,
                    "lenient": lenient_valid(s.valid, reason), "topic": s.topic,
                    "task": s.task.to_json() if s.task is not None else None,
                })  # fmt: skip
    tried = [r for r in rows if r["lenient"]]
    ps = solve_probabilities(domain, [Task.from_json(r["task"]) for r in tried], solver, temperature=1.0)
    for r, p in zip(tried, ps, strict=True):
        r["p"], r["u"] = p, band_utility(p, N_TRIALS, BAND)
    for r in rows:
        r.setdefault("p", None)
        r.setdefault("u", 0.0)
        r["strict_yield"] = r["u"] if r["valid"] else 0.0
        r["lenient_yield"] = r["u"] if r["lenient"] else 0.0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"eval {name}: strict yield {np.mean([r['strict_yield'] for r in rows]):.4f}", flush=True)
    return rows


# ------------------------------------------------------------------------------------------ analysis
def unit_policy(w: int, seed: int, arm: str) -> str:
    return f"ws{w}-warm" if arm == "warm" else f"ws{w}-s{seed}-{arm}"


def _per_context(rows, policy, contexts, key="strict_yield") -> np.ndarray:
    by = {c: [] for c in contexts}
    for r in rows:
        if r["policy"] == policy:
            by[r["context"]].append(r[key])
    return np.array([np.mean(by[c]) for c in contexts])


def t95(values) -> tuple[float, float] | None:
    from scipy.stats import t

    v = np.asarray(values, dtype=float)
    if len(v) < 2:
        return None
    half = float(t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v)))
    return float(v.mean() - half), float(v.mean() + half)


def hierarchical_bootstrap(cube: dict[int, np.ndarray], n: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% interval of the mean paired difference, resampling warm starts, seeds within each, then contexts."""
    rng = np.random.default_rng(seed)
    keys, reps = sorted(cube), []
    for _ in range(n):
        means = []
        for w in rng.choice(keys, len(keys)):
            mat = cube[w][rng.integers(0, cube[w].shape[0], cube[w].shape[0])]
            means.append(mat[:, rng.integers(0, mat.shape[1], mat.shape[1])].mean())
        reps.append(np.mean(means))
    return float(np.percentile(reps, 2.5)), float(np.percentile(reps, 97.5))


def decision(ci: tuple[float, float] | None) -> str:
    if ci is None:
        return "not estimable (one unit)"
    lo, hi = ci
    within = lo >= -MARGIN and hi <= MARGIN
    if lo > 0 or hi < 0:
        verdict = "superior" if lo > 0 else "inferior"
        return verdict + (f", by less than the margin {MARGIN}: equivalent in practice" if within else "")
    return f"equivalent within {MARGIN}" if within else "inconclusive"


def analyse(rows: list[dict], units: list[tuple[int, int]]) -> dict:
    contexts = sorted({r["context"] for r in rows})
    policies = {}
    for name in sorted({r["policy"] for r in rows}):
        mine = [r for r in rows if r["policy"] == name]
        reasons: dict[str, int] = {}
        for r in mine:
            if r["reason"].startswith("degenerate:"):
                why = r["reason"].removeprefix("degenerate:")
                reasons[why] = reasons.get(why, 0) + 1
        topics = [r["topic"] for r in mine if r["valid"] and r["topic"]]
        policies[name] = {
            "samples": len(mine),
            "strict_yield": float(np.mean([r["strict_yield"] for r in mine])),
            "lenient_yield": float(np.mean([r["lenient_yield"] for r in mine])),
            "strict_valid": float(np.mean([r["valid"] for r in mine])),
            "lenient_valid": float(np.mean([r["lenient"] for r in mine])),
            "degenerate": reasons,
            "top_topic": max(topics.count(t) for t in set(topics)) / len(topics) if topics else None,
        }
    contrasts = {}
    for a, b in CONTRASTS:
        cube: dict[int, list] = {}
        diffs = []
        for w, s in units:
            pa, pb = unit_policy(w, s, a), unit_policy(w, s, b)
            if pa not in policies or pb not in policies:
                continue
            d = _per_context(rows, pa, contexts) - _per_context(rows, pb, contexts)
            cube.setdefault(w, []).append(d)
            diffs.append(float(d.mean()))
        if not diffs:
            continue
        ci = t95(diffs)
        sd = float(np.std(diffs, ddof=1)) if len(diffs) > 1 else None
        contrasts[f"{a}-{b}"] = {
            "units": len(diffs),
            "per_unit": diffs,
            "mean": float(np.mean(diffs)),
            "t95": list(ci) if ci else None,
            "bootstrap95": list(hierarchical_bootstrap({w: np.stack(v) for w, v in cube.items()})),
            "unit_sd": sd,
            "detectable_80": _detectable(sd, len(diffs)),
            "decision": decision(ci),
        }
    return {"policies": policies, "contrasts": contrasts, "units": [list(u) for u in units], "contexts": len(contexts)}


def _detectable(sd, n) -> float | None:
    from scipy.stats import t

    if sd is None or n < 2:
        return None
    return float((t.ppf(0.975, n - 1) + t.ppf(0.8, n - 1)) * sd / math.sqrt(n))


def unit_table(a: dict) -> list[str]:
    """Each complete unit's strict yields (a policy per row) and paired differences (a contrast per row), the table
    the experiment's README shows."""
    units = [tuple(u) for u in a["units"]]
    if not units:
        return []
    cols = " | ".join(f"ws{w} s{s}" for w, s in units)
    lines = ["## Per unit (strict yield; a unit is a warm start and a context stream)", "",
             f"| policy | {cols} |", "|---|" + "---|" * len(units)]  # fmt: skip

    def yields(arm):
        return [a["policies"].get(unit_policy(w, s, arm), {}).get("strict_yield") for w, s in units]

    for arm in ("warm", *ARMS):
        cells = " | ".join("-" if y is None else f"{y:.4f}" for y in yields(arm))
        lines.append(f"| {'warm start' if arm == 'warm' else arm} | {cells} |")
    lines += ["", f"| contrast | {cols} | mean, 95% t over units |", "|---|" + "---|" * (len(units) + 1)]
    for pair in CONTRASTS:
        name = "-".join(pair)
        if (c := a["contrasts"].get(name)) is None:
            continue
        t = f" [{c['t95'][0]:+.3f}, {c['t95'][1]:+.3f}]" if c["t95"] else ""
        diffs = iter(c["per_unit"])  # one per unit holding both policies, in the units' order
        both = [x is not None and y is not None for x, y in zip(*map(yields, pair), strict=True)]
        cells = " | ".join(f"{next(diffs):+.4f}" if ok else "-" for ok in both)
        lines.append(f"| {name}{' (primary)' if pair == PRIMARY else ''} | {cells} | {c['mean']:+.4f}{t} |")
    return lines


def report(summary: dict) -> str:
    a = summary["analysis"]
    primary = a["contrasts"].get("-".join(PRIMARY))
    head = "# PROPEL's decisive experiment"
    if primary:
        head += f": the probe minus its cheapest rival, {primary['mean']:+.3f}"
        head += f" [{primary['t95'][0]:+.3f}, {primary['t95'][1]:+.3f}]" if primary["t95"] else ""
        head += f" in strict yield ({primary['decision']}, {primary['units']} units)"
    lines = [head, "", f"Measured {summary['date']} at commit {summary['commit']}; {len(a['units'])} complete units "
             f"(warm start, seed){' - PARTIAL: the pre-registered design has ' + str(summary['planned_units']) + ' units' if len(a['units']) < summary['planned_units'] else ''}; "  # noqa: E501
             f"each policy on {a['contexts']} contexts x {EVAL_SAMPLES} samples. Design and pre-registration: "
             "`experiments/propel_decisive/run.py`'s header.", "",
             "## Contrasts (per unit: the paired difference of strict yields)", "",
             "| contrast | units | mean | 95% t over units | 95% hierarchical bootstrap | unit SD | detectable (80%) "
             "| decision |", "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for name, c in a["contrasts"].items():
        t = f"[{c['t95'][0]:+.4f}, {c['t95'][1]:+.4f}]" if c["t95"] else "n/a"
        b = f"[{c['bootstrap95'][0]:+.4f}, {c['bootstrap95'][1]:+.4f}]"
        sd = "n/a" if c["unit_sd"] is None else f"{c['unit_sd']:.4f}"
        det = "n/a" if c["detectable_80"] is None else f"{c['detectable_80']:.4f}"
        lines.append(f"| {name} | {c['units']} | {c['mean']:+.4f} | {t} | {b} | {sd} | {det} | {c['decision']} |")
    lines += ["", *unit_table(a)]
    lines += ["", "## Per policy", "", "| policy | strict yield | lenient yield | strict valid | lenient valid | "
              "degenerate | top topic |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for name, p in a["policies"].items():
        deg = ", ".join(f"{k} {v}" for k, v in p["degenerate"].items()) or "-"
        top = "-" if p["top_topic"] is None else f"{p['top_topic']:.2f}"
        lines.append(f"| {name} | {p['strict_yield']:.4f} | {p['lenient_yield']:.4f} | {p['strict_valid']:.3f} | "
                     f"{p['lenient_valid']:.3f} | {deg} | {top} |")  # fmt: skip
    probes = summary.get("probes") or {}
    if probes:
        lines += ["", "## The probe stage of each warm start (held-out best-of-8 lift, cross-fitted)", ""]
        for ws, text in probes.items():
            lines += [f"### {ws}", "", text]
    return "\n".join(lines) + "\n"


COLUMNS = ("policy", "context", "k", "valid", "lenient", "reason", "topic", "p", "u", "strict_yield", "lenient_yield",
           "problem", "expression")  # fmt: skip


def task_fields(row: dict) -> dict:
    """A row's ``problem`` and ``expression``: from its task when it was evaluated in this session, from its own
    columns when it was read back from a committed ``rows.csv`` (None for a sample without a task)."""
    from propel.records import Task

    data = Task.from_json(row["task"]).data if row.get("task") else row
    return {"problem": data.get("problem") or None, "expression": data.get("expression") or None}


def write_rows(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({**{k: r.get(k) for k in COLUMNS[:-2]}, **task_fields(r)})


def read_rows(path: Path) -> list[dict]:
    out = []
    for r in csv.DictReader(path.open()):
        out.append({**r, "k": int(r["k"]), "valid": r["valid"] == "True", "lenient": r["lenient"] == "True",
                    "u": float(r["u"]), "strict_yield": float(r["strict_yield"]),
                    "lenient_yield": float(r["lenient_yield"]), "topic": r["topic"] or None})  # fmt: skip
    return out


def reanalyse(path: Path) -> dict:
    """Every number of the committed summary recomputed from its rows (refused where one differs)."""
    summary = json.loads((path.parent / "summary.json").read_text())
    analysis = analyse(read_rows(path), [tuple(u) for u in summary["analysis"]["units"]])
    if json.dumps(analysis, sort_keys=True) != json.dumps(summary["analysis"], sort_keys=True):
        raise SystemExit(f"the rows in {path} do not reproduce {path.parent / 'summary.json'}")
    print(f"{path}: every number of summary.json reproduced")
    (path.parent / "report.md").write_text(report(summary))  # the report of the verified summary, in today's layout
    return analysis


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workdir", default="runs/experiments/propel_decisive")
    p.add_argument(
        "--out",
        default=None,
        help="write summary.json, report.md and rows.csv here after every policy; "
        "a policy whose rows are already there is not run again (a new session continues)",
    )
    p.add_argument("--warm-starts", type=int, nargs="+", default=[0, 1])
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    p.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    p.add_argument("--steps", type=int, default=STEPS)
    p.add_argument("--label-tasks", type=int, default=300)
    p.add_argument("--shuffles", type=int, default=20)
    p.add_argument("--eval-contexts", type=int, default=EVAL_CONTEXTS)
    p.add_argument("--max-units", type=int, default=None, help="stop after this many complete units (budget)")
    p.add_argument("--from-rows", default=None)
    return p.parse_args(argv)


SETTINGS = ("steps", "label_tasks", "shuffles", "eval_contexts")  # a committed row's meaning depends on these


def committed_rows(args) -> tuple[dict[str, list[dict]], dict]:
    """The rows already committed in ``--out`` (policy -> rows) and their summary: the work folder lives in one
    session's checkout only, so a new session continues from what the last one committed. Refused where the
    committed settings differ from this run's."""
    path = Path(args.out) / "rows.csv" if args.out else None
    if path is None or not path.exists():
        return {}, {}
    summary = json.loads((path.parent / "summary.json").read_text())
    theirs = summary.get("settings") or {}
    differ = [k for k in SETTINGS if k in theirs and theirs[k] != getattr(args, k)]
    if differ:
        raise SystemExit(f"{path} was made with other settings ({', '.join(differ)}): pass another --out")
    by: dict[str, list[dict]] = {}
    for r in read_rows(path):
        by.setdefault(r["policy"], []).append(r)
    return by, summary


def _same_samples(fresh: list[dict], kept: list[dict], tolerance: float = 1e-4) -> bool:
    """Whether a policy evaluated again gave the committed samples: the same tasks and validity, and yields equal up
    to float rounding (the solver's exact solve probabilities are a teacher-forced pass, whose last digits depend on
    the CPU: 1e-6 apart on another machine)."""

    def key(r):
        return r["context"], int(r["k"]), bool(r["valid"]), r["reason"], task_fields(r)["problem"]

    if [key(r) for r in fresh] != [key(r) for r in kept]:
        return False
    gaps = [abs(float(a["strict_yield"]) - float(b["strict_yield"])) for a, b in zip(fresh, kept, strict=True)]
    return max(gaps, default=0.0) <= tolerance


def save(
    args, work: Path, rows: list[dict], units: list[tuple[int, int]], probes: dict, planned: int, kept: dict
) -> dict:
    """summary.json, report.md and rows.csv in the work folder (and ``--out``): written after every policy, so a
    stopped session loses at most the arm in progress. Contrasts read complete units only. Committed policies the
    loop has not reached yet (the arms of a partly done unit, while an earlier unit is saved) are written too: a
    session stopped before reaching them must not take them out of ``--out``."""
    done = {r["policy"] for r in rows}
    rows = rows + [r for policy, got in kept.items() if policy not in done for r in got]
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    summary = {
        "date": time.strftime("%Y-%m-%d"),
        "commit": commit.stdout.strip(),
        "settings": vars(args),
        "planned_units": planned,
        "probes": probes,
        "analysis": analyse(rows, units),
    }
    (work / "summary.json").write_text(json.dumps(summary, indent=1))
    (work / "report.md").write_text(report(summary))
    write_rows(work / "rows.csv", rows)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        for name in ("summary.json", "report.md", "rows.csv"):
            shutil.copy(work / name, out / name)
    return summary


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.from_rows:
        return reanalyse(Path(args.from_rows))
    from propel.engines.factory import make_engine

    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    kept, before = committed_rows(args)
    solver = make_engine("hf", "smollm2-135m-instruct")
    planned = len([(w, s) for w in args.warm_starts for s in args.seeds])
    probes = dict(before.get("probes") or {})
    rows = list(kept.get("base") or evaluate(args, "base", None, solver))
    units: list[tuple[int, int]] = []
    for w in args.warm_starts:
        if args.max_units is not None and len(units) >= args.max_units:
            break  # the budget is spent: no next warm start's stages either
        ws = None
        warm_policy = unit_policy(w, 0, "warm")
        for s in args.seeds:
            if args.max_units is not None and len(units) >= args.max_units:
                break
            policies = [unit_policy(w, s, arm) for arm in args.arms]
            if ws is None and not all(p in kept for p in [warm_policy, *policies]):
                ws = prepare(args, w)
                text = (ws / "probe" / "rivals.md").read_text() if (ws / "probe" / "rivals.md").exists() else ""
                if probes.get(f"ws{w}", text) != text:
                    raise SystemExit(f"ws{w}'s probe stage did not reproduce the committed one: a new warm start")
                probes[f"ws{w}"] = text
                warm = json.loads((ws / "warm_start" / "summary.json").read_text())["adapter"]
                fresh = evaluate(args, warm_policy, warm, solver)
                if warm_policy in kept and not _same_samples(fresh, kept[warm_policy]):
                    raise SystemExit(f"ws{w} prepared again does not give its committed samples: a new warm start")
                kept.setdefault(warm_policy, fresh)
            if not any(r["policy"] == warm_policy for r in rows):
                rows += kept[warm_policy]
            artifacts = None
            for arm, policy in zip(args.arms, policies, strict=True):
                if policy in kept:
                    rows += kept[policy]
                    continue
                artifacts = artifacts or reward_artifacts(ws, s, args)
                adapter = train(args, w, ws, s, arm, artifacts)
                rows += evaluate(args, policy, adapter, solver)
                save(args, work, rows, units, probes, planned, kept)
            units.append((w, s))
            save(args, work, rows, units, probes, planned, kept)  # the unit is complete: its contrasts count now
    summary = save(args, work, rows, units, probes, planned, kept)
    print(report(summary))
    return summary


if __name__ == "__main__":
    main()
