# One virtual environment at .venv/ serves the demo, the tests and the CLI.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test fuzz lint format protos bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[all,dev]'
	# pycanon (an independent k/l/t referee for the tests) pins exact numpy/scipy/pandas
	# versions; its checks need only numpy and pandas (a dependency), so it goes in without pins.
	$(BIN)/python -m pip install --quiet --no-deps 'pycanon==1.3.6'
	# the plugin tutorial's example package (docs/plugins.md), installed as a site would
	$(BIN)/python -m pip install --quiet --no-deps -e examples/plugin-skewness
	touch $(STAMP)

setup: $(STAMP)

## demo: set up and run the federated PCA demo (CSP, aggregator, 3 owners as local processes)
demo: $(STAMP)
	$(BIN)/leteo-fed demo pca --out out/demo-pca

## test: set up and run the whole test suite (lint, layer contracts and types included)
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/python -m pytest -q

## fuzz: the property-based fuzzing of every RPC (tests/fuzz/) with many more examples than `make test`
FUZZ_EXAMPLES ?= 2000
fuzz: $(STAMP)
	LETEO_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest -q tests/fuzz

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .

## protos: regenerate the committed gRPC stubs from protos/
protos: $(STAMP)
	$(BIN)/python scripts/gen_protos.py

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_pca_share.py

clean:
	rm -rf $(VENV) out build *.egg-info
