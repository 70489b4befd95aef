PYTHON ?= python3
RECX ?= $(PYTHON) -m recx
# the papers' sweeps: BACKEND local|ray, JOBS runs at once, ADDRESS of a Ray cluster, DEVICE cpu|cuda (empty: the
# experiments' own device, auto), OUT the results folder (empty: results/<experiment>)
BACKEND ?= local
JOBS ?= 1
ADDRESS ?=
DEVICE ?=
OUT ?=
SWEEP = $(RECX) sweep experiments.yaml --backend $(BACKEND) --jobs $(JOBS) $(if $(ADDRESS),--address $(ADDRESS)) \
	$(if $(DEVICE),--set device=$(DEVICE))
sweep_out = $(if $(OUT),--out $(OUT)/$(1))
CI_OUT ?= build/ci-reproduce

.PHONY: setup quickstart test lint test-gpu bench catalog gowalla reproduce-prism reproduce-hns reproduce-bir reproduce-fastvae \
	reproduce-rg reproduce-headlines ci-reproduce ci-bench-quick gpu-pack gpu-check gpu-check-cpu \
	headlines-pack reproduce-headlines-gpu reproduce-headlines-gpu-cpu

setup:
	$(PYTHON) -m pip install torch==2.13.0
	$(PYTHON) -m pip install -e ".[test]"

quickstart: setup
	recx sweep experiments.yaml --experiment quickstart

test:
	$(PYTHON) -m pytest -q -m "not gpu"

# style (ruff: pycodestyle, pyflakes, import order, bugbear; the formatter's check), the layers contract
# (pyproject.toml [tool.importlinter]) and the types of recx/ (mypy, zero errors); run by .ci/run
lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	lint-imports
	$(PYTHON) -m mypy

test-gpu:
	$(PYTHON) -m pytest -q -m gpu

# On a lent GPU machine, with nothing installed (README "GPU"): `make gpu-pack` here first (the Gowalla files and the
# CPU side of the real runs into .gpu-pack/, which travels with the checkout), then there the GPU_CHECK line as is:
# `pytest -m gpu`, each CuPy kernel against its torch reference, host syncs per training kind, the GPU benches against
# their floors with peak memory, a 10-epoch Gowalla run against the CPU's and the PRISM MAWU headline row, within
# GPU_BUDGET seconds; writes gpu-check.md, .json and .log into GPU_OUT and exits non-zero on any failure.
# gpu-check-cpu runs that same command line on a synthetic pack with the CPU forced (CI's dry run).
GPU_PACK ?= .gpu-pack
GPU_OUT ?= build/gpu-check
GPU_BUDGET ?= 420
GPU_CHECK = PYTHONPATH=. $(PYTHON) bench/gpu_check.py --device cuda --data $(GPU_PACK) --out $(GPU_OUT) --budget-s $(GPU_BUDGET)

gpu-pack:
	$(PYTHON) bench/gpu_pack.py --out $(GPU_PACK)

gpu-check:
	$(GPU_CHECK)

gpu-check-cpu:
	$(PYTHON) bench/gpu_pack.py --synthetic --out $(CI_OUT)/gpu-pack
	RECX_GPU_CHECK_FORCE_CPU=1 $(MAKE) gpu-check GPU_PACK=$(CI_OUT)/gpu-pack GPU_OUT=$(CI_OUT)/gpu-check

# The five headline experiments from scratch on one lent GPU machine (README "GPU", docs/reproductions/README.md):
# `make headlines-pack` here first (the datasets' source files, 6 MiB, into .headlines-pack/, which travels with the
# checkout), then there the HEADLINES_GPU line as is: the datasets prepared, the five sweeps at once with HEADLINES_JOBS
# workers shared among them on the one GPU, the sweeps still running stopped HEADLINES_RESERVE seconds before the
# HEADLINES_BUDGET ends (their runs keep their checkpoints in HEADLINES_WORK: the same command goes on from them), each
# experiment's report; writes headlines.md, .json, .log and .tar.gz into HEADLINES_OUT and exits non-zero on a failure.
# reproduce-headlines-gpu-cpu runs that same command line on a synthetic pack with the CPU forced, every run capped at
# 2 epochs (CI's dry run).
HEADLINES_PACK ?= .headlines-pack
HEADLINES_OUT ?= build/headlines-out
HEADLINES_WORK ?= build/headlines
HEADLINES_BUDGET ?= 560
HEADLINES_RESERVE ?= 60
HEADLINES_JOBS ?= 16
HEADLINES_FLAGS ?=
HEADLINES_GPU = PYTHONPATH=. $(PYTHON) bench/gpu_headlines.py --device cuda --data $(HEADLINES_PACK) \
	--out $(HEADLINES_OUT) --work $(HEADLINES_WORK) --budget-s $(HEADLINES_BUDGET) --reserve-s $(HEADLINES_RESERVE) \
	--jobs $(HEADLINES_JOBS) $(HEADLINES_FLAGS)

headlines-pack:
	PYTHONPATH=. $(PYTHON) bench/headlines_pack.py --out $(HEADLINES_PACK)

reproduce-headlines-gpu:
	$(HEADLINES_GPU)

reproduce-headlines-gpu-cpu:
	rm -rf $(CI_OUT)/headlines $(CI_OUT)/headlines-out
	PYTHONPATH=. $(PYTHON) bench/headlines_pack.py --synthetic --out $(CI_OUT)/headlines-pack
	RECX_GPU_CHECK_FORCE_CPU=1 $(MAKE) reproduce-headlines-gpu HEADLINES_PACK=$(CI_OUT)/headlines-pack \
		HEADLINES_OUT=$(CI_OUT)/headlines-out HEADLINES_WORK=$(CI_OUT)/headlines HEADLINES_BUDGET=400 HEADLINES_JOBS=5 \
		HEADLINES_FLAGS=--require-complete

bench:
	$(PYTHON) bench/eval_speed.py

# recx/shell/catalog.json: the registered names, arguments and defaults that --help and shell completion show
catalog:
	$(PYTHON) -m recx.shell.catalog --write

gowalla:
	recx sweep experiments.yaml --experiment gowalla-basics

reproduce-prism:
	$(SWEEP) -e prism-gowalla $(call sweep_out,prism-gowalla)

reproduce-hns:
	$(SWEEP) -e hns-dns $(call sweep_out,hns-dns)
	$(SWEEP) -e hns-softmax-v $(call sweep_out,hns-softmax-v)

reproduce-bir:
	$(SWEEP) -e bir-batch-size $(call sweep_out,bir-batch-size)

reproduce-fastvae:
	$(SWEEP) -e fastvae-table3 $(call sweep_out,fastvae-table3)
	$(SWEEP) -e fastvae-samplers $(call sweep_out,fastvae-samplers)
	$(SWEEP) -e fastvae-scaling $(call sweep_out,fastvae-scaling)

reproduce-rg:
	$(SWEEP) -e rg-table3 $(call sweep_out,rg-table3)

# each paper's headline comparison at its selected point, one seed, to early stopping (or the paper's fixed budget):
# the experiments *-headline of experiments.yaml (their CPU estimates are there); reports in docs/reproductions/
reproduce-headlines:
	$(SWEEP) -e prism-headline $(call sweep_out,prism-headline)
	$(SWEEP) -e hns-headline $(call sweep_out,hns-headline)
	$(SWEEP) -e bir-headline $(call sweep_out,bir-headline)
	$(SWEEP) -e fastvae-headline $(call sweep_out,fastvae-headline)
	$(SWEEP) -e rg-headline $(call sweep_out,rg-headline)

# CI: a tiny end-to-end reproduction on synthetic data (prepare -> sweep with 2 jobs -> report with plots)
ci-reproduce:
	rm -rf $(CI_OUT)
	$(RECX) prepare ci-synthetic --format synthetic --ratios 80/10/10 --data-root $(CI_OUT)/data
	$(RECX) sweep .ci/experiments.yaml -e ci-reproduce --jobs 2 --out $(CI_OUT)/sweep --data-root $(CI_OUT)/data
	$(RECX) report $(CI_OUT)/sweep/results.parquet --out $(CI_OUT)/report --baseline bpr
	test -s $(CI_OUT)/report/plots/swept_n_negatives_ci-synthetic.png
	test -s $(CI_OUT)/report/plots/strata_ci-synthetic.png
	test -s $(CI_OUT)/report/plots/convergence_time_ci-synthetic.png

# CI: every bench of bench/ on tiny synthetic data (`--quick`, bench/quick.py), so that a bench nothing runs cannot rot
# unseen: each runs through its own code and prints its figures and ratios, which at that size mean nothing (none is
# checked). Prints each one's seconds, then fails naming the benches that failed. gpu_check, gpu_pack and gpu_runs have
# their own dry run (gpu-check-cpu), gpu_headlines and its helpers theirs (reproduce-headlines-gpu-cpu), through_cli is run by train_speed's and als_speed's quick runs, bench/official/
# writes the goldens; tests/test_bench_quick.py fails on a bench left out of this list.
BENCH_QUICK = als_speed bir_speed cli_latency dispatch_count eval_speed fastvae_speed gpu_determinism graph_capture graph_safety loop_mistakes \
	netflix_scale paper_paths prepare_speed same_results sampler_speed shared_cores significance_speed silent_stretch train_speed

ci-bench-quick:
	@failed=""; for bench in $(BENCH_QUICK); do \
		echo "== bench/$$bench.py --quick"; started=$$(date +%s); \
		PYTHONPATH=. $(PYTHON) bench/$$bench.py --quick || failed="$$failed $$bench"; \
		echo "== bench/$$bench.py --quick: $$(( $$(date +%s) - started )) s"; \
	done; \
	if [ -n "$$failed" ]; then echo "ci-bench-quick: failed:$$failed"; exit 1; fi
