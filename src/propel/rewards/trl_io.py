"""TRL's reward-function inputs and propel's records, mapped both ways.

TRL's ``GRPOTrainer`` calls every reward function as ``f(prompts=, completions=, completion_ids=, **columns)``: the
dataset row's ``prompt`` (a string, or chat messages), the decoded completion (a string, or
``[{"role": "assistant", "content": text}]`` for chat prompts), its token ids, every other dataset column as a list
(one value per completion), and ``trainer_state``, ``log_extra``, ``log_metric`` (``environments`` with an
environment factory). A propel context is one such row: ``trl_row`` writes its prompt, id, group and gold ``data``
(its scalar fields as columns, which a user's reward function reads by name, and the whole of it as JSON in
``propel_data``: the ``datasets`` library merges the keys of dict columns across rows, filling the missing ones with
None, which would change a test suite's tests); ``trl_samples`` turns a call's inputs back into propel ``Sample``s.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from propel.engines.engine import chat_text
from propel.errors import ConfigError
from propel.records import Context, Prompt, Sample, Turn

DATA_COLUMN = "propel_data"
"""The column holding a context's ``data`` as JSON (exact, whatever the dataset library does to nested columns)."""
ID_COLUMN, GROUP_COLUMN = "propel_id", "propel_group"
ROW_KEYS = ("prompt", "completion", "completion_ids")
"""Dataset columns TRL does not pass as keyword arguments (so data fields of these names travel only as JSON)."""
SCALARS = (str, int, float, bool, type(None))
TRAINER_KWARGS = ("trainer_state", "log_extra", "log_metric", "environments")
"""Keyword arguments TRL adds that are not dataset columns."""


def trl_prompt(prompt: Prompt) -> str | list[dict[str, Any]]:
    """A propel prompt as a TRL dataset's ``prompt``: its chat messages, or its text."""
    if prompt.messages is not None:
        return [dict(m) for m in prompt.messages]
    if prompt.text is not None:
        return prompt.text
    raise ConfigError("a token-id prompt has no TRL form: give the context chat messages or text")


def trl_completion(text: str, conversational: bool) -> str | list[dict[str, Any]]:
    """A completion as TRL passes it: the text, or one assistant message for chat prompts."""
    return [{"role": "assistant", "content": text}] if conversational else text


def completion_text(completion: str | list[dict[str, Any]]) -> str:
    """The text of a TRL completion: the string, or its assistant messages' contents (text parts of a content list
    included) joined by newlines."""
    if isinstance(completion, str):
        return completion
    texts = []
    for message in completion:
        if message.get("role", "assistant") != "assistant":
            continue
        content = message.get("content") or ""
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content if part.get("type") == "text")
        texts.append(content)
    return "\n".join(texts)


def trl_row(context: Context) -> dict[str, Any]:
    """A TRL dataset row of a context: ``prompt``, its id and group, its scalar data fields as columns (a reward
    function reads them by name; nested ones and those named like TRL's own columns are left out: the ``datasets``
    library would merge or reject them across rows) and the whole data as JSON (``propel_data``)."""
    try:
        blob = json.dumps(context.data, sort_keys=True)
    except TypeError as e:
        raise ConfigError(f"context {context.id!r}: its data is not JSON-serialisable ({e})") from e
    columns = {k: v for k, v in context.data.items() if k not in ROW_KEYS and isinstance(v, SCALARS)}
    return {
        "prompt": trl_prompt(context.prompt),
        ID_COLUMN: context.id,
        GROUP_COLUMN: context.group,
        **columns,
        DATA_COLUMN: blob,
    }


def _render(prompt: str | list[dict[str, Any]], tokenizer) -> str:
    if isinstance(prompt, str):
        return prompt
    if tokenizer is not None:
        return chat_text(tokenizer, prompt)
    return "\n\n".join(str(m.get("content", "")) for m in prompt)


def trl_samples(
    prompts: Sequence[str | list[dict[str, Any]]],
    completions: Sequence[str | list[dict[str, Any]]],
    completion_ids: Sequence[Sequence[int]] | None = None,
    columns: dict[str, Sequence[Any]] | None = None,
    tokenizer=None,
) -> list[Sample]:
    """propel samples of one TRL reward call: each with a context (the row's prompt, id, group and data: the columns,
    overridden by ``propel_data`` where present) and one assistant turn (``finish_reason`` ``stop``: TRL does not
    pass why a completion ended). ``Sample.prompt`` is the prompt rendered with
    ``tokenizer``'s chat template (chat prompts without a tokenizer: the contents joined by blank lines)."""
    columns = {k: v for k, v in (columns or {}).items() if k not in TRAINER_KWARGS}
    n = len(prompts)
    if len(completions) != n or any(len(v) != n for v in columns.values()):
        raise ValueError(f"TRL reward inputs disagree in length: {n} prompts, {len(completions)} completions")
    fields = [k for k in columns if k not in (DATA_COLUMN, ID_COLUMN, GROUP_COLUMN)]
    samples = []
    for i, (prompt, completion) in enumerate(zip(prompts, completions, strict=True)):
        data = {k: columns[k][i] for k in fields}
        if DATA_COLUMN in columns:
            data.update(json.loads(columns[DATA_COLUMN][i]))
        ident = str(columns[ID_COLUMN][i]) if ID_COLUMN in columns else str(i)
        group = str(columns[GROUP_COLUMN][i]) if GROUP_COLUMN in columns else ""
        as_prompt = Prompt(text=prompt) if isinstance(prompt, str) else Prompt(messages=[dict(m) for m in prompt])
        text = completion_text(completion)
        ids = list(completion_ids[i]) if completion_ids is not None else []
        samples.append(
            Sample(
                prompt=_render(prompt, tokenizer),
                completion=text,
                context=Context(id=ident, prompt=as_prompt, group=group, data=data),
                turns=[Turn("assistant", text, ids, None, True, "stop")],
            )
        )
    return samples
