# `make demo` and `make test` work on a fresh machine: they create .venv and install what they need.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

.PHONY: install test lint docs demo bench bench-passthrough bench-routes bench-index bench-tail \
	bench-deps profile soak redis schema fuzz clean chromium policy-check json-server datasette

# docker/install.sh is also the image's install step (Dockerfile), so the tests run what ships.
$(INSTALLED): pyproject.toml docker/install.sh
	PYTHON=$(PYTHON) sh docker/install.sh $(VENV) -e '.[dev]' || { apt-get update && \
	  apt-get install -y python3-venv && PYTHON=$(PYTHON) sh docker/install.sh $(VENV) -e '.[dev]'; }
	touch $@

install: $(INSTALLED)

lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy gateway

test: install lint docs redis chromium json-server datasette
	$(BIN)/python -m pytest

# The documentation site (mkdocs.yml, docs/): the Reference's pages are generated from the code as
# it builds; --strict fails on a broken link, a missing page or an unknown anchor. Into site/.
# (Material for MkDocs prints a notice about MkDocs 2 unless told not to.)
docs: install
	NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true $(BIN)/mkdocs build --strict --site-dir site

# The tests use the Redis at 127.0.0.1:6379 (started here when none answers) and start private
# redis-server processes of their own on spare ports.
redis:
	@command -v redis-server >/dev/null && command -v redis-cli >/dev/null || \
	  { apt-get update && apt-get install -y redis-server; }
	@redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 || \
	  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no

# Ports: make demo PORT=8090 ADMIN_PORT=9091 ISSUER_PORT=8092 BACKEND_PORT=8091
demo: install
	$(BIN)/aigw demo --config config/demo.yaml $(if $(PORT),--port $(PORT)) \
	  $(if $(ADMIN_PORT),--admin-port $(ADMIN_PORT)) \
	  $(if $(ISSUER_PORT),--issuer-port $(ISSUER_PORT)) \
	  $(if $(BACKEND_PORT),--backend-port $(BACKEND_PORT))

# Regenerate the committed JSON Schemas of the config and of a policy file (tests check both).
schema: install
	$(BIN)/aigw schema > config/aigw.schema.json
	$(BIN)/aigw schema --policies > config/policy.schema.json

# json-server (npm), the third-party JSON API the tests put the gateway in front of
# (tests/test_json_server.py, examples/json-server/), in .npm/ with the machine's Node. 0.17.4 is
# the registry's `latest`: the 1.0 betas need Node 22 and dropped `q` full-text search.
JSON_SERVER_VERSION := 0.17.4
JSON_SERVER_STAMP := .npm/.json-server-$(JSON_SERVER_VERSION)

$(JSON_SERVER_STAMP):
	@command -v npm >/dev/null || { apt-get update && apt-get install -y nodejs npm; }
	npm install --prefix .npm --no-save --no-package-lock --no-audit --no-fund \
	  json-server@$(JSON_SERVER_VERSION)
	touch $@

json-server: $(JSON_SERVER_STAMP)

# Datasette (PyPI), the second third-party upstream (tests/test_datasette.py, examples/datasette/):
# keyset `next` pagination and FTS5 search restricted to columns, which json-server lacks. In its
# own venv, .datasette/, so its pinned dependencies never meet ours. 0.65.5 is the newest stable.
DATASETTE_VERSION := 0.65.5
DATASETTE_STAMP := .datasette/.datasette-$(DATASETTE_VERSION)

$(DATASETTE_STAMP):
	$(PYTHON) -m venv .datasette || \
	  { apt-get update && apt-get install -y python3-venv && $(PYTHON) -m venv .datasette; }
	.datasette/bin/pip install --quiet datasette==$(DATASETTE_VERSION)
	touch $@

datasette: $(DATASETTE_STAMP)

# Headless Chromium and poppler's pdftoppm, for the access report's screen and print checks
# (tests/test_policy_report.py: Chromium prints the page to PDF, pdftoppm draws its pages).
chromium:
	@{ command -v chromium >/dev/null || command -v chromium-browser >/dev/null; } && \
	  command -v pdftoppm >/dev/null || \
	  { apt-get update && apt-get install -y chromium poppler-utils; }

# What a policy repository's CI runs (README, "Policy CI"): lint, the fixtures with every rule
# covered, and the decisions that change against the base branch (POLICY_BASE, default main).
POLICY_CONFIG ?= config/demo.yaml
POLICY_DIR ?= policies
POLICY_BASE ?= main
policy-check: install
	$(BIN)/aigw policy lint -c $(POLICY_CONFIG) $(POLICY_DIR)
	$(BIN)/aigw policy test -c $(POLICY_CONFIG) --coverage 100 $(POLICY_DIR)
	@base=$$(mktemp -d) && trap 'rm -rf "$$base"' EXIT && \
	if git archive "$(POLICY_BASE)" "$(POLICY_DIR)" 2>/dev/null | tar -x -C "$$base"; then \
	  echo "decisions that change against $(POLICY_BASE):"; \
	  $(BIN)/aigw policy diff -c $(POLICY_CONFIG) "$$base/$(POLICY_DIR)" $(POLICY_DIR); \
	else echo "no $(POLICY_DIR) on $(POLICY_BASE): nothing to diff against"; fi

bench-deps:
	@command -v wrk >/dev/null && command -v nginx >/dev/null || \
	  { apt-get update && apt-get install -y nginx-light wrk; }

# Every spec pipeline beside bare and authenticated passthrough and nginx, tracing on (unsampled
# and 1 in 10) and 2 workers, with issue 24's targets: one report, saved to bench/results/.
bench: install bench-deps redis
	$(BIN)/python bench/pipelines.py --rounds 3 --tracing --scale-workers 2

# Passthrough only: upstream direct, nginx, aigw per transport and worker count.
bench-passthrough: install bench-deps
	$(BIN)/python bench/run.py --workers 1,2

# Event-loop lag while PDPP reads and indexes a stream of 60,000 records under discovery, AIDRE
# and PDPP traffic (issue 22): lag p99 per window, the traffic's latencies, RSS. INDEX_ARGS adds
# options (--records N, --rate R, --profile: py-spy of the loop during the build).
bench-index: install
	$(BIN)/python bench/index_lag.py $(INDEX_ARGS)

# Tail latency under mixed load (issue 24): the discovery document's p50/p99 alone, under AIDRE,
# PDPP and AIP traffic, and while a PDPP index refreshes, with the event-loop lag of each window.
# TAIL_ARGS adds options (--records N, --refresh S, --churn N, --scale X, --profile).
bench-tail: install redis
	$(BIN)/python bench/tail.py $(TAIL_ARGS)

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
	rm -rf $(VENV) .npm .datasette .pytest_cache .ruff_cache .mypy_cache *.egg-info .aigw/pdpp-index \
	  site
