"""Draft data generation on the serving target (fused, batch 1): replies and features."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="module")
def target():
    from voicepipe.nn.llm.engine import gguf_path, shared_model
    from voicepipe.nn.llm.tokenizer import ChatTokenizer

    m, _ = shared_model(gguf_path("smollm2-135m"), "int4", 512)  # one load per test process
    return m, ChatTokenizer(m.metadata)


def _same_features(m, got: torch.Tensor, ref: torch.Tensor) -> None:
    """The fused kernel runs prefill rows and one-token steps through the same
    batch-invariant code and norms them in both: the same bits. Without it (a CPU with
    neither AVX2 nor AVX-512, or VOICEPIPE_KERNELS=0) aten's matrix products block rows by the batch
    size, so a prefill and a step differ by float rounding: equal within fp16 steps."""
    if m.kernel == "llama_step":
        assert torch.equal(got, ref)
        return
    g, r = got.float(), ref.float()
    # bf16 activations: measured 0.7-0.9 % relative error, row cosines >= 0.9996
    assert ((g - r).norm() / r.norm()).item() < 0.02
    assert torch.nn.functional.cosine_similarity(g, r, dim=-1).min().item() > 0.995


def test_generate_one_matches_greedy_and_the_engine_features(target) -> None:
    from voicepipe.nn.llm.draft_spec import FeatureTarget
    from voicepipe.nn.llm.engine import ModelTarget
    from voicepipe.speculative.loop import SpeculativeDecoder
    from voicepipe.training.draft import chat
    from voicepipe.training.draft_gen import generate_one

    m, tok = target
    stop = set(tok.stop_ids)
    ids = chat(tok, "What is a haiku?", 0)
    s = generate_one(m, ids, 24, stop)
    toks = s["tokens"].tolist()
    assert s["prompt_len"] == len(ids) and toks[: len(ids)] == ids
    plain = [t for st in SpeculativeDecoder(ModelTarget(m, 512), None).generate(ids, 24, stop)
             for t in st]  # fmt: skip
    assert toks[len(ids) :] == plain  # the target's own greedy reply
    # feats[i] is the feature whose logits score tokens[i+1]: exactly what the
    # draft reads at inference (FeatureTarget over the same positions).
    assert s["feats"].shape == (len(toks) - 1, m.args.dim) and s["feats"].dtype == torch.float16
    ft = FeatureTarget(m, 512)
    ft.prefill(toks[:-1])
    _same_features(m, s["feats"], ft.feats[: len(toks) - 1].half())


def test_sampled_replies_are_seeded_and_carry_the_engine_features(target) -> None:
    from voicepipe.nn.llm.draft_spec import FeatureTarget
    from voicepipe.training.draft import chat
    from voicepipe.training.draft_gen import generate_one

    m, tok = target
    stop = set(tok.stop_ids)
    ids = chat(tok, "Tell me something about the sea.", 0)
    greedy = generate_one(m, ids, 32, stop)["tokens"].tolist()
    a = generate_one(m, ids, 32, stop, temperature=1.0, seed=3)
    b = generate_one(m, ids, 32, stop, temperature=1.0, seed=3)
    c = generate_one(m, ids, 32, stop, temperature=1.0, seed=4)
    toks = a["tokens"].tolist()
    assert toks == b["tokens"].tolist() and torch.equal(a["feats"], b["feats"])  # seeded
    assert toks != greedy and toks != c["tokens"].tolist()
    ft = FeatureTarget(m, 512)  # the target's features along the sampled tokens
    ft.prefill(toks[:-1])
    _same_features(m, a["feats"], ft.feats[: len(toks) - 1].half())
