"""Differential grading of SWE bugs and repairs: the verdict is computed where the graded code cannot reach.

A bug names what it changed: the functions (and methods) whose code differs from the clean checkout's, and the modules
holding them (``targets``). In a trusted run of the repository's own suite on the *clean* library
(``propel_box.record_runner``), every call the suite makes into those functions is recorded as snapshots: arguments,
outcome (value, or exception class) and the arguments afterwards; each target module's data globals after import are
recorded too. The recording is then replayed on the clean checkout itself in a graded child
(``propel_box.replay_runner``), and only what replays identically is kept: a *check*. Recordings are cached per
repository and target, so each function's suite calls are recorded once.

Grading a variant (a bug, or a bug with a repair laid over it) replays its targets' checks in a fresh sandboxed child
that imports the variant's library and holds no test, no expected outcome and no verdict; the comparison with the
clean library's outcomes happens in the trusted runner. A bug is *trusted* when some check differs under it (its
effect is visible through the suite's own calls); a repair restores the clean behaviour when every check of its bug's
targets is the same again. A bug with no check (its functions are never called by the suite with arguments that
have a snapshot, or it changes no function) cannot be graded this way: ``untrusted``.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from propel.domains.swe.checkout import repo_files, swe_cache
from propel.domains.swe.repos import RepoProfile
from propel.domains.swe.suite import RUNNER_VERSION
from propel.durable import write_json
from propel.python_ast import parse_python
from propel.sandbox.job import Limits
from propel.sandbox.sandbox import Sandbox
from propel.testsuite.runner import encode_files
from propel.testsuite.shipping import framed_records, graded_limits, job, job_limits

RECORD_VERSION = 3
"""Bumped when what a recording holds changes (cached recordings of another version are made again); 2: objects as
their constructor calls, outcomes as a caller sees them, a string-hash seed of the repository's own; 3: a mapping's
values read only from a dict, a snapshot's own reads part of it (one budget, calls they make not recorded)."""
STATE = "<state>"
"""The qualname standing for a module's data globals in a target ``module:<state>``."""
Variant = Mapping[str, "bytes | str | None"]


def _defs(source: str) -> dict[str, list[str]] | None:
    """``{qualname: [ast dumps]}`` of a module's functions and methods (a nested function belongs to the function it
    is in; a property's getter and setter share a name), or None when the text does not parse."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return None
    out: dict[str, list[str]] = {}

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                out.setdefault(prefix + node.name, []).append(ast.dump(node))
            elif isinstance(node, ast.ClassDef):
                walk(node.body, f"{prefix}{node.name}.")

    walk(tree.body, "")
    return out


def changed_functions(before: str, after: str) -> list[str]:
    """Qualnames of the functions and methods of ``before`` that ``after`` changes or removes (sorted)."""
    old, new = _defs(before), _defs(after)
    if old is None:
        return []
    new = new or {}
    return sorted(name for name in old if old[name] != new.get(name))


def module_name(profile: RepoProfile, path: str) -> str | None:
    """The import name of a library file (isodate's "src/isodate/duration.py" is ``isodate.duration``), None when
    it is not one (not Python, a test file, outside every import path)."""
    if not path.endswith(".py") or profile.is_test_path(path):
        return None
    for base in profile.python_path:
        prefix = "" if base in (".", "") else base.rstrip("/") + "/"
        if path.startswith(prefix):
            dotted = path[len(prefix) :].removesuffix(".py").replace("/", ".")
            if all(part.isidentifier() for part in dotted.split(".")):
                return dotted.removesuffix(".__init__")
    return None


def targets_of(profile: RepoProfile, root: str | os.PathLike, files: Variant) -> tuple[str, ...]:
    """What a variant changed, as targets: ``module:qualname`` per changed function and ``module:<state>`` per
    changed module."""
    out: list[str] = []
    for path in sorted(files):
        module = module_name(profile, path)
        clean = Path(root) / path
        if module is None or not clean.is_file():
            continue
        data = files[path]
        after = "" if data is None else data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        before = clean.read_text(encoding="utf-8", errors="replace")
        out += [f"{module}:{name}" for name in changed_functions(before, after)]
        out.append(f"{module}:{STATE}")
    return tuple(out)


@dataclass
class Comparison:
    """A variant's replay against the clean library's checks."""

    status: str
    """``differs`` (some check differs), ``same`` (every check the same), ``untrusted`` (no check to compare) or
    ``runner`` (the replay job died)."""
    checked: int = 0
    differs: list[str] = field(default_factory=list)
    """The checks that differ, each as ``target #n: reason`` (at most 20)."""
    detail: str = ""
    audit: list = field(default_factory=list)
    landlock: int = 0

    @property
    def trusted(self) -> bool:
        return self.status in ("same", "differs")


@dataclass
class Recording:
    """One target's validated checks and the callback tables they use."""

    target: str
    checks: list[dict]
    tables: list[list]
    recorded: int = 0
    """Calls (or module globals) recorded before validation."""
    skipped: dict[str, int] = field(default_factory=dict)
    """Why calls were not recorded (no snapshot of an argument or of the outcome), with counts."""


def _hash_seed(folder: Path) -> int:
    """The repository's own string-hash seed (a random one, drawn once and kept beside its recordings): recording
    and replays iterate sets alike, and graded code cannot recognise a well-known seed such as 0."""
    path = folder / "hash_seed"
    folder.mkdir(parents=True, exist_ok=True)
    try:  # the first process to create it decides; every other one reads its seed
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "w") as f:
            f.write(str(secrets.randbelow(4_294_967_294) + 1))
    for _ in range(100):
        try:
            return int(path.read_text())
        except ValueError:  # the creator has not written it yet
            time.sleep(0.01)
    raise RuntimeError(f"{path} holds no string-hash seed: delete it to draw a new one")


def _shift(tree, offset: int):
    """A snapshot tree with its callback indices moved by ``offset``."""
    if not isinstance(tree, list) or not tree:
        return tree
    if tree[0] == "cb" and len(tree) == 2 and isinstance(tree[1], int):
        return ["cb", tree[1] + offset]
    return [_shift(v, offset) if isinstance(v, list) else v for v in tree]


def _callbacks(tree, found: set[int]) -> None:
    if isinstance(tree, list) and tree:
        if tree[0] == "cb" and len(tree) == 2 and isinstance(tree[1], int):
            found.add(tree[1])
            return
        for v in tree:
            _callbacks(v, found)


class Differential:
    """Records, validates and replays one repository's checks in a sandbox.

    Args:
        profile: the repository.
        root: its clean checkout.
        sandbox: where recording and replays run.
        cache: where recordings are kept (default: the SWE cache).
        timeout_s: wall-clock limit of one recording run and of one variant's replay.
        call_timeout_s: limit of one replayed call (a hang differs).
        memory_mb: address-space limit of the graded child.
        batch_size: variants per replay job.
    """

    def __init__(
        self,
        profile: RepoProfile,
        root: str | os.PathLike,
        sandbox: Sandbox,
        cache: str | os.PathLike | None = None,
        timeout_s: float = 60.0,
        call_timeout_s: float = 5.0,
        memory_mb: int = 1024,
        batch_size: int = 4,
    ) -> None:
        self.profile, self.root, self.sandbox = profile, os.fspath(root), sandbox
        self.timeout_s, self.call_timeout_s, self.memory_mb = timeout_s, call_timeout_s, memory_mb
        self.batch_size = batch_size
        self.folder = swe_cache(cache) / "recordings" / profile.key / f"v{RECORD_VERSION}-runner{RUNNER_VERSION}"
        self._files = {f"repo/{name}": data for name, data in repo_files(root).items()}
        self._memory: dict[str, Recording] = {}
        self.hash_seed = _hash_seed(self.folder)

    # ------------------------------------------------------------------------------------------------ recordings
    def _path(self, target: str) -> Path:
        digest = hashlib.sha256(target.encode()).hexdigest()[:16]
        return self.folder / f"{target.replace(':', '-').replace('<', '').replace('>', '')[:80]}-{digest}.json"

    def recordings(self, targets: Sequence[str]) -> dict[str, Recording]:
        """Each target's validated recording (recorded and validated in the sandbox when not cached)."""
        wanted = list(dict.fromkeys(targets))
        for target in wanted:
            if target not in self._memory and self._path(target).is_file():
                data = json.loads(self._path(target).read_text())
                self._memory[target] = Recording(**data)
        missing = [t for t in wanted if t not in self._memory]
        if missing:
            for recording in self._record(missing):
                write_json(self._path(recording.target), recording.__dict__, indent=None)
                self._memory[recording.target] = recording
        return {t: self._memory[t] for t in wanted}

    def _record(self, targets: list[str]) -> list[Recording]:
        return self._validate(targets, self._recorded(targets))

    def _recorded(self, targets: list[str]) -> dict:
        """The recording job's raw record of ``targets`` (calls, tables, module state), not yet validated."""
        payload = {
            "targets": [t.split(":", 1) for t in targets if not t.endswith(STATE)],
            "modules": sorted({t.split(":", 1)[0] for t in targets if t.endswith(STATE)}),
            "python_path": list(self.profile.python_path),
            "test_globs": list(self.profile.test_globs),
            "args": ["-o", "addopts=", "--rootdir", ".", *self.profile.pytest_args, *self.profile.test_paths],
        }
        # the recording runs the clean suite in the job itself (no graded child): three times a replay's budget
        limits = job_limits(self._child(self.timeout_s * 3), 1, per_item_s=0.0, output_per_item=64 << 20)
        record_job, token = job("record_runner", payload, limits, self._files, pytest=True, hash_seed=self.hash_seed)
        result = self.sandbox.run_many([record_job])[0]
        raw = framed_records(result.stdout, token, 1)
        if raw is None:
            raise RuntimeError(
                f"{self.profile.key}: the recording run died ({result.outcome.value}, exit {result.exit_code}): "
                f"{result.stderr[-800:]}"
            )
        return raw[0]

    def _validate(self, targets: list[str], recorded: dict) -> list[Recording]:
        """Keep what the clean library replays identically (one replay of every recorded check on the clean
        checkout); split it per target, each with its own callback tables."""
        per_target, counts, skipped = self._checks_of(targets, recorded)
        tables = recorded.get("tables") or []
        checks = [c for t in targets for c in per_target[t]]
        kept = set()
        if checks:
            replay = self._replay([{"files": {}}], checks, tables)[0]
            kept = {i for i, r in enumerate(replay.get("results", [])) if r == "same"}
        out, position = [], 0
        for target in targets:
            mine = per_target[target]
            valid = [c for k, c in enumerate(mine, start=position) if k in kept]
            position += len(mine)
            out.append(self._own_tables(target, valid, tables, counts[target], skipped[target]))
        return out

    def replayed_outcomes(self, targets: Sequence[str], files: Variant | None = None) -> list:
        """What each call the suite makes into ``targets`` returns when replayed on the checkout (``files`` laid
        over it), as the graded child observed it: recorded afresh and not validated (a fingerprint probe's
        observations, ``propel.testing.fingerprint``; grading needs ``compare``)."""
        wanted = list(dict.fromkeys(targets))
        recorded = self._recorded(wanted)
        per_target, _, _ = self._checks_of(wanted, recorded)
        checks = [c for t in wanted for c in per_target[t] if c["kind"] == "call"]
        if not checks:
            return []
        variant = {"files": dict(files or {})}
        raw = self._replay([variant], checks, recorded.get("tables") or [], answers=True)[0]
        return list(raw.get("answers") or [])

    def _checks_of(self, targets: list[str], recorded: dict) -> tuple[dict, dict, dict]:
        """``(checks per target, calls recorded per target, why calls were skipped per target)`` of a raw
        recording."""
        per_target: dict[str, list[dict]] = {t: [] for t in targets}
        counts = {t: 0 for t in targets}
        skipped = {t: {} for t in targets}
        for key, calls in (recorded.get("calls") or {}).items():
            module, qualname, accessor = key.rsplit(":", 2)
            target = f"{module}:{qualname}"
            if target not in per_target:
                continue
            counts[target] += len(calls)
            for reason, n in (recorded.get("skipped") or {}).get(key, {}).items():
                skipped[target][reason] = skipped[target].get(reason, 0) + n
            for call in calls:
                per_target[target].append(
                    {
                        "kind": "call",
                        "target": [module, qualname, accessor],
                        "args": call["args"],
                        "kwargs": call["kwargs"],
                        "expected": {"outcome": call["outcome"], "after": call["after"]},
                        **({"construct": True} if call.get("construct") else {}),
                    }
                )
        for module, state in (recorded.get("state") or {}).items():
            target = f"{module}:{STATE}"
            if target in per_target:
                counts[target] += len(state)
                per_target[target] += [
                    {"kind": "state", "module": module, "name": name, "expected": tree} for name, tree in state.items()
                ]
        return per_target, counts, skipped

    @staticmethod
    def _own_tables(target: str, checks: list[dict], tables: list, recorded: int, skipped: dict) -> Recording:
        used: set[int] = set()
        for check in checks:
            for part in ("args", "kwargs", "expected"):
                _callbacks(check.get(part), used)
        order = sorted(i for i in used if 0 <= i < len(tables))
        index = {old: new for new, old in enumerate(order)}

        def remap(tree):
            if not isinstance(tree, list) or not tree:
                return tree
            if tree[0] == "cb" and len(tree) == 2 and isinstance(tree[1], int):
                return ["cb", index.get(tree[1], -1)]
            return [remap(v) if isinstance(v, list) else v for v in tree]

        mapped = [
            {k: (remap(v) if k in ("args", "kwargs") else v) for k, v in c.items()}
            | ({"expected": {k: remap(v) for k, v in c["expected"].items()}} if c["kind"] == "call" else {})
            for c in checks
        ]
        own = [remap(tables[i]) for i in order]
        return Recording(target, mapped, own, recorded, skipped)

    def _child(self, timeout_s: float) -> Limits:
        """The graded replay child's limits (it may start a few threads: a library's own)."""
        return Limits(timeout_s=timeout_s, memory_mb=self.memory_mb, max_file_mb=16, max_processes=8)

    # ------------------------------------------------------------------------------------------------ replays
    def _replay(
        self, variants: list[dict], checks: list[dict], tables: list, first: bool = False, answers: bool = False
    ) -> list[dict]:
        payload = {
            "first": first,
            "answers": answers,
            "hash_seed": self.hash_seed,
            "checks": checks,
            "tables": tables,
            "variants": [{"files": encode_files(dict(v["files"])), "only": v.get("only")} for v in variants],
            "python_path": list(self.profile.python_path),
            "test_globs": list(self.profile.test_globs),
            "limits": {**graded_limits(self._child(self.timeout_s)), "call_timeout_s": self.call_timeout_s},
        }
        limits = job_limits(self._child(self.timeout_s), len(variants), per_item_s=5.0, output_per_item=2_000_000)
        replay_job, token = job("replay_runner", payload, limits, self._files)
        result = self.sandbox.run_many([replay_job])[0]
        raw = framed_records(result.stdout, token, len(variants))
        if raw is None:
            how = f"{result.outcome.value}, exit code {result.exit_code}: {result.stderr[-300:]}"
            return [{"died": f"the replay job died before reporting ({how})"} for _ in variants]
        return raw

    def compare(self, items: Sequence[tuple[Variant, Sequence[str]]]) -> list[Comparison]:
        """Each variant's replay of its targets' checks (``items``: ``(files, targets)``), ``batch_size`` variants
        per sandbox job."""
        recordings = self.recordings([t for _, targets in items for t in targets])
        out: list[Comparison | None] = [None] * len(items)
        pending = []
        for i, (files, targets) in enumerate(items):
            mine = list(dict.fromkeys(targets))
            if not any(recordings[t].checks for t in mine):
                out[i] = Comparison("untrusted", detail=self._why_untrusted(mine, recordings))
            else:
                pending.append((i, dict(files), mine))
        batches = [pending[k : k + self.batch_size] for k in range(0, len(pending), self.batch_size)]
        for batch in batches:
            targets = list(dict.fromkeys(t for _, _, mine in batch for t in mine))
            checks, tables, spans = self._checks([recordings[t] for t in targets])
            variants = []
            for _, files, mine in batch:
                only = [k for t in mine for k in range(*spans[targets.index(t)])]
                variants.append({"files": files, "only": only})
            replays = self._replay(variants, checks, tables, first=True)
            for (i, _, _), variant, raw in zip(batch, variants, replays, strict=True):
                out[i] = self._comparison(raw, checks, variant["only"])
        return out  # type: ignore[return-value]

    @staticmethod
    def _checks(recordings: list[Recording]) -> tuple[list[dict], list[list], list[tuple[int, int]]]:
        """The recordings' checks in one list, their callback tables in one list (indices moved to match), and each
        recording's ``(start, end)`` in the checks."""
        checks, tables, spans = [], [], []
        for recording in recordings:
            offset, start = len(tables), len(checks)
            tables += recording.tables
            for check in recording.checks:
                if check["kind"] == "call" and offset:
                    check = {**check, "args": _shift(check["args"], offset), "kwargs": _shift(check["kwargs"], offset)}
                    check["expected"] = {k: _shift(v, offset) for k, v in check["expected"].items()}
                checks.append(check)
            spans.append((start, len(checks)))
        return checks, tables, spans

    @staticmethod
    def _why_untrusted(targets: Sequence[str], recordings: Mapping[str, Recording]) -> str:
        functions = [t for t in targets if not t.endswith(STATE)]
        if not functions:
            return "the variant changes no function of the library and no module global it could be checked by"
        parts = []
        for target in functions:
            rec = recordings[target]
            why = max(rec.skipped, key=rec.skipped.get) if rec.skipped else "never called by the suite"
            parts.append(f"{target}: {rec.recorded} calls recorded, 0 replayable ({why})")
        return "; ".join(parts)[:600]

    @staticmethod
    def _comparison(raw: dict, checks: list[dict], only: list[int]) -> Comparison:
        if "died" in raw:
            return Comparison("runner", detail=raw["died"])
        results = raw.get("results") or []
        if len(results) != len(checks):
            return Comparison("runner", detail="the replay answered another number of checks")
        reasons = raw.get("reasons") or {}
        differs = []
        for i in only:
            if results[i] == "differs":
                check = checks[i]
                call = check["kind"] == "call"
                where = ":".join(check["target"][:2]) if call else f"{check['module']}.{check['name']}"
                differs.append(f"{where} #{i}: {reasons.get(str(i), 'differs')}")
        if not differs and any(results[i] != "same" for i in only):
            return Comparison("runner", detail="the replay left checks unanswered")
        status = "differs" if differs else "same"
        audit = [tuple(a) for a in raw.get("audit") or [] if isinstance(a, list) and len(a) == 4]
        return Comparison(status, len(only), differs[:20], audit=audit, landlock=int(raw.get("landlock") or 0))
