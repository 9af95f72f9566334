"""kernels/llama_step (the fused forward) against its references.

- Matrix kernels (q8a8, q4a8) against kernels/llama_step/reference.py: the same
  integer arithmetic, so only float accumulation order differs (rtol 1e-5).
- Batch invariance: a row of a many-row call equals a one-row call bit for bit.
- Q4_1 packing round-trips the default model's own Q4_1 tensors exactly.
- The whole fused model against the per-op path on the same dequantized
  weights in fp32 (llama.forward's reference): activations are quantized to
  int8 per 32 values, so logits differ by a little (KL ≤ 0.016 nats per
  position measured); the test bounds the KL and lets the top token flip only
  on a near-tie of the reference.
"""

from __future__ import annotations

import importlib.util

import pytest
import torch

from voicepipe.nn import kernels
from voicepipe.nn.llm import fused, llama, qlinear
from voicepipe.nn.llm.engine import gguf_path


def _reference():
    path = kernels.KERNELS_DIR / "llama_step" / "reference.py"
    spec = importlib.util.spec_from_file_location("llama_step_reference", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def mod():
    m = kernels.llama_step()
    if m is None:
        pytest.skip("kernels/llama_step needs AVX-512 VNNI or AVX2 and a compiler: per-op path")
    return m


@pytest.fixture(scope="module")
def ref():
    return _reference()


# K covers every q4 run shape: 576 = 8+1 chunks, 1536 = 3×8, 256 = 4, 448 = 4+2+1, 896 = 8+4+2.
SHAPES = [
    (192, 576),
    (1536, 576),
    (576, 1536),
    (100, 64),
    (37, 128),
    (48, 256),
    (40, 448),
    (33, 896),
]


@pytest.mark.parametrize("n,k", SHAPES)
def test_q8a8_matches_reference_and_is_batch_invariant(mod, ref, n, k) -> None:
    g = torch.Generator().manual_seed(n * 7 + k)
    w = torch.randint(-127, 128, (n, k), dtype=torch.int8, generator=g)
    scale = torch.rand(n, generator=g) * 0.01
    x = torch.randn(13, k, generator=g)
    x[2, :32] = 0.0  # an all-zero block
    x[3, 5] = 40.0  # an outlier
    y = mod.gemm(x, [w, scale])
    assert torch.allclose(y, ref.q8a8_gemm(x, w, scale), rtol=1e-5, atol=1e-5)
    for m in (1, 2, 5, 8, 9):
        part = mod.gemm(x[:m].contiguous(), [w, scale])
        assert torch.equal(part, y[:m])
        assert torch.equal(mod.gemm(x[m - 1 : m].contiguous(), [w, scale])[0], y[m - 1])


@pytest.mark.parametrize("n,k", SHAPES)
def test_q4a8_matches_reference_and_is_batch_invariant(mod, ref, n, k) -> None:
    g = torch.Generator().manual_seed(n * 11 + k)
    w = torch.randn(n, k, generator=g) * 0.05
    w[0, :32] = 0.25  # a constant block: d = 0
    q4 = list(qlinear.pack_q4(w))
    wq = qlinear.unpack_q4(*q4)
    assert (wq - w).abs().max() <= w.abs().max() / 15  # within half a step of a 4-bit grid
    x = torch.randn(20, k, generator=g)  # 20 rows go 8+6+6
    y = mod.gemm(x, q4)
    assert torch.allclose(y, ref.q4a8_gemm(x, wq), rtol=1e-5, atol=1e-5)
    for m in (1, 3, 6, 7, 8, 9, 13):  # 9 rows go 5+4, 13 rows 7+6
        assert torch.equal(mod.gemm(x[:m].contiguous(), q4), y[:m])
        assert torch.equal(mod.gemm(x[m - 1 : m].contiguous(), q4)[0], y[m - 1])


def test_q4a8_int16_sums_at_their_bound_stay_exact(mod, ref) -> None:
    # The AVX2 path sums a block's vpmaddubsw products in int16 lanes (half of them
    # in a first phase, the rest added in a second): at the top of the 4-bit grid
    # (q = 15) against activations all quantized to ±127 a lane reaches
    # 16 · 15 · 127 = 30,480 of int16's 32,767. Saturation anywhere would move these
    # outputs far from the reference; every row count (1-8 a pass, 9-16 as two
    # halves) must give the one-row bits.
    k, n = 1536, 40
    w = torch.full((n, k), 1.0)
    w[:, ::32] = 0.0  # each block: one weight at the grid's bottom, 31 at its top (q = 15)
    w[1::2] *= -1.0  # and negated rows: q = 0 at the top, 15 at the bottom
    q4 = list(qlinear.pack_q4(w))
    wq = qlinear.unpack_q4(*q4)
    nib = q4[0]
    assert int((nib & 15).max()) == 15 and int((nib >> 4).max()) == 15
    x = torch.ones(16, k)
    x[1::2] *= -1.0  # -127 after quantizing: the negative bound too
    x[2::4, 1::2] *= -1.0  # and rows of alternating sign
    want = ref.q4a8_gemm(x, wq)
    one = torch.cat([mod.gemm(x[i : i + 1].contiguous(), q4) for i in range(16)])
    assert torch.allclose(one, want, rtol=1e-5, atol=1e-3)
    assert float(one.abs().max()) > 1000.0  # the big sums did occur
    for m in range(1, 17):
        assert torch.equal(mod.gemm(x[:m].contiguous(), q4), one[:m]), m


def test_kernel_rejects_bad_matrices(mod) -> None:
    x = torch.zeros(1, 64)
    with pytest.raises(RuntimeError, match="multiple of 32"):
        mod.gemm(torch.zeros(1, 48), [torch.zeros(4, 48, dtype=torch.int8), torch.ones(4)])
    with pytest.raises(RuntimeError, match="float32"):
        mod.gemm(x, [torch.zeros(4, 64, dtype=torch.int8), torch.ones(4, dtype=torch.float64)])
    p, d, m = qlinear.pack_q4(torch.randn(4, 64))
    with pytest.raises(RuntimeError, match="q4 scales"):
        mod.gemm(x, [p, d.half(), m])
    with pytest.raises(RuntimeError):
        mod.gemm(torch.zeros(1, 128), [p, d, m])  # K mismatch


@pytest.fixture(scope="module")
def path():
    return gguf_path("smollm2-135m")


def test_q4_packing_is_exact_on_the_models_q4_1_tensors(mod, path) -> None:
    from voicepipe.nn.llm.gguf import load as load_gguf

    g = load_gguf(path)
    for name in ("blk.0.attn_q.weight", "blk.3.ffn_down.weight"):
        w = g.tensors[name]
        assert torch.equal(qlinear.unpack_q4(*qlinear.pack_q4(w)), w), name


PROMPT = "The three primary colours are red, yellow and"


@pytest.mark.parametrize("weights", ["int8", "int4"])
def test_fused_model_tracks_the_per_op_reference(mod, path, weights) -> None:
    m = llama.load(path, weights, max_len=256)[0]
    assert m.fused is not None and m.kernel == "llama_step"
    from voicepipe.nn.llm.tokenizer import ChatTokenizer

    ids = ChatTokenizer(m.metadata).encode(PROMPT)
    # The reference: the same quantized weights, dequantized, through the per-op path in fp32.
    ref = llama.load(path, "fp32", max_len=256)[0]
    for ly, ry in zip(m.layers, ref.layers, strict=True):
        for name in ("wqkv", "wo", "w13", "w2"):
            lin = getattr(ly, name)
            w = qlinear.unpack_q4(*lin.q4) if weights == "int4" else lin.dequantized()
            getattr(ry, name).w = w
            getattr(ry, name).fn = getattr(ry, name)._pick()
    out = m.output
    ref.output.w = qlinear.unpack_q4(*out.q4) if weights == "int4" else out.dequantized()
    ref.output.fn = ref.output._pick()

    got = llama.verify(m, m.new_cache(), ids)
    want = llama.verify(ref, ref.new_cache(), ids)
    kl = torch.nn.functional.kl_div(
        got.log_softmax(-1), want.log_softmax(-1), log_target=True, reduction="none"
    ).sum(-1)
    assert kl.max().item() < 0.05  # measured ≤ 0.016 nats
    # The top token may only flip on a near-tie of the reference.
    top = got.argmax(-1)
    margin = want.max(-1).values - want.gather(1, top[:, None])[:, 0]
    assert margin.max().item() < 0.5, margin


@pytest.mark.parametrize("context", [4, 42])
def test_fused_verify_rows_equal_decode_steps(mod, path, context) -> None:
    # 42 cached positions: the 9 verified rows end across a 16-key block of the
    # attention's key loop (rows of one pass see different numbers of keys).
    m = llama.load(path, "int4", max_len=128)[0]
    c = m.new_cache()
    llama.prefill(m, c, [1, 504, 3458, 282, *range(600, 600 + context - 4)])
    n = c.length
    toks = [7, 8, 9, 10, 11, 12, 13, 14, 15]
    rows = llama.verify(m, c, toks)
    c.rollback(n)
    for i, t in enumerate(toks):
        assert torch.equal(llama.decode_step(m, c, t), rows[i])


def test_fused_prefill_rows_equal_one_token_steps(mod, path) -> None:
    # 40 rows in one call go through attention in tiles of 16 rows; each row
    # must still be exactly what a one-token step computes.
    m = llama.load(path, "int4", max_len=64)[0]
    toks = torch.arange(300, 340)
    many = m.fused.forward(toks, m.new_cache().kv, 0, False)
    c = m.new_cache()
    for i, t in enumerate(toks.tolist()):
        assert torch.equal(llama.decode_step(m, c, t), many[i]), i


def test_no_kernels_keeps_the_per_op_path(path, monkeypatch) -> None:
    m = llama.load(path, "int4", max_len=64, kernels=False)[0]
    assert m.fused is None and m.kernel == "aten"
    assert fused.build_for(m) is None


def test_forward_into_changes_no_logit_and_fills_only_the_fed_rows(mod, path) -> None:
    m = llama.load(path, "int4", max_len=64)[0]
    toks = torch.tensor([5, 6, 7])
    a = m.fused.forward(toks, m.new_cache().kv, 0, False)
    feats = torch.zeros(64, m.args.dim)
    b = m.fused.forward_into(toks, m.new_cache().kv, 0, False, feats)
    assert torch.equal(a, b)
    assert bool(feats[:3].abs().sum(-1).gt(0).all()) and not feats[3:].any()


def test_two_threads_compute_the_same_bits(mod, path) -> None:
    m = llama.load(path, "int4", max_len=64)[0]
    assert m.fused.threads == 1  # the default (see kernels/llama_step: threads_)
    toks = torch.tensor([5, 6, 7, 8])
    one = m.fused.forward(toks, m.new_cache().kv, 0, False)
    m.fused.threads = 2
    two = m.fused.forward(toks, m.new_cache().kv, 0, False)
    assert torch.equal(one, two)  # each output row is one thread's, computed the same way


# A draft tree: a chain 7 → 8 → 9 → 10, a sibling of 8 (21) with a child (23),
# a sibling of 9 (22) and another of 8 (24): row t follows row PARENTS[t].
TREE = [7, 8, 9, 10, 21, 22, 23, 24]
PARENTS = [-1, 0, 1, 2, 0, 1, 4, 0]


def _path(t: int) -> list[int]:
    rows = [t]
    while PARENTS[rows[-1]] >= 0:
        rows.append(PARENTS[rows[-1]])
    return rows[::-1]


@pytest.mark.parametrize("context", [4, 42, 46])
def test_fused_tree_rows_equal_decodes_of_their_paths(mod, path, context) -> None:
    # 42 and 46 cached positions: a path's keys end inside, or cross into, the
    # next 16-key block of the attention's key loop.
    m = llama.load(path, "int4", max_len=128)[0]
    c = m.new_cache()
    feats = torch.zeros(128, m.args.dim)
    llama.prefill(m, c, [1, 504, 3458, 282, *range(600, 600 + context - 4)], feats)
    n = c.length
    rows = llama.verify(m, c, TREE, feats, PARENTS)
    tree_feats = feats[n : n + len(TREE)].clone()
    tree_kv = c.kv[:, :, :, n : n + len(TREE)].clone()
    for t in range(len(TREE)):
        c.rollback(n)
        for r in _path(t):  # the path's tokens one decode at a time
            logits = llama.verify(m, c, [TREE[r]], feats)[0]
        assert torch.equal(logits, rows[t]), t
        assert torch.equal(feats[c.length - 1], tree_feats[t]), t
        assert torch.equal(c.kv[:, :, :, c.length - 1], tree_kv[:, :, :, t]), t


def test_an_accepted_sibling_moves_into_place(mod, path) -> None:
    from voicepipe.nn.llm.draft_spec import FeatureTarget

    m = llama.load(path, "int4", max_len=64)[0]
    a, b = FeatureTarget(m), FeatureTarget(m)
    assert a.tree
    ids = [1, 504, 3458, 282, 600, 601]
    a.prefill(ids)
    b.prefill(ids)
    base = a.length
    a.score(TREE, PARENTS)
    a.move(base + 5, base + 2)  # the path 7 → 8 → 22 was right
    a.rollback(base + 3)
    b.score([7, 8, 22])
    assert a.fed == b.fed
    assert torch.equal(a.cache.kv, b.cache.kv)
    assert torch.equal(a.feats[: a.length], b.feats[: b.length])  # rows beyond: stale, unread
    with pytest.raises(RuntimeError, match="earlier row"):
        a.score([1, 2], [-1, 1])


def test_trees_need_the_fused_kernel(path) -> None:
    m = llama.load(path, "int4", max_len=64, kernels=False)[0]
    with pytest.raises(ValueError, match="fused kernel"):
        llama.verify(m, m.new_cache(), [1, 2], torch.zeros(64, m.args.dim), [-1, 0])


def test_the_heads_argmax_comes_with_the_logits(mod, path) -> None:
    # Found a chunk of columns at a time while the head runs: the same rows as an
    # argmax over the returned logits, with or without feats, a tree or last_only.
    m = llama.load(path, "int4", max_len=64)[0]
    toks = torch.tensor([5, 6, 7, 8, 9])
    best = torch.empty(5, dtype=torch.long)
    logits = m.fused.forward(toks, m.new_cache().kv, 0, False, best)
    assert torch.equal(best, logits.argmax(-1))
    one = torch.empty(1, dtype=torch.long)
    last = m.fused.forward(toks, m.new_cache().kv, 0, True, one)
    assert int(one) == int(last.argmax())
    feats = torch.zeros(64, m.args.dim)
    tree = [-1, 0, 1, 0, 3]
    logits = m.fused.forward_into(toks, m.new_cache().kv, 0, False, feats, tree, best)
    assert torch.equal(best, logits.argmax(-1))
    with pytest.raises(RuntimeError, match="one entry per logits row"):
        m.fused.forward(toks, m.new_cache().kv, 0, True, best)
    # Ties go to the first column, as argmax's. int4 (the head's format) computes
    # each output in its own lane of the same instructions, so a matrix whose
    # second 1,024 rows repeat its first ties exactly across the 1,024-column
    # chunks the scan folds, and rows 3 and 7 within one.
    from voicepipe.nn.llm.qlinear import Linear

    w = torch.randn(2048, 576)
    w[7] = w[3]
    w[1024:] = w[:1024]
    x = torch.randn(4, 576)
    x[0] = w[3] * 10  # row 0's top: the tie of columns 3, 7, 1027 and 1031
    got = torch.empty(4, dtype=torch.long)
    y = mod.gemm(x, fused.matrix(Linear(w, None, "int4")), got)
    assert torch.equal(y[:, 1024:], y[:, :1024]) and torch.equal(y[:, 7], y[:, 3])
    assert torch.equal(got, y.argmax(-1)) and bool((got < 1024).all())
    assert int(got[0]) == 3
    y = mod.gemm(x, fused.matrix(Linear(w, None, "int8")), got)
    assert torch.equal(got, y.argmax(-1))


def test_the_heads_argmax_keeps_the_first_tie_when_members_claim_chunks(mod) -> None:
    # The head's 1,024-column chunks are claimed by the members in whatever order
    # they get to them (matrix.h, Chunks), so the argmax must not depend on which
    # member folds which chunk first: of equal maxima the lowest column wins.
    # Eight chunks repeat one block of rows; two threads, several calls (claims
    # interleave differently from call to call).
    from voicepipe.nn.llm.qlinear import Linear

    g = torch.Generator().manual_seed(3)
    block = torch.randn(1024, 576, generator=g)
    block[900] = block[5]
    w = block.repeat(8, 1)
    lone = torch.randn(576, generator=g)
    w[4096 + 17] = lone  # row 2's top: only in the fifth chunk
    x = torch.randn(3, 576, generator=g)
    x[0] = block[5] * 10  # row 0's top ties in every chunk: columns 5, 900, 1029, ...
    x[2] = lone * 10
    mat = fused.matrix(Linear(w, None, "int4"))
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        for _ in range(6):
            got = torch.empty(3, dtype=torch.long)
            y = mod.gemm(x, mat, got)
            assert torch.equal(got, y.argmax(-1))
            assert int(got[0]) == 5 and int(got[2]) == 4096 + 17
    finally:
        torch.set_num_threads(threads)


def test_every_row_count_matches_the_reference_row_for_row(mod, ref) -> None:
    # Every pass shape the q4 and q8 kernels have (1-8 rows a pass, 9-16 as two
    # halves): each row equal to a one-row call bit for bit, and within the
    # reference's tolerance.
    g = torch.Generator().manual_seed(5)
    w = torch.randn(48, 448, generator=g) * 0.05
    q4 = list(qlinear.pack_q4(w))
    wq = qlinear.unpack_q4(*q4)
    w8 = torch.randint(-127, 128, (40, 576), dtype=torch.int8, generator=g)
    s8 = torch.rand(40, generator=g) * 0.01
    x4, x8 = torch.randn(16, 448, generator=g), torch.randn(16, 576, generator=g)
    one4 = torch.cat([mod.gemm(x4[i : i + 1].contiguous(), q4) for i in range(16)])
    one8 = torch.cat([mod.gemm(x8[i : i + 1].contiguous(), [w8, s8]) for i in range(16)])
    assert torch.allclose(one4, ref.q4a8_gemm(x4, wq), rtol=1e-5, atol=1e-5)
    assert torch.allclose(one8, ref.q8a8_gemm(x8, w8, s8), rtol=1e-5, atol=1e-5)
    for m in range(1, 17):
        assert torch.equal(mod.gemm(x4[:m].contiguous(), q4), one4[:m]), m
        assert torch.equal(mod.gemm(x8[:m].contiguous(), [w8, s8]), one8[:m]), m


def test_the_pass_profile_adds_up_and_changes_no_bit(mod, path) -> None:
    m = llama.load(path, "int4", max_len=64)[0]
    toks = torch.tensor([5, 6, 7, 8, 9])
    plain = m.fused.forward(toks, m.new_cache().kv, 0, False)
    m.fused.profile(True)
    for _ in range(2):
        got = m.fused.forward(toks, m.new_cache().kv, 0, False, threads=2)
        assert torch.equal(got, plain)
    tbl = m.fused.profile_table()
    m.fused.profile(False)
    assert tbl["passes"] == 2 and tbl["rows"] == 10 and tbl["q4"]
    assert 1 <= len(tbl["members"]) <= 2
    phases = tbl["members"][0]
    for name in ("norm", "quant", "qkv", "rope", "attention", "o", "w13", "silu", "w2", "head"):
        assert phases[name] > 0, name
    # Member 0's phases (kOther taking what its laps miss) add up to the wall time.
    assert sum(phases.values()) == pytest.approx(tbl["wall_ms"], rel=1e-6)
    assert phases["other"] >= 0
    a = m.args
    blocks = a.dim // 32
    assert tbl["weight_bytes"]["head"] == -(-a.vocab_size // 16) * blocks * 320
    qkv_rows = (a.n_head + 2 * a.n_kv_head) * a.head_dim
    assert tbl["weight_bytes"]["qkv"] == a.n_layer * -(-qkv_rows // 16) * blocks * 320
    # Off again: later passes add nothing.
    m.fused.forward(toks, m.new_cache().kv, 0, False)
    assert m.fused.profile_table()["passes"] == 0


def test_the_read_rate_probe_reads_and_refuses_what_it_cannot(mod) -> None:
    buf = torch.ones(8 << 20, dtype=torch.uint8)
    for threads in (1, 2):
        s = mod.read_seconds(buf, threads, 2)
        assert 0 < s < 10  # 8 MiB: a positive, finite time (no rate is asserted)
    with pytest.raises(RuntimeError, match="128-byte"):
        mod.read_seconds(buf[: 8 * 128 + 1], 1, 1)
    with pytest.raises(RuntimeError, match="threads and passes"):
        mod.read_seconds(buf, 0, 1)
    from voicepipe.bench.llm_profile import read_gb_s

    assert read_gb_s(1, mib=8, passes=2) > 0
