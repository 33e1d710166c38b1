.PHONY: setup test demo lint bench

setup:
	bash scripts/setup.sh

test:
	bash scripts/test.sh

lint:
	.venv/bin/ruff check . && .venv/bin/ruff format --check .

demo: setup
	bash scripts/demo.sh

bench: setup
	.venv/bin/python benchmarks/run_all.py
