"""How an OpenEnv environment looks to a policy: its pydantic ``Action`` as one tool, its ``Observation`` as text.

OpenEnv environments take typed actions (a pydantic model per environment) and return typed observations; a language
model writes text. The action's JSON schema (``Action.model_json_schema()`` in-process, the server's ``/schema``
otherwise: the same dict) becomes one tool schema in the chat-template format propel already renders, so the model
calls it as ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``. An observation is shown as its own fields
(OpenEnv's wire format leaves out ``done``, ``reward`` and ``metadata``): a single text field as that text, anything
else as compact JSON. Both modes use these functions, so a trajectory reads the same in-process and over a server.
"""

from __future__ import annotations

import importlib
import json
import re
from typing import Any

BASE_ACTION_FIELDS = ("metadata",)
"""Fields every OpenEnv ``Action`` inherits (bookkeeping, not the environment's interface): kept out of the tool."""


def import_object(path: str) -> Any:
    """The object at ``package.module.Name`` or ``package.module:Name`` (how YAML names an environment class)."""
    module, sep, name = path.partition(":")
    if not sep:
        module, _, name = path.rpartition(".")
    if not module or not name:
        raise ValueError(f"expected an import path like package.module.Name, got {path!r}")
    return getattr(importlib.import_module(module), name)


def tool_name(schema: dict[str, Any]) -> str:
    """The tool's default name: the action class's name in snake case, an ``Action`` suffix dropped
    (``GuessAction`` -> ``guess``, ``SubmitResolution`` -> ``submit_resolution``)."""
    title = str(schema.get("title") or "act")
    if title.endswith("Action") and title != "Action":
        title = title[: -len("Action")]
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", title).lower()


def _clean(node: Any) -> Any:
    """A JSON schema without pydantic's ``title`` keys (noise in a prompt); ``$defs`` and ``$ref`` kept."""
    if isinstance(node, dict):
        return {k: _clean(v) for k, v in node.items() if k != "title" or not isinstance(v, str)}
    if isinstance(node, list):
        return [_clean(v) for v in node]
    return node


def action_tool(schema: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    """One tool schema (the ``tools=`` format of chat templates) for an action class's JSON schema."""
    properties = {k: _clean(v) for k, v in schema.get("properties", {}).items() if k not in BASE_ACTION_FIELDS}
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "required": [k for k in schema.get("required", []) if k in properties],
    }
    if "$defs" in schema:
        parameters["$defs"] = _clean(schema["$defs"])
    description = " ".join(str(schema.get("description") or "Act in the environment.").split())
    return {
        "type": "function",
        "function": {"name": name or tool_name(schema), "description": description, "parameters": parameters},
    }


def _filled(value: Any) -> bool:
    return value is not None and value != "" and value != [] and value != {}


def observation_text(fields: dict[str, Any], field: str | None = None) -> str:
    """What the model reads of an observation's fields: ``field`` alone when named; else the fields that hold
    something, a lone string as itself and anything else as compact JSON."""
    if field is not None:
        value = fields.get(field)
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    shown = {k: v for k, v in fields.items() if _filled(v)}
    if len(shown) == 1 and isinstance(next(iter(shown.values())), str):
        return next(iter(shown.values()))
    return json.dumps(shown, ensure_ascii=False, default=str)


def validation_reason(errors: list[dict[str, Any]]) -> str:
    """A pydantic validation error (``ValidationError.errors()``, or the list an OpenEnv server sends back) as the
    one line the model is shown: ``invalid_action: guess: Input should be less than or equal to 16``."""
    parts = []
    for e in errors:
        where = ".".join(str(p) for p in e.get("loc", ()) if p != "action")
        parts.append(f"{where}: {e.get('msg', 'invalid')}" if where else str(e.get("msg", "invalid")))
    return "invalid_action: " + ("; ".join(parts) or "the arguments do not fit the action")
