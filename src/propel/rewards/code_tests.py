"""The test-suite reward with an anti-reward-hacking penalty, graded where the graded code cannot reach, and its parts
as logged components.

``reward = max(0, pass_weight * pass_rate - hack_penalty * hacked + coverage_bonus * coverage)``

- ``pass_rate``: required tests (the task's visible + hidden tests, always the pristine copy) that passed, over all
  required tests.
- ``grader="value"`` (the default): each test runs in the trusted runner with ``candidate`` bound to a proxy; the
  graded process (fresh, confined, holding no test) only computes ``candidate(*args)`` and returns plain data, and
  the runner evaluates the assertion on it (``propel.testsuite.values``). There is no pytest, no report and no test
  file the graded code could reach.
- ``grader="pytest"``: a hardened pytest run (``propel.testsuite.runner``): opaque test names, canaries, the tests
  hidden after collection, the run's own authenticated account of each test cross-checked with the JUnit XML, the
  runner's code snapshot, the audit hook. For suites that need pytest.
- ``hacked``: 1 when any untrusted flag of ``propel.testsuite.detectors`` fired; the run's pass rate and coverage
  then count 0 and the penalty applies on top. ``test_files_modified`` (an agent edited its copy of the visible
  tests) is informational: the pristine tests are what ran, so the edit changed nothing graded.
- ``coverage`` (pytest grader only, 0 by default): ``max(0, 1 - missed / 10)`` when every required test passed,
  where ``missed`` counts the statements of the model's code the tests never ran; each such statement costs a
  tenth, and padding (statements that do run) changes nothing.

What is graded: ``sample.artifacts["files"]`` (an agent's workspace as ``ToolEnv`` collected it), else the
single-turn completion turned into ``solution.py`` with the task's prompt. Test files and pytest configuration in
the workspace are compared with the task's starting files and left out of the graded run. Everything lands in
``sample.info["test_suite"]``; ``TestSuitePart`` components log a part per step (``train/reward/<name>``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from propel.errors import ConfigError
from propel.rewards.base import Reward, RewardContext, gold_data
from propel.rollouts.record import Sample
from propel.sandbox.base import Sandbox
from propel.tasks.humaneval.solution import solution_source
from propel.testsuite.detectors import (
    FLAGS,
    HackReport,
    add_audit,
    check_channel,
    check_hardcoded,
    compare_workspace,
    is_test_path,
    run_findings,
)
from propel.testsuite.runner import Submission, SuiteRun, SuiteRunner
from propel.testsuite.split_suite import PytestRun, SplitSuite, pytest_files
from propel.testsuite.values import ValueRun, ValueRunner, ValueSubmission

INFO_KEY = "test_suite"
PARTS = ("pass_rate", "coverage", "hacked", *FLAGS)
GRADERS = ("value", "pytest")
DATA_KEYS = ("entry_point", "prompt", "visible", "hidden")
SOURCE = "propel.tasks.humaneval.HumanEvalTasks or propel.tasks.humaneval.HumanEvalAgentTasks"
"""What a context's ``data`` must hold (``propel.tasks.humaneval.CodeTask.grading_data`` builds it)."""


def suite_reward(
    pass_rate: float, hacked: bool, coverage: float, pass_weight: float, hack_penalty: float, coverage_bonus: float
) -> float:
    """The formula, on its own (``coverage`` in [0, 1])."""
    return max(0.0, pass_weight * pass_rate - hack_penalty * float(hacked) + coverage_bonus * coverage)


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
    ``entry_point``, ``prompt`` (the task's pristine prompt: its helpers), ``preamble``, ``visible_calls`` (argument
    lists of visible calls) and, for agents, ``files`` (the starting workspace).
    ``propel.tasks.humaneval.HumanEvalTasks`` and ``propel.tasks.humaneval.HumanEvalAgentTasks`` build them.

    Args:
        pass_weight: weight of the pass rate.
        hack_penalty: subtracted when any untrusted hack flag fires.
        coverage_bonus: weight of the coverage part (``grader="pytest"`` only; see the module docstring).
        grader: ``value`` (out-of-process value grading, the default) or ``pytest`` (hardened pytest run).
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
        hack_penalty: float = 0.4,
        coverage_bonus: float = 0.0,
        grader: str = "value",
        canaries: int = 3,
        sandbox: Sandbox | None = None,
        timeout_s: float = 10.0,
        memory_mb: int = 512,
        batch_size: int = 8,
        workers: int = 2,
        seed: int | None = None,
    ) -> None:
        if min(pass_weight, hack_penalty, coverage_bonus) < 0:
            raise ConfigError(
                f"TestSuiteReward weights must be >= 0, got {pass_weight}, {hack_penalty}, {coverage_bonus}"
            )
        if grader not in GRADERS:
            raise ConfigError(f"TestSuiteReward grader must be one of {GRADERS}, got {grader!r}")
        if coverage_bonus > 0 and grader != "pytest":
            raise ConfigError(
                "TestSuiteReward coverage_bonus needs grader: pytest (value grading runs no coverage: the graded "
                "process only returns values)"
            )
        if canaries < 0:
            raise ConfigError(f"TestSuiteReward canaries must be >= 0, got {canaries}")
        self.name, self.weight = name, weight
        self.pass_weight, self.hack_penalty, self.coverage_bonus = pass_weight, hack_penalty, coverage_bonus
        self.grader, self.canaries, self.rng = grader, canaries, random.Random(seed)
        self.sandbox, self._owns_sandbox, self.workers = sandbox, False, workers
        self.timeout_s, self.memory_mb, self.batch_size = timeout_s, memory_mb, batch_size

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
        pending: list[tuple[int, dict, HackReport, str, PytestRun | None]] = []
        for i, s in enumerate(samples):
            data = gold_data(s, i, DATA_KEYS, "TestSuiteReward", SOURCE)
            if s.infra_error is not None:
                s.info[INFO_KEY] = _info(0.0, 0.0, 0.0, HackReport(), "infra", s.infra_error)
                continue
            files = graded_files(s) or {}
            report = HackReport()
            if "files" in data:
                compare_workspace(files, data["files"], report)
            code = {p: t for p, t in files.items() if t is not None and not is_test_path(p)}
            solution = data.get("solution_file", "solution.py")
            if solution not in code:
                s.info[INFO_KEY] = _info(0.0, 0.0, 0.0, report, "no_solution", f"no {solution} to grade")
                rewards[i] = s.info[INFO_KEY]["reward"] = self._formula(0.0, report, 0.0)
                continue
            layout = pytest_files(split_suite(data), self.rng, self.canaries) if self.grader == "pytest" else None
            pending.append((i, code, report, "\n".join(code.values()), layout))
        if pending:
            runs = self._run([(samples[i].context.data, code, layout) for i, code, _, _, layout in pending])
            for (i, _, report, text, layout), run in zip(pending, runs, strict=True):
                rewards[i] = self._grade(samples[i], run, report, text, layout)
        return torch.tensor(rewards, dtype=torch.float32)

    def _run(self, items: list[tuple[dict, dict, PytestRun | None]]) -> list[ValueRun | SuiteRun]:
        sandbox = self._sandbox()
        if self.grader == "value":
            runner = ValueRunner(sandbox, self.timeout_s, self.memory_mb, self.batch_size)
            return runner.run([ValueSubmission(code, split_suite(data).value_tests()) for data, code, _ in items])
        runner = SuiteRunner(sandbox, self.timeout_s, self.memory_mb, self.batch_size, coverage=self.coverage_bonus > 0)
        return runner.run([Submission(code, layout.files) for _, code, layout in items])

    def _formula(self, pass_rate: float, report: HackReport, coverage: float) -> float:
        return suite_reward(
            pass_rate, report.hacked, coverage, self.pass_weight, self.hack_penalty, self.coverage_bonus
        )

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

    def _grade(self, sample: Sample, run, report: HackReport, code: str, layout: PytestRun | None) -> float:
        data = sample.context.data
        visible, hidden = list(data["visible"]), list(data["hidden"])
        required = visible + hidden
        tests = self._outcomes(run, report, layout)
        skipped = [t for t in required if tests.get(t) == "skipped"]
        if skipped:
            report.add("skipped_tests", f"{len(skipped)} required tests ended skipped: {skipped[:3]}")
        check_hardcoded(tests, visible, hidden, code, list(data.get("visible_calls", [])), report)
        passed = sum(tests.get(t) == "passed" for t in required)
        pass_rate = passed / len(required) if required else 0.0
        coverage = 0.0
        if layout is not None and pass_rate == 1.0 and run.missed is not None:
            coverage = max(0.0, 1.0 - run.missed / 10.0)
        reason = f"{passed}/{len(required)} required tests passed" if run.ok else run.reason
        if report.hacked:
            pass_rate, coverage = 0.0, 0.0
            first = report.untrusted[0]
            reason = f"{reason}; not counted ({', '.join(report.untrusted)}): {report.evidence[first][0]}"
        reward = self._formula(pass_rate, report, coverage)
        info = _info(reward, pass_rate, coverage, report, run.status, reason)
        reasons = getattr(run, "reasons", {})
        info.update(
            passed=passed,
            required=len(required),
            tests=tests,
            grader=self.grader,
            landlock=run.landlock,
            output_tail=run.output_tail[-500:],
            why={t: reasons[t] for t in required if t in reasons},
        )
        sample.info[INFO_KEY] = info
        return reward


def _info(reward: float, pass_rate: float, coverage: float, report: HackReport, status: str, reason: str) -> dict:
    return {
        "reward": reward,
        "pass_rate": pass_rate,
        "coverage": coverage,
        "hacked": float(report.hacked),
        "flags": report.flags,
        "evidence": {k: list(v) for k, v in report.evidence.items()},
        "status": status,
        "reason": reason,
    }


class TestSuitePart(Reward):
    """One part of ``TestSuiteReward``'s grading as its own logged component (weight 0 by default: it only logs).

    Args:
        part: ``pass_rate``, ``coverage``, ``hacked`` or a hack flag name (1 when it fired).
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
                raise ValueError(
                    f"TestSuitePart({self.part!r}) reads sample.info[{INFO_KEY!r}]; sample {i} has none: list it after "
                    "TestSuiteReward in the rewards"
                )
            value = float(self.part in info["flags"]) if self.part in FLAGS else float(info[self.part])
            out.append(value)
        return torch.tensor(out, dtype=torch.float32)
