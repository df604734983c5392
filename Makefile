# `make demo` and `make test` work on a fresh machine: they create .venv and install what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

.PHONY: install test lint demo bench bench-routes bench-deps redis schema fuzz clean

# docker/install.sh is also the image's install step (Dockerfile), so the tests run what ships.
$(INSTALLED): pyproject.toml docker/install.sh
	PYTHON=$(PYTHON) sh docker/install.sh $(VENV) -e '.[dev]' || { apt-get update && \
	  apt-get install -y python3-venv && PYTHON=$(PYTHON) sh docker/install.sh $(VENV) -e '.[dev]'; }
	touch $@

install: $(INSTALLED)

lint: install
	$(BIN)/ruff check .

test: install lint redis
	$(BIN)/python -m pytest

# The tests use the Redis at 127.0.0.1:6379 (started here when none answers) and start private
# redis-server processes of their own on spare ports.
redis:
	@command -v redis-server >/dev/null && command -v redis-cli >/dev/null || \
	  { apt-get update && apt-get install -y redis-server; }
	@redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 || \
	  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no

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

bench-routes: install bench-deps redis
	$(BIN)/python bench/routes.py

# Generated requests against the demo (schemathesis + hypothesis; not part of `make test`):
# prints the counts that must be 0 and exits 1 when one is not (bench/fuzz.py).
fuzz: install
	$(BIN)/python bench/fuzz.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
