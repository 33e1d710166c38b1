#!/usr/bin/env bash
# Set up everything the tests need on a fresh machine, then run the whole suite (unit, real-model, docker).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/system_deps.sh
if [ -f scripts/docker_engine.sh ]; then bash scripts/docker_engine.sh; fi
export WANDB_MODE=offline WANDB_SILENT=true TOKENIZERS_PARALLELISM=false
.venv/bin/ruff check .
.venv/bin/python -m pytest "$@"
