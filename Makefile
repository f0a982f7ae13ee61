# Two commands do all the set-up on a fresh machine: `make run` starts the bot, `make test` runs the tests.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# `make run` installs the bot alone, from requirements.lock; `make test` adds the dev extra (test
# tools, the browser driver, reference MCP servers): a production environment carries no test
# package. `make lock` regenerates both lock files after pyproject.toml's dependencies change.
RUNTIME := $(VENV)/.installed-runtime
STAMP := $(VENV)/.installed
# pytest-xdist workers for `make test`: the suite mostly waits, so more workers than cores pay;
# worksteal: a worker that runs dry takes tests queued on a busy one (a few tests take 10-30 s)
TEST_WORKERS ?= 4

.PHONY: run test lint bench clean lock

# uv when it can be had (seconds), else pip (about 45 s): hashes checked, pip's sources either way
INSTALL := $(BIN)/python tools/install_locked.py $(VENV)

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

# the runtime dependencies exactly as locked (hashes checked), then the bot on top of them
$(RUNTIME): pyproject.toml requirements.lock | $(VENV)/bin/python
	$(INSTALL) requirements.lock
	touch $(RUNTIME)

# the same for the tests: runtime and dev dependencies as locked in requirements-dev.lock
$(STAMP): pyproject.toml requirements-dev.lock | $(VENV)/bin/python
	$(INSTALL) requirements-dev.lock
	touch $(STAMP)

# the reference MCP server from npm the tests drive (tests/mcp_reference/package-lock.json), when
# npm is on PATH: installed here, never downloaded while the tests run. Without npm (or when the
# registry cannot be reached) those tests skip and say why, as .ci/run does for Debian packages.
NPM_REFERENCE := tests/mcp_reference
NPM_STAMP := $(NPM_REFERENCE)/node_modules/.installed
$(NPM_STAMP): $(NPM_REFERENCE)/package.json $(NPM_REFERENCE)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		{ npm ci --prefix $(NPM_REFERENCE) --no-audit --no-fund && touch $(NPM_STAMP); } || \
			echo "npm ci failed: the server-everything MCP tests will be skipped" >&2; \
	else \
		echo "npm is not on PATH: the server-everything MCP tests will be skipped" >&2; \
	fi

run: $(RUNTIME)
	$(BIN)/chatops serve

test: $(STAMP) $(NPM_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/pytest -n $(TEST_WORKERS) --dist worksteal

# every bench script, one after the other (bench/_*.py are their helpers, not benches)
bench: $(STAMP)
	for b in bench/[!_]*.py; do $(BIN)/python $$b || exit 1; done

LOCK := $(BIN)/pip-compile --quiet --generate-hashes --strip-extras --no-emit-index-url \
	--no-emit-find-links
lock: $(STAMP)
	$(BIN)/pip install --quiet pip-tools
	$(LOCK) --output-file requirements.lock pyproject.toml
	$(LOCK) --extra dev --output-file requirements-dev.lock pyproject.toml

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache $(NPM_REFERENCE)/node_modules
