# `make demo` and `make test` work on a fresh machine: they create .venv and install what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

.PHONY: install test lint demo bench bench-deps schema clean

$(INSTALLED): pyproject.toml
	$(PYTHON) -m venv $(VENV) || { apt-get update && apt-get install -y python3-venv && $(PYTHON) -m venv $(VENV); }
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

install: $(INSTALLED)

lint: install
	$(BIN)/ruff check .

test: install lint
	$(BIN)/python -m pytest

demo: install
	$(BIN)/aigw demo --config config/demo.yaml

# Regenerate the committed JSON Schema of the config (a test fails when it drifts).
schema: install
	$(BIN)/aigw schema > config/aigw.schema.json

bench-deps:
	@command -v wrk >/dev/null && command -v nginx >/dev/null || \
	  { apt-get update && apt-get install -y nginx-light wrk; }

bench: install bench-deps
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
