# Two commands set everything up on a fresh machine:
#   make demo   the whole pipeline end to end on Apache Kafka (started here, on loopback)
#   make test   the full test suite, every lane (.ci/run calls exactly this)
# and around them:
#   make install    .venv, the package with its extras (installed by uv, which fetches and unpacks in parallel: a
#                   few times faster than pip on PySpark's half a gigabyte), Apache Kafka's jars and Apicurio
#                   Registry (Maven, once per version), the numba kernels
#   make test-fast  the unit lane alone: no broker, no Spark
#   make test-faults  the long version of the three-node cluster fault tests (tests/faults/test_cluster_faults.py), and the churn soak (tests/benchmarks/test_soak.py)
#   make wheel      dist/fastpubsub-*.whl, what Dockerfile and users install
# Needs Python 3.10+, Java 17+ and Maven (`apt-get install openjdk-17-jre-headless maven`).
#   make docs       the documentation site into site/ (mkdocs build --strict: a broken link fails it)
# `make install` ends with `pubsub warmup`: the numba kernels are compiled once, there, not in the first demo.
VENV   ?= .venv
PYTHON ?= python3
BIN     = $(VENV)/bin
PYTEST  = $(BIN)/python -m pytest -q -p no:cacheprovider

.PHONY: demo test test-fast test-faults bench install kafka tools wheel docs clean

$(VENV)/.installed: pyproject.toml
	@command -v java >/dev/null || { echo "Java 17 or newer is needed: apt-get install openjdk-17-jre-headless" >&2; exit 1; }
	@command -v mvn >/dev/null || { echo "Maven is needed to fetch Apache Kafka: apt-get install maven" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip uv
	$(BIN)/uv pip install --python $(BIN)/python --quiet -e '.[dev,spark,docs,registry]'
	$(BIN)/pubsub broker --fetch-only
	$(BIN)/pubsub registry --fetch-only
	$(BIN)/pubsub warmup
	touch $@

install: $(VENV)/.installed

# The pinned Apache Kafka into ~/.cache/fastpubsub (already there after `make install`; cheap when it is).
kafka: $(VENV)/.installed
	$(BIN)/pubsub broker --fetch-only

# Debian's kcat, a Kafka client nobody here wrote (tests/kafka/test_outside_clients.py); installed when missing and root.
tools:
	@command -v kcat >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	  && { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null; } \
	  || echo "kcat is not installed (apt-get install kcat): its tests will fail" >&2; }

demo: $(VENV)/.installed
	$(BIN)/pubsub demo

# The unit lane first, on both cores (no broker: nothing to share); then every lane that runs Apache Kafka or Spark,
# on two workers as well: a test through the broker mostly waits (on a JVM's start, a kill, a commit), so two of
# them share the cores well.  Each worker starts its own session broker and registry (conftest.py) and takes whole
# files (--dist loadfile: a module's cluster or wheel is built once).  Each lane ends with its slowest tests.
UNIT = -m "not broker and not spark and not slow"
test: $(VENV)/.installed kafka tools
	$(PYTEST) -n 2 $(UNIT) --durations=25
	$(PYTEST) -n 2 --dist loadfile -m "broker or spark or slow" --durations=40

test-fast: $(VENV)/.installed
	$(PYTEST) -n 2 $(UNIT) --durations=10

# The fault tests in their long version, as nightly system tests run: the three-node cluster's faults each alone
# over several seeds with a one-minute outage of the whole cluster, ten kills per service in the kill loops, and
# the cases marked `long`; `make test` runs each fault once, short.
test-faults: $(VENV)/.installed kafka
	$(PYTEST) tests/faults/test_cluster_faults.py tests/faults/test_exactly_once.py --long-faults -s --durations=0
	$(PYTEST) -m long --long-faults --durations=0

# The package as users get it (tests/project/test_packaging.py installs it into a new venv and runs the demo).
wheel: $(VENV)/.installed
	$(BIN)/python -m pip wheel --no-deps . -w dist

# PYTHONPATH: the API reference and the CLI pages are read from this checkout's sources.
docs: $(VENV)/.installed
	PYTHONPATH=src $(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) build dist site src/*.egg-info .pytest_cache .hypothesis .grimp_cache .import_linter_cache
