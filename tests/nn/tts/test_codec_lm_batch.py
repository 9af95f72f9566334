"""Codec-LM steps of several utterances batched (nn/tts/codec_lm_batch.py) on the real model:
the same codes as each utterance decoded alone, under the default rule and greedy."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from voicepipe import config
from voicepipe.config import TtsConfig
from voicepipe.nn.tts.codec_lm_batch import Draft, Verify, run_calls, run_rows
from voicepipe.nn.tts.codec_lm_decode import CodecLMTarget, conditioning
from voicepipe.nn.tts.codec_synthesis import code_blocks, lm_steps
from voicepipe.nn.tts.codec_tts import CodecLMTTS

TEXTS = [
    "Sure! The capital of France is Paris.",
    "It is sunny and twelve degrees.",
    "Your meeting with Anna starts at half past three.",
    "Okay.",
]


@pytest.fixture(scope="module")
def tts() -> CodecLMTTS:
    return CodecLMTTS.from_config(config.Config())


def _batched(tts: CodecLMTTS, texts: list[str], opts: TtsConfig) -> tuple[list[np.ndarray], int]:
    """Each text's codes, every LM call of the texts still decoding run in one batch per
    round (drafts, then verifies), as the TTS batcher runs them; and the most calls in a
    batch."""
    steps = [lm_steps(tts, t, opts) for t in texts]
    blocks: list[list[np.ndarray]] = [[] for _ in texts]
    calls: list[object] = [None] * len(texts)
    widest = 0

    def send(i: int, reply: object) -> None:
        try:
            item = steps[i].send(reply)
            while isinstance(item, np.ndarray):
                blocks[i].append(item)
                item = steps[i].send(None)
            calls[i] = item
        except StopIteration:
            calls[i] = None

    for i in range(len(texts)):
        send(i, None)
    while any(c is not None for c in calls):
        for kind in (Draft, Verify):
            idx = [i for i, c in enumerate(calls) if isinstance(c, kind)]
            if idx:
                widest = max(widest, len(idx))
                for i, r in zip(idx, run_calls([calls[i] for i in idx]), strict=True):
                    send(i, r)
    return [np.concatenate(b) for b in blocks], widest


@pytest.mark.parametrize("rule", ["topk", "greedy"])
def test_batched_steps_give_each_text_its_codes_alone(tts: CodecLMTTS, rule: str) -> None:
    opts = TtsConfig(rule=rule, top_k=3)
    alone = [np.concatenate(list(code_blocks(lm_steps(tts, t, opts)))) for t in TEXTS]
    batched, widest = _batched(tts, TEXTS, opts)
    assert widest == len(TEXTS)  # the steps really ran together
    for a, b in zip(alone, batched, strict=True):
        np.testing.assert_array_equal(a, b)


def test_rows_of_a_batched_pass_match_their_pass_alone(tts: CodecLMTTS) -> None:
    """Different positions and row counts per utterance in one pass (a cache already
    holding frames, a fresh one, K+1 rows and one row)."""
    from voicepipe.nn.tts.hibari_teacher import text_to_ids

    model = tts.m.target

    def target(text: str) -> CodecLMTarget:
        ids = text_to_ids(text)
        al = tts.plans(text)[0][2]
        return CodecLMTarget(model, conditioning(model, ids, al))

    bos = model.args.bos
    a1, a2, b1, b2 = target(TEXTS[0]), target(TEXTS[0]), target(TEXTS[2]), target(TEXTS[2])
    for t in (a1, a2):
        t.run([bos, 5, 7, 9])  # 4 frames already cached
    with torch.inference_mode():
        ha = a1.run([bos, 5, 7, 9, 11, 13, 15])
        hb = b1.run([bos])
        hab = run_rows(model, [(a2, [bos, 5, 7, 9, 11, 13, 15]), (b2, [bos])])
    assert [h.shape[0] for h in hab] == [3, 1]
    torch.testing.assert_close(hab[0], ha, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(hab[1], hb, atol=1e-4, rtol=1e-4)
    assert a2.inputs == a1.inputs and b2.inputs == b1.inputs
