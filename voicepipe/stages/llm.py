"""LLM stage: TranscriptFinal → streamed TextDelta + speakable TextChunk frames.

    TranscriptFinal ─► conversation (system prompt from config + turns)
                    ─► chat template ─► speculative decoder (one step per thread hop)
                    ─► TextDelta per step ─► Chunker ─► TextChunk (last=True ends the reply)

Each session keeps its own conversation and KV cache (the weights are shared
by every session in the process); a new turn only prefills what the cache
does not already hold. On ``Interrupt`` the base Stage cancels the reply
task; the step running in its thread finishes (tens of ms) and nothing more
is generated. The conversation then keeps only the text that had already
been handed to the TTS — the rest was never spoken.

Spans (DESIGN.md §9): ``llm.ttft`` from the transcript's arrival to the first
token; ``llm.first_chunk`` from the first token to the first TextChunk;
``llm.tpot`` at the end of a reply, a span one mean inter-token interval long
ending at the last token (mean time per output token after the first; the
token count and whole decode time ride in its attrs). A MetricsFrame carries
tpot_ms and the speculation metrics.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

from voicepipe.clock import now_ns
from voicepipe.config import Config
from voicepipe.core.chunker import Chunker
from voicepipe.frames import (
    Frame,
    Interrupt,
    MetricsFrame,
    ReplyHeard,
    SpanFrame,
    SystemFrame,
    TextChunk,
    TextDelta,
    TranscriptFinal,
)
from voicepipe.stage import Stage

_DONE = object()


def engine_for(cfg: Config):  # noqa: ANN201 - imports torch lazily
    """A per-session engine over process-wide shared weights."""
    from voicepipe.nn.engine import load_engine
    from voicepipe.nn.sampling import SamplingParams

    c = cfg.llm
    sp = SamplingParams(c.temperature, c.top_k, c.top_p, c.seed)
    # 2048 positions: a voice conversation's window (older turns are dropped), and a
    # per-session fp32 KV cache of ~95 MB for SmolLM2 rather than twice that.
    base = load_engine(c.model, c.weights, c.drafter, c.spec_k, c.adaptive_k, sp, max_len=2048)
    return base.fork()


class LlmStage(Stage):
    name = "llm"

    def __init__(self, cfg: Config, engine: object | None = None) -> None:
        super().__init__(queue_size=16)
        self.cfg = cfg
        self.engine = engine
        self.messages: list[dict[str, str]] = []
        if cfg.llm.system_prompt:
            self.messages.append({"role": "system", "content": cfg.llm.system_prompt})
        # One model pass at a time per session, even when a cancelled step is still running.
        self._lock = threading.Lock()
        self.last_metrics: dict[str, float | int | list[float]] = {}
        self._reply_msg: dict[int, int] = {}  # turn → index of its reply in messages

    def set_heard(self, turn: int, text: str) -> bool:
        """Replace a cut-off reply with what the user actually heard (see core/heard.py).

        Returns False when the turn's reply is no longer in the conversation.
        """
        i = self._reply_msg.get(turn)
        if i is None or i >= len(self.messages) or self.messages[i]["role"] != "assistant":
            return False
        self.messages[i] = {"role": "assistant", "content": text}
        return True

    async def start(self) -> None:
        if self.engine is None:
            self.engine = await asyncio.to_thread(engine_for, self.cfg)

    async def on_system(self, frame: SystemFrame) -> None:
        if isinstance(frame, Interrupt):
            return  # the base class already cancelled the reply task
        if isinstance(frame, ReplyHeard):
            self.set_heard(frame.turn_id, frame.text)

    def _step(self, gen: Iterator[list[int]]) -> object:
        with self._lock:
            return next(gen, _DONE)

    def _prompt(self) -> list[int]:
        eng = self.engine
        budget = eng.target.max_len - self.cfg.llm.max_new_tokens - 8  # type: ignore[attr-defined]
        while True:
            ids = eng.tokenizer.chat_ids(self.messages)  # type: ignore[attr-defined]
            first_turn = 1 if self.messages and self.messages[0]["role"] == "system" else 0
            if len(ids) <= budget or len(self.messages) - first_turn <= 1:
                return ids[-budget:]
            del self.messages[first_turn]  # forget the oldest turn
            self._reply_msg = {t: i - 1 for t, i in self._reply_msg.items() if i > first_turn}

    async def _first_chunk_span(self, turn: int, first_tok_ns: int, chunk: str) -> None:
        end = now_ns()
        attrs = {"chars": len(chunk)}
        await self.push(
            SpanFrame(
                turn_id=turn, name="llm.first_chunk", start_ns=first_tok_ns, end_ns=end, attrs=attrs
            )
        )

    async def process(self, frame: Frame) -> None:
        await self.push(frame)
        if not isinstance(frame, TranscriptFinal) or not frame.text.strip():
            return
        await self.reply(frame.turn_id, frame.text.strip(), frame.t_ns)

    async def reply(self, turn: int, text: str, request_ns: int | None = None) -> str:
        """Generate and stream one reply; returns the text kept in the conversation."""
        from voicepipe.nn.tokenizer import StreamDecoder

        eng = self.engine
        assert eng is not None
        request_ns = now_ns() if request_ns is None else request_ns
        self.messages.append({"role": "user", "content": text})
        ids = self._prompt()
        dec = eng.decoder()  # type: ignore[attr-defined]
        stop = eng.tokenizer.stop_ids  # type: ignore[attr-defined]
        gen = dec.generate(ids, self.cfg.llm.max_new_tokens, stop)
        stream = StreamDecoder(eng.tokenizer)  # type: ignore[attr-defined]
        chunker = Chunker()
        spoken: list[str] = []
        first_tok_ns = last_tok_ns = 0
        n_tokens = 0
        try:
            while True:
                step = await asyncio.to_thread(self._step, gen)
                if step is _DONE:
                    break
                t = now_ns()
                assert isinstance(step, list)
                n_tokens += len(step)
                if not first_tok_ns:
                    first_tok_ns = t
                    await self.push(
                        SpanFrame(
                            turn_id=turn,
                            name="llm.ttft",
                            start_ns=request_ns,
                            end_ns=t,
                            attrs={"prompt_tokens": len(ids)},
                        )
                    )
                last_tok_ns = t
                delta = "".join(stream.push(tok) for tok in step)
                if not delta:
                    continue
                await self.push(TextDelta(turn_id=turn, text=delta))
                for chunk in chunker.push(delta):
                    if not spoken:
                        await self._first_chunk_span(turn, first_tok_ns, chunk)
                    spoken.append(chunk)
                    await self.push(TextChunk(turn_id=turn, text=chunk))
            rest = chunker.flush()
            if rest:
                if not spoken:
                    await self._first_chunk_span(turn, first_tok_ns, rest)
                spoken.append(rest)
            await self.push(TextChunk(turn_id=turn, text=rest or "", last=True))
        finally:
            # Interrupted or not, the conversation remembers only what reached the TTS.
            self.messages.append({"role": "assistant", "content": " ".join(spoken)})
            self._reply_msg[turn] = len(self.messages) - 1
            m = dec.metrics.as_dict()
            if n_tokens > 1:
                m["tpot_ms"] = round((last_tok_ns - first_tok_ns) / 1e6 / (n_tokens - 1), 3)
            m["interrupted"] = int(self.current_turn > turn)
            self.last_metrics = m
            values = {k: v for k, v in m.items() if isinstance(v, (int, float))}
            if not self.current_turn > turn:
                if n_tokens > 1:
                    mean_ns = (last_tok_ns - first_tok_ns) // (n_tokens - 1)
                    await self.push(SpanFrame(
                        turn_id=turn, name="llm.tpot", start_ns=last_tok_ns - mean_ns,
                        end_ns=last_tok_ns,
                        attrs={"tokens": n_tokens,
                               "decode_ms": round((last_tok_ns - first_tok_ns) / 1e6, 3)}))
                await self.push(MetricsFrame(turn_id=turn, source="llm", values=values))
        return " ".join(spoken)
