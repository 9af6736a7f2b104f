# Two commands set everything up on a fresh machine:
#   make demo   the whole pipeline end to end on the embedded broker
#   make test   the full test suite (.ci/run calls exactly this)
VENV   ?= .venv
PYTHON ?= python3
BIN     = $(VENV)/bin

.PHONY: demo test bench install clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,spark]'
	touch $@

install: $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/pubsub demo

test: $(VENV)/.installed
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
