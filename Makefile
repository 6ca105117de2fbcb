# Two commands on a fresh machine with Python 3.11:
#   make demo   set everything up, replay the shipped conversation through every memory and
#               run a short benchmark (one LoCoMo dialogue)
#   make test   set everything up, lint (ruff, mypy) and run the test suite
# and the full benchmark (every dialogue, per-category tables; progress lines on stderr):
#   make bench
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
DATA ?= ../shared/data/locomo_dev.json
SRC := shared langchain_ctxmgmt llamaindex_ctxmgmt tests examples benchmarks tools

.PHONY: demo test bench lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# torch first, pinned: on these machines 2.13.0 is a local CPU wheel; unpinned pulls GBs of CUDA.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $@

demo: $(VENV)/.installed
	$(BIN)/ctxmgmt demo
	@if [ -f "$(DATA)" ]; then $(BIN)/ctxmgmt bench "$(DATA)" --quick; \
	else echo "no $(DATA): skipping the benchmark (pass DATA=path/to/locomo.json)"; fi
	@echo "The full benchmark (every dialogue; several minutes): make bench"

bench: $(VENV)/.installed
	$(BIN)/ctxmgmt bench "$(DATA)" --categories

lint: $(VENV)/.installed
	$(BIN)/ruff check $(SRC)
	$(BIN)/ruff format --check $(SRC)
	$(BIN)/mypy shared/ctxmgmt langchain_ctxmgmt llamaindex_ctxmgmt

test: $(VENV)/.installed lint
	$(BIN)/pytest --disable-socket --allow-unix-socket

clean:
	rm -rf $(VENV) build dist *.egg-info
