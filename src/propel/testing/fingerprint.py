"""Fingerprint parity: the probe (``fingerprint_probe``) run under each grader and as a user would run it, diffed.

Graded code must not be able to tell that it is graded: a program that is correct only where it is watched would
otherwise be paid while users get the bug. Each grader path runs the probe as its graded code and returns what it
observed; a *user run* runs the same code the way a user of it would, ``python3 -c 'import mod; ...'`` in a folder
holding the module, inside the same sandbox (so the sandbox's own traits, shared by every program run there, cancel
out). ``differences`` says which observables differ; ``documented`` reads the differences that
``docs/trusted_grading.md`` lists, with their reasons (``tests/testsuite/test_fingerprint_parity.py`` fails on any
other).

The graders: ``value`` (HumanEval answers), ``agent`` (an agent's module graded by value, as ``envs.verdict`` runs
it), ``replay`` (the SWE grader's replay of a library's calls), ``suite`` (the SWE repository suite: pytest, which
can refuse a repair but never pays one).
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from propel.domains.swe.differential import Differential
from propel.domains.swe.repos import RepoProfile
from propel.domains.swe.suite import SUITE_THREADS, RepoSuite
from propel.sandbox.job import Job, Limits
from propel.sandbox.sandbox import Sandbox
from propel.testing import fingerprint_probe
from propel.testsuite.propel_box import codec
from propel.testsuite.shipping import job_limits
from propel.testsuite.values import ValueRunner, ValueSubmission, ValueTests
from propel.testsuite.vendor import ZIP_NAME, testlib_zip

PROBE = Path(fingerprint_probe.__file__).read_text(encoding="utf-8")
"""The probe's source: the graded code every path runs."""

VALUE_CALL = "import solution\nr = solution.probe(0)\nimport json\nprint(json.dumps(r))\n"
"""A user's run of a value-graded answer: import the module, call it (nothing else imported first)."""

_USER_MAIN = """import json, os, subprocess, sys

with open("files.json") as f:
    files = json.load(f)
os.makedirs("proj")
for name, text in files.items():
    with open(os.path.join("proj", name), "w") as f:
        f.write(text)
# as a user's shell runs it: cd proj (PWD), the command in a process group of its own
env = dict(os.environ, PWD=os.path.abspath("proj"))
command = [sys.executable, "-c", CODE]
done = subprocess.run(command, cwd="proj", input=b"", capture_output=True, env=env, process_group=0)
sys.stdout.write(TOKEN + done.stdout.decode("utf-8", "replace") + TOKEN + "\\n")
sys.stderr.write(done.stderr.decode("utf-8", "replace")[-3000:])
"""


def user_observation(sandbox: Sandbox, files: Mapping[str, str], code: str, limits: Limits | None = None) -> dict:
    """What the probe observes when a user runs ``python3 -c code`` in a folder holding ``files``, in a job of
    ``sandbox`` with ``limits`` (the grading job's, so that the job's own limits compare)."""
    token = secrets.token_hex(8)
    source = _USER_MAIN.replace("CODE", repr(code)).replace("TOKEN", repr(token))
    job = Job(source=source, files={"files.json": json.dumps(dict(files))}, limits=limits or Limits(timeout_s=30))
    result = sandbox.run_many([job])[0]
    parts = result.stdout.split(token)
    if len(parts) != 3 or not parts[1].strip():
        raise RuntimeError(f"the user run printed no observation ({result.outcome.value}): {result.stderr[-1500:]}")
    return json.loads(parts[1].strip().splitlines()[-1])


def value_observation(sandbox: Sandbox, timeout_s: float = 10.0, batch_size: int = 8) -> dict:
    """What the probe observes as a HumanEval answer graded by value (``ValueRunner``'s defaults); ``batch_size=1``
    and ``timeout_s=30`` are how an agent's ``value_tests`` are graded (``envs.verdict``)."""
    tests = ValueTests([("holds", "assert True")], "probe")  # the observation is the child's first call
    runner = ValueRunner(sandbox, timeout_s=timeout_s, batch_size=batch_size)
    (run,) = runner.run([ValueSubmission({"solution.py": PROBE}, tests, calls=["(0,)"])])
    if not run.ok or not run.returned or run.returned[0][0] != "value":
        raise RuntimeError(f"value grading returned no observation: {run.reason} {run.returned} {run.output_tail}")
    return codec.decode(run.returned[0][1])


def value_limits(timeout_s: float = 10.0, items: int = 1) -> Limits:
    """The sandbox job a value-grading batch of ``items`` runs in (the user run's job gets the same)."""
    child = Limits(timeout_s=timeout_s, memory_mb=512, max_file_mb=4, max_processes=0)
    return job_limits(child, items, per_item_s=2.0, output_per_item=200_000)


_RANDOM = [
    (re.compile(r"job-[A-Za-z0-9_]+"), "job-*"),
    (re.compile(r"propel-sandbox-[A-Za-z0-9_]+"), "propel-sandbox-*"),
]


def normalised(observation: Any) -> Any:
    """An observation with the sandbox's random job-folder names written as ``*`` (two jobs compare)."""
    if isinstance(observation, str):
        for pattern, plain in _RANDOM:
            observation = pattern.sub(plain, observation)
        return observation
    if isinstance(observation, list):
        return [normalised(v) for v in observation]
    if isinstance(observation, dict):
        return {k: normalised(v) for k, v in observation.items()}
    return observation


SPLIT = ("environ", "flags", "rlimits")
"""Observables compared entry by entry (``environ.HOME``, ``flags.isolated``, ``rlimits.RLIMIT_AS``)."""


def flattened(observation: Mapping[str, Any]) -> dict:
    """An observation with the ``SPLIT`` observables as one entry per variable, flag or limit, normalised."""
    out = {}
    for key, value in normalised(dict(observation)).items():
        if key in SPLIT and isinstance(value, dict):
            out.update({f"{key}.{name}": item for name, item in value.items()})
        else:
            out[key] = value
    return out


def differences(user: Mapping[str, Any], graded: Mapping[str, Any], noise: set[str] = frozenset()) -> dict:
    """``{observable: (user's value, graded value)}`` for every observable that differs (``noise``: observables
    that differ between two identical user runs, left out)."""
    user, graded = flattened(user), flattened(graded)
    keys = sorted(set(user) | set(graded))
    return {k: (user.get(k), graded.get(k)) for k in keys if k not in noise and user.get(k) != graded.get(k)}


def noise(first: Mapping[str, Any], second: Mapping[str, Any]) -> set[str]:
    """Observables that differ between two runs made the same way (nothing graded code could rely on)."""
    return set(differences(first, second))


def documented(doc: str) -> dict[str, dict[str, str]]:
    """``{grader: {observable: reason}}`` from the fingerprint table of ``docs/trusted_grading.md`` (rows
    ``| `observable` | graders | reason |`` between the ``fingerprint-table`` markers)."""
    start, end = doc.find("<!-- fingerprint-table -->"), doc.find("<!-- /fingerprint-table -->")
    out: dict[str, dict[str, str]] = {}
    if start < 0 or end < 0:
        return out
    for line in doc[start:end].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`"):
            continue
        for name in [c.strip("` ") for c in cells[0].split(",")]:
            for grader in [g.strip() for g in cells[1].split(",")]:
                out.setdefault(grader, {})[name] = cells[2]
    return out


LIBRARY = "probe_lib"
LIBRARY_CALL = (
    "import probe_lib\nr = probe_lib.Probe('t', convert=lambda s: s.upper()).look('x')\nimport json\n"
    "print(json.dumps(r))\n"
)
"""A user's run of the library: make the object with a function of their own, call the method."""
LIBRARY_TEST = """import hashlib
import json
import re

import pytest

from probe_lib import Probe

EXPECTED = {}
RANDOM = [(re.compile(r"job-[A-Za-z0-9_]+"), "job-*")]
RANDOM += [(re.compile(r"propel-sandbox-[A-Za-z0-9_]+"), "propel-sandbox-*")]


def _normalised(value):
    if isinstance(value, str):
        for pattern, plain in RANDOM:
            value = pattern.sub(plain, value)
        return value
    if isinstance(value, list):
        return [_normalised(v) for v in value]
    if isinstance(value, dict):
        return {k: _normalised(v) for k, v in value.items()}
    return value


def _digest(value):
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def _entry(observed, key):
    top, _, name = key.partition(".")
    if name and isinstance(observed.get(top), dict):
        return observed[top].get(name)
    return observed.get(key)


@pytest.mark.parametrize("key", sorted(EXPECTED) or ["*"])
def test_observe(key):
    observed = _normalised(Probe("t", convert=lambda s: s.upper()).look("x"))
    if key == "*":
        with open("observation.json", "w") as f:
            json.dump(observed, f)
        return
    assert _digest(_entry(observed, key)) == EXPECTED[key]
"""
"""The library's suite: its test makes the object and calls the method as a user would; with ``EXPECTED`` (a
digest per observable) filled in, it fails on each observable that differs from the user's pytest run."""


def probe_repo(folder: str | Path, expected: Mapping[str, str] | None = None) -> tuple[RepoProfile, Path]:
    """A one-module repository whose library is the probe and whose suite calls it (``expected``: the digests the
    suite's test compares with, ``digest``)."""
    root = Path(folder)
    (root / "tests").mkdir(parents=True, exist_ok=True)
    (root / f"{LIBRARY}.py").write_text(PROBE)
    test = LIBRARY_TEST.replace("EXPECTED = {}", f"EXPECTED = {dict(expected or {})!r}")
    (root / "tests" / f"test_{LIBRARY}.py").write_text(test)
    profile = RepoProfile("fingerprint", "fingerprint", "0", "", ("tests",), ("*.py",), timeout_s=60.0)
    return profile, root


def digest(value: Any) -> str:
    """The digest ``LIBRARY_TEST`` compares an observable by."""
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def plain(tree: Any) -> Any:
    """A snapshot tree of plain data (what the probe returns) as the value itself."""
    tag = tree[0]
    if tag == "n":
        return None
    if tag in ("b", "s"):
        return tree[1]
    if tag == "i":
        return int(tree[1])
    if tag == "f":
        return float(tree[1])
    if tag in ("l", "t"):
        return [plain(v) for v in tree[1]]
    if tag == "d":
        return {plain(k): plain(v) for k, v in tree[1]}
    return f"<{tag}>"


def replay_observation(sandbox: Sandbox, folder: str | Path, cache: str | Path) -> dict:
    """What the probe observes as a library the SWE grader replays (the suite's call into ``Probe.look``, recorded
    on the clean library and replayed in a graded child)."""
    profile, root = probe_repo(folder)
    outcomes = Differential(profile, root, sandbox, cache=cache).replayed_outcomes([f"{LIBRARY}:Probe.look"])
    if not outcomes or not isinstance(outcomes[0], list) or outcomes[0][0] != "value":
        raise RuntimeError(f"the replay returned no observation: {outcomes}")
    return plain(outcomes[0][1])


def replay_limits(sandbox: Sandbox, folder: str | Path, cache: str | Path) -> Limits:
    """The sandbox job one replay runs in (the user run's job gets the same)."""
    profile, root = probe_repo(folder)
    differential = Differential(profile, root, sandbox, cache=cache)
    child = differential._child(differential.timeout_s)
    return job_limits(child, 1, per_item_s=5.0, output_per_item=2_000_000)


_PYTEST_MAIN = """import json, os, subprocess, sys

with open("files.json") as f:
    files = json.load(f)
for name, text in files.items():
    os.makedirs(os.path.dirname(os.path.join("proj", name)), exist_ok=True)
    with open(os.path.join("proj", name), "w") as f:
        f.write(text)
env = dict(os.environ, PWD=os.path.abspath("proj"), PYTHONPATH=os.path.abspath(ZIP))
command = [sys.executable, "-m", "pytest", "-q", "tests"]
done = subprocess.run(command, cwd="proj", input=b"", capture_output=True, env=env, process_group=0)
with open(os.path.join("proj", "observation.json")) as f:
    sys.stdout.write(TOKEN + f.read() + TOKEN + "\\n")
sys.stderr.write(done.stdout.decode("utf-8", "replace")[-3000:])
"""


def suite_user_observation(sandbox: Sandbox, folder: str | Path, limits: Limits) -> dict:
    """What the probe observes when a user runs the library's suite with pytest (``python3 -m pytest -q tests``,
    pytest importable from ``PYTHONPATH``), in a job with ``limits``."""
    _, root = probe_repo(folder)
    files = {p.relative_to(root).as_posix(): p.read_text() for p in root.rglob("*.py")}
    token = secrets.token_hex(8)
    source = _PYTEST_MAIN.replace("ZIP", repr(ZIP_NAME)).replace("TOKEN", repr(token))
    job = Job(source=source, files={"files.json": json.dumps(files), ZIP_NAME: testlib_zip()}, limits=limits)
    result = sandbox.run_many([job])[0]
    parts = result.stdout.split(token)
    if len(parts) != 3:
        raise RuntimeError(f"the user's pytest run printed no observation ({result.outcome.value}): {result.stderr}")
    return json.loads(parts[1])


def suite_differences(sandbox: Sandbox, folder: str | Path, user: Mapping[str, Any]) -> set[str]:
    """The observables on which the SWE suite (pytest in the hardened runner) differs from ``user`` (a user's
    pytest run of the same suite): the suite's test fails on each of them."""
    expected = {key: digest(value) for key, value in flattened(user).items()}
    profile, root = probe_repo(folder, expected)
    run = RepoSuite(profile, root, sandbox).run_one({})
    if not run.ok:
        raise RuntimeError(f"the suite did not run: {run.status} {run.reason} {run.output_tail}")
    outcomes = {name.rsplit("[", 1)[-1].rstrip("]"): outcome for name, outcome in run.tests.items() if "[" in name}
    return {key for key in expected if outcomes.get(key) != "passed"}


def suite_limits(sandbox: Sandbox, folder: str | Path) -> Limits:
    """The sandbox job one suite run is in (the user's pytest run gets the same)."""
    profile, root = probe_repo(folder)
    suite = RepoSuite(profile, root, sandbox)
    child = Limits(timeout_s=suite.timeout_s, memory_mb=suite.memory_mb, max_file_mb=64, max_processes=SUITE_THREADS)
    return job_limits(child, 1, per_item_s=2.0, output_per_item=3_000_000, setup_s=15.0)
