"""The GGUF engine on the real default model (SmolLM2-135M-Instruct Q4_1).

Oracle: transformers' own GGUF loader (dequantizes to fp32). Tolerance: the
fp32 engine's logits agree within 2e-3 absolute (measured ~5e-5; logits span
about ±30), and the argmax agrees at every position.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.speculative.test_accept import chi2, chi2_critical
from voicepipe.nn import kernels
from voicepipe.nn.llm import fused, llama
from voicepipe.nn.llm.engine import ModelProposer, ModelTarget, gguf_path
from voicepipe.nn.llm.tokenizer import ChatTokenizer
from voicepipe.speculative import accept
from voicepipe.speculative.loop import SpeculativeDecoder
from voicepipe.speculative.ngram import NgramProposer
from voicepipe.speculative.sampling import SamplingParams, probs

PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a land far away, there lived a",
    "def fibonacci(n):\n    if n < 2:\n        return n\n",
]
GROUNDED = (
    'Repeat this sentence exactly: "Trains leave the central station every '
    'twelve minutes, and the last one departs at 11:48 pm."'
)


@pytest.fixture(scope="module")
def path():
    return gguf_path("smollm2-135m")


@pytest.fixture(scope="module")
def fp32(path) -> llama.Transformer:
    return llama.load(path, "fp32", max_len=512)[0]


@pytest.fixture(scope="module")
def int8(path) -> llama.Transformer:
    return llama.load(path, "int8", max_len=512)[0]


@pytest.fixture(scope="module")
def tok(fp32) -> ChatTokenizer:
    return ChatTokenizer(fp32.metadata)


def test_logits_match_transformers_gguf_load(path, fp32, tok) -> None:
    transformers = pytest.importorskip("transformers")
    hf = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32
    ).eval()
    for text in PROMPTS:
        ids = tok.encode(text)
        mine = llama.verify(fp32, fp32.new_cache(128), ids)
        with torch.no_grad():
            ref = hf(torch.tensor([ids])).logits[0]
        assert (mine - ref).abs().max().item() < 2e-3, text
        assert torch.equal(mine.argmax(-1), ref.argmax(-1))


def test_prefill_then_decode_equals_one_pass(fp32, tok) -> None:
    ids = tok.encode(PROMPTS[1])
    full = llama.verify(fp32, fp32.new_cache(128), ids)
    c = fp32.new_cache(128)
    last = llama.prefill(fp32, c, ids[:-3])
    assert torch.allclose(last, full[-4], atol=1e-4)
    for i, t in enumerate(ids[-3:]):
        step = llama.decode_step(fp32, c, t)
        assert torch.allclose(step, full[len(ids) - 3 + i], atol=1e-4)


def test_target_exposes_last_hidden_features(int8, tok) -> None:
    # The feats buffer gets every fed position's normed last hidden state: the rows
    # the head turned into the logits, on prefill (all rows) and on score alike.
    t = ModelTarget(int8, 64)
    t.feats = torch.zeros(64, int8.args.dim)
    ids = tok.encode(PROMPTS[0])
    first = torch.from_numpy(t.prefill(ids))
    logits = t.score([11, 22]).logits
    n = len(ids)
    assert bool(t.feats[: n + 2].abs().sum(-1).gt(0).all()) and not t.feats[n + 2 :].any()
    h = t.feats[n - 1 : n + 2]
    got = torch.cat([first[None], torch.from_numpy(logits)])
    if int8.fused is None:
        assert torch.equal(int8.output(h.to(int8.dtype)).float(), got)
    else:  # the fused head's own matrix kernel on those rows: the same bits
        head = kernels.llama_step().gemm(h.contiguous(), fused.matrix(int8.output))
        assert torch.equal(head, got)


def test_kv_rollback_forgets_rejected_tokens(int8, tok) -> None:
    ids = tok.encode(PROMPTS[0])
    a, b = int8.new_cache(64), int8.new_cache(64)
    llama.prefill(int8, a, ids)
    llama.prefill(int8, b, ids)
    n = len(ids)
    # a: verify 2 real continuations + 3 junk drafts, keep 2; b: only the 2.
    llama.verify(int8, a, [11, 22, 999, 4242, 77])
    a.rollback(n + 2)
    llama.verify(int8, b, [11, 22])
    assert a.length == b.length == n + 2
    assert torch.equal(a.kv[:, :, :, n + 2 :], torch.zeros_like(a.kv[:, :, :, n + 2 :]))
    assert torch.equal(a.kv, b.kv)  # same shapes fed: bit-identical
    assert torch.equal(llama.decode_step(int8, a, 5), llama.decode_step(int8, b, 5))


def test_kv_move_copies_one_position_of_every_layer() -> None:
    from voicepipe.nn.llm.kv_cache import KVCache

    c = KVCache(3, 2, 16, 4, torch.float32)
    c.kv.copy_(torch.randn_like(c.kv))
    c.advance(6)
    before = c.kv.clone()
    c.move(5, 2)
    assert torch.equal(c.kv[:, :, :, 2], before[:, :, :, 5])
    keep = [i for i in range(16) if i != 2]
    assert torch.equal(c.kv[:, :, :, keep], before[:, :, :, keep])  # nothing else moved
    for src, dst in ((6, 2), (2, 6), (-1, 0)):  # only positions the cache holds
        with pytest.raises(ValueError, match="cannot move"):
            c.move(src, dst)


_PLAIN: dict[tuple[int, ...], list[int]] = {}


def _greedy(m: llama.Transformer, ids: list[int], n: int, stop: set[int]) -> list[int]:
    """Plain greedy decoding (one decode_step per token), memoised across parameters."""
    key = (*ids, -n)
    if key not in _PLAIN:
        dec = SpeculativeDecoder(ModelTarget(m, 512), None, SamplingParams())
        _PLAIN[key] = [t for s in dec.generate(ids, n, stop) for t in s]
    return _PLAIN[key]


@pytest.fixture(scope="module")
def int4(path) -> llama.Transformer:
    return llama.load(path, "int4", max_len=512)[0]


@pytest.mark.parametrize(
    "drafter,k,adaptive",
    [
        ("ngram", 1, False),
        ("ngram", 3, True),
        pytest.param("ngram", 6, False, marks=pytest.mark.slow),
        pytest.param("draft-model", 2, False, marks=pytest.mark.slow),
        ("draft-model", 4, True),
    ],
)
def test_greedy_speculation_identical_to_plain(int8, int4, tok, drafter, k, adaptive) -> None:
    """verify() rows are bit-identical to decode_step() rows (int8), so no near-tie can flip."""
    prompts = [tok.chat_ids([{"role": "user", "content": GROUNDED}])]
    if drafter == "ngram":
        prompts.append(tok.chat_ids([{"role": "user", "content": "Name three colours."}]))
    n = 24 if drafter == "ngram" else 12
    for ids in prompts:
        want = _greedy(int8, ids, n, tok.stop_ids)
        prop = (
            NgramProposer()
            if drafter == "ngram"
            else ModelProposer(int4, SamplingParams(), "smollm2-int4")  # cheaper, same tokenizer
        )
        dec = SpeculativeDecoder(
            ModelTarget(int8, 512), prop, SamplingParams(), k=k, adaptive=adaptive
        )
        got = [t for s in dec.generate(ids, n, tok.stop_ids) for t in s]
        assert got == want
        if ids is prompts[0]:
            assert dec.metrics.accepted > n // 3  # the quote is found / the draft agrees


def test_exact_rule_on_real_next_token_distribution(int8, int4, tok) -> None:
    """Target = int8 SmolLM2 at T=1, draft = its int4 re-quantization (a real p ≠ q)."""
    draft = int4
    ids = tok.chat_ids([{"role": "user", "content": "Tell me a fact about cats."}])
    sp = SamplingParams(temperature=1.0)
    q = probs(llama.prefill(int8, int8.new_cache(128), ids).numpy(), sp)
    p = probs(llama.prefill(draft, draft.new_cache(128), ids).numpy(), sp)
    assert np.abs(p - q).sum() > 0.01
    rng = np.random.default_rng(5)
    top = np.argsort(-q)[:12]  # bins: the 12 most likely tokens and "everything else"
    bin_of = np.full(q.shape[0], len(top))
    bin_of[top] = np.arange(len(top))
    qb = np.append(q[top], 1 - q[top].sum())
    counts = np.zeros(len(qb))
    qq = np.stack([q, q])  # K = 1: row 0 scores the draft, row 1 is the bonus row
    drafts = rng.choice(q.shape[0], size=20000, p=p / p.sum())
    for x in drafts:
        r = accept.exact(np.array([x]), p[None], qq, rng.random(1), float(rng.random()))
        counts[bin_of[r.emitted(np.array([x]))[0]]] += 1
    stat, dof = chi2(counts, qb)
    assert stat < chi2_critical(dof), (stat, dof)


@pytest.mark.parametrize("use_kernels", [True, False])
def test_scores_carry_each_rows_argmax(tok, use_kernels: bool) -> None:
    # Greedy verification reads Scores.best: the fused head finds it as it runs,
    # the per-op path by an argmax; either way the logits' own argmax.
    m = llama.load(gguf_path("smollm2-135m"), "int4", max_len=64, kernels=use_kernels)[0]
    t = ModelTarget(m, 64)
    t.prefill(tok.encode(PROMPTS[0]))
    s = t.score([11, 22, 33])
    assert s.best is not None and s.best.tolist() == s.logits.argmax(-1).tolist()
