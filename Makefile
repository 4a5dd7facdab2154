# dpcurator: `make demo` runs the main job, `make test` runs every check. Both bootstrap .venv
# with the standard library's venv on a fresh machine; nothing else is needed before them.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
BENCH_VENV := .venv-bench
PYTEST_WORKERS ?= 2

.PHONY: demo test lint typecheck unit docs bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.stamp-run: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[plot]'
	touch $@

$(VENV)/.stamp-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@ $(VENV)/.stamp-run

demo: $(VENV)/.stamp-run
	$(BIN)/dpcurator demo

lint: $(VENV)/.stamp-test
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/ruff format --check src tests benchmarks scripts

typecheck: $(VENV)/.stamp-test
	$(BIN)/mypy

unit: $(VENV)/.stamp-test
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) -p no:cacheprovider

# The documentation site (mkdocs.yml) into build/site: warnings are errors, the API reference
# is generated from every package's __all__, and the tutorials (docs/tutorials/*.py) execute.
docs: $(VENV)/.stamp-test
	DISABLE_MKDOCS_2_WARNING=true NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

test: lint typecheck unit docs

# Benchmarks run against the peer libraries, installed in their own environment.
$(BENCH_VENV)/.stamp: benchmarks/requirements.txt pyproject.toml
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet -r benchmarks/requirements.txt
	$(BENCH_VENV)/bin/python -m pip install --quiet -e '.[service]'
	touch $@

bench: $(BENCH_VENV)/.stamp
	bash benchmarks/peers/setup_peers.sh
	$(BENCH_VENV)/bin/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) $(BENCH_VENV) .venv-peers build dist src/*.egg-info .mypy_cache .ruff_cache .pytest_cache
