# Everything sets itself up from nothing: `make run`, `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run demo test lint typecheck unit bench bench-smoke clean conformance conformance-setup

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,http,redis]'
	touch $(STAMP)

# The Inspector, connected to the example weather server; it prints the URL to open.
run: $(STAMP)
	$(BIN)/python -m mcpkit.inspector --port 6274 -- $(BIN)/python examples/weather/server.py

demo: $(STAMP)
	$(BIN)/python examples/demo.py

lint: $(STAMP)
	$(BIN)/ruff check src tests examples bench scripts
	$(BIN)/ruff format --check src

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python -m pytest -q

bench-smoke: $(STAMP)
	$(BIN)/python bench/run_all.py --smoke

test: lint typecheck unit bench-smoke conformance

# The official MCP conformance suite (Node 22 and the suite are installed under .cache/).
conformance-setup: $(STAMP)
	$(BIN)/python scripts/conformance.py --setup-only

conformance: $(STAMP)
	$(BIN)/python scripts/conformance.py --leg all

bench: $(STAMP)
	$(BIN)/python bench/run_all.py
bench-http: $(STAMP) ; $(BIN)/python bench/http_bench.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
