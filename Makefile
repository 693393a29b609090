# One place for the commands the README and CI use.
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin

.PHONY: venv lint unit test images demo clean

venv: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(BIN)/pip install -q -U pip
	# CPU build of torch from the machine's local disk; only the precision tests use it.
	$(BIN)/pip install -q 'torch==2.13.0' || echo "torch not available: precision tests will be skipped"
	$(BIN)/pip install -q -e '.[test,train]'
	touch $@

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

unit: venv
	$(BIN)/pytest -m "not docker and not molecule" tests

test: lint
	$(BIN)/pytest tests

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
