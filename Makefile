# One-command set-up, run and test. Idempotent: a second run does nothing loud.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup models run test lint clean

setup: $(STAMP) models

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@# torch first: the CPU wheel on disk; anything installed later that wants torch is then satisfied
	@$(BIN)/pip install -q --disable-pip-version-check torch==2.13.0
	@$(BIN)/pip install -q --disable-pip-version-check -e '.[dev,local,ray]'
	@# EnCodec backend's model code: --no-deps, its declared deps would pull torchaudio (+ CUDA torch)
	@$(BIN)/pip install -q --disable-pip-version-check --no-deps einops encodec==0.1.1
	@touch $(STAMP)

models: $(STAMP)
	@$(BIN)/voicepipe models pull --quiet

run: setup
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
