"""The reply store's export (train draft --stage replies): from a draft-data shard or gen
files, ids past 16 bits kept."""

from __future__ import annotations

import argparse

import numpy as np
import torch

from voicepipe.speculative.replies import ReplyIndex
from voicepipe.training import draft_shard as shard
from voicepipe.training.draft_replies import PREFIX, export_replies

END = 151_645  # Qwen2.5's <|im_end|>: every reply of the default model ends with it
PRE = [7, 8, 9]  # the shard's shared prefix (the system prompt)


def _args(data, out, more="") -> argparse.Namespace:
    return argparse.Namespace(data=str(data), more_data=more, replies_out=str(out))


def test_a_shard_exports_every_reply_with_its_end_token(tmp_path) -> None:
    s = shard.Shard.open(tmp_path / "shard", shard.Manifest("m", "int4", PRE, 160, [END]))
    qs = [("hi", [11, 12, 13, 14, 15, 16, 17, 18, 19, 20], [1, 2, 3, END]),
          ("yo", [21, 22], [1, 2, 4, END])]  # fmt: skip
    s.append([shard.Reply.ask(q, PRE + p).done(r, True) for q, p, r in qs], len(PRE))
    out = tmp_path / "replies.npz"
    assert export_replies(_args(tmp_path / "shard", out)) == 0
    with np.load(out) as z:
        assert z["tokens"].dtype == np.uint32  # in uint16, 151,645 became 20,573
        toks, bounds, at = z["tokens"].tolist(), z["bounds"].tolist(), z["reply_at"].tolist()
    # Each record: the prompt's last PREFIX tokens (fewer if the prompt is shorter), the reply.
    first = ([*PRE, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20][-PREFIX:], [1, 2, 3, END])
    second = ([*PRE, 21, 22], [1, 2, 4, END])
    assert toks == first[0] + first[1] + second[0] + second[1]
    assert bounds == [0, PREFIX + 4, PREFIX + 4 + 5 + 4] and at == [PREFIX, 5]
    ix = ReplyIndex.load(str(out))
    m = ix.match([5, 1, 2])  # "1 2" twice: what follows is 3 or 4, then the end of the turn
    assert m.order == 2 and m.hi - m.lo == 2
    once = ix.match([2, 3], min_count=1)
    assert ix.continuation(once, 2, min_path=0.0, min_count=1)[0] == [END]


def test_gen_files_and_a_shard_export_alike(tmp_path) -> None:
    s = shard.Shard.open(tmp_path / "shard", shard.Manifest("m", "int4", PRE, 160, [END]))
    s.append([shard.Reply.ask("q", [*PRE, 30, 31]).done([5, 6, END], True)], len(PRE))
    gen = tmp_path / "gen"
    gen.mkdir()
    sample = {"tokens": torch.tensor([*PRE, 30, 31, 5, 6, END], dtype=torch.int32),
              "prompt_len": 5}  # fmt: skip
    torch.save([sample], gen / "gen_0000.pt")
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    export_replies(_args(tmp_path / "shard", a))
    export_replies(_args(gen, b))
    with np.load(a) as za, np.load(b) as zb:
        for k in ("tokens", "bounds", "reply_at"):
            assert za[k].tolist() == zb[k].tolist()
