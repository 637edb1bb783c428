# One-command entry points (see README). `make solve` and `make test` set up a
# virtualenv from pyproject.toml on first use.
PYTHON ?= python3
VENV ?= .venv
SPEC ?= specs/ycsb_a.yaml

.PHONY: setup solve test test-python test-engine lint browser

setup: $(VENV)/.installed browser

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -e '.[dev]'
	# compile the design tables' kernels and the frontier's knapsacks once (numba keeps them beside
	# the package: cost_models.kernels, solver.knapsack)
	$(VENV)/bin/python -c "from cost_models import kernels; kernels.load()"
	$(VENV)/bin/python -c "from solver import knapsack; knapsack.load()"
	# the packages' bytecode beside their sources (Python's own __pycache__; it is read even where
	# PYTHONDONTWRITEBYTECODE stops writing it, and a changed source is compiled again): every
	# command's start compiled ~70 modules, 0.1 s of a `cosine whatif` (BENCHMARKS §26)
	$(VENV)/bin/python -m compileall -q cli solver cost_models specs render measure studies report deploy
	touch $@

# The what-if page's test (tests/test_report_html.py) drives Debian's chromium
# through chromium-driver and selenium: installed with apt when root and missing.
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -q && apt-get install -y -q --no-install-recommends chromium chromium-driver; \
	  else echo "chromium and chromium-driver are missing: apt-get install chromium chromium-driver (as root)"; fi

solve: setup
	$(VENV)/bin/cosine solve $(SPEC)

test: test-engine test-python

test-python: setup
	$(VENV)/bin/pytest

# The tests run with TMPDIR (unit tests) and COSINE_TEST_DIR (integration tests) set to
# a fresh directory, on tmpfs when there is one; it must be empty afterwards: every
# test removes its scratch directories, also when it fails. (Built first, outside it.)
test-engine:
	cd engine-template && cargo test --release --workspace --no-run
	@base=/dev/shm; [ -d $$base ] || base=$${TMPDIR:-/tmp}; \
	scratch=$$(mktemp -d -p $$base cosine-test.XXXXXX) || exit 1; \
	(cd engine-template && TMPDIR=$$scratch COSINE_TEST_DIR=$$scratch cargo test --release --workspace); status=$$?; \
	left=$$(ls -A $$scratch); rm -rf $$scratch; \
	if [ -n "$$left" ]; then echo "test-engine: the Rust tests left in TMPDIR:" $$left >&2; exit 1; fi; exit $$status

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy cost_models solver specs render measure studies report deploy bench cli
	$(VENV)/bin/lint-imports
	cd engine-template && cargo fmt --all --check && cargo clippy --release -q --workspace --all-targets -- -D warnings

# System packages for `cosine deploy`, its tests and bench/ycsb: twemproxy (nutcracker),
# redis-tools (redis-cli, redis-benchmark) and redis-server (the peer). `setup` installs
# the missing ones with apt when it runs as root, and otherwise names them.
.PHONY: deploy-packages
setup: deploy-packages
deploy-packages:
	@missing=""; for p in nutcracker:nutcracker redis-tools:redis-benchmark redis-server:redis-server; do \
	  command -v $${p#*:} >/dev/null 2>&1 || missing="$$missing $${p%%:*}"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	  else echo "note: apt-get install$$missing (needed by cosine deploy and its tests)"; fi; \
	fi
