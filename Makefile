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
FLOOR_VENV := .venv-botocore-floor
LOCK_VENV := .venv-lock
PY := $(VENV)/bin/python
# `make test` runs the suite in this many processes (pytest-xdist), each with its own Docker host and stacks:
# most of the suite waits on Docker, DynamoDB and the local stack, so two processes halve it on two cores.
TEST_WORKERS ?= 2
SAM := $(SAM_VENV)/bin/sam
export SAM_CLI_TELEMETRY := 0
export PYTHONPATH := $(CURDIR)/layers/scheduler:$(CURDIR)

.PHONY: help run test deps lint typecheck unit unit-botocore-floor integration validate build security clean sam-local sam-test bench lock contract

help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-19s %s\n", $$1, $$2}'

# Every venv installs its lock (all packages pinned, with hashes; `make lock` writes them) and nothing
# else: --require-hashes refuses any file whose hash the lock does not list. A venv is made anew when
# its lock changes, so that nothing the lock dropped stays behind.
PIP_LOCKED := -m pip install --quiet --progress-bar off --require-hashes

$(VENV)/.installed: requirements.lock
	@echo "==> creating $(VENV) with $(PYTHON) ($$($(PYTHON) --version)) from requirements.lock"
	@rm -rf $(VENV) && $(PYTHON) -m venv $(VENV)
	@$(PY) $(PIP_LOCKED) -r requirements.lock 2>&1 | { grep -v '^WARNING: Location' || true; }
	@$(PY) -m pip check >/dev/null
	@touch $@

# dynalite (npm, Apache-2.0 since 4.0): the second, independent DynamoDB the store tests run on (tests/dynalite).
DYNALITE := tests/dynalite/node_modules/.installed
$(DYNALITE): tests/dynalite/package.json tests/dynalite/package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "npm not found: the tests run the store on dynalite too; install Debian's nodejs and npm (apt-get install nodejs npm)" >&2; exit 1; }
	@echo "==> npm ci in tests/dynalite (dynalite $$(sed -n 's/.*"dynalite": "\(.*\)".*/\1/p' tests/dynalite/package.json))"
	@cd tests/dynalite && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

$(SAM_VENV)/.installed: requirements-sam.lock
	@echo "==> installing SAM CLI into $(SAM_VENV) from requirements-sam.lock"
	@rm -rf $(SAM_VENV) && $(PYTHON) -m venv $(SAM_VENV)
	@$(SAM_VENV)/bin/python $(PIP_LOCKED) -r requirements-sam.lock 2>&1 | { grep -v '^WARNING: Location' || true; }
	@$(SAM_VENV)/bin/sam --version
	@touch $@

# The layer's packages with the oldest boto3/botocore the functions support (requirements-botocore-floor.txt).
# One conflict is deliberate, the one Lambda has too: the SDK's declared urllib3 range against the
# layer's urllib3, which comes first on sys.path there. So pip installs the (complete) lock without
# resolving it again, and `pip check` may name that conflict and no other.
$(FLOOR_VENV)/.installed: requirements-botocore-floor.lock
	@echo "==> creating $(FLOOR_VENV) from requirements-botocore-floor.lock"
	@rm -rf $(FLOOR_VENV) && $(PYTHON) -m venv $(FLOOR_VENV)
	@$(FLOOR_VENV)/bin/python $(PIP_LOCKED) --no-deps -r requirements-botocore-floor.lock 2>&1 | { grep -v '^WARNING: Location' || true; }
	@problems="$$($(FLOOR_VENV)/bin/python -m pip check | grep -v '^botocore [0-9.]* has requirement urllib3' || true)"; \
	 if [ -n "$$problems" ]; then echo "$$problems" >&2; exit 1; fi
	@touch $@

$(LOCK_VENV)/.installed: requirements-lock-tool.txt
	@rm -rf $(LOCK_VENV) && $(PYTHON) -m venv $(LOCK_VENV)
	@$(LOCK_VENV)/bin/python $(PIP_LOCKED) -r requirements-lock-tool.txt 2>&1 | { grep -v '^WARNING: Location' || true; }
	@touch $@

run: $(VENV)/.installed ## Serve the lease API locally (tables kept in .local/dynamodb; FRESH=1 starts empty)
	@exec $(PY) -m devstack $(if $(FRESH),--fresh)

deps: $(VENV)/.installed $(SAM_VENV)/.installed $(FLOOR_VENV)/.installed $(DYNALITE) ## Install what `make test` needs (`make -j4 deps` installs them side by side)

test: lint typecheck validate $(DYNALITE) ## The whole suite: lint, types, template, unit and integration tests, the SDK floor
	@echo "==> pytest in $(TEST_WORKERS) processes"
	@$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile
	@$(MAKE) --no-print-directory unit-botocore-floor

lint: $(VENV)/.installed ## ruff, bandit
	@echo "==> ruff"
	@$(VENV)/bin/ruff check .
	@$(VENV)/bin/ruff format --check .
	@echo "==> bandit"
	@$(VENV)/bin/bandit -q -c bandit.yaml -r layers functions devstack 2>/dev/null

typecheck: $(VENV)/.installed ## mypy
	@echo "==> mypy"
	@$(VENV)/bin/mypy layers/scheduler/scheduler functions devstack client/src scripts/wire_contract.py

validate: $(SAM_VENV)/.installed ## sam validate --lint
	@echo "==> sam validate --lint"
	@$(SAM) validate --lint

build: $(SAM_VENV)/.installed ## sam build (no container; needs python3.13 on PATH)
	@PATH="$(dir $(PYTHON)):$$PATH" $(SAM) build

contract: $(VENV)/.installed ## Write scheduler/wire.py from openapi.yaml and docs/events/*.schema.json (`make unit` checks both)
	@$(PY) scripts/wire_contract.py
	@$(PY) scripts/event_schemas.py

unit: $(VENV)/.installed $(DYNALITE) ## Only the fast tests (no Docker; the `slow` load and fuzz tests are left to `make test`)
	@$(PY) -m pytest tests/unit -m "not slow" -n $(TEST_WORKERS) --dist loadfile

unit-botocore-floor: $(FLOOR_VENV)/.installed $(DYNALITE) ## The unit tests on the oldest boto3/botocore the functions support
	@echo "==> pytest tests/unit with $$($(FLOOR_VENV)/bin/python -c 'import boto3, botocore; print(f"boto3 {boto3.__version__}, botocore {botocore.__version__}")')"
	@$(FLOOR_VENV)/bin/python -m pytest tests/unit -m "not slow" -p no:cacheprovider -q -n $(TEST_WORKERS) --dist loadfile

integration: $(VENV)/.installed ## Only the tests through the local stack and the Docker host
	@$(PY) -m pytest tests/integration tests/providers

bench: $(VENV)/.installed ## Benchmarks (cold start, round trips, overhead, provisioning, sweep cost, expiry lag, fairness) → bench/results
	@$(PY) bench/run_all.py

sam-local: $(VENV)/.installed $(SAM_VENV)/.installed ## What `sam local` needs, on loopback (writes .local/sam/env.json); Ctrl-C stops
	@exec $(PY) -m devstack.sam_local

sam-test: $(VENV)/.installed $(SAM_VENV)/.installed ## Only the SAM tests: sam local through SAM's emulator, deploy readiness
	@$(PY) -m pytest tests/sam

CHECKOV_VENV := .venv-checkov
$(CHECKOV_VENV)/.installed: requirements-checkov.lock
	@rm -rf $(CHECKOV_VENV) && $(PYTHON) -m venv $(CHECKOV_VENV)
	@$(CHECKOV_VENV)/bin/python $(PIP_LOCKED) -r requirements-checkov.lock 2>&1 | { grep -v '^WARNING: Location' || true; }
	@touch $@

security: $(VENV)/.installed $(SAM_VENV)/.installed $(CHECKOV_VENV)/.installed ## bandit, cfn-lint, checkov, pip-audit (see docs/security.md)
	@echo "==> bandit"; $(VENV)/bin/bandit -c bandit.yaml -r layers functions devstack
	@echo "==> cfn-lint"; $(SAM_VENV)/bin/cfn-lint template.yaml
	@echo "==> checkov"; $(CHECKOV_VENV)/bin/checkov --quiet --config-file .checkov.yaml -f template.yaml --framework cloudformation
	@echo "==> pip-audit"; $(VENV)/bin/pip-audit --strict --disable-pip -r requirements.lock

lock: $(LOCK_VENV)/.installed ## Resolve every requirements*.txt into its hashed lock (uv; scripts/lock)
	@UV=$(LOCK_VENV)/bin/uv scripts/lock

clean: ## Remove build output and local state (stops nothing)
	rm -rf .aws-sam .pytest_cache .mypy_cache .ruff_cache
