.PHONY: setup setup-vllm test test-quick docs wheel demo demo-full demo-agent demo-testsuite demo-triage demo-distill demo-grpo-distill lint \
	bench bench-vllm exp-grpo-vs-trl exp-grpo-parity exp-triage-style exp-triage-content exp-turn-kl-scope \
	exp-grader-pressure exp-grader-pressure-seeded exp-probe-ranking exp-probe-ranking-warm exp-propel exp-propel-warm exp-demo-seeds \
	gpu-check gpu-wheels

setup:
	bash scripts/setup.sh

setup-vllm:
	bash scripts/setup_vllm.sh

test:
	bash scripts/test.sh

test-quick:
	PROPEL_TEST_VLLM=0 bash scripts/test.sh

lint:
	.venv/bin/ruff check . && .venv/bin/ruff format --check .

# The documentation site (mkdocs.yml: Material + mkdocstrings); strict: a broken link or reference fails -> site/
docs: setup
	.venv/bin/mkdocs build --strict -d site

# The installable package -> dist/propel_rl-<version>-py3-none-any.whl (installing it: docs/guide/getting_started.md)
wheel: setup
	.venv/bin/pip wheel --no-deps --no-build-isolation -w dist .

# Half size: 16-18 min of stages, 3.8 GB (docs/experiments/demo_2026-12-07: 16:07 and 18:02 wall, 3,821,712 and
# 3,822,624 KB; on another CPU from a fresh clone, setup and the model's conversion included, 19:43 and 3,796,716 KB)
demo: setup
	bash scripts/demo.sh

# The full-size demo (37 min on 2 idle cores): the setting of the committed run docs/experiments/demo_2026-12-06
demo-full: setup
	WANDB_SILENT=true TOKENIZERS_PARALLELISM=false .venv/bin/propel pipeline -c configs/demo_full.yaml

# The agent demos within 4 GB (an 8 GB laptop): an agent episode is a row of ~1,000 tokens, and one micro-batch's
# backward kept ~2.9 GB per row alive (activations and full-vocabulary logits; 4 rows a micro-batch: 8.7 GB peak).
# Here the update takes one row at a time and recomputes each layer in backward (the same loss and gradients:
# tests/models/test_checkpointing.py), under glibc's lowest-memory mode (MALLOC_MMAP_THRESHOLD_, propel/host_memory.py).
# One micro-batch of 1,000-token rows (800 trained), `python benchmarks/update_row_memory.py`, 2026-12-06 (2 cores
# shared, its first version): peak RSS 13.0 GB for 4 rows without recomputation, 7.0 / 4.1 / 2.6 GB for 4 / 2 / 1 rows
# with it (1.3 GB before). Their whole runs take the same flags.
AGENT_LOW_MEMORY := --model.init_args.micro_batch_size=1 --model.init_args.gradient_checkpointing=true

# Multi-turn GRPO on agent episodes (ToolEnv in a local sandbox), 3 steps -> runs/agent/ (summary.md, .json, .png:
# reward, solved rate, turns, tool errors, first steps vs last; propel.callbacks.run_summary)
# Measured with these flags (`/usr/bin/time -v make demo-agent`, 2026-12-06, 2 idle cores, two runs): 4:22 and 7:09
# wall, peak RSS 1.9 GiB (2,018,256 and 2,016,248 KiB), against 8.7 GB before the low-memory flags; on another CPU
# (AMD EPYC, a fresh clone, 2026-12-07, idle): 6:19 and 2,014,728 KiB.
demo-agent: setup
	MALLOC_MMAP_THRESHOLD_=131072 WANDB_MODE=offline .venv/bin/propel fit -c configs/grpo/base.yaml -c configs/agent/grpo.yaml \
		--trainer.max_steps=3 $(AGENT_LOW_MEMORY)

# Job 2: GRPO on HumanEval with the test-suite reward and its hack detectors, 3 steps -> runs/code/. Each layer is
# recomputed in backward (configs/code/testsuite.yaml) under glibc's lowest-memory mode: 4:31 wall, peak RSS 2.4 GiB
# (2,517,880 KiB) on 2 idle cores (`/usr/bin/time -v`, 2026-12-06, one run), against 2:57 and 6.5 GiB (6,865,300 KiB)
# without either; on another CPU (AMD EPYC, a fresh clone, 2026-12-07, idle): 6:15 and 2,539,472 KiB.
demo-testsuite: setup
	MALLOC_MMAP_THRESHOLD_=131072 WANDB_MODE=offline .venv/bin/propel fit -c configs/grpo/base.yaml -c configs/code/testsuite.yaml --trainer.max_steps=3

# GRPO on IT-ticket triage with six logged rewards (format, resolution, grounding, calibration, parsimony,
# repetition), 3 steps -> runs/triage/ (reward curves + reward_windows.md)
# Under glibc's lowest-memory mode: 2.0 GiB peak RSS in 6.3 and 5.0 min (2,142,712 and 2,133,612 KiB; the second on 2
# idle cores, 2026-12-06); 6.9 min and 2,154,508 KiB on another CPU (AMD EPYC, a fresh clone, 2026-12-07, idle); 4.5
# GB in 3.2 min without it (propel/host_memory.py)
demo-triage: setup
	MALLOC_MMAP_THRESHOLD_=131072 WANDB_MODE=offline .venv/bin/propel fit -c configs/grpo/base.yaml -c configs/triage/grpo.yaml --trainer.max_steps=3 \
		--model.init_args.group_size=4 --model.init_args.max_new_tokens=128

# Job 3: turn-targeted KL distillation on the bundled model's agent episodes, 3 steps -> runs/distill/ (summary.md,
# .json, .png: the divergence against the control's, the drift, first steps vs last)
# Measured (`/usr/bin/time -v make demo-distill`, 2026-12-06, 2 idle cores, two runs): 4:23 and 3:09 wall, peak RSS
# 1.8 GiB (1,885,056 and 1,885,288 KiB); an earlier run on cores taken by an experiment peaked the same (1,885,160 KiB);
# on another CPU (AMD EPYC, a fresh clone, 2026-12-07, idle): 4:32 and 1,881,012 KiB.
demo-distill: setup
	MALLOC_MMAP_THRESHOLD_=131072 WANDB_MODE=offline .venv/bin/propel fit -c configs/grpo/base.yaml -c configs/agent/distill.yaml \
		--trainer.max_steps=3 $(AGENT_LOW_MEMORY)

# Job 3 with RL: multi-turn GRPO plus the turn-targeted KL term in one update, 3 steps -> runs/grpo_distill/ (the
# same low-memory settings; summary.md, .json, .png: reward, solved rate, divergence against the control). Measured
# (`/usr/bin/time -v`, 2026-12-06, 2 idle cores, one run): 4:43 wall, peak RSS 1.8 GiB (1,877,924 KiB); on another CPU
# (AMD EPYC, a fresh clone, 2026-12-07, idle): 7:11 and 1,883,568 KiB: episodes run longer or shorter as sampling goes
demo-grpo-distill: setup
	MALLOC_MMAP_THRESHOLD_=131072 WANDB_MODE=offline .venv/bin/propel fit -c configs/grpo/base.yaml -c configs/agent/grpo_distill.yaml \
		--trainer.max_steps=3 $(AGENT_LOW_MEMORY)

# Each benchmark prints one table; run them on an idle machine (they compare against a reference in the same run).
bench: setup
	.venv/bin/python benchmarks/sandbox.py --jobs 200 --workers 2
	.venv/bin/python benchmarks/self_bleu.py --sizes 1000 10000 --nltk-sample 20
	.venv/bin/python benchmarks/triage_integrity.py
	.venv/bin/python benchmarks/extraction.py
	.venv/bin/python benchmarks/grpo_step.py --steps 3
	.venv/bin/python benchmarks/episodes.py
	.venv/bin/python benchmarks/distill_step.py
	.venv/bin/python benchmarks/reward_integrity.py --backends local docker
	.venv/bin/python benchmarks/swe_validity.py --repos parse,inflection,isodate,webcolors --bugs 8 --backends local,docker
	.venv/bin/python benchmarks/probe_fit_overhead.py

# Every CUDA path on one GPU in at most 8 minutes (GRPO bf16, TRL on the same card, turn-KL, probe extraction, FSDP,
# peak memory against the estimate) -> $OUT or runs/gpu_check/gpu_check.{json,md}; on CPU it stops with one line.
# No setup dependency: on a device machine it runs on the image's torch (docs/gpu.md, "Checking a GPU machine").
gpu-check:
	bash scripts/gpu_check.sh

# The wheels and model parts gpu-check needs on a bare device image -> .gpu_wheels/ and .gpu_model/ (ignored; carried)
gpu-wheels: setup
	bash scripts/gpu_wheels.sh

bench-vllm: setup-vllm
	.venv-vllm/bin/python benchmarks/rollout.py
	.venv-vllm/bin/python benchmarks/grpo_step.py --propel-engines hf vllm vllm-merged --steps 10

# Experiments (longer than the demo; each resumable, each writes report.md + curves under runs/experiments/).
# Does propel's GRPO learn like TRL's? propel vs TRL GRPOTrainer on reasoning-gym letter_counting, 40 steps x 3 seeds each
exp-grpo-vs-trl: setup
	.venv/bin/python experiments/grpo_vs_trl/run.py --out runs/experiments/grpo_vs_trl

# The same, paired, on a task that does not saturate in 40 steps (letter_counting, 4-8 words), 5 seeds: parity is
# shown when the 90% interval of the paired area-under-the-curve difference lies inside +-0.10 (the script's header)
exp-grpo-parity: setup
	.venv/bin/python experiments/grpo_vs_trl/run.py --datasets letter_counting '{"min_words": 4, "max_words": 8}' \
		--seeds 0 1 2 3 4 --out runs/experiments/grpo_vs_trl_4to8

# The six triage rewards, style against content: 3 seeds x 200 steps with the forced answer prefix (a GPU-sized run)
exp-triage-style: setup
	.venv/bin/python experiments/triage_style/run.py --out runs/experiments/triage_style

# The same where content can move (the gold runbook alone, the answer opened with its numbering): 9 seeds x 60 steps,
# every component on held-out tickets at steps 0, 50 and 60; the endpoint is held-out content's change over seeds
# (about 30 min a seed on 2 CPU cores; resumable: a finished seed is read back, an interrupted one resumes)
exp-triage-content: setup
	.venv/bin/python experiments/triage_style/run.py --out runs/experiments/triage_content --seeds 0 1 2 3 4 5 6 7 8 \
		--steps 60 --window 10 -- -c experiments/triage_content/config.yaml

# Does turn-targeted KL stay on its turn? Scripted 6-turn conversations (every episode reaches every turn), a team
# convention hinted at a randomised turn t: targeted, sequence (t to the end), whole episode, unrelated-hint control and
# no KL, 3 seeds x 12 steps; off-target drift (before/after t), conflict-turn bleed and retention at matched target
# success (resumable: a finished arm-seed is read back)
exp-turn-kl-scope: setup
	.venv/bin/python experiments/turn_kl_scope/run.py --out runs/experiments/turn_kl_scope

# Does a grader hold under training pressure? GRPO on HumanEval with a few-shot hack in the prompt, trained against a
# naive pytest-exit-status grader and against propel's trusted grading: hack rate, honest pass rate and reward per
# step, 2 arms x 5 seeds x 60 steps (a GPU-sized run; the pilot and the power table first, minutes on CPU)
exp-grader-pressure: setup
	test -f runs/experiments/grader_pressure/pilot.json || \
		.venv/bin/python experiments/grader_pressure/run.py --pilot --out runs/experiments/grader_pressure
	.venv/bin/python experiments/grader_pressure/run.py --out runs/experiments/grader_pressure

# The same question from a policy with a planted hack rate (experiments/grader_pressure/seed_hack_policy.py; docs/experiments.md).
SEEDED := runs/experiments/hack_seeded_policy
exp-grader-pressure-seeded: setup
	.venv/bin/python experiments/grader_pressure/seed_hack_policy.py --out $(SEEDED)
	test -f runs/experiments/grader_pressure_seeded/pilot.json || \
		.venv/bin/python experiments/grader_pressure/run.py --pilot --model $(SEEDED)/model \
		--tasks-path $(SEEDED)/rl_tasks.jsonl --shots none --pilot-variants none --out runs/experiments/grader_pressure_seeded
	.venv/bin/python experiments/grader_pressure/run.py --model $(SEEDED)/model --tasks-path $(SEEDED)/rl_tasks.jsonl \
		--shots none --out runs/experiments/grader_pressure_seeded

# Does the probe rank a group's valid tasks by utility? PROPEL's mechanism offline: 160 contexts x 8 base-generator
# tasks, exact solve probabilities by teacher forcing, the probe cross-fitted over contexts against logistic regression,
# cheap task features, shuffled labels and the oracle (about 45 min on 2 shared CPU cores); outputs committed in docs/
exp-probe-ranking: setup
	.venv/bin/python experiments/probe_ranking/run.py --contexts 160 --workdir runs/experiments/probe_ranking \
		--out docs/experiments/probe_ranking

# The same test on the groups GRPO sees after the gate: 310 contexts from `make demo-full`'s warm start (run it first),
# strict validity, at fit seed 0 (experiments/probe_ranking/preregistration_warm_310.md; 51 min on 2 partly shared
# cores, 2026-12-06); `--fit-seed 1` and `2` refit on the same groups in about 1.5 min each
exp-probe-ranking-warm: setup
	.venv/bin/python experiments/probe_ranking/run.py --adapter runs/demo_full/warm_start/adapters/step-24 --contexts 310 \
		--workdir runs/experiments/probe_ranking_warm --out docs/experiments/probe_ranking_warm/fit_seed_0

# Issue 53's arms: GRPO against the validity gate, the probe, a probe on shuffled labels and the exact utility (the
# oracle), 3 seeds x 12 steps, each policy evaluated on 64 fixed contexts x 4 samples by exact band utility
# (about 90 min on an idle 2-core machine; resumable); reads the ranking run's groups (make exp-probe-ranking first,
# or it runs it); outputs committed in docs/experiments/propel_arms
exp-propel: setup
	.venv/bin/python experiments/propel_arms/run.py --workdir runs/experiments/propel_arms --out docs/experiments/propel_arms

# The same arms continuing one 24-step gate-only run (validity 0.96), 4 seeds (about 150 min; resumable); outputs
# committed in docs/experiments/propel_arms_warm (the shuffled arm ran after propel - gate excluded zero, as fixed)
exp-propel-warm: setup
	.venv/bin/python experiments/propel_arms/run.py --workdir runs/experiments/propel_arms_warm \
		--out docs/experiments/propel_arms_warm --warm-start-steps 24 --seeds 1 2 3 4 --arms gate propel shuffled oracle

# The half-size demo end to end at seeds 1-5 (pre-registered in experiments/demo_seeds/run.py; about 20 min a seed on
# 2 CPU cores; a finished seed's summaries are kept in experiments/demo_seeds/results and not run again)
exp-demo-seeds: setup
	.venv/bin/python experiments/demo_seeds/run.py --out experiments/demo_seeds/results
