.PHONY: setup setup-vllm test test-quick demo lint bench bench-vllm

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

# Each benchmark prints one table; run them on an idle machine (they compare against a reference in the same run).
bench: setup
	.venv/bin/python benchmarks/sandbox.py --jobs 200 --workers 2
	.venv/bin/python benchmarks/self_bleu.py --sizes 1000 10000 --nltk-sample 20
	.venv/bin/python benchmarks/extraction.py
	.venv/bin/python benchmarks/grpo_step.py --steps 3

bench-vllm: setup-vllm
	.venv-vllm/bin/python benchmarks/rollout.py
	.venv-vllm/bin/python benchmarks/grpo_step.py --propel-engines hf vllm vllm-merged --steps 10
