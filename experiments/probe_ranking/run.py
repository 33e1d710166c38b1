"""Does the probe rank a group's valid tasks by utility? PROPEL's mechanism tested offline, before any RL.

GRPO against the probe reward only helps if, within one context's group of sampled tasks, the probe scores the
tasks in the solver's band above the others. This measures exactly that, on groups sampled the way GRPO samples them
(``--contexts`` contexts x ``--group-size`` tasks from the base generator at GRPO's sampling settings; a completion
cut at the token limit is invalid). Every valid task gets its exact solve probability p by teacher forcing
(``propel.domains.exact_trials``); its band utility ``u = P(1 <= Bin(8, p) <= 3)`` is the expected value of PROPEL's
in-band label, and the label itself (8 trials) is drawn from p per task (``label_count``): the distribution real trials
give where p is right, which ``--validate`` tasks check against ``--validate-trials`` real sampled solver attempts.

Pre-registered analysis (fixed before the run):
- **Primary endpoint**: the best-of-k lift, per held-out context with >= 2 valid tasks, of the probe's top-scored
  valid task over a random valid pick, in band utility ``u`` (``propel.metrics.ranking.best_pick_lift``); the mean
  over contexts with a bootstrap interval over contexts (and a t interval).
- **Cross-fitting**: 5 folds grouped by the context's few-shot example set (contexts that share examples are never
  split), a task text seen in the held-out fold removed from training; the probe is trained as PROPEL trains it
  (``ProbeClassifier``, the paper's recipe, on the sampled in-band labels; layer x pooling x arch chosen on an inner
  validation split by AUROC).
- **Comparisons on the same contexts (paired)**: logistic regression on the probe's selected features, cheap task
  features (length, answer magnitude, operator and number counts) by logistic regression, the probe trained on
  shuffled labels, a probe trained on ``u`` itself (soft labels), and the oracle (the top-``u`` task: the ceiling).
- **Power**: N contexts give 80% power (two-sided 5%) on a lift of ``delta`` when ``N >= ((1.96 + 0.84) sd /
  delta)^2``; the report prints sd of the per-context lift and the detectable lift at the N used.
- **Secondary**: the same lift in the sampled in-band label; AUROC of each score against the sampled label and
  Spearman with the solve count and with p, pooled over held-out rows; the exact p against the sampled rate.

Stages write under ``--workdir`` and resume (a rerun skips what is there): ``tasks.jsonl`` (generated groups),
``exact.jsonl`` (p per valid task), ``sampled.jsonl`` (the check's sampled attempts), ``features.pt`` (frozen-reference
activations), then ``summary.json``, ``report.md`` and ``rows.csv`` (one row per valid task, with each method's
held-out score) there and, with ``--out``, copied to that folder (``docs/experiments/probe_ranking``; the rows
compressed, ``rows.csv.gz``).

    make exp-probe-ranking   # = --contexts 160 --out docs/experiments/probe_ranking: about 45 min on 2 shared cores
    python experiments/probe_ranking/run.py --contexts 6 --group-size 4 --layers 6 --workdir /tmp/pr   # minutes
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import re
import shutil
import time
from pathlib import Path

import numpy as np
import torch
from scipy.stats import spearmanr

from propel.domains.exact_trials import band_utility, solve_probabilities
from propel.domains.letter_counting import LetterCountingDomain, letter_examples
from propel.domains.math.expression_domain import MathExpressionDomain, expression_examples
from propel.engines.engine import SamplingSpec
from propel.engines.factory import make_engine
from propel.metrics.intervals import bootstrap, t_interval
from propel.metrics.ranking import best_pick_lift
from propel.probes import ActivationExtractor
from propel.probes.bank import fit_bank
from propel.probes.classifier import ProbeClassifier
from propel.probes.rivals import fit_rival
from propel.probes.training import HeadFit, LoopSpec
from propel.records import Task
from propel.rollouts.scorer import CUT, GeneratorScorer
from propel.rollouts.single_turn import generate_tasks

MODEL = "smollm2-135m-instruct"
BAND, N_TRIALS = (1, 3), 8
METHODS = ("probe", "logistic", "cheap", "shuffled", "probe_soft", "oracle", "zero_fit", "text", "probe+cheap")
"""Every ranking method; a committed ``rows.csv`` may hold fewer (those of the day it ran), and is read as it is."""
CONTRASTS = (
    ("probe", "logistic"),
    ("probe", "cheap"),
    ("probe", "shuffled"),
    ("probe_soft", "probe"),
    ("oracle", "probe"),
    ("probe", "zero_fit"),
    ("probe", "text"),
    ("probe+cheap", "cheap"),
)
Z80 = 1.959964 + 0.841621


DOMAINS = {
    "math": {  # configs/math/domain.yaml: the demo's domain
        "build": lambda: MathExpressionDomain(lenient_expression=True, solver_format="few_shot"),
        "shots": lambda: {e["problem"].strip() for e in expression_examples()},
        "fields": ("problem", "expression"),
    },
    "letters": {  # a two-sided band for the bundled solver (experiments/letter_band/pilot.py)
        "build": LetterCountingDomain,
        "shots": lambda: {e["text"].strip() for e in letter_examples()},
        "fields": ("text", "letter"),
    },
}
"""The generator domains the experiment runs on (``--domain``), what counts as a copy of an in-context example."""


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def _append(path: Path, rows: list[dict]) -> None:
    with path.open("a") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")


def generate(args, domain, engine, work: Path) -> list[dict]:
    """``tasks.jsonl``: ``group_size`` sampled tasks per context, chunk by chunk (a rerun resumes after the last
    finished chunk; each chunk's sampling is seeded by its index, so a resumed run samples what a whole one would)."""
    path = work / "tasks.jsonl"
    rows = _jsonl(path)
    done = {r["context"] for r in rows}
    contexts = domain.contexts(args.contexts, seed=args.seed)
    shots = DOMAINS[args.domain]["shots"]()
    sampling = SamplingSpec(n=args.group_size, max_new_tokens=args.max_new_tokens, temperature=1.0)
    for start in range(0, len(contexts), args.chunk):
        chunk = [c for c in contexts[start : start + args.chunk] if c.id not in done]
        if not chunk:
            continue
        torch.manual_seed(args.seed * 1_000_003 + start)
        t0 = time.monotonic()
        with GeneratorScorer(domain) as scorer:
            sampling.stop = list(scorer.stop)
            groups = generate_tasks(scorer, engine, chunk, sampling)
        new = []
        for ctx, group in zip(chunk, groups, strict=True):
            for k, s in enumerate(group):
                cut = s.turns[0].finish_reason == "length"
                valid = bool(s.valid) and not cut
                task = s.task.to_json() if s.task is not None and valid else None
                new.append(
                    {
                        "context": ctx.id,
                        "group": ctx.group,
                        "k": k,
                        "valid": valid,
                        "reason": "length" if cut and s.valid else s.info.get("reason", ""),
                        "task": task,
                        "text": s.task_text if valid else None,
                        "copy": bool(valid and s.task.data[DOMAINS[args.domain]["fields"][0]].strip() in shots),
                    }
                )
        _append(path, new)
        rows += new
        print(
            f"generate: contexts {start + len(chunk)}/{len(contexts)} "
            f"({sum(r['valid'] for r in new)}/{len(new)} valid, {time.monotonic() - t0:.0f}s)",
            flush=True,
        )
    return rows


def label(args, domain, engine, tasks: list[dict], work: Path) -> tuple[dict[str, float], dict[str, int]]:
    """``exact.jsonl``: every valid task's exact solve probability p; ``sampled.jsonl``: ``--validate-trials``
    sampled solver attempts on the first ``--validate`` valid tasks, which check p (``calibration_of_p``)."""
    valid = [r for r in tasks if r["valid"]]
    exact_path, sampled_path = work / "exact.jsonl", work / "sampled.jsonl"
    exact = {r["id"]: r["p"] for r in _jsonl(exact_path)}
    todo = [r for r in valid if _id(r) not in exact]
    for start in range(0, len(todo), 64):
        chunk = todo[start : start + 64]
        ps = solve_probabilities(domain, [Task.from_json(r["task"]) for r in chunk], engine, temperature=1.0)
        _append(exact_path, [{"id": _id(r), "p": p} for r, p in zip(chunk, ps, strict=True)])
        exact.update({_id(r): p for r, p in zip(chunk, ps, strict=True)})
        print(f"exact p: {len(exact)}/{len(valid)} valid tasks", flush=True)
    sampled = {r["id"]: r["solved"] for r in _jsonl(sampled_path)}
    spec = SamplingSpec(n=args.validate_trials, max_new_tokens=8, temperature=1.0, stop=list(domain.solver_stop))
    todo = [r for r in valid[: args.validate] if _id(r) not in sampled]
    for start in range(0, len(todo), 8):
        chunk = todo[start : start + 8]
        parsed = [Task.from_json(r["task"]) for r in chunk]
        torch.manual_seed(args.seed * 7_919 + len(sampled))
        outs = engine.generate([domain.solver_prompt(t) for t in parsed], spec)
        new = {
            _id(r): int(sum(domain.grade(t, [c.text for c in out])))
            for r, t, out in zip(chunk, parsed, outs, strict=True)
        }
        _append(sampled_path, [{"id": k, "solved": v} for k, v in new.items()])
        sampled.update(new)
        print(f"sampled trials: {len(sampled)}/{min(args.validate, len(valid))} tasks", flush=True)
    return exact, sampled


def _id(row: dict) -> str:
    return f"{row['context']}/{row['k']}"


def label_count(task_id: str, p: float, seed: int) -> int:
    """The solve count PROPEL's ``N_TRIALS`` sampled trials give a task, drawn from its exact p (the same
    distribution as real trials where p is right, which ``sampled.jsonl`` checks), seeded per task."""
    rng = np.random.default_rng([seed, *task_id.encode()])
    return int(rng.binomial(N_TRIALS, p))


def features(args, domain, engine, rows: list[dict], work: Path) -> dict[str, torch.Tensor]:
    """``features.pt``: the frozen reference's pooled activations of each valid task's probe input."""
    path = work / "features.pt"
    if path.exists():
        saved = torch.load(path)
        if saved["ids"] == [r["id"] for r in rows]:
            return saved["features"]
    extractor = ActivationExtractor(
        engine.model, engine.tokenizer, args.layers, ("last_token", "mean_full"), batch_size=16
    )
    feats = extractor.encode([domain.probe_input(Task.from_json(r["task"])) for r in rows])
    torch.save({"ids": [r["id"] for r in rows], "features": feats}, path)
    return feats


_OPS = re.compile(r"[+\-*/]")


def cheap_features(task: str) -> list[float]:
    """What a probe must beat to be worth its cost. Math: length, answer magnitude, operator and number counts;
    letter counting: words, characters, the count and whether it is 0."""
    data = Task.from_json(task).data
    if "letter" in data:
        return [len(data["text"].split()), len(data["text"]), data["answer"], float(data["answer"] == 0)]
    numbers = re.findall(r"\d+(?:\.\d+)?", data["expression"])
    return [
        len(data["problem"]),
        math.log10(abs(data["answer"]) + 1),
        len(_OPS.findall(data["expression"])),
        len(numbers),
        math.log10(max([float(n) for n in numbers] or [0.0]) + 1),
    ]


def _fit_probe(x_tr, y_tr, x_va, y_va, arch: str, seed: int) -> ProbeClassifier:
    pos = float(y_tr.sum())
    weight = float((len(y_tr) - pos) / pos) if 0 < pos < len(y_tr) and y_tr.max() == 1 else None
    torch.manual_seed(seed)  # the head's init depends on the seed only (as the sweep's), not on what ran before
    module = ProbeClassifier(arch=arch, input_dim=x_tr.shape[1], pos_weight=weight)
    mean, std = x_tr.mean(0), x_tr.std(0)
    module.head.set_normalization(mean, std)
    x, y = torch.cat([x_tr, x_va]), torch.cat([y_tr, y_va])
    rows = torch.arange(len(x))
    fit_bank([HeadFit(module, x, y, rows[: len(x_tr)], rows[len(x_tr) :], seed=seed, loop=LoopSpec(monitor="loss"))])
    return module


def _auroc(y: np.ndarray, s: np.ndarray) -> float | None:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, s)) if 0 < y.sum() < len(y) else None


def select_cell(feats, keys, fit, va, target, seed: int, soft: bool = False) -> tuple[str, str, float]:
    """The feature key (layer/pooling) and probe arch whose probe, fit on ``fit``, scores best on ``va`` (AUROC, or
    Spearman with a soft target), and that score (-inf when none could be scored: the first key, linear)."""
    best, best_cell = -np.inf, None
    y = torch.tensor(target, dtype=torch.float32)
    for key in keys:
        x = feats[key].float()
        for arch in ("linear", "mlp"):
            module = _fit_probe(x[fit], y[fit], x[va], y[va], arch, seed)
            with torch.no_grad():
                s = module(x[va]).numpy()
            if soft:
                value = spearmanr(s, target[va]).statistic if len(set(target[va])) > 1 else np.nan
            else:
                value = _auroc(target[va].astype(int), s)
            value = -np.inf if value is None or np.isnan(value) else value
            if value > best:
                best, best_cell = value, (key, arch)
    key, arch = best_cell or (keys[0], "linear")
    return key, arch, float(best)


def _probe_scores(feats, keys, tr, te, target, groups, rng_seed: int, soft: bool) -> tuple[np.ndarray, str]:
    """Held-out scores of the probe selected on an inner validation split (AUROC, or Spearman with a soft target)."""
    inner_groups = sorted(set(groups[tr]))
    rng = np.random.default_rng(rng_seed)
    val_groups = set(rng.choice(inner_groups, size=max(1, len(inner_groups) // 5), replace=False))
    va = tr[np.isin(groups[tr], list(val_groups))]
    fit = tr[~np.isin(groups[tr], list(val_groups))]
    key, arch, _ = select_cell(feats, keys, fit, va, target, rng_seed, soft)
    y = torch.tensor(target, dtype=torch.float32)
    x = feats[key].float()
    module = _fit_probe(x[fit], y[fit], x[va], y[va], arch, rng_seed)
    with torch.no_grad():
        return module(x[te]).numpy(), f"{key}/{arch}"


def cross_fit(args, rows: list[dict], feats: dict[str, torch.Tensor]) -> tuple[dict[str, np.ndarray], list[str]]:
    """Held-out scores of every method for every valid task (5 folds grouped by few-shot example set)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GroupKFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    groups = np.array([r["group"] for r in rows])
    texts = np.array([r["text"] for r in rows])
    y = np.array([BAND[0] <= r["solve_count"] <= BAND[1] for r in rows], dtype=np.float64)
    u = np.array([r["u"] for r in rows])
    cheap = np.array([cheap_features(r["task"]) for r in rows])
    keys = sorted(feats)
    torch.set_num_threads(1)  # tiny heads train fastest on one thread
    scores = {m: np.full(len(rows), np.nan) for m in METHODS}
    folds_of = np.full(len(rows), -1)
    cells = []
    folds = GroupKFold(n_splits=min(5, len(set(groups)))).split(np.zeros(len(rows)), groups=groups)
    for fold, (tr, te) in enumerate(folds):
        tr = tr[~np.isin(texts[tr], texts[te])]  # deduplicated: no held-out task text is trained on
        probe, cell = _probe_scores(feats, keys, tr, te, y, groups, args.seed + fold, soft=False)
        scores["probe"][te] = probe
        cells.append(cell)
        x = feats[cell.rsplit("/", 1)[0]].numpy().astype(np.float64)
        lr = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000, class_weight="balanced"))
        scores["logistic"][te] = lr.fit(x[tr], y[tr]).decision_function(x[te]) if 0 < y[tr].sum() < len(tr) else 0.0
        cf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000, class_weight="balanced"))
        scores["cheap"][te] = (
            cf.fit(cheap[tr], y[tr]).decision_function(cheap[te]) if 0 < y[tr].sum() < len(tr) else 0.0
        )
        shuffled = y.copy()
        shuffled[tr] = np.random.default_rng(args.seed + 100 + fold).permutation(y[tr])
        scores["shuffled"][te], _ = _probe_scores(feats, keys, tr, te, shuffled, groups, args.seed + fold, soft=False)
        scores["probe_soft"][te], _ = _probe_scores(feats, keys, tr, te, u, groups, args.seed + fold, soft=True)
        scores["oracle"][te] = u[te]
        domain = DOMAINS[args.domain]["build"]()
        scores["zero_fit"][te] = [domain.zero_fit_score(Task.from_json(rows[i]["task"])) for i in te]
        if 0 < y[tr].sum() < len(tr):
            text = fit_rival("text", domain, [], [texts[i] for i in tr], y[tr], seed=args.seed)
            scores["text"][te] = text.score([texts[i] for i in te])
        else:
            scores["text"][te] = 0.0
        folds_of[te] = fold
        print(f"cross-fit: fold {fold + 1} done (probe cell {cell})", flush=True)
    for fold in np.unique(folds_of):  # the probe's incremental value: its held-out logit beside the cheap features
        te, tr = np.flatnonzero(folds_of == fold), np.flatnonzero(folds_of != fold)
        stacked = np.nan_to_num(np.column_stack([cheap, scores["probe"]]))  # a fold with one class scored nothing
        sf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000, class_weight="balanced"))
        scores["probe+cheap"][te] = (
            sf.fit(stacked[tr], y[tr]).decision_function(stacked[te]) if 0 < y[tr].sum() < len(tr) else 0.0
        )
    return scores, cells


def analyse(args, rows: list[dict], scores: dict[str, np.ndarray], cells: list[str]) -> dict:
    contexts = [r["context"] for r in rows]
    u = np.array([r["u"] for r in rows])
    y = np.array([BAND[0] <= r["solve_count"] <= BAND[1] for r in rows], dtype=np.float64)
    counts = np.array([r["solve_count"] for r in rows])
    p = np.array([r["p"] for r in rows])
    lifts, out = {}, {"methods": {}}
    for m in [m for m in METHODS if m in scores]:
        unscored = int(np.isnan(scores[m]).sum())
        scores = {**scores, m: _unscored_last(scores[m])}
        keys, lift = best_pick_lift(contexts, scores[m], u)
        _, lift_sampled = best_pick_lift(contexts, scores[m], y)
        lifts[m] = lift
        sd = float(lift.std(ddof=1)) if len(lift) > 1 else float("nan")
        out["methods"][m] = {
            "lift_u": _iv(bootstrap(lift, seed=args.seed)),
            "lift_u_t": _iv(t_interval(lift)),
            "lift_sampled": _iv(bootstrap(lift_sampled, seed=args.seed)),
            "auroc_sampled_label": _auroc(y.astype(int), scores[m]),
            "spearman_solve_count": _rho(scores[m], counts),
            "spearman_p": _rho(scores[m], p),
            "sd_lift": sd,
            "detectable_lift_80": Z80 * sd / math.sqrt(len(lift)) if len(lift) > 1 else None,
            "contexts_for_0.08": math.ceil((Z80 * sd / 0.08) ** 2) if len(lift) > 1 else None,
            "unscored": unscored,
        }
    for a, b in CONTRASTS:
        if a not in lifts or b not in lifts:
            continue
        d = lifts[a] - lifts[b]
        out["methods"][f"{a}-{b}"] = {"lift_u": _iv(bootstrap(d, seed=args.seed)), "lift_u_t": _iv(t_interval(d))}
    out["contexts_compared"] = len(lifts["probe"])
    out["probe_cells"] = cells
    return out


def _iv(interval) -> dict | None:
    return interval.as_dict() if interval is not None else None


def _unscored_last(s: np.ndarray) -> np.ndarray:
    """``s`` with each NaN (a fold whose training rows had one class: the method scored nothing) below every scored
    item, so a method never picks what it did not score and a context it scored nothing in ties (lift 0)."""
    s = np.asarray(s, dtype=np.float64)
    finite = s[np.isfinite(s)]
    floor = (finite.min() if len(finite) else 0.0) - 1.0
    return np.where(np.isnan(s), floor, s)


def _rho(a, b) -> float | None:
    return float(spearmanr(a, b).statistic) if len(set(np.round(b, 12))) > 1 and len(set(a)) > 1 else None


def calibration_of_p(rows: list[dict], trials: int) -> dict:
    """The exact p against the sampled rate: means, correlation, and binned (p deciles) sampled rate vs mean p."""
    p = np.array([r["p"] for r in rows])
    rate = np.array([r["sampled"] / trials for r in rows])
    order = np.argsort(p)
    bins = [
        {"mean_p": float(p[b].mean()), "sampled_rate": float(rate[b].mean()), "tasks": len(b)}
        for b in np.array_split(order, min(10, len(order)))
        if len(b)
    ]
    return {
        "tasks": len(rows),
        "mean_p": float(p.mean()),
        "mean_sampled_rate": float(rate.mean()),
        "mean_difference": _iv(t_interval(rate - p)),
        "pearson": float(np.corrcoef(p, rate)[0, 1]) if len(rows) > 2 else None,
        "spearman": _rho(p, rate),
        "bins": bins,
        "solve_count_histogram": np.bincount([r["sampled"] for r in rows], minlength=trials + 1).tolist(),
        "u_mean": float(np.mean([r["u"] for r in rows])),
    }


def report(args, summary: dict) -> str:
    m = summary["ranking"]["methods"]

    def iv(d):
        return "n/a" if d is None else f"{d['estimate']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]"

    def num(x):
        return "n/a" if x is None else f"{x:.3f}"

    g, c = summary["generation"], summary["calibration"]
    lines = [
        "# Does the probe rank a group's valid tasks by utility?",
        "",
        f"Measured {summary['date']} at commit `{summary['commit']}` with "
        f"`python experiments/probe_ranking/run.py --domain {args.domain} --contexts {args.contexts} "
        f"--group-size {args.group_size}{_extra_flags(args)}`: "
        f"{g['contexts']} contexts x {args.group_size} tasks from {_generator(args)} (SmolLM2-135M-Instruct, "
        f"the {args.domain} domain, temperature 1, {args.max_new_tokens} new tokens, a cut completion invalid); "
        f"{g['valid']} valid ({g['valid_rate']:.1%}), {g['copies']} of them copies of an in-context example; "
        f"{summary['ranking']['contexts_compared']} held-out contexts with at least 2 valid tasks.",
        "",
        "## Best-of-k lift over a random valid pick (the pre-registered endpoint)",
        "",
        "The band utility u = P(1 <= Bin(8, p) <= 3) of each method's top-scored valid task minus the context's mean u "
        "(a random valid pick), averaged over held-out contexts; 95% bootstrap intervals over contexts (t intervals "
        "agree within rounding; both are in `summary.json`). Secondary: the same lift in the sampled in-band label, "
        "the pooled AUROC against that label, and Spearman with the solve count.",
        "",
        "| method | lift in u | lift in sampled label | AUROC | Spearman (solve count) | Spearman (p) |",
        "|---|---|---|---|---|---|",
    ]
    names = {
        "probe": "probe (PROPEL's recipe)",
        "logistic": "logistic regression, same features",
        "cheap": "cheap task features",
        "shuffled": "probe on shuffled labels",
        "probe_soft": "probe on soft labels (u)",
        "oracle": "oracle (top u): the ceiling",
        "zero_fit": "zero-fit rule (the domain's, unfitted)",
        "text": "text classifier (TF-IDF)",
        "probe+cheap": "cheap features + the probe's logit",
    }
    for k in [k for k in METHODS if k in m]:
        r = m[k]
        lines.append(
            f"| {names[k]} | {iv(r['lift_u'])} | {iv(r['lift_sampled'])} | {num(r['auroc_sampled_label'])} "
            f"| {num(r['spearman_solve_count'])} | {num(r['spearman_p'])} |"
        )
    lines += ["", "Paired differences (same contexts):", "", "| difference | lift in u |", "|---|---|"]
    for k in [f"{a}-{b}" for a, b in CONTRASTS if f"{a}-{b}" in m]:
        lines.append(f"| {k} | {iv(m[k]['lift_u'])} |")
    pr = m["probe"]
    lines += [
        "",
        "## Power",
        "",
        f"The per-context lift of the probe has sd {pr['sd_lift']:.3f}; with {summary['ranking']['contexts_compared']} "
        f"contexts the lift detectable with 80% power (two-sided 5%) is {num(pr['detectable_lift_80'])}, and a lift "
        f"of 0.08 needs {pr['contexts_for_0.08']} contexts.",
        "",
        "## Exact solve probability against sampled trials",
        "",
        f"On the first {c['tasks']} valid tasks: mean exact p {c['mean_p']:.4f}, "
        f"mean sampled rate {c['mean_sampled_rate']:.4f} ({args.validate_trials} trials each; "
        f"difference {iv(c['mean_difference'])}), Pearson {num(c['pearson'])}, Spearman "
        f"{num(c['spearman'])}. Sampled solve counts 0..{args.validate_trials}: {c['solve_count_histogram']}. "
        f"Mean u {c['u_mean']:.3f}.",
        "",
        "| p decile: mean p | sampled rate | tasks |",
        "|---|---|---|",
    ]
    lines += [f"| {b['mean_p']:.4f} | {b['sampled_rate']:.4f} | {b['tasks']} |" for b in c["bins"]]
    lines += ["", "## Verdict", "", summary["verdict"], ""]
    return "\n".join(lines)


def _generator(args) -> str:
    """Who wrote the ranked groups: the base generator, or it with a warm start's adapter."""
    adapter = getattr(args, "adapter", None)
    return f"the generator with the adapter `{adapter}`" if adapter else "the base generator"


def _extra_flags(args) -> str:
    """The command's flags beyond the defaults the report names (the adapter, the fit seed)."""
    flags = f" --adapter {args.adapter}" if getattr(args, "adapter", None) else ""
    return flags + (f" --fit-seed {args.fit_seed}" if getattr(args, "fit_seed", None) is not None else "")


def verdict(summary: dict) -> str:
    m = summary["ranking"]["methods"]
    pr, d_lr, d_cheap, d_sh = (
        m["probe"]["lift_u"],
        m["probe-logistic"]["lift_u"],
        m["probe-cheap"]["lift_u"],
        m["probe-shuffled"]["lift_u"],
    )
    if pr is None:
        return "Too few contexts with two valid tasks to compare."

    def words(iv, what):
        if iv["low"] > 0:
            return f"the probe's top pick beats {what} (interval above zero)"
        if iv["high"] < 0:
            return f"the probe's top pick is worse than {what} (interval below zero)"
        return f"the probe is not distinguishable from {what}"

    parts = [
        words(pr, "a random valid pick"),
        words(d_lr, "logistic regression on the same features"),
        words(d_cheap, "cheap task features"),
        words(d_sh, "a probe trained on shuffled labels"),
    ]
    return "On this domain and solver, " + "; ".join(parts) + "."


ROW_COLUMNS = ("id", "context", "group", "copy", "solve_count", "sampled", "p", "u")


def write_rows(path: Path, rows: list[dict], scores: dict[str, np.ndarray]) -> None:
    """``rows.csv``: one row per valid task with its labels and every method's held-out score, at full precision,
    so ``--from-rows`` recomputes the analysis exactly."""
    import csv

    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        fields = [
            k for k in ("problem", "expression", "letter", "text") if rows and k in Task.from_json(rows[0]["task"]).data
        ]
        writer.writerow([*ROW_COLUMNS, *METHODS, *fields, "answer"])
        for i, r in enumerate(rows):
            d = Task.from_json(r["task"]).data
            labels = [
                r["id"],
                r["context"],
                r["group"],
                int(r["copy"]),
                r["solve_count"],
                r.get("sampled"),
                r["p"],
                r["u"],
            ]
            labels = ["" if v is None else repr(v) if isinstance(v, float) else v for v in labels]
            writer.writerow([*labels, *[repr(float(scores[m][i])) for m in METHODS], *[d[k] for k in fields],
                             d["answer"]])  # fmt: skip


def read_rows(path: Path) -> tuple[list[dict], dict[str, np.ndarray]]:
    """``rows.csv`` (or ``rows.csv.gz``) back as the analysis' rows and scores."""
    import csv

    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", newline="") as fh:
        table = list(csv.DictReader(fh))
    rows = [
        {"id": t["id"], "context": t["context"], "group": t["group"], "copy": t["copy"] == "1",
         "solve_count": int(t["solve_count"]), "sampled": int(t["sampled"]) if t["sampled"] else None,
         "p": float(t["p"]), "u": float(t["u"])}
        for t in table
    ]  # fmt: skip
    return rows, {m: np.array([float(t[m]) for t in table]) for m in METHODS if table and m in table[0]}


def reanalyse(args, path: Path) -> dict:
    """The ranking analysis recomputed from a committed ``rows.csv``; checked against the ``summary.json`` beside
    it (exit status 1 when a number differs)."""
    rows, scores = read_rows(path)
    summary = path.parent / "summary.json"
    fit_seed = json.loads(summary.read_text())["settings"].get("fit_seed") if summary.exists() else None
    if fit_seed is not None:  # the bootstrap ran under the fit seed
        args = argparse.Namespace(**{**vars(args), "seed": fit_seed})
    ranking = analyse(args, rows, scores, cells=[])
    if summary.exists():
        saved = json.loads(summary.read_text())["ranking"]["methods"]
        same = json.dumps(saved, sort_keys=True) == json.dumps(
            json.loads(json.dumps(ranking["methods"])), sort_keys=True
        )
        print(f"{path}: the analysis {'reproduces' if same else 'DOES NOT reproduce'} {summary}")
        if not same:
            raise SystemExit(1)
    for m in [m for m in METHODS if m in scores]:
        print(f"{m:>12}: lift in u {ranking['methods'][m]['lift_u']}")
    return ranking


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--domain", choices=sorted(DOMAINS), default="math")
    ap.add_argument("--workdir", default="runs/experiments/probe_ranking")
    ap.add_argument("--out", default=None, help="copy summary.json, report.md and rows.csv (as rows.csv.gz) here")
    ap.add_argument("--contexts", type=int, default=160)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--trials", type=int, default=N_TRIALS)
    ap.add_argument("--validate", type=int, default=100, help="valid tasks whose exact p is checked by sampling")
    ap.add_argument("--validate-trials", type=int, default=16, help="sampled solver attempts per checked task")
    ap.add_argument("--layers", type=int, nargs="+", default=[6, 12, 18, 24])
    ap.add_argument("--chunk", type=int, default=8, help="contexts per generation call")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--fit-seed",
        type=int,
        default=None,
        help="seed of the label draws, the probes' fits and the bootstrap (default: --seed); another value reruns "
        "those stages on the same generated groups, exact p and features (kept in --workdir)",
    )
    ap.add_argument("--model", default=MODEL)
    ap.add_argument(
        "--adapter",
        default=None,
        help="a LoRA adapter on the generator (a warm start's): its groups are ranked; solver and reference stay the "
        "base model",
    )
    ap.add_argument(
        "--from-rows", type=Path, default=None, help="recompute the analysis from a committed rows.csv (or .csv.gz)"
    )
    args = ap.parse_args(argv)
    if args.from_rows:
        return reanalyse(args, args.from_rows)
    if args.trials != N_TRIALS:
        raise SystemExit(f"--trials must be {N_TRIALS}: the band {BAND} is defined on {N_TRIALS} trials")
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    domain = DOMAINS[args.domain]["build"]()
    engine = make_engine("hf", args.model)
    if args.adapter:  # the policy GRPO would continue generates; the frozen base solves and is the reference
        from propel.models.trained_policy import load_policy

        model, tokenizer = load_policy(args.model, args.adapter)
        tasks = generate(args, domain, make_engine("hf", args.model, model=model, tokenizer=tokenizer), work)
        del model
    else:
        tasks = generate(args, domain, engine, work)
    exact, sampled = label(args, domain, engine, tasks, work)
    # Label draws, probe fits and the bootstrap under their own seed: the stages with variance that reruns in minutes
    fit = argparse.Namespace(**{**vars(args), "seed": args.seed if args.fit_seed is None else args.fit_seed})
    rows = []
    for r in tasks:
        if r["valid"]:
            i, p = _id(r), exact[_id(r)]
            count = label_count(i, p, fit.seed)
            rows.append(
                {
                    **r,
                    "id": i,
                    "p": p,
                    "u": band_utility(p, N_TRIALS, BAND),
                    "solve_count": count,
                    "sampled": sampled.get(i),
                }
            )
    feats = features(args, domain, engine, rows, work)
    scores, cells = cross_fit(fit, rows, feats)
    import subprocess

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    summary = {
        "date": time.strftime("%Y-%m-%d"),
        "commit": commit,
        "settings": vars(args),
        "band": BAND,
        "generation": {
            "contexts": len({r["context"] for r in tasks}),
            "samples": len(tasks),
            "valid": len(rows),
            "valid_rate": len(rows) / max(1, len(tasks)),
            "copies": sum(r["copy"] for r in rows),
            "cut_at_limit": sum(r["reason"] in ("length", CUT) for r in tasks),  # the scorer's reason, or this file's
        },
        "calibration": calibration_of_p([r for r in rows if r["sampled"] is not None], args.validate_trials),
        "ranking": analyse(fit, rows, scores, cells),
    }
    summary["verdict"] = verdict(summary)
    (work / "summary.json").write_text(json.dumps(summary, indent=1))
    (work / "report.md").write_text(report(args, summary))
    write_rows(work / "rows.csv", rows, scores)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        for name in ("summary.json", "report.md"):
            shutil.copy(work / name, out / name)
        with (work / "rows.csv").open("rb") as src, gzip.GzipFile(out / "rows.csv.gz", "wb", mtime=0) as dst:
            shutil.copyfileobj(src, dst)  # compressed where it is committed (a fifth of the size)
    print((work / "report.md").read_text())
    return summary


if __name__ == "__main__":
    main()
