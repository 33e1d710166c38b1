"""jsonargparse's nested error messages as one line: the innermost cause, the full key, a close match.

jsonargparse reports a bad key under ``model`` as a tree (``Parser key "model":`` / ``Does not validate against
any of the Union subtypes`` / ... / ``Problem with given class_path 'X':`` / ``Option 'bogus_key' is not
accepted``): the cause is the deepest line, and the key is the path of ``Parser key`` and ``class_path`` lines above
it. ``explain`` keeps that line, names the full key (``model.init_args.bogus_key``) and, for an unknown key, the
closest accepted one (``Did you mean: 'model.init_args.lr'?``).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable

_NOISE = re.compile(
    r"^(Does not validate against any of the Union subtypes|Subtypes:|Errors:|Given value|"
    r"Expected a <class 'NoneType'>)"
)
_KEY = re.compile(r'^Parser key "([^"]+)":$')
_CLASS = re.compile(r"^Problem with given class_path '([^']+)':$")
_OPTION = re.compile(r"Option '([^']+)' is not accepted")
_REQUIRED = re.compile(r"(?:Option|Key) '([^']+)' is required")
_GROUP = re.compile(r"Group '([^']+)' does not accept option '([^']+)'")
_UNRECOGNIZED = re.compile(r"^Unrecognized arguments: (.*)$")
_INNER_CLASS = re.compile(r"class_path='([^']+)'")
RENAMED = {
    "episodes_per_context": "group_size",  # TurnKLDistillModule, as GRPOModule names it
    "max_steps_without_targets": "max_steps_without_update",  # TurnKLDistillModule, as LoRAPolicyModule names it
    "malformed_action_reward": "malformed_call_reward",  # OpenEnvAgentEnv, as ToolEnv names it
}
"""Init arguments renamed to the name the same idea has elsewhere: old name -> new name. An old config's key is
answered with the new one (``suggest``); a checkpoint's saved settings are read under it (``propel.cli.resume``)."""


def _leaves(message: str) -> list[tuple[int, list[tuple[str, str]], str]]:
    """Each meaningful line with its indentation and the ``("key"|"class", value)`` contexts above it."""
    stack: list[tuple[int, str, str]] = []
    leaves = []
    for raw in message.splitlines():
        text = raw.strip()
        if not text:
            continue
        indent = len(raw) - len(raw.lstrip()) + (2 if text.startswith("- ") else 0)
        text = text.removeprefix("- ").strip()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if match := _KEY.match(text):
            stack.append((indent, "key", match.group(1)))
        elif match := _CLASS.match(text):
            stack.append((indent, "class", match.group(1)))
        elif not _NOISE.match(text):
            leaves.append((indent, [(kind, value) for _, kind, value in stack], text))
    return leaves


def _path(contexts: list[tuple[str, str]]) -> tuple[str, str | None]:
    """The dotted key of the contexts (``init_args`` after each class) and the innermost class_path."""
    parts: list[str] = []
    cls = None
    for kind, value in contexts:
        if kind == "key":
            parts.append(value)
        else:
            parts.append("init_args")
            cls = value
    return ".".join(parts), cls


def class_keys(class_path: str) -> list[str]:
    """Every (dotted) init argument jsonargparse accepts for ``class_path`` (``**kwargs`` chains followed)."""
    import importlib

    from jsonargparse import ArgumentParser

    module, _, name = class_path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name)
        parser = ArgumentParser(exit_on_error=False)
        parser.add_class_arguments(cls, fail_untyped=False)
        return list(parser.get_defaults().keys())
    except Exception:  # noqa: BLE001 (a suggestion is a courtesy: never let it hide the error itself)
        return []


def suggest(unknown: str, candidates: Iterable[str]) -> str | None:
    """The accepted key closest to ``unknown`` among those with the same parent (``trainer.max_stepz`` ->
    ``trainer.max_steps``; a renamed key's new name, ``RENAMED``), or None when nothing is close."""
    parent, _, name = unknown.rpartition(".")
    siblings = {}
    for key in candidates:
        key_parent, _, key_name = str(key).rpartition(".")
        if key_parent == parent and not key_name.startswith("__"):
            siblings[key_name] = str(key)
    if RENAMED.get(name) in siblings:
        return siblings[RENAMED[name]]
    hits = difflib.get_close_matches(name, list(siblings), n=1, cutoff=0.75)
    return siblings[hits[0]] if hits else None


def _tidy(text: str) -> str:
    text = re.sub(r"Expected a <class '([\w.]+)'>", r"expected \1", text)
    return re.sub(r"<class '([\w.]+)'>", r"\1", text)


def explain(message: str, top_keys: Callable[[], Iterable[str]] | None = None) -> str:
    """One line for a jsonargparse error ``message``; ``top_keys`` lists the parser's own keys (for suggestions
    on a key outside any class)."""
    leaves = _leaves(str(message))
    if not leaves:
        return "invalid arguments"
    _, contexts, text = max(leaves, key=lambda leaf: leaf[0])  # the innermost cause (first of the deepest)
    known = any(p.search(text) for p in (_OPTION, _GROUP, _UNRECOGNIZED))
    if not known and not any(c for _, c, _ in leaves):  # a flat message (a YAML syntax error, ...): keep it all
        flat = " ".join(text for _, _, text in leaves)
        return _tidy(flat if len(flat) <= 400 else flat[:397] + "...")
    prefix, cls = _path(contexts)
    unknown = None
    if match := _OPTION.search(text):
        unknown = match.group(1)
        inner = _INNER_CLASS.search(text)
        cls = inner.group(1) if inner else cls
        reason = f"option {unknown!r} is not accepted" + (f" by {cls}" if cls else "")
    elif match := _GROUP.search(text):
        unknown = f"{match.group(1)}.{match.group(2)}"
        reason = f"option {match.group(2)!r} is not accepted in {match.group(1)!r}"
    elif match := _UNRECOGNIZED.match(text):
        unknown = next((a[2:].split("=", 1)[0] for a in match.group(1).split() if a.startswith("--")), None)
        reason = f"option {unknown!r} is not accepted" + (f" by {cls}" if cls else "")
    elif match := _REQUIRED.search(text):
        return f"{prefix}.{match.group(1)}: required, but not given" + (f" (an argument of {cls})" if cls else "")
    else:
        reason = _tidy(text)
    if unknown is None:
        prefix = prefix.removesuffix(".init_args")
        return f"{prefix}: {reason}" if prefix else reason
    key = f"{prefix}.{unknown}" if prefix else unknown
    if cls is not None:
        hit = suggest(unknown, class_keys(cls))
        hit = f"{prefix}.{hit}" if hit and prefix else hit
    else:
        hit = suggest(unknown, top_keys() if top_keys else ())
    return f"{key}: {reason}" + (f". Did you mean: {hit!r}?" if hit else "")


_GROUPS = {
    "LightningModule": "model",
    "LightningDataModule": "data",
    "Callback": "trainer.callbacks",
    "Logger": "trainer.logger",
}
_SUBTYPES = re.compile(r"^Subtypes: \[(.*)\]$")
_GIVEN_CLASS = re.compile(r"class_path='([^']+)'")


def init_error(message: str) -> str:
    """One line for a class that refused its arguments while being built (jsonargparse's ``instantiate_classes``:
    ``group_size: 1`` -> ``model.init_args.group_size: must be >= 2 ...``): the class's own message, under the
    full key when it starts with one of the class's argument names, else under the group and class."""
    lines = [line.strip() for line in str(message).splitlines() if line.strip()]
    group, causes, cls = None, [], None
    in_errors = False
    for line in lines:
        if match := _SUBTYPES.match(line):
            names = re.findall(r"<class '[\w.]*?(\w+)'>", match.group(1))
            group = next((_GROUPS[n] for n in names if n in _GROUPS), group)
        elif line == "Errors:":
            in_errors = True
        elif line.startswith("Given value"):
            in_errors = False
            cls = cls or (m.group(1) if (m := _GIVEN_CLASS.search(line)) else None)
        elif in_errors and line.startswith("- ") and not _NOISE.match(line[2:]):
            causes.append(line[2:])
    if not causes:
        return explain(message)
    cause = _tidy(causes[-1])
    first, _, rest = cause.partition(" ")
    if group and cls and rest:
        names = {str(k).split(".", 1)[0] for k in class_keys(cls)}
        if first.split(".", 1)[0] in names:
            return f"{group}.init_args.{first}: {rest}"
    where = " ".join(p for p in (group, f"({cls})" if cls else None) if p)
    return f"{where}: {cause}" if where else cause
