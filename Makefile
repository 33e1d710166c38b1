.PHONY: setup setup-vllm test test-quick demo demo-agent demo-testsuite demo-distill lint bench bench-vllm

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

demo: setup
	bash scripts/demo.sh

# Multi-turn GRPO on agent episodes (ToolEnv in a local sandbox), 3 steps (~10 min on 2 cores) -> runs/agent/
demo-agent: setup
	WANDB_MODE=offline .venv/bin/propel fit -c configs/agent/grpo.yaml --trainer.max_steps=3

# Job 2: GRPO on HumanEval with the test-suite reward and its hack detectors, 3 steps -> runs/code/
demo-testsuite: setup
	WANDB_MODE=offline .venv/bin/propel fit -c configs/code/testsuite.yaml --trainer.max_steps=3

# Job 3: turn-targeted KL distillation on the bundled model's agent episodes, 3 steps -> runs/distill/
demo-distill: setup
	WANDB_MODE=offline .venv/bin/propel fit -c configs/agent/distill.yaml --trainer.max_steps=3

# Each benchmark prints one table; run them on an idle machine (they compare against a reference in the same run).
bench: setup
	.venv/bin/python benchmarks/sandbox.py --jobs 200 --workers 2
	.venv/bin/python benchmarks/self_bleu.py --sizes 1000 10000 --nltk-sample 20
	.venv/bin/python benchmarks/extraction.py
	.venv/bin/python benchmarks/grpo_step.py --steps 3
	.venv/bin/python benchmarks/episodes.py
	.venv/bin/python benchmarks/distill_step.py
	.venv/bin/python benchmarks/testsuite.py --solutions 48 --backends local docker

bench-vllm: setup-vllm
	.venv-vllm/bin/python benchmarks/rollout.py
	.venv-vllm/bin/python benchmarks/grpo_step.py --propel-engines hf vllm vllm-merged --steps 10
