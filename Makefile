# Two commands on a fresh machine with Python 3.11:
#   make demo   set up .venv, replay the shipped conversation through every memory and run a
#               short benchmark (one LoCoMo dialogue)
#   make test   set up .venv, lint (ruff, mypy) and run the whole test suite (what CI runs);
#               .venv/bin/pytest -m "not model" skips the tests that load MiniLM or spaCy
# and the full benchmark (every dialogue, per-category tables; progress lines on stderr):
#   make bench
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
DATA ?= ../shared/data/locomo_dev.json
SRC := shared langchain_ctxmgmt llamaindex_ctxmgmt tests examples benchmarks tools

.PHONY: demo test bench lint clean

PIP := $(BIN)/pip install -qq --no-compile

$(BIN)/python:
	@echo "Creating $(VENV) with $(PYTHON)"
	@$(PYTHON) -m venv $(VENV)
	@$(PIP) --upgrade pip

# torch first, pinned, the CPU build: a torch wheel pip finds without an index (its find-links,
# as on machines that keep wheels offline), its other requirements from pip's configured index;
# otherwise PyTorch's CPU index, as PyTorch documents it (PyPI's torch pulls GBs of CUDA).
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
$(VENV)/.torch: | $(BIN)/python
	@echo "Installing torch 2.13.0 (CPU) into $(VENV)"
	@if $(PIP) --no-index --no-deps torch==2.13.0 2>/dev/null; then $(PIP) torch==2.13.0; \
	else $(PIP) torch==2.13.0 --index-url $(TORCH_INDEX); fi
	@touch $@

# The demo needs the memories with their weights, the CLI and both frameworks ([all]); the
# tests also need the test tools ([dev]). pip compiles nothing ahead (--no-compile): Python
# compiles what it imports, when it first imports it.
$(VENV)/.installed-all: pyproject.toml $(VENV)/.torch
	@echo "Installing ctxmgmt[all] (editable) into $(VENV)"
	@$(PIP) -e ".[all]"
	@touch $@

$(VENV)/.installed: pyproject.toml $(VENV)/.torch
	@echo "Installing ctxmgmt[dev] (editable) into $(VENV)"
	@$(PIP) -e ".[dev]"
	@touch $@

demo: $(VENV)/.installed-all
	@$(BIN)/ctxmgmt demo
	@if [ -f "$(DATA)" ]; then \
	echo; echo "Benchmark: one dialogue of $(DATA) and its questions"; \
	echo "with gold evidence. Every memory, the full history and the baselines (these"; \
	echo "get KadaneDial's tokens per question) replay it; the tables show how much"; \
	echo "evidence each sends verbatim, whether the answer is in it, and the cost."; \
	$(BIN)/ctxmgmt bench "$(DATA)" --quick --no-references --no-progress; \
	else echo "no $(DATA): skipping the benchmark (pass DATA=path/to/locomo.json)"; fi
	@echo "The full benchmark (every dialogue, per question category): make bench"

bench: $(VENV)/.installed-all
	$(BIN)/ctxmgmt bench "$(DATA)" --categories

lint: $(VENV)/.installed
	$(BIN)/ruff check $(SRC)
	$(BIN)/ruff format --check $(SRC)
	$(BIN)/mypy shared/ctxmgmt langchain_ctxmgmt llamaindex_ctxmgmt

test: $(VENV)/.installed lint
	$(BIN)/pytest --disable-socket --allow-unix-socket

clean:
	rm -rf $(VENV) build dist *.egg-info
