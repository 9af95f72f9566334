"""Draft fine-tuning: the batch mix, and a short fit from the release draft on target replies."""

from __future__ import annotations

import argparse
import json
import random

import pytest
import torch


def test_pick_draws_the_recent_share_of_every_batch() -> None:
    from voicepipe.training.draft_fit import pick

    old, recent = [("old", i) for i in range(100)], [("new", i) for i in range(100)]
    random.seed(0)
    assert all(x[0] == "new" for x in pick(old, recent, 8, 1.0))
    drawn = [x for _ in range(500) for x in pick(old, recent, 8, 0.75)]
    assert len(drawn) == 4000
    share = sum(x[0] == "new" for x in drawn) / len(drawn)
    assert 0.72 < share < 0.78
    uniform = [x for _ in range(500) for x in pick(old, recent, 8, 0.0)]
    assert 0.45 < sum(x[0] == "new" for x in uniform) / len(uniform) < 0.55
    batch = pick(old, recent, 8, 0.75)
    assert len(set(batch)) == 8  # no sequence twice in one batch
    assert len(pick([], recent[:3], 8, 0.75)) == 3  # too few: all there is


def test_by_length_regroups_a_pool_into_batches_of_like_length() -> None:
    from voicepipe.training.draft_fit import by_length

    random.seed(1)
    pool = [
        {"tokens": torch.zeros(n), "id": i} for i, n in enumerate(random.sample(range(5, 300), 32))
    ]
    batches = by_length(pool, 8)
    assert [len(b) for b in batches] == [8, 8, 8, 8]
    assert sorted(x["id"] for b in batches for x in b) == list(range(32))  # each sample once
    spans = sorted(
        (min(len(x["tokens"]) for x in b), max(len(x["tokens"]) for x in b)) for b in batches
    )
    # like lengths together: the batches' length ranges do not overlap
    assert all(hi < lo for (_, hi), (lo, _) in zip(spans, spans[1:], strict=False))
    assert len(by_length(pool[:5], 2)) == 3  # a short pool: its rest is one smaller batch


def test_evaluate_counts_what_drafting_through_the_cache_gets_right() -> None:
    # evaluate's agreement 1, 2 and 3 tokens deep must be what the cached decode
    # gets: from every reply row, draft on while the guesses before were right.
    from voicepipe.nn.llm.draft_model import DraftArgs, EagleDraft
    from voicepipe.training.draft_fit import evaluate

    torch.manual_seed(0)
    a = DraftArgs(dim=32, n_head=4, n_kv_head=2, head_dim=8, ffn_dim=48, n_layer=1,
                  rope_base=10000.0, target_vocab=50)  # fmt: skip
    model = EagleDraft(a, torch.tensor([3, 8]))  # 2 rows: right half the time by chance
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.2)
    model.eval()
    emb = torch.randn(50, 32)
    head = emb[model.vocab]
    val = [
        {"tokens": torch.randint(0, 50, (n,)), "feats": torch.randn(n - 1, 32), "prompt_len": 4}
        for n in (14, 20, 17, 20, 22, 18, 25, 16)
    ]
    hits, n = [0, 0, 0], [0, 0, 0]
    with torch.no_grad():
        for smp in val:
            t, f, pl = smp["tokens"], smp["feats"], smp["prompt_len"]
            rows = len(t) - 2  # row i reads (f_i, E[t_{i+1}]), its label is f_{i+1}'s argmax
            want = (f[1 : rows + 1] @ head.T).argmax(-1)
            fin, nemb = f[None, :rows], emb[t[1 : rows + 1]][None]
            for q0 in range(rows):
                if q0 + 2 < pl:  # a prompt row: never drafted from
                    continue
                cache = model.new_cache(64)
                h = model(fin[:, : q0 + 1], nemb[:, : q0 + 1], cache, 0)[:, -1:]
                for s in range(3):
                    q = q0 + s
                    if q >= rows:
                        break
                    if s:
                        h = model(h, nemb[:, q : q + 1], cache, q)
                    ok = bool((h[0, 0] @ head.T).argmax() == want[q])
                    hits[s] += ok
                    n[s] += 1
                    if not ok:
                        break
    got = evaluate(model, head, val, emb)
    assert min(n) > 10  # every depth was reached
    assert got["val_top1"] == pytest.approx(hits[0] / n[0], abs=1e-4)
    assert got["val_c2"] == pytest.approx(hits[1] / n[1], abs=1e-4)
    assert got["val_c3"] == pytest.approx(hits[2] / n[2], abs=1e-4)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Three tiny gen shards of the int4 target's own greedy replies (6 prompts)."""
    from voicepipe.nn.llm.engine import gguf_path, shared_model
    from voicepipe.nn.llm.tokenizer import ChatTokenizer
    from voicepipe.training.draft import chat
    from voicepipe.training.draft_gen import generate_one
    from voicepipe.training.draft_prompts import train_prompts

    torch.set_num_threads(1)
    m, _ = shared_model(gguf_path("smollm2-135m"), "int4", 512)  # one load per test process
    tok = ChatTokenizer(m.metadata)
    data = tmp_path_factory.mktemp("draft_data")
    prompts = train_prompts(6)
    for s in range(3):
        samples = []
        for i in (2 * s, 2 * s + 1):
            smp = generate_one(m, chat(tok, prompts[i], i), 40, set(tok.stop_ids))
            smp["prompt_index"] = i
            samples.append(smp)
        torch.save(samples, data / f"gen_{s:04d}.pt")
    return data


def test_fit_from_the_release_draft_logs_its_start_and_holds_out_the_val_shard(
    shards, tmp_path
) -> None:
    from voicepipe.nn.llm.draft_model import load
    from voicepipe.nn.llm.draft_spec import draft_path
    from voicepipe.training import draft_fit

    run = tmp_path / "run"
    args = argparse.Namespace(
        data=str(shards),
        run=str(run),
        model="smollm2-135m",
        threads=1,
        seed=0,
        vocab=8192,
        steps=2,
        lr=1e-4,
        bs=2,
        init=str(draft_path("smollm2-draft")),
        val_shard="2",
        recent_from=1,
        recent_share=0.75,
        depths=2,
        depth_weight=0.8,
        qat=True,
        more_data="",
        ffn_dim=0,
        prompt_ctx=0,
    )
    assert draft_fit.fit(args) == 0
    log = [json.loads(x) for x in (run / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [0, 2]
    start = log[0]
    assert start["qat"] is True  # measured as the fused draft runs: int4 layer, int8 fc
    # The release draft agrees with the target on most of these replies' next tokens (0.6
    # on held-out replies); deeper guesses, each after right ones, hold less often.
    assert 0.25 < start["val_top1"] <= 1.0
    assert 0.0 < start["val_c2"] <= 1.0 and 0.0 <= start["val_c3"] <= 1.0
    p1, c2, c3 = start["val_top1"], start["val_c2"], start["val_c3"]
    assert start["val_tokens"] == pytest.approx(1 + p1 + p1 * c2 + p1 * c2 * c3, abs=2e-3)
    assert log[1]["samples"] == 4  # shards 0 and 1 trained on, shard 2 held out
    assert log[1]["recent_samples"] == 2
    model, meta = load(run / "best.pt")
    assert meta["val_shards"] == ["gen_0002.pt"]
    assert model.vocab.numel() <= 8192
    # A second call resumes at the last step instead of starting again.
    args.steps = 2
    assert draft_fit.fit(args) == 0
    assert len((run / "log.jsonl").read_text().splitlines()) == 2
    with pytest.raises(SystemExit):
        draft_fit.fit(argparse.Namespace(**{**vars(args), "val_shard": "7", "run": str(tmp_path)}))


def test_more_data_joins_the_recent_pool_without_the_held_out_prompts(shards, tmp_path) -> None:
    import shutil

    from voicepipe.training import draft_fit

    more = tmp_path / "more"
    more.mkdir()
    # Other replies to the prompts of shard 0 (trained on) and shard 2 (held out).
    shutil.copy(shards / "gen_0000.pt", more / "gen_0000.pt")
    shutil.copy(shards / "gen_0002.pt", more / "gen_0001.pt")
    args = argparse.Namespace(
        data=str(shards), run=str(tmp_path / "run"), model="smollm2-135m", threads=1, seed=0,
        vocab=8192, steps=1, lr=1e-4, bs=2, init="", val_shard="2", recent_from=1,
        recent_share=0.5, depths=1, depth_weight=0.8, qat=False, more_data=str(more),
        ffn_dim=0, prompt_ctx=0,
    )  # fmt: skip
    assert draft_fit.fit(args) == 0
    log = [json.loads(x) for x in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert log[-1]["samples"] == 6  # 4 of the main shards + 2 more; shard 2's prompts out
    assert log[-1]["recent_samples"] == 4


def test_trim_keeps_the_reply_and_the_last_prompt_tokens() -> None:
    from voicepipe.training.draft_features import trim as _trim

    s = {"tokens": torch.arange(10), "feats": torch.arange(9)[:, None].float(), "prompt_len": 6}
    t = _trim(s, 2)
    assert t["tokens"].tolist() == [4, 5, 6, 7, 8, 9]
    assert t["prompt_len"] == 2  # tokens 4, 5 are prompt; 6.. the reply
    # feats[i] scores tokens[i + 1]: the pairing survives the cut
    assert t["feats"][:, 0].tolist() == [4.0, 5.0, 6.0, 7.0, 8.0]
    assert _trim(s, 0) is s and _trim(s, 6) is s and _trim(s, 50) is s


def test_ffn_channels_ranks_by_what_a_channel_can_move() -> None:
    from voicepipe.training.draft_fit import ffn_channels

    torch.manual_seed(0)
    f, dim = 6, 4
    w13 = torch.randn(2 * f, dim) * 0.01
    w2 = torch.randn(dim, f) * 0.01
    for c, g in ((1, 5.0), (4, 3.0)):  # two channels with large gate, up and down
        w13[c] *= 100 * g
        w13[f + c] *= 100
        w2[:, c] *= 100
    assert ffn_channels(w13, w2, 2).tolist() == [1, 4]
    assert ffn_channels(w13, w2, f).tolist() == list(range(f))


def test_biased_draft_runs_the_same_cached_and_whole() -> None:
    # A Qwen2-shaped draft (Q/K/V biases): the cached decode is the full forward.
    from voicepipe.nn.llm.draft_model import DraftArgs, EagleDraft

    torch.manual_seed(0)
    a = DraftArgs(dim=32, n_head=4, n_kv_head=2, head_dim=8, ffn_dim=24, n_layer=1,
                  rope_base=10000.0, target_vocab=50, attn_bias=True)  # fmt: skip
    model = EagleDraft(a, torch.arange(10))
    with torch.no_grad():
        model.layers[0].wqkv.bias.normal_()
    feats, nxt = torch.randn(1, 5, 32), torch.randn(1, 5, 32)
    with torch.no_grad():
        whole = model(feats, nxt)
        cache = model.new_cache(16)
        steps = [model(feats[:, i : i + 1], nxt[:, i : i + 1], cache, pos=i) for i in range(5)]
    assert torch.allclose(whole, torch.cat(steps, dim=1), atol=1e-5)
    assert model.layers[0].wqkv.bias.abs().sum() > 0
