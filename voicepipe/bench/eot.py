"""`voicepipe bench eot`: how well the LLM's P(end of turn) separates finished from
unfinished transcripts (the semantic end of turn, core/turns/semantic.py).

Each transcript goes through the LLM stage's own streaming prefill (stages/llm/ahead.py,
``on_pause``) in a fresh session: the conversation's system prompt, the user header and
the words, and P(the template's end-of-user-turn token) read from that pass. With
``[turns] p_end_model`` set, through that model instead (stages/llm/p_end.py), as the
server then reads it. Reports the
ROC AUC (finished scored above unfinished), per eagerness the share of finished turns
that get the short pause (P(end) ≥ p_hi) and of unfinished ones cut off that soon
(the false cut-offs a user would feel), and each transcript's P(end).

The set (below) was written by hand for this benchmark, in the style Whisper tiny.en
transcribes speech (capitals, its punctuation, digits for spoken numbers): finished
questions, commands and answers of a voice assistant's kind, and unfinished ones of the
kinds users report being cut off in: a clause cut before its object, a trailing "um" or
"uh", a number or an e-mail address being read out, a trailing conjunction. No line is
taken from a data set or from the project's other benchmarks.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
from typing import Any

FINISHED = [
    "What is the capital of France?",
    "Set a timer for five minutes.",
    "What's the weather like tomorrow in Berlin?",
    "Turn off the kitchen lights.",
    "How tall is Mount Everest?",
    "Tell me a joke.",
    "Who wrote Pride and Prejudice?",
    "What time is it in Tokyo right now?",
    "Can you remind me to call my sister at six?",
    "How many ounces are in a pound?",
    "Play some jazz.",
    "What's 17 times 23?",
    "Thanks, that's all.",
    "Yes, please.",
    "No, the other one.",
    "Why is the sky blue?",
    "How do I boil an egg?",
    "Translate good morning into Spanish.",
    "What's a good name for a goldfish?",
    "Read me the news headlines.",
    "My number is 555-0142.",
    "Send it to anna at example dot com.",
    "How far away is the moon?",
    "Stop.",
    "Okay, go ahead.",
    "What does photosynthesis mean?",
    "Add milk and eggs to my shopping list.",
    "How long should I bake potatoes?",
    "Who won the World Cup in 2018?",
    "Spell the word necessary.",
    "What's the square root of 144?",
    "I'd like to book a table for two at eight.",
    "Can you explain how a rainbow forms?",
    "Is it going to rain this weekend?",
    "Wake me up at 7 a.m.",
    "That sounds great, thank you.",
]

UNFINISHED = [
    "What is the capital of",
    "Set a timer for",
    "What's the weather like in",
    "Turn off the",
    "Um",
    "So, uh",
    "I was wondering if you could",
    "Can you tell me how to",
    "My number is 555",
    "My number is five five five",
    "It's 0 1 7",
    "Send it to anna at",
    "My email is john dot",
    "Remind me to",
    "How many ounces are in a",
    "Tell me about the",
    "I want to book a table for",
    "Play something by",
    "What's 17 times",
    "Who wrote the",
    "How do I",
    "And then",
    "Because",
    "I think that the",
    "Okay, so, um,",
    "Translate good morning into",
    "The address is 42",
    "Can you add milk and",
    "Why is the sky",
    "How long should I bake the",
    "What I really want to know is",
    "Let me think, uh,",
    "Could you please",
    "It was either Tuesday or",
    "The code is 4 8",
    "Wake me up at",
]


def auc(pos: list[float], neg: list[float]) -> float:
    """P(a finished transcript scores above an unfinished one), ties counting half."""
    if not pos or not neg:
        return float("nan")
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


async def _scores(cfg: Any, texts: list[str]) -> list[float]:
    from voicepipe.stages.llm.engine import engine_for
    from voicepipe.stages.llm.p_end import estimator_for
    from voicepipe.stages.llm.stage import LlmStage

    est = estimator_for(cfg)
    if est is not None:  # the separate P(end) model the server would ask
        return [await est.estimate_async(t) for t in texts]

    cfg = dataclasses.replace(cfg, turns=dataclasses.replace(cfg.turns, prefill_ahead=True))
    base = engine_for(cfg)
    out = []
    for i, text in enumerate(texts):
        stage = LlmStage(cfg, base.fork())  # a new session: nothing of the last transcript
        await stage.start()
        assert stage.ahead is not None
        p = await stage.ahead.on_pause(i + 1, text, 0)
        await stage.stop()
        out.append(float("nan") if p is None else p)
    return out


def run(cfg: Any) -> dict[str, Any]:
    from voicepipe.core.turns.semantic import eagerness

    scores = asyncio.run(_scores(cfg, FINISHED + UNFINISHED))
    pos, neg = scores[: len(FINISHED)], scores[len(FINISHED) :]
    per: dict[str, Any] = {}
    for name in ("high", "medium", "low"):
        e = eagerness(name, cfg.vad.end_silence_ms)
        assert e is not None
        per[name] = {
            "p_hi": e.p_hi,
            "p_lo": e.p_lo,
            "finished_short_pause": round(sum(p >= e.p_hi for p in pos) / len(pos), 3),
            "finished_long_wait": round(sum(p <= e.p_lo for p in pos) / len(pos), 3),
            "unfinished_cut_short": round(sum(p >= e.p_hi for p in neg) / len(neg), 3),
            "unfinished_long_wait": round(sum(p <= e.p_lo for p in neg) / len(neg), 3),
        }
    return {
        "model": cfg.turns.p_end_model or cfg.llm.model,  # the model that read P(end)
        "llm": cfg.llm.model,
        "n_finished": len(pos),
        "n_unfinished": len(neg),
        "auc": round(auc(pos, neg), 4),
        "eagerness": per,
        "p_end": {t: round(p, 5) for t, p in zip(FINISHED + UNFINISHED, scores, strict=True)},
    }


def _handler(args: argparse.Namespace) -> int:
    out = run(args.config)
    if args.json:
        print(json.dumps(out))
    else:
        print(f"{out['model']}: AUC {out['auc']:.3f} on {out['n_finished']} finished / "
              f"{out['n_unfinished']} unfinished transcripts")  # fmt: skip
        for name, r in out["eagerness"].items():
            print(f"  {name:6s} {r}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eot",
        help="semantic end of turn: P(end) of finished vs unfinished transcripts (AUC)",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_handler)
