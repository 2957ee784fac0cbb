# The two quick-start commands: `make dev` (local stack) and `make test` (whole suite).
# Both create or refresh .venv by themselves.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# The functions' runtime Python (interlude_cdk.layer.PYTHON_VERSION) with the development dependencies: `make test`
# runs the unit and integration suites on it too (scripts/runtime_python.py; the system is left unchanged).
RUNTIME_VENV := .venv-runtime
PORT ?= 8080
# Node.js 22 and the CDK CLI come from package-lock.json (`make node-deps`), first on PATH for every recipe: the CDK
# CLI, jsii (synthesis) and pyodide run on a supported Node.js whatever the machine's own is (Debian's is 20).
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)
CDK := $(CURDIR)/node_modules/.bin/cdk
STACK ?= Interlude
# Layer's lock file: resolved for the functions' platform (infra/interlude_cdk/layer.py), every wheel hashed.
LOCK := infra/interlude_cdk/layer-requirements.lock
# Build-time Node packages (package-lock.json: pyodide, which compiles the layers' bytecode with Python 3.14).
NODE_STAMP := node_modules/.installed-stamp
# Each module compiled once, its bytecode (__pycache__, ignored by git and by every package build) read by every later
# process: where the environment sets PYTHONDONTWRITEBYTECODE (some CI images, this machine), each process the suite
# starts (a local stack, each of its api instances, a CLI command) compiled the package again (ADR 0117).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: dev test venv runtime-python system-deps node-deps lint synth layer lock deploy cdk preflight bench bench-all clean

# pip installs uv, and uv the rest: it fetches side by side and compiles a module when it is first imported, where pip
# fetched one package at a time and compiled every module (on a fresh machine, 188 s against 1,148 s at load 20–29).
# uv says what it does as it goes (resolved, each large download, prepared) and names each package it installed.
$(STAMP): pyproject.toml
	@test -x $(PY) || { echo "Creating $(VENV) with $(PYTHON)"; $(PYTHON) -m venv $(VENV); }
	@echo "Installing Interlude and its development tools into $(VENV) (the first time takes a few minutes):"
	@$(PY) -m pip install --quiet 'uv>=0.5'
	@$(VENV)/bin/uv pip install --python $(PY) -e '.[dev]'
	@echo "Installed: $(VENV) is ready."
	@touch $(STAMP)

venv: $(STAMP)

# CPython from Debian's archive into .cache/runtime-python, and $(RUNTIME_VENV) on it (cached: quick when current).
runtime-python: venv
	@$(PY) scripts/runtime_python.py $(RUNTIME_VENV)

system-deps:
	@bash scripts/ensure_system_deps.sh

# Exactly the locked versions and integrity hashes, again whenever package-lock.json changes.
$(NODE_STAMP): package-lock.json
	@command -v npm >/dev/null || bash scripts/ensure_system_deps.sh
	npm ci --no-audit --no-fund --loglevel=error
	@touch $(NODE_STAMP)

node-deps: $(NODE_STAMP)

dev: venv
	$(PY) -m interlude.cli dev --port $(PORT)

# The lint contracts run first: a layer importing upward fails the build before any test runs. Lint, the system's
# packages, Node's and the runtime Python need nothing of one another (only .venv): they run side by side, mostly
# waiting on downloads, each one's output printed whole when it ends; each handler's import from its layers alone
# (layer-imports) as soon as the runtime Python and Node.js are there.
# Whole files per worker, in the order tests/conftest.py puts them (the longest first), so both finish together.
# Then the unit and integration suites on the runtime's Python.
# The integration suite runs the functions' own code in-process, as Lambda runs it (its handlers on moto): on the
# runtime's Python alone, in the second pass, as the cold-import checks (RUNTIME_ONLY) do. The first pass runs every
# other file: the unit suite (both Pythons), the e2e suite (the same functions behind the local stack, on the
# development Python) and tests/infra, and the integration files whose subject runs on the development machine
# (DEVELOPMENT_SIDE: the CLI against a deployment, the local stack's instance pool and moto, the IAM check's tools).
# `make test-integration` still runs the whole integration suite on the development Python (ADR 0149).
RUNTIME_ONLY := tests/unit/test_cold_imports.py
DEVELOPMENT_SIDE := tests/integration/test_cli_deployment.py tests/integration/test_instance_pool.py \
  tests/integration/test_moto_patches.py tests/integration/test_moto_world.py tests/integration/test_iam_check.py
test: venv
	@$(MAKE) --no-print-directory --jobs=4 --output-sync=target lint system-deps node-deps layer-imports
	@echo "== The unit, e2e and infra suites on the development Python ($$($(PY) -V)), but RUNTIME_ONLY"
	$(PY) -m pytest -n 2 --dist loadfile --no-loadscope-reorder -q $(addprefix --ignore=,$(RUNTIME_ONLY)) \
	  tests/unit tests/e2e tests/infra $(DEVELOPMENT_SIDE)
	@echo "== The unit and integration suites on the functions' runtime Python ($$($(RUNTIME_VENV)/bin/python -V))"
	$(RUNTIME_VENV)/bin/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder -q tests/unit tests/integration

.PHONY: layer-imports
layer-imports: runtime-python node-deps
	$(PY) scripts/check_layer_imports.py

# ruff, then the import contracts of pyproject.toml's [tool.importlinter] over this checkout's package.
lint: venv
	$(VENV)/bin/ruff check .
	PYTHONPATH=layers/core/python$${PYTHONPATH:+:$$PYTHONPATH} $(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

# One directory of the suite as `make test` runs it, without lint: test-unit, test-integration, test-e2e, test-infra.
.PHONY: test-unit test-integration test-e2e test-infra
SUITE := $(PY) -m pytest -n 2 --dist loadfile --no-loadscope-reorder -q
test-unit: venv
	$(SUITE) tests/unit
test-integration: venv node-deps
	$(SUITE) tests/integration
test-e2e: venv system-deps node-deps
	$(SUITE) tests/e2e
test-infra: venv node-deps
	$(SUITE) tests/infra

synth: venv node-deps
	$(PY) app.py

# The locked dependencies into layers/core/build (prints the layer's size and the lock's sha256).
layer: venv node-deps
	$(PY) -m interlude_cdk.make_layer

# Re-resolve the lock after a change to pyproject's dependencies (UPGRADE=1: newest allowed versions).
lock: venv
	$(VENV)/bin/uv pip compile pyproject.toml --quiet --generate-hashes --only-binary :all: \
	  --python-platform aarch64-manylinux2014 --python-version 3.14 --custom-compile-command "make lock" \
	  $(if $(UPGRADE),--upgrade,) -o $(LOCK)

# The one deploy command (docs/operations.md, "Deploy"): builds the layer while synthesizing, then deploys.
deploy: venv node-deps
	$(CDK) deploy $(STACK) -c stackName=$(STACK) --require-approval broadening $(CDK_ARGS)

# Any other CDK CLI command on the pinned CLI and Node.js: make cdk ARGS="bootstrap aws://ACCOUNT/REGION ...".
cdk: venv node-deps
	$(CDK) $(ARGS)

# What would stop a deploy into the account of your credentials (docs/operations.md, "First deploy").
preflight: venv node-deps
	$(CDK) synth $(STACK) -c stackName=$(STACK) $(CDK_ARGS) --quiet
	$(PY) -m interlude.cli preflight --stack $(STACK)

# Issue 31's goals table, each figure beside its goal with a verdict, then issue 13's other figures (bench/summary.py;
# several minutes). It rewrites the figures docs/scale.md prints (between its `bench:` markers).
bench: venv runtime-python
	$(PY) bench/summary.py --write-docs

# Every bench script in full, one after another.
bench-all: venv
	@for script in bench/[!_]*.py; do [ "$$script" = bench/summary.py ] && continue; echo "== $$script"; $(PY) $$script || exit 1; done

clean:
	rm -rf $(VENV) $(RUNTIME_VENV) .cache cdk.out .interlude .pytest_cache node_modules
