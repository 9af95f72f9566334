"""Streaming speech recognition stage: AudioIn → SpeechStart / partials / SpeechEnd / final.

    AudioIn ─► Silero VAD (32 ms chunks, state carried) ─► Endpointer (core/turns/endpoint.py)
                 │ SpeechStart (turn born here)              │ SpeechEnd + spans
                 └──────────── decoder task ◄────────────────┘
                     asyncio.to_thread(WhisperAsr.transcribe) on the turn's audio
                     → TranscriptPartial (stable prefix, core/turns/partials.py)
                     → TranscriptFinal

``process`` only runs the VAD and the endpointer (well under a millisecond
per 20 ms frame), so audio intake never waits for Whisper. One decoder task
per stage runs one decode at a time, picking the most useful job:

1. the final of an ended turn (unless a decode already covers its audio);
2. an *early final*: once the trailing silence reaches ``asr.early_final_ms``
   the turn's audio is decoded while the endpointer is still waiting for
   ``vad.end_silence_ms``; if no speech follows, that result is the final, so
   the final is ready almost the moment the endpoint fires;
3. a partial, every ``asr.partial_interval_ms`` of new audio while speaking.

Preemptive generation (``turns.preempt``): when a decode that saw at least
``turns.preempt_after_ms`` of trailing silence finishes while the turn is
still open, its text goes out as ``TranscriptStable`` so the LLM can start a
tentative reply (core/turns/preempt.py). That decode is the early final itself (no
extra work): an early final decoded before the pause reached ``preempt_after_ms``
(``asr.early_final_ms`` smaller) goes out as the stable text the moment it does,
so the decode's time overlaps the silence instead of following it; a smaller
``preempt_after_ms`` than ``early_final_ms`` adds one decode per pause. If the
user then speaks again in the same turn, ``SpeechResumed`` voids the stable text.

Turn ids are born here: each SpeechStart gets a new, larger id. Spans:
``vad.speech`` (arrival of the first → last speech sample) and ``asr.final``
(arrival of the audio that completed the endpoint silence → final transcript
pushed; the silence wait itself is the endpointer's policy, not ASR cost, and
``since_speech_end_ms`` in its attrs gives the total from the last speech
sample).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from voicepipe.clock import now_ns
from voicepipe.config import Config
from voicepipe.core.turns.endpoint import EndpointConfig, Endpointer, SpeechEnded, SpeechStarted
from voicepipe.core.turns.level import speech_level_db
from voicepipe.core.turns.partials import StablePrefix
from voicepipe.core.turns.pauses import PauseLog
from voicepipe.core.turns.semantic import Eagerness, EndOfTurnBoard, eagerness
from voicepipe.frames import (
    AudioIn,
    Frame,
    InputEnd,
    SessionSetup,
    SpanFrame,
    SpeechEnd,
    SpeechResumed,
    SpeechStart,
    TranscriptFinal,
    TranscriptPartial,
    TranscriptStable,
    TurnControl,
)
from voicepipe.nn.asr.vad import CHUNK, SileroVad
from voicepipe.nn.asr.whisper import Hypothesis, WhisperAsr
from voicepipe.schedulers.asr_gate import decode_gate
from voicepipe.stage import Stage, TurnCounter

log = logging.getLogger(__name__)
SR = 16000  # what Silero and Whisper consume
PREROLL_MS = 300  # audio before the onset given to Whisper: VAD onsets lag soft consonants


class _Audio:
    """Append-only sample buffer addressed by absolute sample index; old samples can be dropped."""

    def __init__(self) -> None:
        self._a = np.zeros(SR * 4, np.float32)
        self.start = 0  # absolute index of self._a[0]
        self.end = 0  # absolute index one past the newest sample

    def append(self, pcm: np.ndarray) -> None:
        n = self.end - self.start
        if n + len(pcm) > len(self._a):
            grown = np.zeros(max(2 * len(self._a), n + len(pcm)), np.float32)
            grown[:n] = self._a[:n]
            self._a = grown
        self._a[n : n + len(pcm)] = pcm
        self.end += len(pcm)

    def get(self, i: int, j: int) -> np.ndarray:
        i = max(i, self.start)
        return self._a[i - self.start : j - self.start].copy()

    def drop_before(self, i: int) -> None:
        k = min(i, self.end) - self.start
        if k > SR:  # compact rarely, in big steps
            n = self.end - self.start
            self._a[: n - k] = self._a[k:n]
            self.start += k


@dataclass
class _Turn:
    id: int
    start_idx: int  # first sample handed to Whisper
    started: SpeechStarted
    stable: StablePrefix = field(default_factory=StablePrefix)
    ended: SpeechEnded | None = None
    end_idx: int = 0  # audio of the final stops here
    last_speech_idx: int = 0
    best: tuple[int, Hypothesis] | None = None  # newest decode: (cutoff sample, result)
    partial_at: int = 0  # cutoff of the last partial launched
    last_partial: str = ""
    stable_at: int | None = None  # last speech sample when TranscriptStable went out
    level_db: float | None = None  # of the newest decode's audio (core/turns/level.py)
    done: asyncio.Event = field(default_factory=asyncio.Event)  # final pushed (or dropped)


class AsrStage(Stage):
    name = "asr"
    intake = True  # the source of turns: never cancel audio intake mid-frame (voicepipe/stage.py)

    def __init__(
        self,
        cfg: Config,
        *,
        asr: WhisperAsr | None = None,
        partials: bool = True,
        turns: TurnCounter | None = None,
        eot: EndOfTurnBoard | None = None,
    ) -> None:
        super().__init__()
        self.cfg = cfg
        self.asr = asr
        self.partials = partials
        # Semantic end of turn (core/turns/semantic.py): the LLM stage posts P(end) on
        # ``eot``; without a board (no local LLM behind) silence alone ends a turn.
        self.eot = eot if cfg.turns.prefill_ahead else None
        self.vad_cfg = cfg.vad
        self.semantic: Eagerness | None = (
            eagerness(cfg.turns.eagerness, cfg.vad.end_silence_ms) if self.eot else None
        )
        self.ep = Endpointer(EndpointConfig.from_vad(cfg.vad, self.semantic))
        self.vad: SileroVad | None = None
        self.audio = _Audio()
        self.early_samples = cfg.asr.early_final_ms * SR // 1000
        self.tail_samples = max(self.early_samples, cfg.asr.tail_ms * SR // 1000)
        self.partial_samples = max(1, cfg.asr.partial_interval_ms * SR // 1000)
        # The pause's text goes out for a tentative reply, and for P(end) (semantic).
        self.preempt_samples = (
            max(1, cfg.turns.preempt_after_ms * SR // 1000)
            if cfg.turns.preempt or self.semantic is not None
            else None
        )
        self._origin_media_ns: int | None = None
        self._resampler: Any = None  # a soxr.ResampleStream (soxr has no types) once needed
        self._in_rate = SR
        self._turn_seq = 0
        self.turns = turns or TurnCounter()  # shared with the LLM stage (its alerts' turns)
        self._turn: _Turn | None = None  # the open turn
        self._last_end_idx = 0  # where the previous turn's audio stopped
        self._pending: list[_Turn] = []  # ended turns whose final is not out yet
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()  # set whenever the decoder may have run out of work
        self._decoding = False
        self._decoder: asyncio.Task[None] | None = None
        # Counters for `voicepipe bench asr` (seconds of decoding by kind, counts).
        self.stats: dict[str, float] = {
            "partial_s": 0.0,
            "early_s": 0.0,
            "final_s": 0.0,
            "stable_s": 0.0,
            "partials": 0,
            "early_hits": 0,
            "finals": 0,
            "stables": 0,
            "resumed": 0,
            "dropped": 0,
            "retries": 0,
            "abandoned": 0,  # partials whose text decode a pause made pointless
        }
        self.decodes: list[tuple[str, float, float]] = []  # (kind, audio s, decode s)
        self.partial_lag_ms: list[float] = []  # arrival of a partial's last sample → pushed
        self._last_t_ns = 0
        # The open turn's pauses, each a ``turns.pause`` span (core/turns/pauses.py).
        self.pauses = PauseLog(min_ms=cfg.asr.early_final_ms)
        # An estimate (or refusal) posted between two VAD chunks is applied at once: the
        # board wakes ``_estimates``, which runs the endpointer's rule on the audio so far
        # under the lock that also covers each frame's chunks.
        self._estimate = asyncio.Event()
        self._estimator: asyncio.Task[None] | None = None
        self._ep_lock = asyncio.Lock()

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        if self.asr is None:
            self.asr = await asyncio.to_thread(WhisperAsr.from_config, self.cfg)
        self.vad = SileroVad()
        self._decoder = asyncio.create_task(self._decode_loop(), name="asr:decoder")
        if self.eot is not None:
            self.eot.listeners.append(self._estimate.set)
            self._estimator = asyncio.create_task(self._estimates(), name="asr:estimates")

    async def stop(self) -> None:
        if self.eot is not None and self._estimate.set in self.eot.listeners:
            self.eot.listeners.remove(self._estimate.set)
        for task in (self._decoder, self._estimator):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def wait_idle(self) -> None:
        """Until the decoder has nothing left to do for the audio seen so far.

        Lets a file be streamed in lockstep (as if decoding took no time), which makes
        offline transcription and tests deterministic.
        """
        while self._decoding or self._next_job() is not None:
            self._idle.clear()
            self._wake.set()
            await self._idle.wait()

    async def process(self, frame: Frame) -> None:
        if isinstance(frame, AudioIn):
            await self._on_audio(frame)
        elif isinstance(frame, InputEnd):
            async with self._ep_lock:
                await self._on_events(self.ep.flush(now_ns()))
            for turn in list(self._pending):
                await turn.done.wait()
            await self.push(frame)
        elif isinstance(frame, TurnControl):
            await self._control(frame)
        else:
            if isinstance(frame, SessionSetup) and (
                frame.vad is not None or frame.eagerness is not None
            ):
                # The endpointer reads its config on every chunk: a turn in progress goes
                # on under the new thresholds.
                if frame.vad is not None:
                    overrides: dict[str, Any] = dict(frame.vad)  # (names checked by sender)
                    self.vad_cfg = dataclasses.replace(self.cfg.vad, **overrides)
                if frame.eagerness is not None and self.eot is not None:
                    self.semantic = eagerness(frame.eagerness, self.vad_cfg.end_silence_ms)
                elif self.semantic is not None:  # same policy, the new silence fallback
                    self.semantic = eagerness(self.semantic.name, self.vad_cfg.end_silence_ms)
                self.ep.cfg = EndpointConfig.from_vad(self.vad_cfg, self.semantic)
            await self.push(frame)

    async def _control(self, frame: TurnControl) -> None:
        """An endpoint's manual turn taking: ``commit`` ends the open turn now (its final
        follows as usual); ``clear`` drops it (no final; ``SpeechEnd(accepted=False)``)."""
        if frame.action == "commit":
            async with self._ep_lock:
                await self._on_events(self.ep.flush(now_ns()))
        elif frame.action == "clear" and self._turn is not None:
            turn, self._turn = self._turn, None
            self.ep = Endpointer(self.ep.cfg)  # forget the open speech run
            self._last_end_idx = self.audio.end
            self.stats["dropped"] += 1
            turn.done.set()
            end = self._media_ns(self.audio.end)
            await self.push(SpeechEnd(turn_id=turn.id, media_ns=end, accepted=False))
        await self.push(frame)

    # ------------------------------------------------------------ audio → VAD → endpoint

    def _media_ns(self, idx: int) -> int:
        assert self._origin_media_ns is not None
        return self._origin_media_ns + idx * 1_000_000_000 // SR

    async def _on_audio(self, frame: AudioIn) -> None:
        async with self._ep_lock:
            await self._on_audio_locked(frame)

    async def _estimates(self) -> None:
        """Each estimate the board gets, applied now: the turn ends if the silence heard so
        far is already what that P(end) asks for (``Endpointer.poll``)."""
        while True:
            await self._estimate.wait()
            self._estimate.clear()
            async with self._ep_lock:
                if self._turn is None or not self.ep.in_speech:
                    continue
                self._read_board()
                events = self.ep.poll(now_ns())
                if events:
                    await self._on_events(events, self._idx(self.ep.media_end_ns))

    def _read_board(self) -> None:
        """The board's answer for the open turn's current speech end, to the endpointer."""
        assert self.eot is not None and self._turn is not None
        last = self.ep.last_speech_media_ns
        if self.eot.declined(self._turn.id, last):
            self.ep.decline_p_end(last)
        p_end = self.eot.p_end(self._turn.id, last)
        if p_end is not None:
            known = self.ep.p_end is not None
            self.ep.set_p_end(p_end, last)
            if not known:
                self.pauses.estimate(
                    last,
                    self.ep.trailing_silence_ns / 1e6,
                    p_end,
                    self.ep.silence_needed_ns() / 1e6,
                )

    async def _on_audio_locked(self, frame: AudioIn) -> None:
        assert self.vad is not None
        if self._origin_media_ns is None:
            self._origin_media_ns = frame.media_ns
        self._last_t_ns = frame.t_ns
        pcm = np.asarray(frame.pcm, dtype=np.float32).reshape(-1)
        if frame.sample_rate != SR:
            if self._resampler is None or self._in_rate != frame.sample_rate:
                import soxr

                self._in_rate = frame.sample_rate
                # vr=True: output in step with input, not in blocks (see stages/output.py)
                self._resampler = soxr.ResampleStream(
                    frame.sample_rate, SR, 1, dtype="float32", vr=True
                )
            pcm = self._resampler.resample_chunk(pcm)
        first_chunk = self.vad.chunks_done
        self.audio.append(pcm)
        probs = self.vad.feed(pcm)
        end = self.audio.end
        for k, p in enumerate(probs):
            c_end = (first_chunk + k + 1) * CHUNK
            wall = frame.t_ns - (end - c_end) * 1_000_000_000 // SR  # arrival of the chunk end
            if self.eot is not None and self._turn is not None and self.ep.in_speech:
                self._read_board()
            events = self.ep.update(
                float(p), self._media_ns(c_end - CHUNK), self._media_ns(c_end), wall
            )
            if self._turn is not None and self.ep.in_speech:
                turn = self._turn
                await self._pause_trace(turn, c_end, wall)
                turn.last_speech_idx = self._idx(self.ep.last_speech_media_ns)
                if turn.stable_at is not None and turn.last_speech_idx > turn.stable_at:
                    turn.stable_at = None  # the user spoke on: the stable text is void
                    self.stats["resumed"] += 1
                    await self.push(SpeechResumed(turn_id=turn.id))
            if events:
                await self._on_events(events, c_end)
        if self._turn is not None:
            self._wake.set()
        elif not self._pending:
            self.audio.drop_before(end - PREROLL_MS * SR // 1000)

    async def _pause_trace(self, turn: _Turn, c_end: int, wall: int) -> None:
        """Book the open turn's pause: opened by enough silence, closed when speech returns."""
        last = self.ep.last_speech_media_ns
        if turn.last_speech_idx < self._idx(last):  # speech again: the pause before it is over
            pause_ms = (self._media_ns(c_end - CHUNK) - self._media_ns(turn.last_speech_idx)) / 1e6
            await self._pause_span(turn.id, self.pauses.close("resumed", pause_ms), wall)
        else:
            silence_ms = self.ep.trailing_silence_ns / 1e6
            if self._estimated and silence_ms >= self.cfg.asr.early_final_ms:
                # The pause's decode is due now: its transcript goes to the LLM for P(end),
                # so the endpointer waits for that rather than cut on silence alone.
                self.ep.expect_p_end(last)
            self.pauses.silence(last, silence_ms, self.ep.silence_needed_ns() / 1e6)

    @property
    def _estimated(self) -> bool:
        """Each pause's transcript gets a P(end) (or a refusal) from the LLM stage."""
        return self.semantic is not None and self.eot is not None and self.eot.estimator

    async def _pause_span(self, turn_id: int, attrs: dict | None, end_ns: int) -> None:
        if attrs is None:
            return
        start = end_ns - round(float(attrs["pause_ms"]) * 1e6)
        await self.push(
            SpanFrame(
                turn_id=turn_id, name="turns.pause", start_ns=start, end_ns=end_ns, attrs=attrs
            )
        )

    def _idx(self, media_ns: int) -> int:
        assert self._origin_media_ns is not None
        return (media_ns - self._origin_media_ns) * SR // 1_000_000_000

    async def _on_events(self, events: list, at_idx: int | None = None) -> None:
        at_idx = self.audio.end if at_idx is None else at_idx
        for ev in events:
            if isinstance(ev, SpeechStarted):
                # Keep finals in turn order: the previous turn's final goes out first.
                for turn in list(self._pending):
                    await turn.done.wait()
                self.pauses.close("dropped", 0.0)  # (a cleared turn's: no span)
                self._turn_seq = self.turns.next(max(self._turn_seq, self.current_turn))
                onset = self._idx(ev.onset_media_ns)
                # The pre-roll never reaches back into the previous turn (after a max-length
                # cut the next turn starts right away: its words must not be heard twice).
                start = max(
                    onset - PREROLL_MS * SR // 1000, self._last_end_idx, self.audio.start, 0
                )
                self._turn = _Turn(
                    self._turn_seq, start, ev, last_speech_idx=at_idx, partial_at=at_idx
                )
                await self.push(SpeechStart(turn_id=self._turn_seq, media_ns=ev.onset_media_ns))
            elif isinstance(ev, SpeechEnded) and self._turn is not None:
                turn, self._turn = self._turn, None
                turn.ended, turn.end_idx = ev, at_idx
                self._last_end_idx = at_idx
                turn.last_speech_idx = self._idx(ev.last_speech_media_ns)
                silence_ms = (self._media_ns(at_idx) - ev.last_speech_media_ns) / 1e6
                await self._pause_span(turn.id, self.pauses.close(ev.reason, silence_ms), ev.now_ns)
                await self.push(
                    SpeechEnd(
                        turn_id=turn.id, media_ns=ev.last_speech_media_ns, accepted=ev.accepted
                    )
                )
                await self.push(
                    SpanFrame(
                        turn_id=turn.id,
                        name="vad.speech",
                        start_ns=ev.onset_wall_ns,
                        end_ns=ev.last_speech_wall_ns,
                        attrs={
                            "media_start_ms": ev.onset_media_ns / 1e6,
                            "media_end_ms": ev.last_speech_media_ns / 1e6,
                            "reason": ev.reason,
                            "accepted": ev.accepted,
                        },
                    )
                )
                if ev.accepted:
                    self._pending.append(turn)
                else:
                    self.stats["dropped"] += 1
                    turn.done.set()
                self._wake.set()

    # ------------------------------------------------------------ decoding

    def _covers(self, turn: _Turn, cutoff: int) -> bool:
        """A decode up to ``cutoff`` saw the whole turn plus enough trailing silence."""
        need = turn.end_idx if turn.ended is not None else self.audio.end
        return cutoff >= min(need, turn.last_speech_idx + self.early_samples)

    def _next_job(self) -> tuple[_Turn, int, str] | None:
        if self._pending:
            # Finals go out in turn order, and before any work on the open turn.
            first = self._pending[0]
            if first.best is not None and self._covers(first, first.best[0]):
                return first, first.best[0], "ready"
            return first, first.end_idx, "final"
        turn = self._turn
        if turn is None:
            return None
        now = self.audio.end
        silence = now - turn.last_speech_idx
        if silence >= self.early_samples:
            if turn.best is None or not self._covers(turn, turn.best[0]):
                return turn, now, "early"
            if self._publish_due(turn, silence):
                return turn, turn.best[0], "publish"
            return None
        if self.preempt_samples is not None and silence >= self.preempt_samples:
            # Preempt earlier than the early final: one decode for this pause.
            if turn.best is None or turn.best[0] < turn.last_speech_idx + self.preempt_samples:
                return turn, now, "stable"
            return None
        if self.partials and silence < CHUNK and now - turn.partial_at >= self.partial_samples:
            return turn, now, "partial"
        return None

    def _paused_since(self, turn: _Turn) -> Callable[[], bool]:
        """For a partial of ``turn``: has a pause long enough for the pause's decode begun
        (or the turn ended) since it started? Then the partial's text decoder is skipped
        (the encoder has run): the pause's decode sees all its audio and more, and it
        waits for the decoder, as every pause's P(end), and so every end of turn, does."""

        def paused() -> bool:
            # (read from the decode's thread: ints the event loop replaces, never mutates)
            silence = self.audio.end - turn.last_speech_idx
            return self._turn is not turn or silence >= self.early_samples

        return paused

    def _publish_due(self, turn: _Turn, silence: int) -> bool:
        """An early final decoded before ``turns.preempt_after_ms`` of silence (a smaller
        ``asr.early_final_ms``) goes out as the stable text once the silence is that long,
        with no decode of its own: the decode ran while the user was already silent, so
        the LLM's head start no longer waits for it."""
        return (
            self.preempt_samples is not None
            and silence >= self.preempt_samples
            and turn.best is not None
            and bool(turn.best[1].text.strip())
            and turn.stable_at != turn.last_speech_idx
        )

    async def _decode_loop(self) -> None:
        assert self.asr is not None
        while True:
            job = self._next_job()
            if job is None:
                self._wake.clear()
                self._idle.set()
                await self._wake.wait()
                continue
            turn, cutoff, kind = job
            if kind == "publish":  # the early final's text, now that the pause is long enough
                assert turn.best is not None
                await self._stable(turn, self.audio.end, turn.best[1])
                continue
            if kind == "ready":  # decoded during the endpoint silence: nothing left to do
                self.stats["early_hits"] += 1
                await self._finish(turn, turn.best[1] if turn.best else None, early=True)
                continue
            gate = decode_gate() if self.cfg.asr.decode_priority else None
            if gate is not None:  # finals before other sessions' partials (schedulers/asr_gate.py)
                await gate.acquire(urgent=kind != "partial")
            try:
                if gate is not None:
                    again = self._next_job()  # the audio moved on while this waited
                    if again is None or again[2] == "ready":
                        continue  # (the loop's top handles it; the gate is released below)
                    turn, cutoff, kind = again
                if kind == "partial":
                    turn.partial_at = cutoff
                # A decode sees the speech and at most tail_samples after its last speech
                # chunk, however late it starts: trailing silence is noise in a real room,
                # and Whisper turns it into words (a decode that started late, once the
                # decoder was free, or the final after the whole endpoint silence, used to
                # see up to vad.end_silence_ms of it; the lockstep pass never did).
                stop = min(cutoff, turn.last_speech_idx + self.tail_samples)
                pcm = self.audio.get(turn.start_idx, max(stop, turn.start_idx + 1))
                level_db = speech_level_db(pcm, SR)
                cut_t_ns = self._last_t_ns
                speech_end = self._media_ns(turn.last_speech_idx)
                if kind in ("early", "stable"):
                    at_ms = (self.audio.end - turn.last_speech_idx) * 1000 / SR
                    self.pauses.decoding(speech_end, at_ms)
                self._decoding = True
                partial = kind == "partial"
                hyp = await asyncio.to_thread(
                    self.asr.transcribe,
                    pcm,
                    retry=not partial,
                    beam_size=self.cfg.asr.partial_beam_size if partial else None,
                    abandon=self._paused_since(turn) if partial else None,
                )
            finally:
                if gate is not None:
                    gate.release()
                if self._decoding:
                    self._decoding = False
                    self._idle.set()
            if hyp.abandoned:  # a pause began meanwhile: its own decode comes next
                self.stats["abandoned"] += 1
                continue
            if kind in ("early", "stable"):
                self.pauses.decoded(speech_end, hyp.seconds * 1e3)
                if not hyp.text.strip():  # no words: no transcript, so no P(end) will come
                    self.ep.decline_p_end(speech_end)
            self.stats[f"{kind}_s"] += hyp.seconds
            self.decodes.append((kind, hyp.audio_s, hyp.seconds))
            self.stats["retries"] += hyp.retried
            if turn.best is None or cutoff >= turn.best[0]:
                turn.best = (cutoff, hyp)
                turn.level_db = level_db
            if kind == "final":
                await self._finish(turn, hyp)
                continue
            if kind != "partial" and turn.ended is None:
                await self._stable(turn, cutoff, hyp)
            if turn.ended is None and await self._partial(turn, hyp):
                self.partial_lag_ms.append((now_ns() - cut_t_ns) / 1e6)

    async def _partial(self, turn: _Turn, hyp: Hypothesis) -> bool:
        if not self.partials or not hyp.text:
            return False
        p = turn.stable.update(hyp.text)
        if p.text == turn.last_partial:
            return False
        turn.last_partial = p.text
        self.stats["partials"] += 1
        await self.push(
            TranscriptPartial(
                turn_id=turn.id,
                text=p.text,
                stable_prefix=p.agreed,
                heard=p.heard,
                level_db=turn.level_db,
            )
        )
        return True

    async def _stable(self, turn: _Turn, heard: int, hyp: Hypothesis) -> None:
        """A decode of the pause: if ``heard`` (the audio seen so far: the decode's cutoff,
        or now for an early final decoded before the pause was long enough) holds enough
        silence after the last speech, the LLM may start on its text."""
        if self.preempt_samples is None or not hyp.text.strip():
            return
        if heard - turn.last_speech_idx < self.preempt_samples:
            return  # too short a pause so far, or speech came back after the cutoff
        turn.stable_at = turn.last_speech_idx
        self.stats["stables"] += 1
        silence_ms = (self.audio.end - turn.last_speech_idx) * 1000 / SR
        self.pauses.stable(self._media_ns(turn.last_speech_idx), silence_ms, hyp.text)
        await self.push(
            TranscriptStable(
                turn_id=turn.id,
                text=hyp.text,
                speech_end_media_ns=self._media_ns(turn.last_speech_idx),
            )
        )

    async def _finish(self, turn: _Turn, hyp: Hypothesis | None, early: bool = False) -> None:
        """Push the ended turn's final; ``early``: decoded during the endpoint silence."""
        ev = turn.ended
        assert ev is not None
        self._pending.remove(turn)
        text = hyp.text if hyp is not None else ""
        if text:
            self.stats["finals"] += 1
            await self.push(
                TranscriptFinal(
                    turn_id=turn.id,
                    text=text,
                    speech_end_media_ns=ev.last_speech_media_ns,
                    speech_end_wall_ns=ev.last_speech_wall_ns,
                    level_db=turn.level_db,
                )
            )
        else:
            self.stats["dropped"] += 1
        end = now_ns()
        attrs = {
            "text": text,
            "speech_end_media_ms": ev.last_speech_media_ns / 1e6,
            "since_speech_end_ms": (end - ev.last_speech_wall_ns) / 1e6,
            "endpoint": ev.reason,
            "early": early,  # the pause's decode was the final (no decode after the endpoint)
            "empty": not text,
        }
        if hyp is not None:
            attrs.update(
                audio_s=round(hyp.audio_s, 3),
                window_s=hyp.window_s,
                decode_ms=round(hyp.seconds * 1e3, 1),
                no_speech_prob=round(hyp.no_speech_prob, 3),
            )
        await self.push(
            SpanFrame(
                turn_id=turn.id,
                name="asr.final",
                start_ns=ev.now_ns,
                end_ns=max(end, ev.now_ns),
                attrs=attrs,
            )
        )
        turn.done.set()
        if self._turn is None and not self._pending:
            self.audio.drop_before(self.audio.end - PREROLL_MS * SR // 1000)


async def stream_file(
    stage: AsrStage, pcm: np.ndarray, sample_rate: int, *, frame_ms: int = 20, lockstep: bool = True
) -> list[Frame]:
    """Drive a started ``stage`` with ``pcm`` in ``frame_ms`` frames, as fast as it goes.

    Returns every frame the stage pushed (its ``push`` is replaced). With ``lockstep``
    each frame waits for the decoder to go idle, so partials fall at the same audio
    positions on every run; without it, decoding overlaps intake as it would live.
    """
    out: list[Frame] = []

    async def collect(f: Frame) -> None:
        out.append(f)

    stage.push = collect
    n = max(1, sample_rate * frame_ms // 1000)
    for seq, i in enumerate(range(0, len(pcm), n)):
        await stage.process(
            AudioIn(
                pcm=pcm[i : i + n],
                sample_rate=sample_rate,
                media_ns=i * 1_000_000_000 // sample_rate,
                seq=seq,
            )
        )
        if lockstep:
            await stage.wait_idle()
    await stage.process(InputEnd())
    return out


def preload(cfg: Config) -> None:
    """Load the ASR's weights once per process, before the first session."""
    WhisperAsr.from_config(cfg)
