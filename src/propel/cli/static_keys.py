"""The init arguments a class accepts, read from its source with ``ast`` (no import), so a misspelled key under
``model``, ``data`` or ``trainer`` is refused in a fraction of a second, before torch and Lightning load.

jsonargparse, the authority, needs the class imported (``propel.cli.errors.class_keys``), and importing
Lightning alone takes seconds. This module answers only what it can answer for certain: a class whose ``__init__``
it can follow to the end (``**kwargs`` passed on to bases it can read, up to ``LightningModule`` /
``LightningDataModule`` / ``object``). Anything else (a base outside the readable packages, ``**kwargs`` used some
other way) is "unknown", and the key is left to the full parser. A mapping without ``class_path`` is checked when
the argument's annotation names one dataclass (``loss: LossSpec | None``: ``loss: {betaa: 0.1}``), and a command-line
key reaches as deep as its dots (``--model.init_args.loss.betaa``). A test holds the key sets equal to
jsonargparse's for every class the shipped configs name.
"""

from __future__ import annotations

import ast
import copy
import difflib
import re
from collections.abc import Iterator, Mapping
from functools import cache

from propel.cli.class_names import class_names, defining_class, module_file
from propel.cli.errors import suggest
from propel.errors import ConfigErrors
from propel.python_ast import parse_python

TERMINAL = {"object", "LightningModule", "LightningDataModule", "Generic", "ABC", "Protocol"}
"""Bases that add no init argument of their own to a subclass that does not pass ``**kwargs`` to them."""
SECTIONS = ("model", "data")
"""Config sections holding a ``class_path`` whose init_args are checked (every ``class_path`` under ``trainer`` is
checked too: callbacks, logger, strategy, plugins)."""
TRAINER = "lightning.pytorch.trainer.trainer.Trainer"
"""The class whose arguments the ``trainer`` section holds."""
_DOTTED = re.compile(r"^(propel|lightning)(\.[A-Za-z_]\w*)+$")
"""A string that names something in a readable package (a class given as a plain string: ``- propel.rewards.X``)."""


@cache
def _parse(module: str) -> ast.Module | None:
    path = module_file(module)
    return parse_python(path.read_text()) if path else None


def _imported(tree: ast.Module, module: str, name: str) -> str | None:
    """The dotted origin of ``name`` as imported in ``module`` (``from x import name``, ``import x as name``)."""
    package = module if module_file(module) and module_file(module).name == "__init__.py" else module.rpartition(".")[0]
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:
                parts = package.split(".")
                source = ".".join(parts[: len(parts) - node.level + 1] + ([source] if source else []))
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    return f"{source}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname == name or alias.name == name:
                    return alias.name
    return None


def _find_class(class_path: str, depth: int = 0) -> tuple[str, ast.ClassDef] | None:
    module, _, name = class_path.rpartition(".")
    tree = _parse(module) if module and depth < 8 else None
    if tree is None:
        return None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return module, node
    origin = _imported(tree, module, name)  # a re-export (``propel.domains.MathExpressionDomain``)
    return _find_class(origin, depth + 1) if origin else None


def _base_path(module: str, base: ast.expr) -> str | None:
    """The dotted path of a base class expression (``Name`` or ``alias.Attr``) as seen from ``module``."""
    tree = _parse(module)
    if isinstance(base, ast.Subscript):  # Generic[T]
        base = base.value
    if isinstance(base, ast.Name):
        if any(isinstance(n, ast.ClassDef) and n.name == base.id for n in tree.body):
            return f"{module}.{base.id}"
        return _imported(tree, module, base.id) or base.id
    if isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name):
        origin = _imported(tree, module, base.value.id)
        return f"{origin}.{base.attr}" if origin else None
    return None


def _forwards_kwargs(init: ast.FunctionDef, kwargs: str) -> bool:
    """Whether ``__init__`` passes its ``**kwargs`` on to ``super().__init__`` (and nowhere else)."""
    uses = [n for n in ast.walk(init) if isinstance(n, ast.Name) and n.id == kwargs]
    calls = [
        n
        for n in ast.walk(init)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == "__init__"
        and isinstance(n.func.value, ast.Call)
        and isinstance(n.func.value.func, ast.Name)
        and n.func.value.func.id == "super"
        and any(k.arg is None and isinstance(k.value, ast.Name) and k.value.id == kwargs for k in n.keywords)
    ]
    return bool(calls) and len(uses) == len(calls)


def _is_dataclass(node: ast.ClassDef) -> bool:
    def name(d: ast.expr) -> str:
        d = d.func if isinstance(d, ast.Call) else d
        return d.attr if isinstance(d, ast.Attribute) else getattr(d, "id", "")

    return any(name(d) == "dataclass" for d in node.decorator_list)


def _init(node: ast.ClassDef) -> ast.FunctionDef | None:
    return next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)


def _fields(node: ast.ClassDef) -> dict[str, ast.expr]:
    """A dataclass's own fields and their annotations (``ClassVar`` ones are not fields)."""
    annotated = [n for n in node.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]
    return {n.target.id: n.annotation for n in annotated if "ClassVar" not in ast.unparse(n.annotation)}


@cache
def accepted_keys(class_path: str) -> frozenset[str] | None:
    """Every init argument ``class_path`` accepts, or None when its source does not settle it."""
    found = _find_class(class_path)
    if found is None:
        return None
    module, node = found
    init = _init(node)
    if init is None and _is_dataclass(node):
        return _with_bases(module, node, frozenset(_fields(node)))
    if init is None:
        return _with_bases(module, node, frozenset())
    args = init.args
    own = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]} - {"self"}
    if args.kwarg is None:
        return frozenset(own)
    if not _forwards_kwargs(init, args.kwarg.arg):
        return None
    return _with_bases(module, node, frozenset(own))


_NO_DEFAULT = object()


def init_default(class_path: str, key: str, depth: int = 0) -> object:
    """The literal default of ``class_path``'s init argument ``key`` (followed through ``**kwargs`` into the bases),
    or ``NO_DEFAULT`` when the source does not settle it (no such argument, no default, or not a literal)."""
    found = _find_class(class_path) if depth < 8 else None
    if found is None:
        return _NO_DEFAULT
    module, node = found
    init = _init(node)
    if init is not None:
        args = init.args
        positional = [*args.posonlyargs, *args.args]
        with_default = [a.arg for a in positional[len(positional) - len(args.defaults) :]]
        defaults = dict(zip(with_default, args.defaults, strict=True))
        defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None})
        if key in defaults:
            try:
                return ast.literal_eval(defaults[key])
            except ValueError:
                return _NO_DEFAULT
        if args.kwarg is None or not _forwards_kwargs(init, args.kwarg.arg):
            return _NO_DEFAULT
    for base in node.bases:
        path = _base_path(module, base)
        if path is not None and path.rpartition(".")[2] not in TERMINAL:
            value = init_default(path, key, depth + 1)
            if value is not _NO_DEFAULT:
                return value
    return _NO_DEFAULT


NO_DEFAULT = _NO_DEFAULT
"""What ``init_default`` returns when the source does not settle a default."""


def _with_bases(module: str, node: ast.ClassDef, own: frozenset[str]) -> frozenset[str] | None:
    keys = set(own)
    for base in node.bases:
        path = _base_path(module, base)
        if path is None:
            return None
        if path.rpartition(".")[2] in TERMINAL:
            continue
        inherited = accepted_keys(path)
        if inherited is None:
            return None
        keys |= inherited
    return frozenset(keys)


def _annotation(class_path: str, name: str, depth: int = 0) -> tuple[str, ast.expr] | None:
    """``(module, annotation)`` of init argument (or dataclass field) ``name`` of ``class_path``, followed through
    ``**kwargs`` into the bases; None when the source does not settle it."""
    found = _find_class(class_path) if depth < 8 else None
    if found is None:
        return None
    module, node = found
    init = _init(node)
    if init is not None:
        args = init.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            if arg.arg == name:
                return (module, arg.annotation) if arg.annotation is not None else None
        if args.kwarg is None or not _forwards_kwargs(init, args.kwarg.arg):
            return None
    elif _is_dataclass(node) and name in _fields(node):
        return module, _fields(node)[name]
    for base in node.bases:
        path = _base_path(module, base)
        if path is not None and path.rpartition(".")[2] not in TERMINAL:
            hit = _annotation(path, name, depth + 1)
            if hit is not None:
                return hit
    return None


def _named_class(module: str, annotation: ast.expr) -> str | None:
    """The class an annotation names when it names exactly one (``X``, ``X | None``, ``Optional[X]``)."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        annotation = parse_python(annotation.value, "eval").body
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        sides = [s for s in (annotation.left, annotation.right) if not _is_none(s)]
        return _named_class(module, sides[0]) if len(sides) == 1 else None
    if isinstance(annotation, ast.Subscript) and ast.unparse(annotation.value).endswith("Optional"):
        return _named_class(module, annotation.slice)
    if isinstance(annotation, ast.Name | ast.Attribute):
        return _base_path(module, annotation)
    return None


def _is_none(node: ast.expr) -> bool:
    return (isinstance(node, ast.Constant) and node.value is None) or ast.unparse(node) == "None"


def _public_path(class_path: str) -> str:
    """The shortest import path of ``class_path`` (``propel.losses.LossSpec``): how jsonargparse names it."""
    module, _, name = class_path.rpartition(".")
    target = _find_class(class_path)
    parts = module.split(".")
    for i in range(1, len(parts)):
        shorter = f"{'.'.join(parts[:i])}.{name}"
        if _find_class(shorter) == target:
            return shorter
    return class_path


@cache
def nested_dataclass(class_path: str, name: str) -> str | None:
    """The dataclass that init argument ``name`` of ``class_path`` is annotated with (``loss: LossSpec | None``),
    whose fields a mapping without ``class_path`` gives; None for anything else."""
    hit = _annotation(class_path, name)
    path = _named_class(*hit) if hit is not None else None
    found = _find_class(path) if path is not None else None
    return _public_path(path) if found is not None and _is_dataclass(found[1]) else None


@cache
def resolve_class(name: str) -> str:
    """The import path of a short class name (``ToolEnv`` -> ``propel.envs.ToolEnv``) when the source names one class
    of that name (``propel.cli.class_names``); a dotted path, or a name the source does not settle, as given."""
    if "." in name:
        return name
    found = defining_class(name)
    return _public_path(found) if found is not None and _find_class(found) is not None else name


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """A module's top-level statements, those inside top-level ``if``/``try``/``with`` blocks included."""
    for node in body:
        yield node
        for field in ("body", "orelse", "finalbody"):
            if isinstance(node, ast.If | ast.Try | ast.With):
                yield from _statements(getattr(node, field, []) or [])
        for handler in getattr(node, "handlers", []) if isinstance(node, ast.Try) else []:
            yield from _statements(handler.body)


def _binds(module: str, name: str) -> bool | None:
    """Whether ``module``'s source binds ``name`` at its top level (a class, a function, an assignment, an import, a
    submodule); None when that cannot be told (no source, a star import, a module ``__getattr__``)."""
    tree = _parse(module)
    if tree is None:
        return None
    for node in _statements(tree.body):
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            return True
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
            return None
        if isinstance(node, ast.ImportFrom | ast.Import) and any(a.name == "*" for a in node.names):
            return None
        if isinstance(node, ast.ImportFrom | ast.Import) and any(
            (a.asname or a.name).split(".")[0] == name for a in node.names
        ):
            return True
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
    return module_file(f"{module}.{name}") is not None  # a submodule


def missing_class(class_path: str) -> str | None:
    """Why ``class_path`` certainly names nothing, with the closest class that exists (one line), or None when it
    exists or the source cannot tell. A short name is looked up by name; a dotted path in a readable package must be
    bound by its module."""
    module, _, name = class_path.rpartition(".")
    if not module:  # a short name may name a class of any imported package (torch's AdamW): only a near miss
        known = name in class_names() or not difflib.get_close_matches(name, class_names(), n=1, cutoff=0.8)
        if known:
            return None
        why = f"no class named {name!r} in propel or Lightning"
    elif not _DOTTED.match(class_path):
        return None
    elif module_file(module) is not None:
        if _binds(module, name) is not False:
            return None
        why = f"{module} has no {name!r}"
    else:
        parent = module
        while "." in parent and module_file(parent) is None:
            parent = parent.rpartition(".")[0]
        if module_file(parent) is None or _binds(parent, module[len(parent) + 1 :].split(".")[0]) is not False:
            return None
        why = f"no module {module}"
    exact = defining_class(name)
    close = difflib.get_close_matches(name, class_names(), n=1, cutoff=0.8) if exact is None else []
    hit = exact or (defining_class(close[0]) if close else None)
    return why + (f". Did you mean: {_public_path(hit)!r}?" if hit else "")


def class_nodes(value: object, key: str) -> Iterator[tuple[str, str, Mapping]]:
    """``(key, class_path, init_args)`` of every ``class_path`` mapping under ``value`` (lists included; a short name
    given as its import path, ``resolve_class``), and of every mapping given for an argument annotated with a
    dataclass."""
    if isinstance(value, Mapping):
        if isinstance(value.get("class_path"), str):
            init_args = value.get("init_args") or {}
            if isinstance(init_args, Mapping):
                class_path = resolve_class(value["class_path"])
                yield key, class_path, init_args
                yield from _arguments(class_path, init_args, key)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from class_nodes(item, f"{key}[{i}]")


def _arguments(class_path: str, init_args: Mapping, key: str) -> Iterator[tuple[str, str, Mapping]]:
    for name, inner in init_args.items():
        where = f"{key}.init_args.{name}"
        typed = nested_dataclass(class_path, str(name).removesuffix("+"))
        if isinstance(inner, Mapping) and "class_path" not in inner and typed is not None:
            fields = {k: v for k, v in inner.items() if k != "init_args"}
            if isinstance(inner.get("init_args"), Mapping):
                fields.update(inner["init_args"])
            yield where, typed, fields
            yield from _arguments(typed, fields, where)
        else:
            yield from class_nodes(inner, where)


def _class_strings(value: object, key: str) -> Iterator[tuple[str, str]]:
    """``(key, value)`` of every ``class_path`` and of every plain string naming something in a readable package
    (``- propel.rewards.EnvironmentReward``) under ``value``."""
    if isinstance(value, Mapping):
        for name, inner in value.items():
            if name == "class_path" and isinstance(inner, str):
                yield f"{key}.class_path", inner
            else:
                yield from _class_strings(inner, f"{key}.{name}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _class_strings(item, f"{key}[{i}]")
    elif isinstance(value, str) and _DOTTED.match(value):
        yield key, value


def key_problems(config: Mapping) -> list[str]:
    """Every problem the source settles, one line each, as the full parser words them: a ``trainer`` key, or an
    init argument of a class under ``trainer`` (callbacks, logger, ...), ``model`` or ``data``, that the class
    certainly does not accept, and a class that certainly does not exist; what the source does not settle passes."""
    problems: list[str] = []
    trainer = config.get("trainer")
    nodes: list[tuple[str, str, Mapping]] = []
    strings: list[tuple[str, str]] = []
    if isinstance(trainer, Mapping):
        accepted = accepted_keys(TRAINER)
        for name, value in trainer.items():
            if accepted is not None and name.removesuffix("+") not in accepted:  # "callbacks+": appended
                hit = suggest(name, accepted)
                hint = f". Did you mean: 'trainer.{hit}'?" if hit else _accepts(name, accepted)
                problems.append(f"trainer.{name}: option 'trainer.{name}' is not accepted{hint}")
                continue
            nodes += class_nodes(value, f"trainer.{name}")
            strings += _class_strings(value, f"trainer.{name}")
    for section in SECTIONS:
        nodes += class_nodes(config.get(section), section)
        strings += _class_strings(config.get(section), section)
    for key, value in strings:
        why = missing_class(value)
        if why is not None:
            problems.append(f"{key}: {why}")
    for key, class_path, init_args in nodes:
        accepted = accepted_keys(class_path)
        if accepted is None:
            continue
        for name in init_args:
            if name.removesuffix("+") not in accepted:
                full = f"{key}.init_args.{name}"
                hit = suggest(name, accepted)
                hint = f". Did you mean: '{key}.init_args.{hit}'?" if hit else _accepts(name, accepted)
                problems.append(f"{full}: option {name!r} is not accepted by {class_path}{hint}")
    return problems


def _accepts(name: str, accepted: frozenset[str], most: int = 8) -> str:
    """Where no accepted key is close to ``name``: the accepted ones, closest first (``most`` of them)."""
    ranked = sorted(accepted, key=lambda k: (-difflib.SequenceMatcher(None, name, k).ratio(), k))
    more = f", ... ({len(ranked)} in all)" if len(ranked) > most else ""
    return f". Accepted: {', '.join(ranked[:most])}{more}" if ranked else ". It accepts no arguments"


def check_keys(config: Mapping) -> None:
    """Refuse every problem ``key_problems`` finds, all in one ``ConfigErrors`` (one line each)."""
    problems = key_problems(config)
    if problems:
        raise ConfigErrors(problems)


def _merge(old: dict, new: Mapping) -> None:
    """``old.update(new)``, where ``key+`` appends to ``key``'s list (jsonargparse's list append)."""
    for name, value in new.items():
        base = str(name).removesuffix("+")
        if base != name and isinstance(old.get(base), list):
            old[base] = [*old[base], *(value if isinstance(value, list) else [value])]
        else:
            old[name] = copy.deepcopy(value)


def merged_config(files: list[dict], overrides: list[tuple[str, str]]) -> dict:
    """The ``trainer``/``model``/``data`` sections as the parser would see their keys: later files update earlier
    ones (a new ``class_path`` replaces the section, ``callbacks+`` appends to ``callbacks``), then ``--trainer.x
    value`` and ``--model.init_args.x value`` overrides, nested ones included (``--model.init_args.loss.beta``;
    values are not checked)."""
    out: dict = {}
    for data in copy.deepcopy(files):
        if isinstance(data.get("trainer"), Mapping):
            _merge(out.setdefault("trainer", {}), data["trainer"])
        for section in SECTIONS:
            new = data.get(section)
            if not isinstance(new, Mapping):
                continue
            old = out.get(section)
            if isinstance(old, dict) and new.get("class_path", old.get("class_path")) == old.get("class_path"):
                _merge(old.setdefault("init_args", {}), dict(new.get("init_args") or {}))
            else:
                out[section] = {"class_path": new.get("class_path"), "init_args": dict(new.get("init_args") or {})}
    for key, value in overrides:
        section, *path = key.split(".")
        if "[" in key or not path or path[-1] == "class_path":  # list items, a new class: the full parser's
            continue
        if section == "trainer" and len(path) == 1:
            out.setdefault("trainer", {})[path[0]] = value
        if section in SECTIONS and len(path) > 1 and path[0] == "init_args":
            _put(out.setdefault(section, {}), path, value)
    return out


def _put(node: dict, path: list[str], value: object) -> None:
    """``node[path[0]][path[1]]... = value``, making the mappings on the way; a step through a value that is not a
    mapping (a class given by name, a fragment's path) sets nothing."""
    for name in path[:-1]:
        if node.get(name) is None:
            node[name] = {}
        if not isinstance(node[name], dict):
            return
        node = node[name]
    node[path[-1]] = value
