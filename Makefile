# The two commands that matter: `make demo` and `make test`. Both work from nothing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO := demo-state

.PHONY: demo test lint venv clean system-deps bench

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

# `make demo PORT=8123` serves on another port (default: 127.0.0.1:9478).
demo: $(STAMP)
	$(BIN)/honestyd demo --dir $(DEMO)$(if $(PORT), --listen 127.0.0.1:$(PORT))

lint: $(STAMP)
	$(BIN)/ruff check daemon collectors scorers tests
	$(BIN)/mypy

# Programs the suite runs for real (tests/tools.py: a missing one fails the test naming its package):
# prometheus and promtool (Debian's prometheus), Alertmanager and amtool (prometheus-alertmanager),
# systemd-analyze, setpriv (util-linux, in every Debian), and headless Chromium. Installed from Debian's
# packages when missing (CI runs as root).
SYSTEM_TOOLS := prometheus:prometheus promtool:prometheus prometheus-alertmanager:prometheus-alertmanager \
	amtool:prometheus-alertmanager systemd-analyze:systemd chromium:chromium setpriv:util-linux
system-deps:
	@missing=""; for pair in $(SYSTEM_TOOLS); do command -v $${pair%%:*} >/dev/null || missing="$$missing $${pair#*:}"; done; \
	if [ -n "$$missing" ]; then echo "installing Debian packages:$$missing"; apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; fi

# Two workers, a test file per worker at a time (a module's fixtures are built once); `pytest` alone runs serially.
test: $(STAMP) system-deps
	$(BIN)/ruff check daemon collectors scorers tests bench
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

# Performance suite (not part of `make test`): figures and ratios against baselines, < 15 min.
bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) $(DEMO)
