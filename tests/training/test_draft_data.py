"""train draft-data: batched greedy replies equal the one-at-a-time engine's; the shard
resumes, restores whole prompts and refuses a second target's replies."""

from __future__ import annotations

import numpy as np
import pytest

from voicepipe.training import draft_shard as shard


@pytest.fixture(scope="module")
def engine():
    from voicepipe.nn.llm.engine import load_engine

    return load_engine("smollm2-135m", "int4", "none", max_len=512)


def test_batched_replies_are_the_engines_greedy_replies(engine) -> None:
    from voicepipe.config import Config
    from voicepipe.training.draft_data import batched_replies, served_prompts, single_replies

    prefix, render = served_prompts(Config(), engine)
    engine.share_prefix(prefix)
    qs = [
        "What is a haiku?",
        "Name three rivers in Africa.",
        "hey, how do magnets work",
        "Tell me a fun fact about owls.",
        "Why is bread chewy?",
    ]
    jobs = [shard.Reply.ask(q, render(q)) for q in qs]
    assert all(j.prompt[: len(prefix)] == prefix and len(j.prompt) > len(prefix) for j in jobs)
    stop = set(engine.tokenizer.stop_ids)
    # 2 rows for 5 prompts: rows are refilled while the other row is mid-reply, so
    # prompt rows and decode rows share passes.
    batched = list(batched_replies(engine, jobs, 2, 20, stop))
    single = {r.pid: r for r in single_replies(engine, jobs, 20, stop)}
    assert sorted(r.pid for r in batched) == sorted(single)
    for r in batched:
        assert r.reply and r.reply == single[r.pid].reply, r.question
        assert r.ended == (r.reply[-1] in stop) == single[r.pid].ended
        assert len(r.reply) <= 20


def _meta(prefix: list[int]) -> shard.Manifest:
    return shard.Manifest("m", "int4", prefix, 160, [2])


def test_the_shard_resumes_and_restores_whole_prompts(tmp_path) -> None:
    pre = [1, 5, 9]
    s = shard.Shard.open(tmp_path, _meta(pre))
    a = shard.Reply.ask("What is rain?", [*pre, 70000, 4]).done([100000, 2], True)
    b = shard.Reply.ask("Why?", [*pre, 8]).done([7] * 5, False)
    s.append([a, b], len(pre))
    again = shard.Shard.open(tmp_path, _meta(pre))  # a resumed job
    assert again.ids() == {a.pid, b.pid}
    c = shard.Reply.ask("what is rain", [*pre, 3])  # the same question, normalised
    assert c.pid == a.pid
    # A part written twice with one id (never by the job: it skips done ids) is read once.
    again.append([c.done([9, 2], True)], len(pre))
    got = list(shard.Shard.load(tmp_path).replies())
    assert got == [a, b]  # uint32 ids past 65,535 survive; the prefix is stored once
    assert [p.name for p in again.parts()] == ["part_00000.npz", "part_00001.npz"]
    with np.load(again.parts()[0]) as z:
        assert z["reply"].dtype == np.uint32 and z["prompt"].tolist() == [70000, 4, 8]


def test_the_shard_refuses_other_settings_and_prompts_without_its_prefix(tmp_path) -> None:
    shard.Shard.open(tmp_path, _meta([1, 2]))
    with pytest.raises(shard.ShardError, match="prefix"):
        shard.Shard.open(tmp_path, _meta([1, 3]))
    s = shard.Shard.open(tmp_path, _meta([1, 2]))
    with pytest.raises(shard.ShardError, match="prefix"):
        s.append([shard.Reply.ask("Hi?", [4, 2, 3]).done([2], True)], 2)
    with pytest.raises(shard.ShardError, match="manifest"):
        shard.Shard.load(tmp_path / "nowhere")


def test_features_from_the_shard_are_what_gen_records(engine, tmp_path) -> None:
    """The shard keeps ids only; the features recomputed from it are those draft_gen
    records while answering (the fit stage's input): the prompt's rows before its last
    bit for bit, the rest within rounding (one multi-row pass here, as a verify pass
    computes them; the prompt's pass then one row per pass there)."""
    import torch

    from voicepipe.config import Config
    from voicepipe.training.draft_data import batched_replies, served_prompts
    from voicepipe.training.draft_features import export
    from voicepipe.training.draft_gen import generate_one

    prefix, render = served_prompts(Config(), engine)
    stop = set(engine.tokenizer.stop_ids)
    jobs = [shard.Reply.ask(q, render(q)) for q in ("What is fog?", "Name a blue fruit.")]
    got = list(batched_replies(engine, jobs, 2, 12, stop))
    src = tmp_path / "shard"
    s = shard.Shard.open(src, shard.Manifest("smollm2-135m", "int4", prefix, 12, sorted(stop)))
    s.append(got, len(prefix))
    assert export(src, tmp_path / "gen", max_len=512, prompt_ctx=0) == 1
    assert export(src, tmp_path / "gen", max_len=512) == 0  # converted parts are skipped
    assert export(src, tmp_path / "cut", max_len=512, prompt_ctx=4) == 1
    samples = torch.load(tmp_path / "gen" / "gen_0000.pt", weights_only=True)
    cut = torch.load(tmp_path / "cut" / "gen_0000.pt", weights_only=True)
    for r, smp, c in zip(got, samples, cut, strict=True):
        ref = generate_one(engine.model, r.prompt, 12, stop)
        assert torch.equal(smp["tokens"], ref["tokens"]) and smp["prompt_len"] == len(r.prompt)
        p = len(r.prompt) - 1
        assert torch.equal(smp["feats"][:p], ref["feats"][:p])
        cos = torch.cosine_similarity(smp["feats"][p:].float(), ref["feats"][p:].float(), dim=-1)
        assert smp["feats"].shape == ref["feats"].shape and bool((cos > 0.99).all()), cos
        # --prompt-ctx 4: the same sample less all but the prompt's last 4 tokens
        lo = len(r.prompt) - 4
        assert c["prompt_len"] == 4 and torch.equal(c["tokens"], smp["tokens"][lo:])
        assert torch.equal(c["feats"], smp["feats"][lo:])
        # (saved as copies: a trimmed sample's file holds its own rows, not the whole)
        assert c["feats"].untyped_storage().nbytes() == c["feats"].nbytes


def test_features_kept_while_generating_are_the_exported_ones(engine, tmp_path) -> None:
    """--with-features: the rows' FeatureTargets record each reply's features as the
    generating passes compute them; they are the export's (the same prompt prefill, as
    one row of a batched pass: bit for bit; the reply's rows one per pass there, all at
    once in the export: within rounding), with the same replies as without."""
    import torch

    from voicepipe.config import Config
    from voicepipe.training import draft_features
    from voicepipe.training.draft_data import batched_replies, served_prompts

    prefix, render = served_prompts(Config(), engine)
    engine.share_prefix(prefix)
    stop = set(engine.tokenizer.stop_ids)
    qs = ["What is fog?", "Name a blue fruit.", "How do bees make honey?"]
    jobs = [shard.Reply.ask(q, render(q)) for q in qs]
    kept: dict[str, dict] = {}
    got = list(
        batched_replies(
            engine,
            jobs,
            2,
            12,
            stop,
            lambda r, f: kept.update({r.pid: draft_features.of_feats(f, r)}),
        )
    )
    plain = {r.pid: r.reply for r in batched_replies(engine, jobs, 2, 12, stop)}
    assert {r.pid: r.reply for r in got} == plain  # recording changes no reply
    src = tmp_path / "shard"
    s = shard.Shard.open(src, shard.Manifest("smollm2-135m", "int4", prefix, 12, sorted(stop)))
    s.append(got, len(prefix))
    assert draft_features.export(src, tmp_path / "gen", max_len=512, prompt_ctx=0) == 1
    exported = torch.load(tmp_path / "gen" / "gen_0000.pt", weights_only=True)
    for r, e in zip(got, exported, strict=True):
        k = kept[r.pid]
        assert torch.equal(k["tokens"], e["tokens"]) and k["prompt_len"] == e["prompt_len"]
        assert k["feats"].shape == e["feats"].shape
        p = len(r.prompt) - 1
        assert torch.equal(k["feats"][:p], e["feats"][:p])
        cos = torch.cosine_similarity(k["feats"].float(), e["feats"].float(), dim=-1)
        assert bool((cos > 0.99).all()), cos
