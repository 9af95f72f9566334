"""Fixtures the LLM stage's real-model tests share: the fast profile's 135M, replies capped."""

from __future__ import annotations

import dataclasses

import pytest

from tests.profile import fast
from voicepipe.config import Config
from voicepipe.stages.llm.engine import engine_for


@pytest.fixture(scope="module")
def cfg() -> Config:
    c = fast()
    return dataclasses.replace(c, llm=dataclasses.replace(c.llm, max_new_tokens=40))


@pytest.fixture(scope="module")
def engine(cfg):
    return engine_for(cfg)
