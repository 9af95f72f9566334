"""Streaming prefill: the user's words go into the session's KV cache while they speak, and
the pass that prefills the pause's words reads P(end of the user's turn) on the way.

Not a stage: what ``LlmStage`` holds beside its ``LocalEngine`` (stages/llm/local.py).

    TranscriptPartial ──────────────────► background pass: conversation + user header + the
                                          agreed words, or the whole partial
                                          (``llm.prefill_partials``), P(end) at the last
                                          (yields to every reply, any session's)
    TranscriptStable (the pause's text) ─► the same words: that P(end) posted at once; else
                                          a pass to the end of its words ─► P(end) ─►
                                          EndOfTurnBoard ─► the ASR's endpointer
                                          (core/turns/semantic.py), then the tentative reply
    the reply's prompt ─────────────────► ``llm.prefill_ahead`` span; the reply prefills
                                          only what the cache lacks (the last words, the
                                          assistant header)

The target of a pass is the prompt a reply to those words would have (the chat template
over the conversation and the user's message), cut before the template's end-of-user-turn
tokens; its next token is the end of the user's message (``<|im_end|>`` for ChatML), fed as
the ``Engine.feed`` sentinel so the pass's last row is the message's last token and its
logits are the model's next-token distribution there: P(end) costs no extra pass.
Re-tokenising a growing text can change its last token(s), and Whisper may revise words:
the cache keeps the common token prefix of what it holds and the new target
(``ModelTarget``'s own reuse) and rolls the rest back (``AheadLedger`` counts it). The
reply's prompt is rendered from the final transcript exactly as without this, so it is
token-identical, and the cache rows it reuses were computed from the same tokens at the
same positions: greedy replies do not change (tests/stages/llm/test_prefill_ahead.py).

Priority. A partial's pass waits while any session of the process generates or speaks a
reply (``BUDGET.sessions``), and with ``llm.batching`` it is a background job of the batch
scheduler (a chunk only in steps where nobody decodes and no reply's prompt waits). The
pause's pass runs at once: it is the start of the tentative reply's own prefill, which
would run then anyway. None runs while this session's own reply does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import numpy as np

from voicepipe.clock import now_ns
from voicepipe.core.tokens import common_prefix, common_suffix
from voicepipe.core.turns.semantic import (
    AheadLedger,
    EndOfTurnBoard,
    p_end_read,
)
from voicepipe.nn.threads import BUDGET
from voicepipe.schedulers.llm_batch import prefill as batched_prefill
from voicepipe.stages.llm.local import DONE
from voicepipe.stages.llm.reply import Reply

log = logging.getLogger(__name__)
_YIELD_S = 0.01  # how often a waiting background pass looks again
# Tokens per background pass at most: a pass cannot be stopped once in its thread, and the
# pause's pass (P(end), which the end of turn waits for) queues behind it; on two busy
# cores a 32-token pass of the 1.5B takes about a second.
BACKGROUND_CHUNK = 8


def end_probability(logits: Any, end_ids: set[int] | frozenset[int]) -> float:
    """P(any of ``end_ids`` next) under ``logits`` (softmax, in float64)."""
    x = np.asarray(logits, dtype=np.float64).reshape(-1)
    x = np.exp(x - x.max())
    total = x.sum()
    return float(sum(x[i] for i in end_ids if 0 <= i < len(x)) / total)


class PrefillAhead:
    """One session's streaming prefill over a ``LocalEngine`` (``local``)."""

    def __init__(
        self, local: Any, board: EndOfTurnBoard | None, chunk: int, source: str = ""
    ) -> None:
        self.local = local
        self.board = board  # None: prefill only (a separate P(end) model answers pauses)
        self.source = source  # the model its estimates are read from (the board's source)
        self.chunk = max(1, chunk)
        self.ledger = AheadLedger()
        self.turn = -1
        self.replying = 0  # this session's replies in progress: no pass meanwhile
        self._want: str | None = None  # the newest partial's words not yet prefilled
        self._task: asyncio.Task[None] | None = None
        self._suffix: int | None = None  # tokens the template puts after a user message
        self.first_ns = 0  # the turn's first and last pass (the span's extent)
        self.last_ns = 0
        self.p_end: float | None = None
        self.p_end_text = ""
        self.errors = 0
        self.pause_timing: dict[str, float] = {}  # the last on_pause's (ms)

    def prepare(self) -> None:
        """Once the engine is there: its prompt passes become split-invariant (row-wise
        on aten's path, ``ModelTarget.rowwise_prompt``), so a turn prefilled while spoken
        holds exactly the keys and values one prefilled at the end would."""
        eng = self.local.engine
        t = getattr(eng, "target", None)
        if t is not None and hasattr(t, "rowwise_prompt"):
            t.rowwise_prompt = getattr(t.model, "fused", None) is None

    # ------------------------------------------------------------ when it may run

    @property
    def usable(self) -> bool:
        eng = self.local.engine
        return eng is not None and hasattr(eng, "feed") and hasattr(eng, "target")

    def _new_turn(self, turn: int) -> None:
        if turn != self.turn:
            self.turn = turn
            self.ledger.reset()
            self.first_ns = self.last_ns = 0
            self.p_end, self.p_end_text = None, ""

    async def on_partial(self, turn: int, text: str) -> None:
        """A new partial of the open turn: prefill its words in the background (``text``:
        the agreed words, or all of them with ``llm.prefill_partials = "all"``: a revised
        word costs a rollback to the common token prefix, and a pause that ends on the
        partial's words finds P(end) read)."""
        if not text.strip() or not self.usable or turn < self.turn:
            return
        self._new_turn(turn)
        text = text.strip()
        # Whisper begins a final with a capital; a partial of audio cut mid-sentence often
        # does not ("turn on the" against the final's "Turn on the kitchen lights."), and
        # the first token differing, the cache would keep none of the user's words.
        self._want = text[:1].upper() + text[1:]
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._background(), name=f"llm:ahead:{turn}")

    async def _background(self) -> None:
        while self._want is not None:
            await self._quiet()
            text, self._want = self._want, None
            try:
                await self._pass(text, background=True)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a speculative pass must never cost the session
                self.errors += 1
                log.warning("prefill ahead failed: %r", e)
                return

    async def _quiet(self) -> None:
        """Until no reply runs in the process (this session's, or another's decode or TTS:
        ``BUDGET`` counts them across threads, so this looks every ``_YIELD_S``)."""
        while True:
            if not self.replying and BUDGET.sessions <= 0:
                return
            await asyncio.sleep(_YIELD_S)

    async def stop_background(self) -> None:
        """Before this session's reply touches the cache: no background pass after this."""
        self._want = None
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        # (a pass cancelled mid-thread still holds the session's lock until its pass ends;
        # the reply's own passes take that lock, or, batched, queue behind it)

    async def on_pause(self, turn: int, text: str, speech_end_media_ns: int) -> float | None:
        """The pause's transcript: prefill to the end of its words now and post P(end), or
        say that none will come (the endpointer waits for one or the other).

        When a background pass already read P(end) at the end of exactly these words (the
        last partial's text was the pause's), it is posted at once, before this pass: the
        endpoint need not wait for a pass whose only use is then the reply's prompt."""
        p = None
        t0 = t1 = now_ns()
        rows = -1
        narrowed = 0
        early = False
        posted = t0
        text = text.strip()
        if text and self.usable and not self.replying:
            # (replying: a reply already answers these words: its cache is its own now)
            await self.stop_background()
            t1 = now_ns()
            self._new_turn(turn)
            known = self._known(text)
            if known is not None and self.board is not None:
                self.board.post(
                    turn, speech_end_media_ns, p_end_read(known, text), text, self.source
                )
                early, posted = True, now_ns()
            before = self.local.engine.target.prefilled
            narrowed = getattr(self.local.engine.target, "narrowed", 0)
            try:
                p = await self._pass(text, background=False)
            except Exception as e:
                self.errors += 1
                log.warning("prefill ahead (pause) failed: %r", e)
            rows = self.local.engine.target.prefilled - before
            narrowed = getattr(self.local.engine.target, "narrowed", 0) - narrowed
            if p is None and known is not None:
                p = known  # (the pass failed, or was not needed: the estimate stands)
        if self.board is not None and not early:
            if p is None:
                self.board.decline(turn, speech_end_media_ns, self.source)
            else:  # (the model's P(end), unless the words end on a cue of more to come)
                self.board.post(turn, speech_end_media_ns, p_end_read(p, text), text, self.source)
            posted = now_ns()
        # where the estimate's time went: the background pass's end, then its own pass;
        # rows: the tokens that pass ran (-1: no pass tried); known: P(end) came from a
        # background pass over the same words, posted before this pass; post_ms: when
        # the endpointer could have it; narrowed: its passes that got one thread of the
        # two they wanted (another model call was in flight)
        self.pause_timing = {
            "stop_ms": (t1 - t0) / 1e6,
            "pass_ms": (now_ns() - t1) / 1e6,
            "post_ms": (posted - t0) / 1e6,
            "rows": float(rows),
            "known": float(early),
            "narrowed": float(narrowed),
        }
        return p

    def _known(self, text: str) -> float | None:
        """P(end) read by an earlier pass at the end of exactly ``text``, if the cache still
        holds those words (else None)."""
        if self.p_end is None or self.p_end_text != text or self.ledger.held is None:
            return None
        got = self.target(text)
        if got is None or self.ledger.plan(got[0]) != len(got[0]):
            return None
        return self.p_end

    # ------------------------------------------------------------ a pass

    def _suffix_len(self) -> int:
        """Tokens the chat template puts after a user message's words (its end-of-user-turn
        and the assistant header): the common suffix of two renders that differ only in the
        words."""
        if self._suffix is None:
            self._suffix = common_suffix(self.local.prompt("Hello."), self.local.prompt("2"))
        return self._suffix

    def target(self, text: str) -> tuple[list[int], int] | None:
        """(the prompt up to the end of ``text``, the token that ends the user's message)."""
        ids = self.local.prompt(text)
        k = self._suffix_len()
        if k <= 0 or len(ids) <= k + 1:
            return None
        return ids[:-k], ids[-k]

    async def _pass(self, text: str, background: bool) -> float | None:
        got = self.target(text)
        if got is None:
            return None
        ids, end_id = got
        eng = self.local.engine
        t = eng.target
        keep = self.ledger.plan(ids)
        known = self.ledger.held is not None and keep == len(ids) and self.p_end_text == text
        if known and background:
            return self.p_end  # nothing new (a partial repeating its words)
        if not self.first_ns:
            self.first_ns = now_ns()
        if self.ledger.base is None:  # where the user's words start: the conversation and
            a, b = self.target("Hello."), self.target("2")  # the user header, as in
            base = common_prefix(a[0], b[0]) if a and b else 0  # system_prefix
        else:
            base = self.ledger.base
        before = t.prefilled
        if not background:  # the pause: its words and the assistant header in one pass
            # (P(end) known for these words: the pass starts after them, no word rerun)
            headed = await self._with_header(text, ids, rerun=not known)
            if headed is not None:
                full, logits = headed
                self.last_ns = now_ns()
                self.ledger.fed(full, t.prefilled - before, 1, base=base)
                if logits is not None:
                    stops = set(eng.tokenizer.stop_ids) | {end_id}
                    self.p_end, self.p_end_text = end_probability(logits, stops), text
                return self.p_end
        if known:
            return self.p_end  # (the header did not fit one pass: the reply feeds it)
        if common_prefix(t.fed, ids) >= len(ids):  # all there: rerun the last for its logits
            await asyncio.to_thread(self._rollback, len(ids) - 1)
        passes = await self._feed(ids + [end_id], background)
        self.last_ns = now_ns()
        self.ledger.fed(ids, t.prefilled - before, passes, base=base)
        logits = t.last_logits
        if logits is None or passes == 0:
            return None
        stops = set(eng.tokenizer.stop_ids) | {end_id}
        self.p_end, self.p_end_text = end_probability(logits, stops), text
        return self.p_end

    async def _with_header(
        self, text: str, ids: list[int], rerun: bool = True
    ) -> tuple[list[int], Any | None] | None:
        """The pause's pass, when what the cache lacks fits one: the words and the
        template's end of the user's turn and assistant header, i.e. the whole prompt a
        reply to these words has, with the logits at the last word (P(end)). The reply
        that follows finds its prompt in the cache and its first token's logits held
        (``ModelTarget.prefill_rows``): no pass of its own before the first token. None:
        not possible here (batched, another target, too much left), nothing run.
        ``rerun=False``: P(end) at the last word is known already; the pass starts after
        the words and the logits returned are None."""
        t = self.local.engine.target
        if self.local._batcher() is not None or not hasattr(t, "prefill_rows"):
            return None
        full = self.local.prompt(text)
        if full[: len(ids)] != ids or len(full) - common_prefix(t.fed, full) > self.chunk:
            return None

        def run() -> tuple[list[int], Any | None] | None:
            with self.local.lock:
                if not rerun:
                    got = t.prefill_rows(full, len(full) - 1)
                    return None if got is None else (full, None)
                if common_prefix(t.fed, full) >= len(ids):  # rerun the last word for P(end)
                    t.rollback(len(ids) - 1)
                got = t.prefill_rows(full, len(ids) - 1)
            return None if got is None else (full, got[0])

        return await asyncio.to_thread(run)

    def _rollback(self, n: int) -> None:
        with self.local.lock:
            self.local.engine.target.rollback(n)

    async def _feed(self, tokens: list[int], background: bool) -> int:
        """Make the caches hold ``tokens[:-1]``; the passes run."""
        batcher = self.local._batcher()
        chunk = min(self.chunk, BACKGROUND_CHUNK) if background else self.chunk
        if batcher is not None:
            return await batched_prefill(batcher, self.local.engine, tokens, chunk, background)
        gen = self.local.engine.feed(tokens, chunk)
        n = 0
        # (cancelled, the generator is dropped, not closed: its step may still be running
        # in the thread, under the session's lock)
        while await asyncio.to_thread(self.local.step, gen) is not DONE:
            n += 1
            if background:
                await self._quiet()
        return n

    # ------------------------------------------------------------ the reply

    async def before_reply(self, r: Reply) -> None:
        """A reply of this session starts: stop background passes, settle the books and say
        what the streaming prefill did (the ``llm.prefill_ahead`` span)."""
        await self.stop_background()
        if r.turn != self.turn or self.ledger.texts == 0 or not self.usable:
            return
        kept, dropped = self.ledger.settle(self.local.prompt(r.text))
        led = self.ledger
        await r.span(
            "llm.prefill_ahead",
            self.first_ns,
            max(self.last_ns, self.first_ns),
            kept=kept,  # tokens of the user's turn the reply found in the cache
            rolled_back=led.rolled_back,  # prefilled ahead, then thrown away (this turn)
            prefilled=led.prefilled,  # run through the model ahead of the reply
            passes=led.passes,
            texts=led.texts,
            settled_dropped=dropped,
            p_end=-1.0 if self.p_end is None else round(self.p_end, 4),
        )
