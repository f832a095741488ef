# The README's commands. Each target creates .venv and installs everything if needed.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install demo test lint bench clean docs

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch first, pinned: here it is the CPU build on local disk; unpinned, pip pulls a
	# multi-GB CUDA build.
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

## A real sweep on the embedded default: digits, CPU, ~1 minute on 2 cores.
demo: $(STAMP)
	$(BIN)/costtune sweep experiments/digits.yaml

## ruff, mypy, then pytest.
test: $(STAMP)
	$(BIN)/ruff check costtune tests benchmarks
	$(BIN)/mypy costtune
	$(BIN)/python -m pytest -q

## docs/config.md from the config's models (a test fails when it is stale)
docs: $(STAMP)
	$(BIN)/python -c "from costtune.core.config import config_reference as r; import pathlib; p = pathlib.Path('docs/config.md'); head = p.read_text().split('| field |')[0]; p.write_text(head + r())"

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
