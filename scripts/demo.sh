#!/usr/bin/env bash
# The demo: the main job on embedded defaults (bundled SmolLM2-135M, local sandbox, W&B offline).
set -euo pipefail
cd "$(dirname "$0")/.."
export WANDB_SILENT=true TOKENIZERS_PARALLELISM=false
if [ -f configs/demo.yaml ]; then
  exec .venv/bin/propel pipeline -c configs/demo.yaml "$@"
fi
# Until the pipeline lands: the smallest real job, the bundled model answering offline.
exec .venv/bin/python -m propel.models.smoke
