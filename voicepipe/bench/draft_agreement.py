"""``bench draft --agreement``: how often an EAGLE draft's first guess is the target's token,
teacher-forced along the target's own replies.

A drafter's acceptance in the engine mixes the draft's agreement with how the engine
uses it (prompt lookup and the reply store in front, K, the runner-ups, the window over a
context it has not seen). This measures the first alone, the way the fit measures its
held-out parts: along each prompt's plain greedy reply, the target's feature at every
position (one prefill of prompt and reply on the serving target), the draft's first
guess from each (float weights, ``EagleDraft.forward``) against the token the target
chose next. So a prompt set's figure can be held beside the fit's ``val_top1``: a gap
between them is the prompts, not the engine.

- ``first_guess``: share of the replies' positions where the draft's first guess is
  the target's next token;
- ``in_vocab``: the same over the positions whose token is in the draft's reduced
  vocabulary (what ``val_top1`` counts), and ``positions`` / ``in_vocab_positions``.
"""

from __future__ import annotations

from typing import Any

# Prompt positions the draft reads before a reply (``train draft --prompt-ctx``: 12).
PROMPT_CTX = 12


def samples(model: Any, pairs: list[tuple[list[int], list[int]]]) -> list[dict[str, Any]]:
    """The fit's samples (``draft_features``: tokens, prompt length, the target's features)
    for (prompt, reply) pairs, each from one prefill on a single FeatureTarget, trimmed to
    the last PROMPT_CTX prompt tokens as the draft trained."""
    from voicepipe.nn.llm.draft_spec import FeatureTarget
    from voicepipe.training import draft_features
    from voicepipe.training.draft_shard import Reply

    ft = FeatureTarget(model, max(len(p) + len(r) for p, r in pairs) + 1)
    ft.prefixes = None  # the previous pair's prompt is the only prefix kept (as the export)
    return [
        draft_features.trim(
            draft_features.sample(ft, Reply.ask(str(i), p).done(r, True)), PROMPT_CTX
        )
        for i, (p, r) in enumerate(pairs)
        if r
    ]


def agreement(draft: Any, emb: Any, samples: list[dict[str, Any]]) -> dict[str, Any]:
    """First-guess agreement of ``draft`` over ``samples`` (``samples()``): the input at
    position i is (feature i, embedding of token i + 1), its guess is for token i + 2;
    counted where token i + 2 is a reply token."""
    import torch

    vocab = draft.vocab.long()
    head = emb[vocab].float()
    hit = hit_in = n = n_in = 0
    inside = torch.zeros(emb.shape[0], dtype=torch.bool)
    inside[vocab] = True
    with torch.no_grad():
        for s in samples:
            t, f, plen = s["tokens"].long(), s["feats"].float(), s["prompt_len"]
            m = len(t) - 2  # inputs i = 0 … m-1 predict t[i + 2]
            if m <= 0:
                continue
            pred = draft(f[:m].unsqueeze(0), emb[t[1 : m + 1]].float().unsqueeze(0))[0]
            guess = vocab[(pred @ head.T).argmax(-1)]
            want = t[2 : m + 2]
            reply = torch.arange(m) + 2 >= plen
            ok = (guess == want) & reply
            hit += int(ok.sum())
            n += int(reply.sum())
            keep = reply & inside[want]
            hit_in += int((ok & keep).sum())
            n_in += int(keep.sum())
    return {
        "first_guess": round(hit / max(1, n), 4),
        "in_vocab": round(hit_in / max(1, n_in), 4),
        "positions": n,
        "in_vocab_positions": n_in,
    }


def model_agreement(model: Any, pairs: list[tuple[list[int], list[int]]]) -> dict[str, Any]:
    """The same first-guess share for a draft *model* (a GGUF of the target's family): its
    greedy token after each reply prefix (one prefill of the prompt, one pass over the
    reply) against the token the target chose; every reply position counts, as above.
    It has the whole vocabulary, so ``in_vocab`` is ``first_guess``."""
    from voicepipe.nn.llm.target import ModelTarget

    hit = n = 0
    t = ModelTarget(model, max(len(p) + len(r) for p, r in pairs) + 1)
    t.prefixes = None
    for prompt, reply in pairs:
        if not reply:
            continue
        t.rollback(0)
        first = int(t.prefill(prompt).argmax())
        rest: list[int] = []
        if len(reply) > 1:
            s = t.score(reply[:-1])
            # ModelTarget fills ``best``; the argmax of the logits is the same token
            best = s.best if s.best is not None else s.logits.argmax(-1)
            rest = best.tolist()
        guesses = [first, *rest]
        hit += sum(g == w for g, w in zip(guesses, reply, strict=True))
        n += len(reply)
    share = round(hit / max(1, n), 4)
    return {"first_guess": share, "in_vocab": share, "positions": n, "in_vocab_positions": n}
