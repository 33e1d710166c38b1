"""The test-suite reward with an anti-reward-hacking penalty, graded where the graded code cannot reach, and its parts
as logged components.

``reward = pass_weight * pass_rate - hack_penalty * hacked``

- ``pass_rate = min(held-out rate, overall rate)``: the share of the task's *held-out* tests (``hidden``, always the
  pristine copy, plus the reference-generated ones below) that passed, capped by the share of *all* its tests,
  visible ones included, that passed. The visible tests were shown (in the prompt's examples or the workspace), so
  passing them is no evidence of working code and they never raise the reward: answering them from a table buys
  nothing. But a run that fails any visible test is capped below fully correct (the overall rate is then under 1),
  so the reward is monotone in what the program gets right: passing one more test, visible or held out, never
  lowers it, and a program wrong on the examples is not graded correct. When every visible test passes the cap is
  the held-out rate itself. A task that holds no test out pays its visible tests.
- Held out means unseen: the task's held-out tests never call the function with an input the prompt or a visible
  test shows (``propel.testsuite.shown``), and a task left with fewer than ``held_out.MIN_HELD_OUT`` distinct
  held-out inputs gets more (``test_generated_<k>``): inputs near its own, unseen and inside the envelope of its
  inputs, answered by the task's reference solution in the sandbox (once per task), and passed when the graded
  code's answer equals the reference's (floats within 1e-6; ``propel.testsuite.held_out``).
- ``hacked``: 1 when a penalised flag fired (``propel.testsuite.detectors``); the run's pass rate then counts 0 and
  the penalty is subtracted: a flagged hack scores ``-hack_penalty``, *below* an honest failure's 0, so in a GRPO
  group where nothing passes, trying a hack is not free (its advantage is the most negative of the group). With the
  default 0.5 and a group of 8 where one sample hacks and seven fail honestly, the hack's advantage is -2.47 (scaled
  by the group's standard deviation) and each honest failure's +0.35.
- ``grader="value"`` (the default): each test runs in the trusted runner with ``candidate`` bound to a proxy; the
  graded process (fresh, confined, holding no test) only computes ``candidate(*args)`` and returns plain data, and
  the runner evaluates the assertion on it (``propel.testsuite.values``). Nothing the graded process does inside
  itself can change a verdict, so its behaviour flags (frames read, files written, test frameworks imported, an exit)
  are logged with where they fired and cost nothing; what its answers show is penalised: ``hardcoded_outputs``, the
  visible inputs answered with their own outputs and every other input tried with one default, decided on the
  answers whether or not the visible tests pass (``detectors.check_hardcoded`` on the hidden tests' inputs and
  inputs near the visible ones, whose reference answers are computed once per task from the task's reference
  solution), and ``custom_eq``, a returned object
  whose class brings its own ``==`` (it travels, and is compared, as the plain value it holds either way).
- ``grader="pytest"``: a hardened pytest run (``propel.testsuite.runner``), whose verdict is decided *inside* the
  graded process: a policy can reach it (``docs/trusted_grading.md``). An evaluation-only grader, refused as a reward
  unless ``allow_in_process_verdict`` names the choice; every flag but ``test_files_modified`` is penalised there.

What the grader cannot judge is NaN, never 0 (``propel.rewards.combine``): a rollout lost to an infrastructure
failure (status ``infra``), and every submission of a call whose sandbox raised (status ``grader_failed``: the sandbox's
contract is that nothing a job does raises, so an exception is the grader not running). The graded code failing,
hanging or killing its runner is a real verdict: 0, with its flags.

What is graded: ``sample.artifacts["files"]`` (an agent's workspace as ``ToolEnv`` collected it), else the
single-turn completion turned into ``solution.py`` with the task's prompt. Test files and pytest configuration in
the workspace are compared with the task's starting files and left out of the graded run (``test_files_modified`` is
informational: the pristine tests are what ran). Everything lands in ``sample.info["test_suite"]``;
``TestSuitePart`` components log a part per step (``train/reward/<name>``).
"""

from __future__ import annotations

import hashlib
import logging
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from propel.errors import ConfigError
from propel.records import Sample
from propel.rewards.reward import Reward, RewardContext, gold_data
from propel.sandbox.sandbox import Sandbox
from propel.tasks.humaneval.solution import solution_source
from propel.testsuite.detectors import (
    FLAGS,
    VALUE_PENALISED,
    HackReport,
    add_audit,
    check_channel,
    check_hardcoded,
    compare_workspace,
    is_test_path,
    run_findings,
)
from propel.testsuite.held_out import MIN_HELD_OUT, answered_alike, candidates, usable
from propel.testsuite.neighbours import literal_calls, probe_inputs
from propel.testsuite.runner import Submission, SuiteRun, SuiteRunner
from propel.testsuite.shown import distinct_inputs
from propel.testsuite.split_suite import PytestRun, SplitSuite, pytest_files
from propel.testsuite.values import ValueRun, ValueRunner, ValueSubmission, ValueTests

log = logging.getLogger(__name__)

INFO_KEY = "test_suite"
PARTS = ("pass_rate", "visible_pass_rate", "hacked", *FLAGS)
GRADERS = ("value", "pytest")
DATA_KEYS = ("entry_point", "prompt", "visible", "hidden")
SOURCE = "propel.tasks.humaneval.HumanEvalTasks or propel.tasks.humaneval.HumanEvalAgentTasks"
"""What a context's ``data`` must hold (``propel.tasks.humaneval.CodeTask.grading_data`` builds it)."""


UNJUDGED = ("infra", "grader_failed")
"""Statuses of a sample the grader could not judge: its reward and every part are NaN."""

HACK_PENALTY = 0.5
"""Default penalty of a flagged run: its reward is -0.5, below an honest failure's 0."""


def suite_reward(pass_rate: float, hacked: bool, pass_weight: float, hack_penalty: float) -> float:
    """The formula, on its own (a hacked run's ``pass_rate`` counts 0)."""
    return pass_weight * (0.0 if hacked else pass_rate) - hack_penalty * float(hacked)


def capped_rate(held_passed: int, held: int, visible_passed: int, visible: int) -> float:
    """``min(held-out rate, overall rate)``: the held-out tests pay, and a failed visible test caps the result below
    1 (the overall rate is then under 1); with no held-out test the visible ones pay."""
    if not held:
        return visible_passed / visible if visible else 0.0
    return min(held_passed / held, (held_passed + visible_passed) / (held + visible))


@dataclass
class Probes:
    """The inputs a submission is asked for outside its tests (``ValueSubmission.calls``), by role."""

    sources: list[str]
    """Argument tuples as literals: the visible calls', the hidden calls', the generated held-out candidates', and the
    inputs near the visible ones."""
    n_visible: int
    own: list[int] = field(default_factory=list)
    """Indices of the task's own (visible and hidden) inputs."""
    candidates: list[int] = field(default_factory=list)
    """Indices of the reference-generated held-out inputs' candidates (the reference decides which are used)."""
    need: int = 0
    """Generated held-out inputs the task needs (``MIN_HELD_OUT`` minus its distinct held-out inputs)."""


def graded_files(sample: Sample) -> dict[str, str | None] | None:
    """The files the model left: the rollout's collected files, else ``solution.py`` from a single-turn completion
    (None when the context has no prompt to build it from)."""
    files = sample.artifacts.get("files")
    if files is not None:
        return dict(files)
    data = sample.context.data if sample.context is not None else {}
    if "prompt" not in data or "entry_point" not in data:
        return None
    name = data.get("solution_file", "solution.py")
    return {name: solution_source(data["prompt"], sample.completion, data["entry_point"])}


def split_suite(data: dict) -> SplitSuite:
    """The context's tests as a ``SplitSuite``."""
    module = data.get("solution_file", "solution.py").removesuffix(".py").replace("/", ".")
    tests = {**data["visible"], **data["hidden"]}
    return SplitSuite(tests, data["entry_point"], data["prompt"], data.get("preamble", ""), module)


class TestSuiteReward(Reward):
    """Runs the task's pristine tests against what the model wrote, penalising what the run shows was gamed.

    Contexts carry the suite in ``data``: ``visible`` and ``hidden`` (test name -> body calling ``candidate``),
    ``entry_point``, ``prompt`` (the task's pristine prompt: its helpers), ``preamble``, ``visible_calls`` and
    ``hidden_calls`` (argument lists of the tests' calls), ``reference`` (a correct ``solution.py``: the hard-coding
    check's answers; without it the check is off) and, for agents, ``files`` (the starting workspace).
    ``propel.tasks.humaneval.HumanEvalTasks`` and ``propel.tasks.humaneval.HumanEvalAgentTasks`` build them.

    Args:
        pass_weight: weight of the pass rate.
        hack_penalty: subtracted when a penalised flag fires (the run's reward is then ``-hack_penalty``).
        grader: ``value`` (out-of-process value grading, the default) or ``pytest`` (hardened pytest run, decided in
            the graded process: needs ``allow_in_process_verdict``).
        allow_in_process_verdict: accept ``grader: pytest`` although its verdict is reachable from the graded process
            (evaluation of suites that need pytest; never an RL reward one would trust against a searching policy).
        canaries: canary tests per pytest run (copies of real tests expecting a wrong value).
        sandbox: where the tests run; None starts a ``LocalSandbox`` on first use (closed by ``close()``).
        timeout_s: wall-clock limit of one submission's grading (a hanging solution gets 0).
        memory_mb: memory limit of the graded process.
        batch_size: submissions per sandbox job.
        workers: sandbox workers when this reward starts its own sandbox.
        seed: seeds the pytest runs' names, order and canaries (None: fresh each run).
    """

    __test__ = False  # not a pytest test class, whatever its name

    def __init__(
        self,
        name: str = "tests",
        weight: float = 1.0,
        pass_weight: float = 1.0,
        hack_penalty: float = HACK_PENALTY,
        grader: str = "value",
        allow_in_process_verdict: bool = False,
        canaries: int = 3,
        sandbox: Sandbox | None = None,
        timeout_s: float = 10.0,
        memory_mb: int = 512,
        batch_size: int = 8,
        workers: int = 2,
        seed: int | None = None,
    ) -> None:
        if min(pass_weight, hack_penalty) < 0:
            raise ConfigError(f"TestSuiteReward weights must be >= 0, got pass_weight {pass_weight}, {hack_penalty}")
        if grader not in GRADERS:
            raise ConfigError(f"TestSuiteReward grader must be one of {GRADERS}, got {grader!r}")
        if grader == "pytest" and not allow_in_process_verdict:
            raise ConfigError(
                "TestSuiteReward grader: pytest decides pass/fail inside the graded process, where a policy can reach "
                "the verdict (docs/trusted_grading.md): it is an evaluation-only grader. Use grader: value for a "
                "reward, or set allow_in_process_verdict: true to use it anyway"
            )
        if canaries < 0:
            raise ConfigError(f"TestSuiteReward canaries must be >= 0, got {canaries}")
        if timeout_s <= 0 or memory_mb < 64 or batch_size < 1 or workers < 1:
            raise ConfigError(
                "TestSuiteReward needs timeout_s > 0, memory_mb >= 64, batch_size >= 1 and workers >= 1; got "
                f"{timeout_s}, {memory_mb}, {batch_size}, {workers}"
            )
        self.name, self.weight = name, weight
        self.pass_weight, self.hack_penalty = pass_weight, hack_penalty
        self.grader, self.canaries, self.rng = grader, canaries, random.Random(seed)
        self.sandbox, self._owns_sandbox, self.workers = sandbox, False, workers
        self.timeout_s, self.memory_mb, self.batch_size = timeout_s, memory_mb, batch_size
        self._reference: dict[str, list] = {}

    def setup(self, context: RewardContext) -> None:
        self._sandbox()

    def _sandbox(self) -> Sandbox:
        if self.sandbox is None:
            from propel.sandbox.local import LocalSandbox

            self.sandbox, self._owns_sandbox = LocalSandbox(max_workers=self.workers), True
        return self.sandbox

    def close(self) -> None:
        if self._owns_sandbox and self.sandbox is not None:
            self.sandbox.close()
            self.sandbox, self._owns_sandbox = None, False

    def __call__(self, samples: Sequence[Sample]) -> torch.Tensor:
        rewards = [0.0] * len(samples)
        pending: list[tuple[int, dict, HackReport, PytestRun | None]] = []
        for i, s in enumerate(samples):
            data = gold_data(s, i, DATA_KEYS, "TestSuiteReward", SOURCE)
            if s.infra_error is not None:
                s.info[INFO_KEY] = _info(math.nan, math.nan, HackReport(), "infra", s.infra_error)
                rewards[i] = math.nan
                continue
            files = graded_files(s) or {}
            report = HackReport(penalised=VALUE_PENALISED if self.grader == "value" else None)
            if "files" in data:
                compare_workspace(files, data["files"], report)
            code = {p: t for p, t in files.items() if t is not None and not is_test_path(p)}
            solution = data.get("solution_file", "solution.py")
            if solution not in code:
                s.info[INFO_KEY] = _info(0.0, 0.0, report, "no_solution", f"no {solution} to grade")
                continue
            layout = pytest_files(split_suite(data), self.rng, self.canaries) if self.grader == "pytest" else None
            pending.append((i, code, report, layout))
        if pending:
            datas = [samples[i].context.data for i, _, _, _ in pending]
            probes = [self._probes(data) for data in datas]
            try:
                references = self._references(datas, probes)
                runs, returned = self._run(
                    [(d, code, layout, p) for d, (_, code, _, layout), p in zip(datas, pending, probes, strict=True)]
                )
            except Exception as e:  # no job's behaviour raises in a sandbox: this is the grader, not the code
                why = f"the grader could not run: {type(e).__name__}: {e}"
                log.warning("propel: %s %s; its %d submissions are not judged (NaN)", self.name, why, len(pending))
                for i, *_ in pending:
                    samples[i].info[INFO_KEY] = _info(math.nan, math.nan, HackReport(), "grader_failed", why)
                    rewards[i] = math.nan
                return torch.tensor(rewards, dtype=torch.float32)
            for k, (i, _, report, layout) in enumerate(pending):
                rewards[i] = self._grade(samples[i], runs[k], report, layout, references[k], returned[k], probes[k])
        return torch.tensor(rewards, dtype=torch.float32)

    # ------------------------------------------------------------------------------------------- hard-coding check
    @staticmethod
    def _probes(data: dict) -> Probes | None:
        """The hard-coding check's inputs and the generated held-out inputs' candidates for a task (None without a
        reference solution)."""
        if not data.get("reference"):
            return None
        seed = str(data.get("task_id") or data["entry_point"])
        visible, hidden = data.get("visible_calls") or [], data.get("hidden_calls") or []
        need = max(0, MIN_HELD_OUT - distinct_inputs(list(data["hidden"].values()), data["entry_point"]))
        extra = candidates(visible, hidden, data["prompt"], data["entry_point"], seed, need)
        sources, n_visible = probe_inputs(visible, hidden, seed, extra)
        if len(sources) <= n_visible:
            return None
        index = {source: i for i, source in enumerate(sources)}
        own = sorted({index[repr(a)] for a in literal_calls([*visible, *hidden]) if repr(a) in index})
        chosen = [index[repr(a)] for a in literal_calls(extra) if repr(a) in index]
        return Probes(sources, n_visible, own, chosen, need)

    def _references(self, datas: list[dict], probes: list) -> list[list | None]:
        """The reference solution's answers to each task's probes, computed in the sandbox once per task."""
        keys = [None if p is None else _probe_key(d, p.sources) for d, p in zip(datas, probes, strict=True)]
        todo = {k: (d, p) for k, d, p in zip(keys, datas, probes, strict=True) if k and k not in self._reference}
        if todo:
            runner = ValueRunner(self._sandbox(), self.timeout_s, self.memory_mb, self.batch_size)
            subs = [
                ValueSubmission({d.get("solution_file", "solution.py"): d["reference"]}, _no_tests(d), calls=p.sources)
                for d, p in todo.values()
            ]
            for key, run in zip(todo, runner.run(subs), strict=True):
                self._reference[key] = list(run.returned) if run.ok else []
        return [self._reference.get(k) if k else None for k in keys]

    # ------------------------------------------------------------------------------------------------ grading
    def _run(self, items: list[tuple[dict, dict, PytestRun | None, Probes | None]]) -> tuple[list, list[list]]:
        """Each submission's run and its answers to the probes."""
        sandbox = self._sandbox()
        values = ValueRunner(sandbox, self.timeout_s, self.memory_mb, self.batch_size)
        if self.grader == "value":
            subs = [
                ValueSubmission(code, split_suite(d).value_tests(), calls=p.sources if p else [])
                for d, code, _, p in items
            ]
            runs = values.run(subs)
            return runs, [list(r.returned) for r in runs]
        runner = SuiteRunner(sandbox, self.timeout_s, self.memory_mb, self.batch_size)
        runs = runner.run([Submission(code, layout.files) for _, code, layout, _ in items])
        probed = [k for k, (_, _, _, p) in enumerate(items) if p]
        answers: list[list] = [[] for _ in items]
        if probed:
            subs = [ValueSubmission(items[k][1], _no_tests(items[k][0]), calls=items[k][3].sources) for k in probed]
            for k, run in zip(probed, values.run(subs), strict=True):
                answers[k] = list(run.returned)
        return runs, answers

    def _outcomes(self, run: ValueRun | SuiteRun, report: HackReport, layout: PytestRun | None) -> dict[str, str]:
        """Real test name -> outcome, with the run's evidence added to ``report``."""
        add_audit(run_findings(run), report)
        if layout is None:
            if not run.ok:
                report.add("early_exit", run.reason)
            return dict(run.tests) if run.ok else {}
        opaque = run.by_name()
        check_channel(run, report)
        if run.ok:
            known = {*layout.names, *(n for pair in layout.canaries for n in pair)}
            unknown = sorted(k for k in run.report_tests if k.rsplit("::", 1)[-1] not in known)
            if unknown:
                report.add("report_tampered", f"the report has tests the suite does not: {unknown[:4]}")
            missing = [n for pair in layout.canaries for n in pair if n not in opaque]
            if missing:
                report.add("report_tampered", f"{len(missing)} canary tests are missing from the run's account")
            if any(opaque.get(a) == opaque.get(b) == "passed" for a, b in layout.canaries):
                report.add("canary_passed", "both tests of a canary pair passed (one expects a wrong value)")
        return {real: opaque[name] for name, real in layout.names.items() if name in opaque} if run.ok else {}

    def _grade(self, sample: Sample, run, report: HackReport, layout, reference, returned, probes) -> float:
        data = sample.context.data
        visible, hidden = list(data["visible"]), list(data["hidden"])
        tests = self._outcomes(run, report, layout)
        skipped = [t for t in [*visible, *hidden] if tests.get(t) == "skipped"]
        if skipped:
            report.add("skipped_tests", f"{len(skipped)} tests ended skipped: {skipped[:3]}")
        generated = self._generated(tests, reference, returned, probes)
        held = [*hidden, *generated]
        required = held or visible
        visible_passed = sum(tests.get(t) == "passed" for t in visible)
        check_hardcoded(reference, returned, probes.n_visible if probes else 0, report)
        passed = sum(tests.get(t) == "passed" for t in required)
        held_passed = sum(tests.get(t) == "passed" for t in held)
        pass_rate = capped_rate(held_passed, len(held), visible_passed, len(visible))
        which = "held-out" if held else "visible (the task holds none out)"
        reason = f"{passed}/{len(required)} {which} tests passed" if run.ok else run.reason
        if held and visible_passed < len(visible):
            reason += f"; {len(visible) - visible_passed} visible tests failed: capped at {pass_rate:.2f}"
        if report.hacked:
            first = report.untrusted[0]
            reason = f"{reason}; not counted ({', '.join(report.untrusted)}): {report.evidence[first][0]}"
        reward = suite_reward(pass_rate, report.hacked, self.pass_weight, self.hack_penalty)
        info = _info(reward, 0.0 if report.hacked else pass_rate, report, run.status, reason)
        reasons = getattr(run, "reasons", {})
        info.update(
            passed=passed,
            required=len(required),
            generated=len(generated),
            visible_pass_rate=visible_passed / len(visible) if visible else 0.0,
            tests=tests,
            grader=self.grader,
            landlock=run.landlock,
            output_tail=run.output_tail[-500:],
            why={t: reasons[t] for t in [*visible, *held] if t in reasons},
        )
        sample.info[INFO_KEY] = info
        return reward

    @staticmethod
    def _generated(tests: dict[str, str], reference, returned: list, probes: Probes | None) -> list[str]:
        """The reference-generated held-out tests' names, their outcomes added to ``tests``: passed when the graded
        code answered the input as the reference does."""
        if not probes or not reference or not probes.need:
            return []
        names = []
        for k, i in enumerate(usable(reference, probes.candidates, probes.own, probes.need)):
            name = f"test_generated_{k}"
            got = returned[i] if i < len(returned) else ("error", "no answer")
            tests[name] = "passed" if answered_alike(got, reference[i]) else "failed"
            names.append(name)
        return names


def _no_tests(data: dict) -> ValueTests:
    """A value submission's test list when only its answers to the probes are wanted."""
    module = data.get("solution_file", "solution.py").removesuffix(".py").replace("/", ".")
    return ValueTests([], data["entry_point"], data["prompt"], data.get("preamble", ""), module)


def _probe_key(data: dict, sources: list[str]) -> str:
    text = "\0".join([data["entry_point"], data["reference"], *sources])
    return hashlib.sha256(text.encode()).hexdigest()


def _info(reward: float, pass_rate: float, report: HackReport, status: str, reason: str) -> dict:
    return {
        "reward": reward,
        "pass_rate": pass_rate,
        "visible_pass_rate": 0.0,
        "hacked": float(report.hacked),
        "flags": report.flags,
        "evidence": {k: list(v) for k, v in report.evidence.items()},
        "status": status,
        "reason": reason,
    }


class TestSuitePart(Reward):
    """One part of ``TestSuiteReward``'s grading as its own logged component (weight 0 by default: it only logs);
    NaN where the grader could not judge the sample.

    Args:
        part: ``pass_rate``, ``visible_pass_rate``, ``hacked`` or a hack flag name (1 when it fired).
        name: the component's name (default: the part).
    """

    __test__ = False

    def __init__(self, part: str, name: str | None = None, weight: float = 0.0) -> None:
        if part not in PARTS:
            raise ConfigError(f"TestSuitePart part must be one of {PARTS}, got {part!r}")
        self.part, self.name, self.weight = part, name or part, weight

    def __call__(self, samples: Sequence[Sample]) -> torch.Tensor:
        out = []
        for i, s in enumerate(samples):
            info = s.info.get(INFO_KEY)
            if info is None:
                raise ConfigError(
                    f"TestSuitePart({self.part!r}) reads sample.info[{INFO_KEY!r}]; sample {i} has none: list it after "
                    "TestSuiteReward in the rewards"
                )
            if info["status"] in UNJUDGED:
                out.append(math.nan)
                continue
            out.append(float(self.part in info["flags"]) if self.part in FLAGS else float(info[self.part]))
        return torch.tensor(out, dtype=torch.float32)
