# `make demo` and `make test` work on a fresh machine: they create .venv and install what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

.PHONY: install test lint demo bench bench-passthrough bench-routes bench-deps profile soak redis \
	schema fuzz clean

$(INSTALLED): pyproject.toml
	$(PYTHON) -m venv $(VENV) || { apt-get update && apt-get install -y python3-venv && $(PYTHON) -m venv $(VENV); }
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
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

# Every spec pipeline beside passthrough and nginx: one table, saved to bench/results/.
bench: install bench-deps redis
	$(BIN)/python bench/pipelines.py --rounds 3

# Passthrough only: upstream direct, nginx, aigw per transport and worker count.
bench-passthrough: install bench-deps
	$(BIN)/python bench/run.py --workers 1,2

# A py-spy flame graph of passthrough under load, into bench/results/.
profile: install bench-deps
	$(BIN)/pip install --quiet py-spy
	$(BIN)/python bench/profile.py

# Five minutes of mixed spec traffic with a reload midway: statuses, RSS and fds per process.
soak: install bench-deps redis
	$(BIN)/python bench/soak.py --workers 2

bench-routes: install bench-deps redis
	$(BIN)/python bench/routes.py

# Generated requests against the demo (schemathesis + hypothesis; not part of `make test`):
# prints the counts that must be 0 and exits 1 when one is not (bench/fuzz.py).
fuzz: install
	$(BIN)/python bench/fuzz.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
