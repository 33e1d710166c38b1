#!/usr/bin/env bash
# `make gpu-wheels`: what `make gpu-check` needs on a device whose image has only PyTorch, Lightning, transformers and
# peft, gathered here (with network) into ignored folders that travel with the working tree (`carry`, 64 MiB a call):
#   .gpu_wheels/          the wheels (--no-deps, an explicit list; the versions this .venv runs; binary ones for
#                         manylinux x86_64 and GPU_PYTHON, default 3.12: the lent H200 image's Python) but pyarrow,
#                         and needs.txt
#                         ("<import name> <dist>==<version>": what scripts/gpu_check.sh installs when the import fails)
#   .gpu_wheels_pyarrow/  pyarrow alone (53 MiB: a call of its own, skipped when the image has pyarrow)
#   .gpu_model/arch/      the bundled SmolLM2-135M-Instruct's config and tokenizer (the check builds the same
#                         architecture with random weights from it: the same memory and compute per token)
#   .gpu_model/part-*     only with GPU_MODEL_WEIGHTS=1: the bundled model's GGUF (98 MB) in 45 MiB parts + SHA256SUMS
# The device calls that carry them: docs/gpu.md ("Checking a GPU machine").
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
GPU_PYTHON=${GPU_PYTHON:-3.12}  # the lent H200 image runs Python 3.12.3 (seen 2026-11-30); binary wheels are per version
# import name -> distribution: what the check imports beyond torch, lightning, transformers and peft (and their own
# dependencies), found by running `benchmarks/gpu_check.py --device cpu` in a venv holding only those four (pip install
# torch==2.13.0 lightning transformers==5.19.0 peft) until every part ran
NEEDS=(
    "trl trl" "datasets datasets" "dill dill" "multiprocess multiprocess" "xxhash xxhash" "pyarrow pyarrow"
    "pandas pandas" "dateutil python-dateutil" "six six" "tzdata tzdata" "libcst libcst" "gguf gguf"
)
rm -rf .gpu_wheels .gpu_wheels_pyarrow && mkdir -p .gpu_wheels .gpu_wheels_pyarrow
: > .gpu_wheels/needs.txt
for pair in "${NEEDS[@]}"; do
    read -r module dist <<< "$pair"
    version=$("$PY" -c "import importlib.metadata as m; print(m.version('$dist'))")
    echo "$module $dist==$version" >> .gpu_wheels/needs.txt
    "$PY" -m pip download -q --no-deps --only-binary=:all: --platform manylinux2014_x86_64 \
        --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 --python-version "$GPU_PYTHON" \
        -d "$([ "$dist" = pyarrow ] && echo .gpu_wheels_pyarrow || echo .gpu_wheels)" "$dist==$version"
done
rm -rf .gpu_model && mkdir -p .gpu_model/arch
"$PY" - <<'PY'
from pathlib import Path
from transformers import AutoConfig, AutoTokenizer
from propel.models.bundled import bundled_model_dir
src = bundled_model_dir("smollm2-135m-instruct")
AutoConfig.from_pretrained(src).save_pretrained(".gpu_model/arch")
AutoTokenizer.from_pretrained(src).save_pretrained(".gpu_model/arch")
print("gpu-wheels: .gpu_model/arch from", src, sorted(p.name for p in Path(".gpu_model/arch").iterdir()))
PY
if [ "${GPU_MODEL_WEIGHTS:-0}" = 1 ]; then
    gguf=$("$PY" -c 'from propel.models.bundled import bundled_gguf_path; print(bundled_gguf_path("smollm2-135m-instruct"))')
    (cd .gpu_model && cp "$gguf" . && sha256sum SmolLM2-135M-Instruct.Q4_1.gguf > SHA256SUMS \
        && split -b 45M -d SmolLM2-135M-Instruct.Q4_1.gguf part- && rm SmolLM2-135M-Instruct.Q4_1.gguf \
        && ls part-* | wc -l > parts)
fi
du -sh .gpu_wheels .gpu_wheels_pyarrow .gpu_model
echo "gpu-wheels: $(wc -l < .gpu_wheels/needs.txt) wheels for Python $GPU_PYTHON in .gpu_wheels and .gpu_wheels_pyarrow;" \
    "the model's config and tokenizer in .gpu_model/arch$([ -f .gpu_model/parts ] && echo ", its weights in $(cat .gpu_model/parts) parts")"
