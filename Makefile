# The two quick-start commands: `make dev` (local stack) and `make test` (whole suite).
# Both create or refresh .venv by themselves.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PORT ?= 8080
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20

.PHONY: dev test venv system-deps lint synth layer bench clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

system-deps:
	@bash scripts/ensure_system_deps.sh

dev: venv
	$(PY) -m interlude.cli dev --port $(PORT)

# The lint contracts run first: a layer importing upward fails the build before any test runs.
test: lint system-deps
	$(PY) -m pytest -n 2 --dist loadfile -q

# ruff, then the import contracts of pyproject.toml's [tool.importlinter] over this checkout's package.
lint: venv
	$(VENV)/bin/ruff check .
	PYTHONPATH=layers/core/python$${PYTHONPATH:+:$$PYTHONPATH} $(VENV)/bin/lint-imports

synth: venv
	$(PY) app.py

layer: venv
	bash scripts/build_layer.sh

bench: venv
	@for script in bench/[!_]*.py; do echo "== $$script"; $(PY) $$script || exit 1; done

clean:
	rm -rf $(VENV) cdk.out .interlude .pytest_cache
