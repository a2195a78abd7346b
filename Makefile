# Two entry points (see README): `make run` and `make test`. Both set everything up.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

$(BIN)/dsh-recall: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.test-deps: $(BIN)/dsh-recall
	$(BIN)/pip install -q -e '.[test]'
	touch $@

.PHONY: run test bench deps check
WS ?= $(CURDIR)
Q ?= where is the search query turned into ranked excerpts
# Index a directory (default: this one) on the embedded default (SQLite + shipped model) and search it.
run: $(BIN)/dsh-recall
	$(BIN)/dsh-recall index --wait "$(WS)"
	$(BIN)/dsh-recall search --workspace "$(WS)" "$(Q)"

deps: $(VENV)/.test-deps

test: $(VENV)/.test-deps
	$(BIN)/python -m pytest

# Lint (ruff: pyflakes, pycodestyle, import order, pyupgrade, bugbear) and type-check (mypy) the package.
check: $(VENV)/.test-deps
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/mypy

bench: $(VENV)/.test-deps
	$(BIN)/python bench/code_swebench.py
