# openalice-scheduler — the two commands that matter are `make run` and `make test`.
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
.DEFAULT_GOAL := help

# The Lambda runtime's Python (python3.13, see template.yaml) where installed; else any python3 ≥ 3.11.
# (pyenv shims are skipped unless they run: a shim for an inactive version only prints an error.)
PYTHON ?= $(shell for p in $$(command -v python3.13) $(wildcard $(HOME)/.pyenv/versions/3.13*/bin/python3.13 /root/.pyenv/versions/3.13*/bin/python3.13) python3; do \
	$$p -c 'import sys; assert sys.version_info >= (3, 11)' 2>/dev/null && { echo $$p; break; }; done)
VENV := .venv
SAM_VENV := .venv-sam
PY := $(VENV)/bin/python
SAM := $(SAM_VENV)/bin/sam
export SAM_CLI_TELEMETRY := 0
export PYTHONPATH := $(CURDIR)/layers/scheduler:$(CURDIR)

.PHONY: help run test lint typecheck unit integration validate build security clean sam-local sam-test bench

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-11s %s\n", $$1, $$2}'

$(VENV)/.installed: requirements-dev.txt layers/scheduler/requirements.txt
	@echo "==> creating $(VENV) with $(PYTHON) ($$($(PYTHON) --version))"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install --quiet --upgrade pip
	@$(PY) -m pip install --quiet --progress-bar off -r requirements-dev.txt 2>&1 | { grep -v '^WARNING: Location' || true; }
	@$(PY) -m pip check >/dev/null
	@touch $@

# dynalite (npm, Apache-2.0 since 4.0): the second, independent DynamoDB the store tests run on (tests/dynalite).
DYNALITE := tests/dynalite/node_modules/.installed
$(DYNALITE): tests/dynalite/package.json tests/dynalite/package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "npm not found: the tests run the store on dynalite too; install Debian's nodejs and npm (apt-get install nodejs npm)" >&2; exit 1; }
	@echo "==> npm ci in tests/dynalite (dynalite $$(sed -n 's/.*"dynalite": "\(.*\)".*/\1/p' tests/dynalite/package.json))"
	@cd tests/dynalite && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

$(SAM_VENV)/.installed: requirements-sam.txt
	@echo "==> installing SAM CLI into $(SAM_VENV)"
	@test -x $(SAM_VENV)/bin/python || $(PYTHON) -m venv $(SAM_VENV)
	@$(SAM_VENV)/bin/python -m pip install --quiet --progress-bar off -r requirements-sam.txt 2>&1 | { grep -v '^WARNING: Location' || true; }
	@$(SAM_VENV)/bin/sam --version
	@touch $@

run: $(VENV)/.installed ## Serve the lease API locally (tables kept in .local/dynamodb; FRESH=1 starts empty)
	@exec $(PY) -m devstack $(if $(FRESH),--fresh)

test: lint typecheck validate $(DYNALITE) ## The whole suite: lint, types, template, unit and integration tests
	@echo "==> pytest"
	@$(PY) -m pytest

lint: $(VENV)/.installed ## ruff, bandit
	@echo "==> ruff"
	@$(VENV)/bin/ruff check .
	@$(VENV)/bin/ruff format --check .
	@echo "==> bandit"
	@$(VENV)/bin/bandit -q -c bandit.yaml -r layers functions devstack 2>/dev/null

typecheck: $(VENV)/.installed ## mypy
	@echo "==> mypy"
	@$(VENV)/bin/mypy layers/scheduler/scheduler functions devstack client/src

validate: $(SAM_VENV)/.installed ## sam validate --lint
	@echo "==> sam validate --lint"
	@$(SAM) validate --lint

build: $(SAM_VENV)/.installed ## sam build (no container; needs python3.13 on PATH)
	@PATH="$(dir $(PYTHON)):$$PATH" $(SAM) build

unit: $(VENV)/.installed $(DYNALITE) ## Only the fast tests (no Docker)
	@$(PY) -m pytest tests/unit

integration: $(VENV)/.installed ## Only the tests through the local stack and the Docker host
	@$(PY) -m pytest tests/integration tests/providers

bench: $(VENV)/.installed ## Benchmarks (cold start, round trips, overhead, provisioning, sweep cost, expiry lag) → bench/results
	@$(PY) bench/run_all.py

sam-local: $(VENV)/.installed $(SAM_VENV)/.installed ## What `sam local` needs, on loopback (writes .local/sam/env.json); Ctrl-C stops
	@exec $(PY) -m devstack.sam_local

sam-test: $(VENV)/.installed $(SAM_VENV)/.installed ## Only the SAM tests: sam local through SAM's emulator, deploy readiness
	@$(PY) -m pytest tests/sam

CHECKOV_VENV := .venv-checkov
$(CHECKOV_VENV)/.installed:
	@test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	@$(CHECKOV_VENV)/bin/python -m pip install --quiet --progress-bar off checkov==3.3.30 2>&1 | { grep -v '^WARNING: Location' || true; }
	@touch $@

security: $(VENV)/.installed $(SAM_VENV)/.installed $(CHECKOV_VENV)/.installed ## bandit, cfn-lint, checkov, pip-audit (see docs/security.md)
	@echo "==> bandit"; $(VENV)/bin/bandit -c bandit.yaml -r layers functions devstack
	@echo "==> cfn-lint"; $(SAM_VENV)/bin/cfn-lint template.yaml
	@echo "==> checkov"; $(CHECKOV_VENV)/bin/checkov --quiet --config-file .checkov.yaml -f template.yaml --framework cloudformation
	@echo "==> pip-audit"; $(VENV)/bin/pip-audit --strict --disable-pip -r requirements.lock

clean: ## Remove build output and local state (stops nothing)
	rm -rf .aws-sam .pytest_cache .mypy_cache .ruff_cache
