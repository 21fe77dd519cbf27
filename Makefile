# Everything a fresh machine (Python 3.11+, Node 20, npm) needs, from nothing.
# The newest CPython the machine can start (3.13, then 3.12, then 3.11): the sandbox forks a fresh worker per run,
# which costs less on a newer interpreter. `make PYTHON=python3.11 ...` picks one by hand.
PYTHON ?= $(shell scripts/newest-python)
VENV   := .venv
BIN    := $(VENV)/bin
NODE_SERVERS := tests/node_modules/.package-lock.json
WHEELHOUSE := .wheels/.built
DIST   ?= dist
PORT   ?= 8765
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: install run test bench lint clean wheel

install: $(VENV)/.installed $(NODE_SERVERS)

$(VENV)/.installed: pyproject.toml
	@echo "make: the virtualenv uses $$($(PYTHON) -c 'import sys; print(sys.executable, sys.version.split()[0])')"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

# The wheels of OneTool's dependencies (and pip), for the test that installs the built wheel with pipx offline.
$(WHEELHOUSE): pyproject.toml $(VENV)/.installed
	$(BIN)/pip wheel --quiet --wheel-dir .wheels . pip
	touch $@

# OneTool as a wheel, to install without a clone: pipx install dist/onetool-*.whl (or uv tool install).
wheel: $(VENV)/.installed
	$(BIN)/pip wheel --quiet --no-deps --no-build-isolation --wheel-dir $(DIST) .

$(NODE_SERVERS): tests/package.json tests/package-lock.json
	cd tests && npm ci --no-audit --no-fund --loglevel=error

# Serve the example config over streamable HTTP (works offline).
run: install
	$(BIN)/onetool serve --http --port $(PORT) --config onetool.yaml

test: install $(WHEELHOUSE)
	$(BIN)/ruff check .
	$(BIN)/mypy onetool sandbox
	$(BIN)/lint-imports --no-cache
	$(BIN)/pytest -q -n 2 --dist loadfile

bench: install
	$(BIN)/python -m bench

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy onetool sandbox
	$(BIN)/lint-imports --no-cache

clean:
	rm -rf $(VENV) tests/node_modules .wheels dist
