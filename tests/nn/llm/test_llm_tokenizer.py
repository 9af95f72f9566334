"""GGUF tokenizer and chat template against transformers' GGUF tokenizer (the oracle)."""

from __future__ import annotations

import pytest
from gguf import GGUFReader

from voicepipe.nn.llm.engine import gguf_path
from voicepipe.nn.llm.gguf import read_metadata
from voicepipe.nn.llm.tokenizer import ChatTokenizer, StreamDecoder

TEXTS = [
    "Hello world! It costs 3.5 dollars, or 1,000 yen.",
    "  spaces\n\n\ttabs 12345 don't I'LL ünïcödé 日本語 🙂",
    "<|im_start|>user\nhi<|im_end|>\n",
]
MESSAGES = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "content": "4."},
    {"role": "user", "content": "And 3+3?"},
]


@pytest.fixture(scope="module")
def path():
    return gguf_path("smollm2-135m")


@pytest.fixture(scope="module")
def tok(path) -> ChatTokenizer:
    return ChatTokenizer(read_metadata(GGUFReader(str(path))))


def test_encode_and_template_match_transformers(path, tok) -> None:
    transformers = pytest.importorskip("transformers")
    hf = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    for text in TEXTS:
        assert tok.encode(text) == hf.encode(text, add_special_tokens=False), text
    for msgs in (MESSAGES, MESSAGES[1:2]):
        assert tok.render(msgs) == hf.apply_chat_template(
            msgs, tokenize=False, add_generation_prompt=True
        )


def test_roundtrip_and_stream_decoding(tok) -> None:
    for text in TEXTS[:2]:
        ids = tok.encode(text)
        assert tok.decode(ids) == text
        sd = StreamDecoder(tok)
        pieces = [sd.push(i) for i in ids]
        assert "".join(pieces) == text
        assert all("\ufffd" not in p for p in pieces)  # never half a UTF-8 character
    im_end = tok.encode("<|im_end|>")
    assert len(im_end) == 1 and im_end[0] in tok.stop_ids
    assert StreamDecoder(tok).push(im_end[0]) == ""
