"""The held-out reply set of `voicepipe bench tts --set replies`: what the assistant says.

``data/tts_reply_prompts.json`` holds hand-written user prompts of ordinary
kinds (facts, advice, how-to, lists, names, foreign words, numbers, dates,
money, units, quoted titles), disjoint from every training prompt list
(tests/test_tts_replies.py). ``data/tts_replies_<model>.json`` holds the
replies an LLM gave them, produced by ``make_replies`` through the LLM stage
itself (``LlmStage.reply``: the configured system prompt, the model's chat
template, greedy decoding, ``max_new_tokens``), each prompt in a fresh
conversation, with the chunks the stage handed to the TTS (the TTS speaks a
reply chunk by chunk, so the benchmark does too).

    voicepipe bench tts --make-replies smollm2-135m
    voicepipe bench tts --make-replies qwen2.5-coder-1.5b   # ~10 tok/s: nohup it

The file is rewritten after every reply, so a killed run resumes where it stopped.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

DATA = Path(__file__).parent / "data"
PROMPTS = DATA / "tts_reply_prompts.json"
# The default replies: the likely next default LLM's if generated, else today's default's.
PREFERRED = ("qwen2.5-coder-1.5b", "smollm2-135m")


def prompts() -> list[str]:
    return json.loads(PROMPTS.read_text())["prompts"]


def replies_path(model: str) -> Path:
    return DATA / f"tts_replies_{model}.json"


def load_replies(model: str = "") -> dict:
    """The stored replies of ``model`` (default: the first of PREFERRED that exists)."""
    for m in [model] if model else PREFERRED:
        p = replies_path(m)
        if p.exists():
            return json.loads(p.read_text())
    raise SystemExit(
        f"no stored replies for {model or ' or '.join(PREFERRED)} under {DATA}; "
        f"generate them with `voicepipe bench tts --make-replies MODEL`"
    )


def _drafter(model: str, configured: str) -> str:
    """The configured drafter when it belongs to this model's family, else n-gram lookup.

    Greedy speculative decoding gives the target's own greedy text whatever drafts, so
    the drafter only changes the speed."""
    return configured if model == "smollm2-135m" else "ngram"


def make_replies(cfg, model: str, out: Path | None = None, limit: int = 0) -> Path:
    """Generate (or resume) the replies of ``model`` to every prompt through LlmStage."""
    import asyncio

    from voicepipe.frames import TextChunk, TextDelta
    from voicepipe.stages.llm.engine import engine_for
    from voicepipe.stages.llm.stage import LlmStage

    llm = dataclasses.replace(
        cfg.llm, model=model, drafter=_drafter(model, cfg.llm.drafter), temperature=0.0
    )
    cfg = dataclasses.replace(cfg, llm=llm)
    out = out or replies_path(model)
    data = json.loads(out.read_text()) if out.exists() else {}
    rows: list[dict] = data.get("replies", [])
    done = {r["prompt"] for r in rows}
    todo = [p for p in prompts() if p not in done]
    if limit:
        todo = todo[:limit]
    engine = engine_for(cfg)
    stage = LlmStage(cfg, engine)
    deltas: list[str] = []
    chunks: list[str] = []

    async def push(frame) -> None:
        if isinstance(frame, TextDelta):
            deltas.append(frame.text)
        elif isinstance(frame, TextChunk) and frame.text.strip():
            chunks.append(frame.text)

    stage.push = push  # type: ignore[method-assign]
    keep = 1 if cfg.llm.system_prompt else 0
    for i, prompt in enumerate(todo):
        del stage.messages[keep:]  # a fresh conversation per prompt
        deltas.clear()
        chunks.clear()
        t0 = time.perf_counter()
        asyncio.run(stage.reply(i + 1, prompt))
        dt = time.perf_counter() - t0
        rows.append(
            {
                "prompt": prompt,
                "reply": "".join(deltas).strip(),
                "chunks": list(chunks),  # what the TTS stage is handed, one at a time
                "tokens": int(stage.last_metrics.get("tokens", 0)),
                "seconds": round(dt, 2),
            }
        )
        _write(out, model, cfg, rows)
        print(f"[{len(rows)}/{len(prompts())}] {dt:.1f} s: {rows[-1]['reply'][:70]!r}", flush=True)
    _write(out, model, cfg, rows)
    return out


def _write(out: Path, model: str, cfg, rows: list[dict]) -> None:
    c = cfg.llm
    data = {
        "model": model,
        "weights": c.weights,
        "generation": {
            "temperature": c.temperature,
            "max_new_tokens": c.max_new_tokens,
            "system_prompt": c.system_prompt,
            "drafter": c.drafter,
            "via": "voicepipe.stages.llm.stage.LlmStage.reply, one fresh conversation per prompt",
        },
        "replies": rows,
    }
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    tmp.replace(out)
