"""Load a causal LM and its tokenizer from a bundled alias, a local folder, a GGUF file or a hub id."""

from __future__ import annotations

import hashlib
import os
import socket
from pathlib import Path
from urllib.parse import urlparse

from propel.errors import ModelNotFoundError
from propel.models.bundled import BUNDLED_ALIASES, bundled_model_dir, convert_gguf_to_hf
from propel.paths import cache_dir

DTYPES = ("float32", "bfloat16", "float16")


def resolve_model_dir(name_or_path: str) -> str:
    """Turn an alias, folder or ``.gguf`` file into something ``from_pretrained`` reads; hub ids pass through."""
    if name_or_path in BUNDLED_ALIASES:
        return str(bundled_model_dir(name_or_path))
    path = Path(os.path.expanduser(name_or_path))
    if path.is_file() and path.suffix == ".gguf":
        stat = path.stat()
        key = hashlib.sha1(f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:12]
        out = cache_dir() / "models" / f"{path.stem}-{key}"
        if not (out / "config.json").exists():
            convert_gguf_to_hf(path, out)
        return str(out)
    if path.is_dir():
        if not (path / "config.json").exists():
            raise ModelNotFoundError(f"model folder {path} has no config.json: pass a save_pretrained folder")
        return str(path)
    if path.suffix == ".gguf" or name_or_path.startswith((".", "/", "~")):
        raise ModelNotFoundError(f"model path {name_or_path!r} does not exist")
    if _offline(name_or_path) and not _in_hub_cache(name_or_path):
        raise _hub_error(name_or_path, ConnectionError("hub unreachable and not in the local HF cache"))
    return name_or_path


def _in_hub_cache(repo_id: str) -> bool:
    from huggingface_hub import try_to_load_from_cache

    try:
        return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    except ValueError:  # not a valid repo id
        return False


def _hub_error(name: str, err: Exception) -> ModelNotFoundError:
    aliases = ", ".join(BUNDLED_ALIASES)
    return ModelNotFoundError(
        f"cannot load model {name!r} offline ({type(err).__name__}). Use a bundled alias ({aliases}), a local "
        f"folder, or a .gguf file; to fetch a hub model, run `hf download {name} --local-dir DIR` on a machine "
        "with network and pass DIR."
    )


def load_tokenizer(name_or_path: str, *, padding_side: str = "left"):
    """Tokenizer with a pad token (falls back to EOS) and the given padding side."""
    from transformers import AutoTokenizer

    source = resolve_model_dir(name_or_path)
    try:
        tok = AutoTokenizer.from_pretrained(source, local_files_only=_offline(source))
    except OSError as err:
        raise _hub_error(name_or_path, err) from err
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = padding_side
    return tok


def _hub_reachable(timeout_s: float = 3.0) -> bool:
    """One quick TCP connect to the hub, so an unreachable hub fails in seconds instead of minutes of retries."""
    host = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co")).hostname or "huggingface.co"
    try:
        socket.create_connection((host, 443), timeout=timeout_s).close()
        return True
    except OSError:
        return False


def _offline(source: str) -> bool:
    """Load without touching the network: local folders, ``HF_HUB_OFFLINE``, or an unreachable hub (cache only)."""
    if os.path.isdir(source):
        return True
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() not in ("0", "", "false"):
        return True
    return not _hub_reachable()


def load_model(name_or_path: str, *, dtype: str = "float32", device: str = "cpu", padding_side: str = "left"):
    """Return ``(model, tokenizer)``; the model is in eval mode on ``device``.

    Args:
        name_or_path: bundled alias (``smollm2-135m-instruct``), local folder, ``.gguf`` file, or hub id.
        dtype: one of ``float32``, ``bfloat16``, ``float16``.
        device: torch device string.
        padding_side: tokenizer padding side (``left`` for generation).
    """
    import torch
    from transformers import AutoModelForCausalLM

    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    source = resolve_model_dir(name_or_path)
    try:
        model = AutoModelForCausalLM.from_pretrained(
            source, dtype=getattr(torch, dtype), local_files_only=_offline(source)
        )
    except OSError as err:
        raise _hub_error(name_or_path, err) from err
    model.to(device).eval()
    return model, load_tokenizer(name_or_path, padding_side=padding_side)
