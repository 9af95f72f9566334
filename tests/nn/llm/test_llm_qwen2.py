"""qwen2 architecture (Qwen2.5-Coder 0.5B): logits, tokenizer and template vs transformers.

Slow and optional: the model is a 0.5 GB benchmark download, never a default
(`voicepipe models pull qwen2.5-coder-0.5b`). Run with `pytest -m slow`.
"""

from __future__ import annotations

import pytest
import torch

from voicepipe import registry
from voicepipe.nn.llm import llama
from voicepipe.nn.llm.engine import gguf_path
from voicepipe.nn.llm.tokenizer import ChatTokenizer

pytestmark = pytest.mark.slow
NAME = "qwen2.5-coder-0.5b"


@pytest.fixture(scope="module")
def path():
    if registry.verify(NAME, deep=False):
        pytest.skip(f"{NAME} not pulled (voicepipe models pull {NAME})")
    return gguf_path(NAME)


def test_qwen2_matches_transformers(path) -> None:
    transformers = pytest.importorskip("transformers")
    m = llama.load(path, "fp32", max_len=256)[0]
    assert m.args.arch == "qwen2" and m.args.attn_bias
    tok = ChatTokenizer(m.metadata)
    hf_tok = transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    msgs = [{"role": "user", "content": "Write a function that adds 3.5 and 1,000."}]
    assert tok.render(msgs) == hf_tok.apply_chat_template(
        msgs, tokenize=False, add_generation_prompt=True
    )
    hf = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32
    ).eval()
    for text in ("def quicksort(arr):", "The capital of France is Paris.  12345 don't\n\n x"):
        ids = tok.encode(text)
        assert ids == hf_tok.encode(text, add_special_tokens=False)
        mine = llama.verify(m, m.new_cache(64), ids)
        with torch.no_grad():
            ref = hf(torch.tensor([ids])).logits[0]
        assert (mine - ref).abs().max().item() < 2e-3
        assert torch.equal(mine.argmax(-1), ref.argmax(-1))
