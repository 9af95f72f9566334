"""`bench llm`'s served-context prompt is the one the server builds (system prompt and
tools block with the default config), so its decode figure compares with ``llm.tpot``."""

from __future__ import annotations

import pytest
from gguf import GGUFReader

from voicepipe.bench.llm import SERVED_QUESTION, TTFT_PROMPT, served_ids
from voicepipe.config import Config
from voicepipe.nn.llm.engine import gguf_path
from voicepipe.nn.llm.gguf import read_metadata
from voicepipe.nn.llm.tokenizer import ChatTokenizer
from voicepipe.stages.llm.engine import system_prefix
from voicepipe.stages.llm.tools import active_tools, system_prompt


@pytest.fixture(scope="module")
def tok() -> ChatTokenizer:
    path = gguf_path(Config().llm.model)  # the default model: its template renders tools
    if not path.is_file():
        pytest.skip(f"{path} not pulled")
    return ChatTokenizer(read_metadata(GGUFReader(str(path))))


def test_served_prompt_is_the_servers(tok) -> None:
    cfg = Config()
    box = active_tools(cfg, tok)
    assert box is not None and box.tools  # tools on by default, so the block is rendered
    ids = served_ids(tok)
    prefix = system_prefix(tok, system_prompt(cfg, box), box.specs())
    assert ids[: len(prefix)] == prefix  # the prefix every served prompt starts with
    # then the question's turn, as a prompt without the system message ends
    turn = ids[len(prefix) :]
    alone = tok.chat_ids([{"role": "user", "content": SERVED_QUESTION}])
    assert turn and alone[-len(turn) :] == turn
    bench = tok.chat_ids([{"role": "user", "content": TTFT_PROMPT}])
    assert len(ids) > 3 * len(bench)  # why the served pass reads more cache
