# Everything sets itself up from nothing: `make run`, `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
REDIS_PORT ?= 6379

.PHONY: run demo test lint typecheck unit bench bench-smoke clean conformance conformance-setup ts-sdk redis postgres docs docs-build soak fuzz

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,http,redis,docs,otel,servers-sql,servers-fetch,openapi,speed]'
	touch $(STAMP)

# The Inspector, connected to the example weather server; it prints the URL to open.
run: $(STAMP)
	$(BIN)/python -m mcpkit.inspector --port 6274 -- $(BIN)/python examples/weather/server.py

demo: $(STAMP)
	$(BIN)/python examples/demo.py

lint: $(STAMP)
	$(BIN)/ruff check src tests examples bench scripts fuzz
	$(BIN)/ruff format --check src
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

# Redis on 127.0.0.1:$(REDIS_PORT) (the scale-out tests and conformance leg need it): started if not answering.
redis:
	@if [ "$$(redis-cli -h 127.0.0.1 -p $(REDIS_PORT) ping 2>/dev/null)" != "PONG" ]; then \
		echo "starting redis-server on 127.0.0.1:$(REDIS_PORT)"; \
		redis-server --port $(REDIS_PORT) --bind 127.0.0.1 --daemonize yes --save '' --appendonly no >/dev/null; \
		for i in $$(seq 1 50); do \
			[ "$$(redis-cli -h 127.0.0.1 -p $(REDIS_PORT) ping 2>/dev/null)" = "PONG" ] && exit 0; sleep 0.1; \
		done; \
		echo "redis-server did not answer PING on 127.0.0.1:$(REDIS_PORT)"; exit 1; \
	fi

# PostgreSQL on 127.0.0.1:5432 (the sql server's tests): the machine's own, or Debian's packages.
postgres:
	@sh scripts/test-postgres.sh

unit: $(STAMP) redis postgres ts-sdk
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -q

bench-smoke: $(STAMP) redis
	$(BIN)/python bench/run_all.py --smoke
	$(BIN)/python bench/run_all.py --smoke --phases stdio client --mcpkit-loop asyncio

test: lint typecheck docs-build unit bench-smoke conformance

# The official MCP conformance suite (Node 22 and the suite are installed under .cache/).
conformance-setup: $(STAMP)
	$(BIN)/python scripts/conformance.py --setup-only

# The TypeScript SDK client the stdio interop tests drive (tests/transports/test_stdio_ts_progress.py),
# pinned, installed with npm under .cache/ like the conformance suite.
TS_SDK_PREFIX := .cache/npm-ts-sdk
TS_SDK_PACKAGES := @modelcontextprotocol/sdk@1.32.2 zod@4.6.7
TS_SDK_STAMP := $(TS_SDK_PREFIX)/.installed-sdk-1.32.2-zod-4.6.7

ts-sdk: $(TS_SDK_STAMP)

$(TS_SDK_STAMP):
	mkdir -p $(TS_SDK_PREFIX)
	npm install --prefix $(TS_SDK_PREFIX) --no-audit --no-fund --no-update-notifier --loglevel=error \
		--save-exact $(TS_SDK_PACKAGES)
	touch $@

conformance: $(STAMP) redis
	$(BIN)/python scripts/conformance.py --leg all

# The documentation site (MkDocs): served with live reload on 127.0.0.1:8001; make test builds it strictly.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --dev-addr 127.0.0.1:8001

docs-build: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

bench: $(STAMP) redis
	$(BIN)/python bench/run_all.py
bench-http: $(STAMP) ; $(BIN)/python bench/http_bench.py

# The soak under faults (docs/soak.md): two workers on a private redis-server, mixed load in both eras,
# SIGKILL / Redis restart / SIGTERM drain in turn for DURATION; the report goes to build/soak/soak.md.
# make test runs its short form (tests/testing/soak/test_soak_short.py).
DURATION ?= 10m
soak: $(STAMP)
	$(BIN)/python -m mcpkit.testing.soak --duration $(DURATION) --out build/soak

# Fuzzing (docs/fuzzing.md): every target, or TARGET=name, for TIME seconds each; coverage-guided
# with atheris where it installs (only here: make test runs the harnesses' short form without it),
# property-based with hypothesis otherwise; then line coverage over the corpus. Exit 1 on a crash.
TIME ?= 60
TARGET ?=
fuzz: $(STAMP)
	$(BIN)/python -m pip install --quiet coverage
	$(BIN)/python -m pip install --quiet atheris || echo "atheris did not install here: hypothesis only"
	$(BIN)/python fuzz/run.py $(TARGET) --time $(TIME) --coverage

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
