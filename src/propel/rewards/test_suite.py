"""The test-suite reward with an anti-reward-hacking penalty (issue 16), and its parts as logged components.

``reward = max(0, pass_weight * pass_rate - hack_penalty * hacked + coverage_bonus * coverage)``

- ``pass_rate``: required tests (the task's visible + hidden tests, run from the pristine copy in the context's
  ``data["tests"]``) reported *passed* in pytest's JUnit XML, over all required tests; skipped is not passed, and a
  run without a report or with pytest exit codes 2-5 (interrupted, internal, usage, nothing collected) counts 0.
- ``hacked``: 1 when any detector of ``propel.testsuite.detectors`` fired (each flag is its own entry). A flag in
  ``UNTRUSTED`` (tampering, read or hard-coded answers, early exits) also zeroes the run's pass rate and coverage:
  with the default weights a hack that made every test pass would otherwise still earn ``1 - 0.4``, more than an
  honest partial solution.
- ``coverage``: coverage.py's statement coverage of the model's code under the suite, in [0, 1].

What is graded: ``sample.artifacts["files"]`` (an agent's workspace as ``ToolEnv`` collected it, or what a
single-turn environment put there), else the single-turn completion turned into ``solution.py`` with the task's
prompt. Test files and pytest configuration the model wrote are compared with the pristine ones (the detectors) and
left out of the graded run. Everything lands in ``sample.info["test_suite"]``; ``TestSuitePart`` components log a
part per step (``train/reward/<name>``) and ``SampleTable`` shows them per sample.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

import torch

from propel.domains.humaneval.solution import solution_source
from propel.errors import ConfigError
from propel.rewards.base import Reward, RewardContext
from propel.rollouts.record import Sample
from propel.sandbox.base import Sandbox
from propel.testsuite.detectors import FLAGS, HackReport, check_run, compare_workspace, is_test_path, scan_code
from propel.testsuite.runner import Submission, SuiteRun, SuiteRunner, pristine_ini

INFO_KEY = "test_suite"
PARTS = ("pass_rate", "coverage", "hacked", *FLAGS)
UNTRUSTED = ("early_exit", "pytest_tampered", "constant_eq", "reads_tests", "hardcoded_outputs", "canary_passed")
UNTRUSTED += ("report_tampered",)
"""Flags meaning the passes did not come from correct code (the run was tampered with, the answers were read or
spelled out): the run's pass rate and coverage count 0, and the penalty applies on top. Flags on the workspace's
tests alone (modified, weakened, skip markers) keep the pristine run's pass rate: the edit changed nothing graded."""


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


class TestSuiteReward(Reward):
    """Runs the task's pristine pytest suite against what the model wrote, penalising detected hacks.

    Contexts carry the suite in ``data``: ``tests`` (file -> pristine text), ``visible_tests`` and ``hidden_tests``
    (test names), ``canary`` (a test module with one ``test_canary`` that no honest solution passes, optional),
    ``visible_calls`` (argument lists of visible calls) and, for agents, ``files`` (the starting workspace).
    ``propel.domains.humaneval.HumanEvalTasks`` and ``propel.envs.humaneval.HumanEvalAgentTasks`` build them.

    Args:
        pass_weight: weight of the pass rate.
        hack_penalty: subtracted when any hack flag fires.
        coverage_bonus: weight of the coverage (0-1) of the model's code.
        sandbox: where the suites run; None starts a ``LocalSandbox`` on first use (closed by ``close()``).
        timeout_s: wall-clock limit of one suite run (a hanging solution gets 0).
        memory_mb: memory limit of one suite run.
        batch_size: suite runs per sandbox job (pytest is imported once per job).
        workers: sandbox workers when this reward starts its own sandbox.
    """

    __test__ = False  # not a pytest test class, whatever its name

    def __init__(
        self,
        name: str = "tests",
        weight: float = 1.0,
        pass_weight: float = 1.0,
        hack_penalty: float = 0.4,
        coverage_bonus: float = 0.1,
        sandbox: Sandbox | None = None,
        timeout_s: float = 10.0,
        memory_mb: int = 512,
        batch_size: int = 8,
        workers: int = 2,
    ) -> None:
        if min(pass_weight, hack_penalty, coverage_bonus) < 0:
            raise ConfigError(
                f"TestSuiteReward weights must be >= 0, got {pass_weight}, {hack_penalty}, {coverage_bonus}"
            )
        self.name, self.weight = name, weight
        self.pass_weight, self.hack_penalty, self.coverage_bonus = pass_weight, hack_penalty, coverage_bonus
        self.sandbox, self._owns_sandbox, self.workers = sandbox, False, workers
        self.timeout_s, self.memory_mb, self.batch_size = timeout_s, memory_mb, batch_size

    def setup(self, context: RewardContext) -> None:
        self._runner()

    def _runner(self) -> SuiteRunner:
        if self.sandbox is None:
            from propel.sandbox.local import LocalSandbox

            self.sandbox, self._owns_sandbox = LocalSandbox(max_workers=self.workers), True
        return SuiteRunner(self.sandbox, self.timeout_s, self.memory_mb, self.batch_size)

    def close(self) -> None:
        if self._owns_sandbox and self.sandbox is not None:
            self.sandbox.close()
            self.sandbox, self._owns_sandbox = None, False

    def __call__(self, samples: Sequence[Sample]) -> torch.Tensor:
        rewards = [0.0] * len(samples)
        pending: list[tuple[int, Submission, HackReport, dict]] = []
        for i, s in enumerate(samples):
            data = s.context.data if s.context is not None else {}
            if "tests" not in data:
                raise ValueError(
                    f"TestSuiteReward grades against the context's data['tests']; sample {i} has none (use "
                    "propel.domains.humaneval.HumanEvalTasks or propel.envs.humaneval.HumanEvalAgentTasks)"
                )
            if s.infra_error is not None:
                s.info[INFO_KEY] = _info(0.0, 0.0, 0.0, HackReport(), "infra", s.infra_error)
                continue
            files = graded_files(s)
            report = HackReport()
            compare_workspace(files or {}, data.get("files", {}), report)
            code_files = {p: t for p, t in (files or {}).items() if t is not None and not is_test_path(p)}
            for path, text in code_files.items():
                if path.endswith(".py"):
                    scan_code(path, text, report)
            solution = data.get("solution_file", "solution.py")
            if solution not in code_files:
                s.info[INFO_KEY] = _info(0.0, 0.0, 0.0, report, "no_solution", f"no {solution} to grade")
                rewards[i] = self._formula(0.0, report, 0.0)
                s.info[INFO_KEY]["reward"] = rewards[i]
                continue
            token = "c" + secrets.token_hex(6)
            tests = {"pytest.ini": pristine_ini(), **data["tests"]}
            canary = None
            if data.get("canary"):
                canary = f"test_{token}"
                tests[f"test_{token}.py"] = data["canary"].replace("def test_canary(", f"def {canary}(")
            meta = {"canary": canary, "code": "\n".join(code_files.values())}
            pending.append((i, Submission(code_files, tests), report, meta))
        runs = self._runner().run([p[1] for p in pending]) if pending else []
        for (i, _, report, meta), run in zip(pending, runs, strict=True):
            rewards[i] = self._grade(samples[i], run, report, meta)
        return torch.tensor(rewards, dtype=torch.float32)

    def _formula(self, pass_rate: float, report: HackReport, coverage: float) -> float:
        return suite_reward(
            pass_rate, report.hacked, coverage, self.pass_weight, self.hack_penalty, self.coverage_bonus
        )

    def _grade(self, sample: Sample, run: SuiteRun, report: HackReport, meta: dict) -> float:
        data = sample.context.data
        visible, hidden = list(data.get("visible_tests", [])), list(data.get("hidden_tests", []))
        required = visible + hidden
        check_run(
            run,
            report,
            required=required,
            visible=visible,
            canary=meta["canary"],
            code=meta["code"],
            visible_calls=list(data.get("visible_calls", [])),
        )
        passed = sum(run.tests.get(t) == "passed" for t in required) if run.ok else 0
        pass_rate = passed / len(required) if required else 0.0
        coverage = (run.coverage or 0.0) / 100.0 if run.ok else 0.0
        reason = f"{passed}/{len(required)} required tests passed" if run.ok else run.reason
        distrust = [f for f in report.flags if f in UNTRUSTED]
        if distrust:
            pass_rate, coverage = 0.0, 0.0
            reason = f"{reason}; not counted ({', '.join(distrust)}): {report.evidence[distrust[0]][0]}"
        reward = self._formula(pass_rate, report, coverage)
        info = _info(reward, pass_rate, coverage, report, run.status, reason)
        info.update(passed=passed, required=len(required), tests=dict(run.tests), output_tail=run.output_tail[-500:])
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
