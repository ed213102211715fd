# The two commands that matter: `make demo` and `make test`. Both work from nothing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO := demo-state

.PHONY: demo test lint venv clean system-deps

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/honestyd demo --dir $(DEMO)

lint: $(STAMP)
	$(BIN)/ruff check daemon collectors scorers tests
	$(BIN)/mypy

# Programs the suite runs for real: promtool (Debian's prometheus) and systemd-analyze.
system-deps:
	@command -v promtool >/dev/null || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; }
	@command -v systemd-analyze >/dev/null || { apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd >/dev/null; }

test: $(STAMP) system-deps
	$(BIN)/ruff check daemon collectors scorers tests bench
	$(BIN)/mypy
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) $(DEMO)
