"""An agent episode's verdict, decided where the agent's code cannot reach it.

``ToolEnv`` collects the workspace files a task names (``data["collect"]``) when the episode ends; the verdict is then
computed from those files, outside the episode's session:

- ``expect_files``: ``{path: text}``, each collected file's text (a trailing newline aside) compared with the
  expected text here, in the trainer;
- ``value_tests``: the task's input -> output tests (``module``, ``entry_point``, ``tests`` as ``[name, body]`` pairs
  calling ``candidate(...)``, optional ``helpers`` and ``preamble``), run by value grading on the collected files: a
  fresh sandboxed child imports the agent's module and returns plain values, and each assertion runs in the trusted
  runner (``propel.testsuite.values``).

The episode passes when every part holds. No exit status of a process that ran the agent's code is ever a pass: a task
that carries a shell ``verify`` command is refused with the keys to use instead (an agent could end such a verifier
with ``raise SystemExit(0)`` at import, or an always-equal return value).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from propel.errors import ConfigError
from propel.sandbox.sandbox import Sandbox
from propel.testsuite.values import ValueRunner, ValueSubmission, ValueTests

KEYS = ("expect_files", "value_tests")


def check_task(data: Mapping[str, Any], context_id: str) -> None:
    """Refuse a task whose verdict would be an exit status, or that has none (a clear error at reset)."""
    if "verify" in data:
        raise ConfigError(
            f"task {context_id!r} has a shell `verify` command: its exit status comes from a process that ran the "
            "agent's code, which the agent controls. Describe the check as data instead: `expect_files` "
            "({path: text}) or `value_tests` ({module, entry_point, tests: [[name, body]]}) (propel.envs.verdict)"
        )
    unknown = [k for k in ("expect_files", "value_tests") if k in data and not isinstance(data[k], dict)]
    if unknown:
        raise ConfigError(f"task {context_id!r}: {unknown} must be mappings (propel.envs.verdict)")
    if "value_tests" in data:
        spec = data["value_tests"]
        missing = [k for k in ("module", "entry_point", "tests") if k not in spec]
        if missing:
            raise ConfigError(f"task {context_id!r}: value_tests lacks {missing}")


def needed_files(data: Mapping[str, Any]) -> list[str]:
    """The workspace files the verdict reads (added to what the environment collects)."""
    out = list(data.get("expect_files", {}))
    if "value_tests" in data:
        out.append(str(data["value_tests"]["module"]).replace(".", "/") + ".py")
    return out


def verdict(
    data: Mapping[str, Any],
    files: Mapping[str, str | None],
    cut: list[str],
    sandbox: Sandbox | None,
    timeout_s: float = 30.0,
) -> dict[str, Any]:
    """``{"passed", "output", ...}`` for an episode that left ``files`` (``cut``: collected files cut short, which
    fail the parts that read them). A task with neither key passes nothing."""
    parts: dict[str, bool] = {}
    lines: list[str] = []
    for path, expected in (data.get("expect_files") or {}).items():
        text = files.get(path)
        ok = text is not None and path not in cut and text.rstrip("\n") == str(expected).rstrip("\n")
        parts[f"file:{path}"] = ok
        if not ok:
            shown = "missing" if text is None else repr(text[:60])
            lines.append(f"{path}: expected {str(expected)[:60]!r}, found {shown}")
    out: dict[str, Any] = {}
    if "value_tests" in data:
        ok, detail, tests = _value_tests(data["value_tests"], files, cut, sandbox, timeout_s)
        parts["value_tests"] = ok
        out["tests"] = tests
        if not ok:
            lines.append(detail)
    out.update(passed=bool(parts) and all(parts.values()), parts=parts, output="\n".join(lines)[:2000])
    if not parts:
        out["output"] = "the task describes no check (expect_files or value_tests)"
    return out


def _value_tests(
    spec: Mapping[str, Any], files: Mapping[str, str | None], cut: list[str], sandbox: Sandbox | None, timeout_s: float
) -> tuple[bool, str, dict[str, str]]:
    module = str(spec["module"])
    path = module.replace(".", "/") + ".py"
    code = {p: t for p, t in files.items() if t is not None and p.endswith(".py") and p not in cut}
    if path not in code:
        return False, f"{path}: {'cut short' if path in cut else 'missing'}", {}
    if sandbox is None:
        raise ConfigError("value_tests verdicts run in a sandbox: the environment needs the trainer's sandbox")
    tests = ValueTests(
        [(str(n), str(b)) for n, b in spec["tests"]],
        str(spec["entry_point"]),
        str(spec.get("helpers", "")),
        str(spec.get("preamble", "")),
        module,
    )
    run = ValueRunner(sandbox, timeout_s=timeout_s, batch_size=1).run([ValueSubmission(code, tests)])[0]
    if not run.ok:
        return False, f"the tests did not run: {run.reason}", {}
    failed = [name for name, _ in tests.tests if run.tests.get(name) != "passed"]
    detail = "; ".join(f"{name}: {run.reasons.get(name, run.tests.get(name, 'not run'))}" for name in failed[:3])
    return not failed, detail, dict(run.tests)
