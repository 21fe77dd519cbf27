# Everything a fresh machine (Python 3.11+, Node 20, npm) needs, from nothing.
# The newest CPython the machine can start (3.13, then 3.12, then 3.11): the sandbox forks a fresh worker per run,
# which costs less on a newer interpreter. `make PYTHON=python3.11 ...` picks one by hand.
PYTHON ?= $(shell scripts/newest-python)
# `make test` also runs the sandbox's worker tests (its hostile corpus, the OS layers) on the oldest CPython (3.11)
# when the machine has it, in a virtualenv of its own: confinement must hold on every interpreter OneTool runs on.
OLDEST ?= $(shell scripts/oldest-python)
OLD_VENV := .venv-oldest
OLDEST_SUBSET := tests/sandbox/worker
VENV   := .venv
# pytest-xdist workers: two more than the 2 cores of the reference machine, since a worker often waits on a process
# it started (a gateway, an upstream) while it imports; measured on the whole suite: 2 workers 1,174 s (90 % busy),
# 3 workers 999 s (97 %); with the suite's newer tests (they wait more), 3 workers left 13 % of the cores idle.
WORKERS ?= 4
BIN    := $(VENV)/bin
NODE_SERVERS := tests/node_modules/.package-lock.json
WHEELHOUSE := .wheels/.built
DIST   ?= dist
PORT   ?= 8765
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: install run test suite typecheck oldest-venv test-oldest bench lint clean wheel

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

# The suite leaves a tenth of the two cores idle (its workers wait on the processes they start): mypy and the oldest
# interpreter's virtualenv (downloads, mostly) are made beside it, in that idle time, rather than before or after.
test: install $(WHEELHOUSE)
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-cache
	$(MAKE) --no-print-directory -j3 suite typecheck oldest-venv
	$(MAKE) --no-print-directory test-oldest

suite: install $(WHEELHOUSE)
	$(BIN)/pytest -q -n $(WORKERS) --dist loadfile

typecheck: install
	$(BIN)/mypy onetool sandbox packs

# Made only where the machine has an oldest CPython other than the suite's.
oldest-venv:
	@if [ -n "$(OLDEST)" ] && [ "$$($(OLDEST) -c 'import sys; print(sys.prefix)')" != "$$($(BIN)/python -c 'import sys; print(sys.base_prefix)')" ]; then \
	    [ -f $(OLD_VENV)/.installed ] && [ $(OLD_VENV)/.installed -nt pyproject.toml ] || { \
	        $(OLDEST) -m venv $(OLD_VENV) && $(OLD_VENV)/bin/pip install --quiet --upgrade pip \
	        && $(OLD_VENV)/bin/pip install --quiet -e '.[test]' && touch $(OLD_VENV)/.installed; }; \
	fi

test-oldest: $(NODE_SERVERS) oldest-venv
	@if [ -z "$(OLDEST)" ]; then echo "make: no CPython 3.11 on this machine: the oldest-interpreter subset did not run"; \
	elif [ "$$($(OLDEST) -c 'import sys; print(sys.prefix)')" = "$$($(BIN)/python -c 'import sys; print(sys.base_prefix)')" ]; then \
	    echo "make: the suite ran on the oldest supported CPython already"; \
	else \
	    echo "make: the sandbox subset on $$($(OLDEST) -c 'import sys; print(sys.executable, sys.version.split()[0])')"; \
	    PATH="$(CURDIR)/$(OLD_VENV)/bin:$$PATH" $(OLD_VENV)/bin/pytest -q -n $(WORKERS) --dist loadfile $(OLDEST_SUBSET); \
	fi

bench: install
	$(BIN)/python -m bench

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy onetool sandbox packs
	$(BIN)/lint-imports --no-cache

clean:
	rm -rf $(VENV) $(OLD_VENV) tests/node_modules .wheels dist
