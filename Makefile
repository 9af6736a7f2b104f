# Two commands set everything up on a fresh machine:
#   make demo   the whole pipeline end to end on the embedded broker
#   make test   the full test suite (.ci/run calls exactly this)
#   make wheel  dist/fastpubsub-*.whl, what Dockerfile and users install
#   make docs   the documentation site into site/ (mkdocs build --strict: a broken link fails it)
# `make install` ends with `pubsub warmup`: the numba kernels are compiled once, there, not in the first demo.
VENV   ?= .venv
PYTHON ?= python3
BIN     = $(VENV)/bin

.PHONY: demo test bench install wheel docs clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,spark,docs]'
	$(BIN)/pubsub warmup
	touch $@

install: $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/pubsub demo

test: $(VENV)/.installed
	$(BIN)/python -m pytest -q

# The package as users get it (tests/test_packaging.py installs it into a new venv and runs the demo).
wheel: $(VENV)/.installed
	$(BIN)/python -m pip wheel --no-deps . -w dist

# PYTHONPATH: the API reference and the CLI pages are read from this checkout's sources.
docs: $(VENV)/.installed
	PYTHONPATH=src $(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) build dist site src/*.egg-info .pytest_cache .hypothesis .grimp_cache .import_linter_cache
