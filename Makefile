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
	@echo "Creating $(VENV) with $(PYTHON)"
	@$(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --upgrade pip

# torch first, pinned, the CPU build: a torch wheel pip finds without an index (its find-links,
# as on machines that keep wheels offline), its other requirements from pip's configured index;
# otherwise PyTorch's CPU index, as PyTorch documents it (PyPI's torch pulls GBs of CUDA).
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	@echo "Installing torch 2.13.0 (CPU), then ctxmgmt with its [dev] extra, into $(VENV)"
	@if $(BIN)/pip install --quiet --no-index --no-deps torch==2.13.0 2>/dev/null; \
	then $(BIN)/pip install --quiet torch==2.13.0; \
	else $(BIN)/pip install --quiet torch==2.13.0 --index-url $(TORCH_INDEX); fi
	@$(BIN)/pip install --quiet -e ".[dev]"
	@touch $@

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
