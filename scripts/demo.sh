#!/usr/bin/env bash
# The demo: PROPEL end to end on embedded defaults (bundled SmolLM2-135M, local sandbox, W&B offline).
# Extra arguments are pipeline overrides, e.g. `bash scripts/demo.sh grpo.trainer.max_steps=40`.
set -euo pipefail
cd "$(dirname "$0")/.."
export WANDB_SILENT=true TOKENIZERS_PARALLELISM=false
exec .venv/bin/propel pipeline -c configs/demo.yaml "$@"
