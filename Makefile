# The two commands that matter: `make demo` and `make test`. Both work from nothing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO := demo-state

.PHONY: demo test lint venv clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	rm -rf $(DEMO)
	$(BIN)/honestyd simulate --seed 7 --out $(DEMO) --agents 10 --days 3
	$(BIN)/honestyd ingest --state $(DEMO) --db $(DEMO).db
	$(BIN)/honestyd score --db $(DEMO).db --at 2026-05-04T00:00:00Z --window 24h --config $(DEMO)/.sim/config.toml --checks $(DEMO)/.sim/checks.jsonl --verify-paths

lint: $(STAMP)
	$(BIN)/ruff check daemon collectors scorers tests
	$(BIN)/mypy

test: $(STAMP)
	$(BIN)/ruff check daemon collectors scorers tests
	$(BIN)/mypy
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) $(DEMO) $(DEMO).db
