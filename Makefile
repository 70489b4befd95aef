PYTHON ?= python3

.PHONY: setup quickstart test test-gpu bench gowalla

setup:
	$(PYTHON) -m pip install torch==2.13.0
	$(PYTHON) -m pip install -e ".[test]"

quickstart: setup
	recx sweep experiments.yaml --experiment quickstart

test:
	$(PYTHON) -m pytest -q -m "not gpu"

test-gpu:
	$(PYTHON) -m pytest -q -m gpu

bench:
	$(PYTHON) bench/eval_speed.py

gowalla:
	recx sweep experiments.yaml --experiment gowalla-basics
