# The two commands are `make demo` and `make test`; each sets up .venv on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
EXTRAS := dev,spark
INSTALLED := $(VENV)/.installed
BENCH_INSTALLED := $(VENV)/.bench-installed
CODEC := $(VENV)/.codec-built
NODE_CLIENTS := node_modules/.installed

SEEDS ?= 2000
JOBS ?= 2
ROUNDS ?= 30
CHAOS_SEED ?= 1
FUZZ_INPUTS ?= 1000000
FUZZ_SEED ?= 1
FLEET_SCALE ?= 1

.PHONY: demo test lint bench simulate chaos fuzz clean kcat etcd

# make demo SECURE=1: the same on a secured cluster (TLS, SASL/SCRAM, ACLs; src/kraft/cli/demo_security.py).
demo: $(CODEC)
	$(PY) -m kraft.cli demo $(if $(filter-out 0,$(SECURE)),--secure)

test: lint $(CODEC) $(NODE_CLIENTS) kcat
	$(PY) -m pytest -n 2 -q

# ruff, then mypy over src/kraft as [tool.mypy] in pyproject.toml sets it up (docs/decisions/0036-types.md).
lint: $(INSTALLED)
	$(VENV)/bin/ruff check src tests bench
	$(PY) -m mypy

# make bench FLEET_SCALE=0.1: the fleet benchmark at a tenth of its observers, topics and brokers.
bench: $(CODEC) $(BENCH_INSTALLED) etcd
	KRAFT_FLEET_SCALE=$(FLEET_SCALE) $(PY) bench/run_all.py

# Many more simulation seeds than make test runs: a static quorum, a dynamic one
# (KIP-853) whose voters an operator changes, and a static one upgraded to kraft.version 1 and then
# changed, all under every fault mix; a failure prints its replay command.
simulate: $(CODEC)
	$(PY) -m kraft.sim --seeds $(SEEDS) --jobs $(JOBS)
	$(PY) -m kraft.sim --seeds $(SEEDS) --jobs $(JOBS) --membership
	$(PY) -m kraft.sim --seeds $(SEEDS) --jobs $(JOBS) --upgrade

# A real local cluster under random kills, pauses and restarts; see src/kraft/cli/chaos.py.
chaos: $(CODEC)
	$(PY) -m kraft.cli chaos --rounds $(ROUNDS) --seed $(CHAOS_SEED) --dir .chaos-data

# Hostile requests against a real node on both listeners; see src/kraft/cli/fuzz.py.
fuzz: $(CODEC)
	$(PY) -m kraft.cli fuzz --inputs $(FUZZ_INPUTS) --seed $(FUZZ_SEED) --dir .fuzz-data

# A venv is made only once, so only then is $(PYTHON) checked: kraft needs 3.11 or newer.
$(INSTALLED): pyproject.toml setup.py Makefile
	@test -x $(PY) || $(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
	  echo "kraft needs Python 3.11 or newer; PYTHON=$(PYTHON) is $$($(PYTHON) --version 2>/dev/null || echo 'no command here')." >&2; \
	  echo "Run make with PYTHON=python3.11 (or newer), e.g. 'make test PYTHON=python3.12'." >&2; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -U pip setuptools wheel
	$(PY) -m pip install -q --disable-pip-version-check -e '.[$(EXTRAS)]'
	touch $@

# The benchmarks' baselines (PySyncObj) and plots, installed only for `make bench`.
$(BENCH_INSTALLED): $(INSTALLED)
	$(PY) -m pip install -q --disable-pip-version-check -e '.[$(EXTRAS),bench]'
	touch $@

# The C extensions (record codec, metadata record reader, image untracking, shape check) are
# rebuilt in place whenever a source changes.
$(CODEC): $(INSTALLED) src/kraft/records/_codec.c src/kraft/metadata/_fields.c \
    src/kraft/metadata/_collector.c src/kraft/protocol/_shape.c
	$(PY) setup.py -q build_ext --inplace
	touch $@

# kafkajs, the admin client not written in Python that tests/server checks kraft with, from
# package-lock.json into node_modules. Node.js and npm come from Debian where they are missing.
$(NODE_CLIENTS): package.json package-lock.json
	command -v npm >/dev/null || { apt-get update -q && apt-get install -y -q nodejs npm; }
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# kcat, the command-line consumer tests/groups runs in a group (librdkafka's, as Debian builds it),
# from Debian where it is missing.
kcat:
	command -v kcat >/dev/null || { apt-get update -q && apt-get install -y -q kcat; }

# etcd 3.4, the peer bench/writes_bench.py measures kraft's writes against (Debian's build), from
# Debian where it is missing.
etcd:
	command -v etcd >/dev/null || { apt-get update -q && apt-get install -y -q etcd-server; }

clean:
	rm -rf $(VENV) build src/*.egg-info demo-data node_modules
	find src -name '*.so' -delete
