"""The probe job as ``propel probe -c configs/probe/sweep.yaml``: a labeled pool -> frozen-reference activations
(cached, resumable) -> the layer x pooling x arch x balance sweep -> the selected probe refit and exported
(``probe_artifact/``) -> the probe against its rivals (``propel.probes.competition``: the zero-fit rule, cheap task
features, a text classifier, shuffled-label probes) -> the reward, whichever ranks held-out tasks best
(``artifact/``, read by ``ProbeReward``; ``rivals.md`` says which won and by how much).

Selection breaks ties with RVP measured on a fixed sample of the policy GRPO starts from scored by the exact reward
GRPO trains with (``RVPSpec``: its gate and group size are the GRPO run's; the pipeline copies them).
"""

from __future__ import annotations

import shutil
import time
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from jsonargparse import ActionConfigFile, ArgumentError, ArgumentParser
from scipy.stats import spearmanr

from propel.cli.config_files import with_fragments_inlined
from propel.cli.errors import explain
from propel.domains.exact_trials import band_utility
from propel.domains.interface import Domain
from propel.durable import write_json
from propel.engines.engine import SamplingSpec
from propel.engines.factory import make_adapter_engine, make_engine
from propel.errors import ConfigError
from propel.metrics.held_out import auroc_interval, compare_on_held_out
from propel.models import freeze, load_model
from propel.pools.io import read_pool
from propel.pools.summary import print_summary_table
from propel.probes import ActivationExtractor, extract_to_cache
from propel.probes.baseline import fit_logistic, length_only_predictions, topic_only_predictions
from propel.probes.competition import RivalSpec, compete
from propel.probes.competition import markdown as competition_markdown
from propel.probes.data import align_labels
from propel.probes.gate import GateSpec, logit_quantiles
from propel.probes.plots import plot_reliability
from propel.probes.pooling import POOLINGS, TRAJECTORY_POOLINGS, check_poolings
from propel.probes.rivals import RIVALS, fit_rival
from propel.probes.splits import fold_shortage
from propel.probes.sweep import refit_selected, run_sweep, split_indices
from propel.probes.sweep_spec import BASELINE_ARCH, RVPSample, SweepSpec, parse_key
from propel.records import Task
from propel.rollouts.scorer import GeneratorScorer
from propel.rollouts.single_turn import generate_tasks

SUMMARY = "summary.json"
RIVALS_REPORT = "rivals.md"
"""The probe against its rivals (``propel.probes.competition.markdown``); ``summary.json``'s ``rivals`` holds the
numbers."""
PROBE_ARTIFACT = "probe_artifact"
"""Where the selected probe always goes; ``artifact/`` holds the reward: the probe when it wins, else the rival."""
HELD_OUT_ROWS = "held_out_rows.json"
"""Per held-out row: id, label and each classifier's prediction (the rows behind ``summary.json``'s ``held_out``)."""


@dataclass
class RVPSpec:
    """The fixed sample of the policy GRPO starts from that RVP is measured on, and the reward it is scored with."""

    contexts: int = 8
    """Contexts of the sample (0 skips RVP); drawn with seed ``seed + 10_000``, apart from the labeled pool's."""
    group_size: int = 4
    """Samples per context: GRPO's ``group_size`` (the pipeline copies it), whose within-group variance RVP reads."""
    max_new_tokens: int = 256
    """Generation length of the sample (as the labeled tasks were generated)."""
    temperature: float = 1.0
    gate: GateSpec = field(default_factory=GateSpec)
    """The GRPO run's ``ProbeReward`` gate (the pipeline copies it; by hand, set it as the run has it)."""
    adapter: str | None = None
    """The LoRA adapter GRPO starts from, on the reference model (a peft folder or a GRPO ``.ckpt``): RVP reads the
    reward variance of the policy GRPO trains, and a warm start's tasks are not the base generator's (the pipeline
    fills in the warm start's adapter when the warm start runs before the probe stage). None: the reference model."""


class ProbeJob:
    """Train, select and export one activation probe from a labeled task pool.

    Args:
        pool: folder of the labeled pool (``part-*.parquet``, as ``propel predict`` with LabelingModule writes it).
        domain: the pool's task domain (renders tasks into the text the reference reads; draws RVP contexts).
        output_dir: where the feature cache, ``sweep/``, ``artifact/``, ``reliability.png`` and ``summary.json`` go.
        reference_model: the frozen reference whose activations the probes read (the generator's base model).
        layers: hidden-state layers to extract.
        poolings: token poolings to extract (``propel.probes.POOLINGS``).
        batch_size: extraction batch size.
        max_length: extraction truncation (tokens).
        trajectory_pooling: how a trajectory's per-turn vectors are pooled (``mean``, ``last``, ``max``), for domains
            whose probes read generator episodes (``Domain.probe_input``: SWE); single texts ignore it.
        sweep: the grid and training recipe.
        rvp: the RVP sample and its reward.
        rivals: the rivals the probe competes with on held-out best-of-k lift, and which ranker becomes the reward
            written to ``artifact/`` (``propel.probes.competition.RivalSpec``; the probe itself always goes to
            ``probe_artifact/``).
        engine: engine of the RVP sample: ``hf`` generates with the loaded reference itself.
        engine_kwargs: arguments of another engine.
        seed: seed of the RVP sample.
    """

    def __init__(
        self,
        pool: str,
        domain: Domain,
        output_dir: str = "runs/probe",
        reference_model: str = "smollm2-135m-instruct",
        layers: list[int] | None = None,
        poolings: list[str] | None = None,
        batch_size: int = 8,
        max_length: int = 512,
        trajectory_pooling: str = "mean",
        sweep: SweepSpec = SweepSpec(),  # noqa: B008 (frozen-by-convention defaults, copied below)
        rvp: RVPSpec = RVPSpec(),  # noqa: B008
        rivals: RivalSpec = RivalSpec(),  # noqa: B008
        engine: str = "hf",
        engine_kwargs: dict[str, Any] | None = None,
        seed: int = 0,
    ) -> None:
        self.pool, self.domain, self.output_dir = Path(pool), domain, Path(output_dir)
        self.reference_model = reference_model
        self.layers = list(layers) if layers is not None else [6, 12, 18, 24]
        self.poolings = list(poolings) if poolings is not None else ["last_token", "mean_full"]
        bad = [p for p in self.poolings if p not in POOLINGS]
        if bad:
            raise ConfigError(f"probe poolings: unknown {bad}; choose from {list(POOLINGS)}")
        if not self.layers:
            raise ConfigError("probe layers: name at least one layer")
        self.batch_size, self.max_length = batch_size, max_length
        try:
            (self.trajectory_pooling,) = check_poolings(trajectory_pooling, TRAJECTORY_POOLINGS, "trajectory_pooling")
        except ValueError as e:
            raise ConfigError(f"probe {e}") from None
        self.sweep = replace(sweep)
        if self.sweep.split not in ("random", "stratified_kfold", "group_kfold"):
            raise ConfigError(
                f"probe sweep.split: choose random, stratified_kfold or group_kfold, got {self.sweep.split!r}"
            )
        self.rvp = replace(rvp)
        self.rivals = replace(rivals)
        if self.rvp.adapter is not None and not Path(self.rvp.adapter).exists():
            raise ConfigError(f"probe rvp.adapter: {self.rvp.adapter!r} does not exist (a peft folder or a GRPO .ckpt)")
        self.engine, self.engine_kwargs, self.seed = engine, dict(engine_kwargs or {}), seed

    def rvp_texts(self, model, tokenizer) -> tuple[list[str], list[bool]]:
        """The fixed sample (of the reference model, or of ``rvp.adapter`` on it) as the texts the probe reads, and
        their validity."""
        torch.manual_seed(self.seed + 1)
        contexts = self.domain.contexts(self.rvp.contexts, seed=self.seed + 10_000)
        if self.rvp.adapter is not None:  # a copy of its own: the frozen reference stays without the adapter
            engine = make_adapter_engine(self.engine, self.reference_model, self.rvp.adapter, **self.engine_kwargs)
        elif self.engine == "hf":
            engine = make_engine("hf", self.reference_model, model=model, tokenizer=tokenizer)
        else:
            engine = make_engine(self.engine, self.reference_model, **self.engine_kwargs)
        scorer = GeneratorScorer(self.domain)
        sampling = SamplingSpec(
            n=self.rvp.group_size,
            max_new_tokens=self.rvp.max_new_tokens,
            temperature=self.rvp.temperature,
            stop=list(scorer.stop),
        )
        with scorer:
            groups = generate_tasks(scorer, engine, contexts, sampling)
        samples = [s for group in groups for s in group]
        return [s.task_text for s in samples], [bool(s.valid) for s in samples]

    def run(self) -> dict:
        """Run the job (a rerun reuses the cached features) and write ``summary.json``; returns the summary."""
        out, start = self.output_dir, time.monotonic()
        frame, ids, items = self._pool_items()
        labeled = align_labels(ids, frame)  # no model loaded, no activations cached for a probe that cannot be fitted
        short = fold_shortage(
            labeled.labels.numpy(), labeled.groups, split=self.sweep.split, n_folds=self.sweep.n_folds
        )
        if short:
            return self._without_probe(labeled, frame, dict(zip(ids, items, strict=True)), short, start)
        model, tokenizer = load_model(self.reference_model)
        freeze(model)
        extractor = self._extractor(model, tokenizer)
        cache = extract_to_cache(extractor, items, model_id=self.reference_model, cache_root=out / "cache", ids=ids)
        features = {key: cache.load(key) for key in cache.keys}
        rows = align_labels(cache.ids, frame)
        rvp_sample = self._rvp_sample(model, tokenizer, extractor) if self.rvp.contexts > 0 else None
        result = run_sweep(
            features, rows, self.sweep, rvp_sample=rvp_sample, out_dir=out / "sweep", cache_key=cache.root.name
        )
        module, metrics = refit_selected(features, rows, result, self.sweep)
        artifact = self._export(module, metrics, features, rows, result, cache)
        self._plot_test_reliability(artifact, features, rows, result, metrics)
        held_out, ranking = self._held_out(
            artifact, features, rows, result, metrics, frame, dict(zip(ids, items, strict=True))
        )
        summary = self._summary(rows, result, metrics, start, held_out)
        summary["held_out_ranking"] = ranking
        summary["rivals"] = self._compete(artifact, features, rows, result, frame, dict(zip(ids, items, strict=True)))
        summary["reward"] = summary["rivals"]["reward"] if summary["rivals"] else "probe"
        summary["probe_artifact"] = str(out / PROBE_ARTIFACT)
        write_json(out / SUMMARY, summary)
        return summary

    def _compete(self, artifact, features, rows, result, frame, item_of: dict) -> dict | None:
        """The probe against its rivals (``propel.probes.competition``); writes the reward to ``artifact/`` (a
        rival's ``ranker.json``, or the probe) and ``rivals.md``. None when disabled or the pool is too small."""
        out = self.output_dir
        reward_dir = out / "artifact"
        shutil.rmtree(reward_dir, ignore_errors=True)
        if not self.rivals.enabled:
            shutil.copytree(out / PROBE_ARTIFACT, reward_dir)
            return None
        tasks, texts = _tasks_and_texts(frame, rows, item_of)
        utility = self._utility(frame, rows)
        x = features[result.selected["key"]][torch.as_tensor(rows.rows, dtype=torch.long)].float()
        try:
            contest = compete(
                self.domain, tasks, texts, x, rows, utility, self.sweep, result.selected["arch"],
                result.selected["balance"], self.rivals,
            )  # fmt: skip
        except ValueError as err:  # too few rows of a class to cross-fit: the probe stays the reward, said so
            warnings.warn(f"probe rivals skipped: {err}", stacklevel=2)
            shutil.copytree(out / PROBE_ARTIFACT, reward_dir)
            return {"skipped": str(err), "reward": "probe"}
        if contest["reward"] == "probe":
            shutil.copytree(out / PROBE_ARTIFACT, reward_dir)
        else:
            self._save_rival(contest["reward"], tasks, texts, rows.labels.numpy(), reward_dir)
        (out / RIVALS_REPORT).write_text(competition_markdown(contest))
        return contest

    def _save_rival(self, kind: str, tasks, texts, labels, folder: Path) -> None:
        """The rival ``kind`` fitted on these rows as the reward in ``folder``, with its logit quantiles on them
        (the reward's default floor sits below them, as for a probe)."""
        ranker = fit_rival(kind, self.domain, tasks, texts, labels, self.rivals.seed)
        scores = ranker.score(tasks if ranker.reads == "task" else texts)
        ranker.logit_quantiles = logit_quantiles(torch.as_tensor(scores, dtype=torch.float32))
        ranker.save(folder)

    def _without_probe(self, rows, frame, item_of: dict, short: str, start: float) -> dict:
        """Too few labeled rows of a class (or too few groups) to fit and validate a probe: the reward is the
        domain's zero-fit rule, the one ranker that needs no labels (or the rival ``rivals.reward`` names, fitted on
        every row when both classes are there), and the summary says why. A config that asks for the probe, or a
        domain that declares no zero-fit rule, stops here with the reason. No probe artifact is written: none was
        fitted."""
        positives = int(rows.labels.sum().item())
        tasks, texts = _tasks_and_texts(frame, rows, item_of)
        why = f"{len(rows.ids)} labeled valid tasks, {positives} in the band: {short}"
        fix = "label more tasks or lower probe.sweep.n_folds"
        if not self.rivals.enabled or self.rivals.reward == "probe":
            raise ConfigError(f"probe job: no probe can be fitted ({why}), and the config makes the probe the reward "
                              f"(rivals.enabled: false or rivals.reward: probe): {fix}, or let rivals.reward: best "
                              "fall back to the domain's zero-fit rule")  # fmt: skip
        kind = self.rivals.reward if self.rivals.reward in RIVALS else "zero_fit"
        if kind == "zero_fit" and self.domain.zero_fit_score(tasks[0]) is None:
            raise ConfigError(f"probe job: no probe can be fitted ({why}), and the {self.domain.name} domain declares "
                              f"no zero-fit rule to rank tasks instead: {fix}")  # fmt: skip
        if kind != "zero_fit" and not 0 < positives < len(rows.ids):
            raise ConfigError(f"probe job: rivals.reward: {kind} cannot be fitted on one class ({why}): {fix}")
        warnings.warn(f"probe job: no probe fitted ({why}); the reward is `{kind}`", stacklevel=2)
        out = self.output_dir
        shutil.rmtree(out / "artifact", ignore_errors=True)
        shutil.rmtree(out / PROBE_ARTIFACT, ignore_errors=True)  # a probe from an earlier run is not this pool's
        self._save_rival(kind, tasks, texts, rows.labels.numpy(), out / "artifact")
        summary = {
            "rows": len(rows.ids),
            "positives": positives,
            "split": self.sweep.split,
            "n_folds": self.sweep.n_folds,
            "selected": None,
            "held_out": None,
            "artifact": str(out / "artifact"),
            "seconds": time.monotonic() - start,
            "rivals": {"skipped": why, "reward": kind, "unfitted": True},
            "reward": kind,
            "probe_artifact": None,
        }
        write_json(out / SUMMARY, summary)
        return summary

    def _utility(self, frame, rows) -> np.ndarray:
        """Each labeled row's utility: its exact band utility where the pool has the solver's exact solve probability
        (``rivals.band``, the pool's ``n_trials``), else its 0/1 label."""
        by_id = frame.set_index(frame["id"].astype(str))
        labels = rows.labels.numpy().astype(float)
        if "exact_p" not in by_id or by_id.loc[rows.ids, "exact_p"].isna().any():
            return labels
        ps, ns = by_id.loc[rows.ids, "exact_p"].astype(float), by_id.loc[rows.ids, "n_trials"].astype(int)
        return np.array([band_utility(p, n, tuple(self.rivals.band)) for p, n in zip(ps, ns, strict=True)])

    def _pool_items(self) -> tuple[Any, list[str], list]:
        """``(pool frame, valid ids, valid probe inputs)``; refuses a pool with no valid task, and an RVP sample for
        probes that read episodes (the sample is single-turn)."""
        frame = read_pool(self.pool)
        valid = frame[frame["valid"].astype(bool)] if len(frame) else frame
        if not len(valid):
            raise ConfigError(f"probe job: the pool {str(self.pool)!r} has no valid task; label more tasks first")
        ids = [str(i) for i in valid["id"]]
        items = [self.domain.probe_input(Task.from_json(t)) for t in valid["task"]]  # texts, or turn lists
        if self.rvp.contexts > 0 and not isinstance(items[0], str):
            raise ConfigError(
                f"probe rvp: the {self.domain.name} probes read generator episodes (turn lists), and the RVP sample "
                "is single-turn generation; set rvp.contexts: 0"
            )
        return frame, ids, items

    def _extractor(self, model, tokenizer):
        """The activation extractor over the job's layers, poolings and truncation."""
        return ActivationExtractor(
            model,
            tokenizer,
            self.layers,
            self.poolings,
            batch_size=self.batch_size,
            max_length=self.max_length,
            trajectory_pooling=self.trajectory_pooling,
        )

    def _rvp_sample(self, model, tokenizer, extractor):
        """The fixed on-policy sample's features and validity, which selection's RVP tiebreak reads."""
        rvp_texts, rvp_valid = self.rvp_texts(model, tokenizer)
        return RVPSample(
            features=extractor.encode(rvp_texts),
            valid=torch.tensor(rvp_valid),
            group_size=self.rvp.group_size,
            gate=self.rvp.gate,
        )

    def _export(self, module, metrics, features, rows, result, cache):
        """The refit probe as an artifact under ``artifact/``, with its calibration and its logit quantiles on the
        pool (the reward's default floor sits below them)."""
        layer, pooling = parse_key(result.selected["key"])
        artifact = module.to_artifact(
            reference_model=self.reference_model,
            layer=layer,
            pooling=pooling,
            max_length=self.max_length,
            trajectory_pooling=self.trajectory_pooling,
            metrics=metrics,
            reference=cache.meta.get("reference"),
        )
        artifact.calibration = module.calibration  # fit on the validation fold (the soft gate's probabilities)
        pool_x = features[result.selected["key"]][torch.as_tensor(rows.rows, dtype=torch.long)].float()
        artifact.logit_quantiles = logit_quantiles(artifact.score(pool_x))  # the reward's default floor sits below
        artifact.save(self.output_dir / PROBE_ARTIFACT)
        return artifact

    def _plot_test_reliability(self, artifact, features, rows, result, metrics) -> None:
        """``reliability.png`` of the exported probe on the test rows of its refit split, which it never trained on."""
        _, _, test = split_indices(rows, self.sweep, fold=metrics["fold"])  # rows the refit probe never trained on
        test_idx = torch.as_tensor(rows.rows[test], dtype=torch.long)
        with torch.no_grad():
            probs = artifact.probs(features[result.selected["key"]][test_idx].float())
        plot_reliability(
            probs,
            rows.labels[torch.as_tensor(test, dtype=torch.long)],
            self.output_dir / "reliability.png",
            title=f"selected probe {result.selected['key']} {result.selected['arch']} (test split)",
        )

    def _held_out(
        self, artifact, features, rows, result, metrics, frame, item_of: dict
    ) -> tuple[dict | None, dict | None]:
        """On the test rows of the exported probe's refit split: ``(comparison, ranking)``, or ``(None, None)`` when
        those rows lack a class. The comparison: the probe against chance, logistic regression on the same
        features, and the input's length and topic alone, as balanced accuracies with paired bootstrap intervals
        (``propel.metrics.held_out``); each row's label and predictions go to ``held_out_rows.json``, so the outer
        folds of a k-fold sweep can be pooled (``probe_outer_folds.py``). The ranking (``held_out_ranking``): what
        GRPO uses of the probe, its scores' AUROC against the label and Spearman with the solve count."""
        train, _, test = split_indices(rows, self.sweep, fold=metrics["fold"])
        y = rows.labels.numpy().astype(bool)
        if y[test].all() or not y[test].any():
            return None, None
        x = features[result.selected["key"]][torch.as_tensor(rows.rows, dtype=torch.long)].float()
        ids = np.asarray(rows.ids)
        with torch.no_grad():
            scores = artifact.score(x[test])
        topics = dict(zip(frame["id"].astype(str), frame["topic"].fillna("").astype(str), strict=True))
        predictions = {
            "probe": (torch.sigmoid(scores) >= artifact.threshold).numpy(),
            "logistic": fit_logistic(x[train].numpy(), y[train], balance="weighted").predict(x[test].numpy()),
            "length_only": length_only_predictions(
                [item_of[i] for i in ids[train]], y[train], [item_of[i] for i in ids[test]]
            ),
        }
        if any(topics.get(i) for i in ids):
            predictions["topic_only"] = topic_only_predictions(
                [topics.get(i, "") for i in ids[train]], y[train], [topics.get(i, "") for i in ids[test]]
            )
        per_row = {"ids": ids[test].tolist(), "labels": y[test].tolist()}  # pooled over outer folds by callers
        per_row.update({name: np.asarray(p, dtype=bool).tolist() for name, p in predictions.items()})
        write_json(self.output_dir / HELD_OUT_ROWS, per_row)
        solves = dict(zip(frame["id"].astype(str), frame["solve_count"], strict=True))
        counts = np.asarray([solves[i] for i in ids[test]], dtype=float)
        rho = spearmanr(scores.numpy(), counts).statistic if len(set(counts)) > 1 else float("nan")
        interval = auroc_interval(y[test], scores.numpy(), seed=int(metrics["seed"]))
        ranking = {
            "rows": int(len(test)),
            "auroc": interval["estimate"],
            "auroc_interval": [interval["low"], interval["high"]],
            "spearman_solve_count": float(rho),
        }
        return compare_on_held_out(y[test], predictions, subject="probe", seed=int(metrics["seed"])), ranking

    def _summary(self, rows, result, metrics, start: float, held_out: dict | None = None) -> dict:
        """``summary.json``'s content: the pool, the selected cell, its refit metrics, the logistic baseline of the
        same features (the sweep's row), the held-out comparison (``_held_out``) and the best cells."""
        out, table = self.output_dir, result.table
        baseline = table[(table["arch"] == BASELINE_ARCH) & (table["key"] == result.selected["key"])]
        selected = {k: (v.item() if hasattr(v, "item") else v) for k, v in result.selected.to_dict().items()}
        return {
            "rows": len(rows.ids),
            "positives": int(rows.labels.sum().item()),
            "split": self.sweep.split,
            "n_folds": self.sweep.n_folds,
            "selected": selected,
            "selected_refit_metrics": metrics,
            "logistic_baseline": baseline.iloc[0].to_dict() if len(baseline) else None,
            "held_out": held_out,
            "top_cells": table.head(5).to_dict("records"),
            "artifact": str(out / "artifact"),
            "seconds": time.monotonic() - start,
        }


def _tasks_and_texts(frame, rows, item_of: dict) -> tuple[list[Task], list[str]]:
    """The labeled rows' tasks and their probe inputs as the text classifier reads them, in the rows' order."""
    task_of = dict(zip(frame["id"].astype(str), frame["task"], strict=True))
    return [Task.from_json(task_of[i]) for i in rows.ids], [_text(item_of[i]) for i in rows.ids]


def _text(item) -> str:
    """A probe input as the text classifier reads it (a trajectory's turns joined)."""
    if isinstance(item, str):
        return item
    return "\n".join(t.get("content") or "" if isinstance(t, dict) else str(t) for t in item)


def probe_parser():
    """The ``propel probe`` parser: ``ProbeJob``'s arguments, YAML configs in omegaconf+ mode."""
    parser = ArgumentParser(prog="propel probe", parser_mode="omegaconf+", exit_on_error=False, description=__doc__)
    parser.add_argument("-c", "--config", action=ActionConfigFile, help="YAML config (e.g. configs/probe/sweep.yaml)")
    parser.add_class_arguments(ProbeJob, fail_untyped=True)
    return parser


def parse_probe(args: list[str]) -> ProbeJob:
    """A ``ProbeJob`` from ``propel probe`` arguments (a bad key or value raises a one-line ``ConfigError``)."""
    parser = probe_parser()
    try:
        cfg = parser.parse_args(with_fragments_inlined(args))
        init = parser.instantiate_classes(cfg).as_dict()
    except ArgumentError as err:
        raise ConfigError(explain(str(err), lambda: list(parser.get_defaults().keys()))) from None
    init.pop("config", None)
    init.pop("__path__", None)
    return ProbeJob(**init)


def main(args: list[str]) -> dict:
    """``propel probe -c CONFIG [--key value ...]``: run the job and print where the artifact went."""
    summary = parse_probe(args).run()
    print_summary_table(
        {
            "rows": summary["rows"],
            "positives": summary["positives"],
            "selected": (summary["selected"] or {}).get("key", "none: too few labels"),
            "reward": summary["reward"],
            "artifact": summary["artifact"],
        },
        "probe",
    )
    return summary
