# One-command entry points (see README). `make solve` and `make test` set up a
# virtualenv from pyproject.toml on first use.
PYTHON ?= python3
VENV ?= .venv
SPEC ?= specs/ycsb_a.yaml

.PHONY: setup solve test test-python test-engine lint

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[dev]'
	touch $@

solve: setup
	$(VENV)/bin/cosine solve $(SPEC)

test: test-engine test-python

test-python: setup
	$(VENV)/bin/pytest

test-engine:
	cd engine-template && cargo test --release --workspace

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy cost_models solver specs render measure studies report deploy bench cli.py
