"""Turn-taking between ASR and LLM: barge-in that tells a backchannel from an interruption.

The ASR stage gives every user turn a new id when speech starts. With no reply in flight,
this stage turns ``SpeechStart(turn N)`` into an ``Interrupt(turn N)`` at once, a system
frame that jumps the queues downstream (LLM → TTS → output pacer → client, whose playout
flushes on the wire ``interrupt`` message); stages keep work of turn N and newer, so the
interrupt is harmless when nothing older is in flight.

While a reply is in flight (from the final transcript it answers, or its first words,
until the client reports it played to the end), speech is not enough: a listener's
"mm-hmm", a cough, or the assistant's own voice coming back into the microphone must not
cut the answer. The new turn's frames are held back and an ``OverlapJudge``
(core/turns/overlap.py) weighs its partial transcripts, its final one and its duration
against the reply's own words (``ReplyWords``, sent upstream by the LLM):

- **interrupt**: the ``Interrupt`` goes out, then the held frames, and the turn goes on
  as any other (measured from the turn's onset: span ``turns.overlap``);
- **backchannel** or **echo**: the held frames are dropped, the reply resumes where it
  stopped, and the turn never reaches the LLM or its conversation.

While the judge listens, the reply is paused (``[turns] pause_on_speech``): a
``PlayoutHold`` goes downstream with the onset, so the assistant goes quiet within the
audio the client already holds, not after the words are in; the verdict resumes it
(``hold=False``) or cuts it (``Interrupt``).

The echo reference is the reply's words the loudspeaker played from
``turns.echo_words_ms`` before the speech began until the judgment (``Speaker``,
core/playout/speaker.py, fed by the output stage and the client's playback reports);
without a ``Speaker`` it is the whole text of the replies in flight (``ReplyWords``).

Each decision is a ``turns.overlap`` span (onset → decision; attrs: verdict, text, and the
turn's level_db and the quiet_below_db it was held to, where known).
``[turns] backchannel = false`` restores barge-in on speech onset alone.

``EndOfTurnBoard`` (core/turns/semantic.py) is the other thing of turn-taking a pipeline
hands its stages: the LLM stage posts P(end of turn) on it, the ASR's endpointer reads it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from voicepipe.clock import now_ns
from voicepipe.config import TurnsConfig
from voicepipe.core.playout.speaker import Speaker
from voicepipe.core.turns.level import UserLevel
from voicepipe.core.turns.overlap import OverlapConfig, OverlapJudge, Verdict
from voicepipe.core.turns.semantic import EndOfTurnBoard
from voicepipe.frames import (
    Frame,
    Interrupt,
    PlaybackReport,
    PlayoutHold,
    ReplyWords,
    SessionSetup,
    SpanFrame,
    SpeechEnd,
    SpeechResumed,
    SpeechStart,
    SystemFrame,
    TranscriptFinal,
    TranscriptPartial,
    TranscriptStable,
)
from voicepipe.stage import Stage

__all__ = ["BargeIn", "EndOfTurnBoard"]

SPAN = "turns.overlap"
# Speech over a paused reply is the user's, not its echo, once it goes on this long after
# the last audio the client had to play (the room's reverberation, the alignment's error).
AFTER_SPEAKER_NS = 500_000_000
MAX_SPEAKER_WAIT_NS = 1_500_000_000
# After the client reports a reply played to the end, its echo may still be in the room
# (path delay, reverberation) and in the ASR's pipeline: it stays a reference this long.
ECHO_TAIL_NS = 1_000_000_000
# A client that sends no playback reports (or a reply that never comes) must not leave a
# reply in flight for ever, or every later "yes" would be judged a backchannel: a reply
# ends at the latest when its words, spoken at this rate, would have been said, plus slack.
SECONDS_PER_CHAR = 0.08
SLACK_NS = 5_000_000_000
# The frames of one user turn, as the ASR sends them (held, then released or dropped).
TURN_FRAMES = (SpeechEnd, TranscriptPartial, TranscriptStable, SpeechResumed, TranscriptFinal)
Ask = Callable[[OverlapJudge, float], Verdict]


@dataclass
class _Reply:
    text: str = ""
    expires_ns: int = 0

    def extend(self, text: str, now: int) -> None:
        self.text = f"{self.text} {text}".strip()
        spoken = round(len(text) * SECONDS_PER_CHAR * 1e9)
        self.expires_ns = max(self.expires_ns, now + SLACK_NS) + spoken


@dataclass
class _Held:
    """A user turn that began during a reply, its frames held until the judge decides."""

    turn: int
    judge: OverlapJudge
    onset_ns: int  # when its SpeechStart was made (the onset confirmed)
    frames: list[Frame] = field(default_factory=list)
    timer: asyncio.Task[None] | None = None

    def ms(self, t_ns: int) -> float:
        return (t_ns - self.onset_ns) / 1e6


class BargeIn(Stage):
    name = "turns"

    def __init__(
        self,
        cfg: TurnsConfig | None = None,
        speaker: Speaker | None = None,
        eot: EndOfTurnBoard | None = None,
    ) -> None:
        super().__init__()
        cfg = cfg or TurnsConfig()
        self.speaker = speaker
        # The ASR's endpointer waits for the LLM's P(end) of each pause; a turn held here
        # (judged over a reply) or dropped never reaches the LLM, so say none will come:
        # its end is silence's, as the judge, which waits for the end, needs.
        self.eot = eot
        self.pause = cfg.pause_on_speech
        self.echo_words_ns = cfg.echo_words_ms * 1_000_000
        self.enabled = True  # off: the endpoint decides (Realtime interrupt_response=false)
        self.judging = cfg.backchannel
        self.overlap = OverlapConfig(
            max_wait_ms=cfg.overlap_max_wait_ms, quiet_gap_db=cfg.echo_quiet_gap_db
        )
        self._replies: dict[int, _Reply] = {}  # replies in flight: turn → words so far
        self._ended: dict[int, int] = {}  # replies played to the end: turn → when (ns)
        self._held: _Held | None = None
        self._dropped: set[int] = set()  # turns judged backchannel or echo
        self.user_level = UserLevel()  # the user's own voice, from the turns that were theirs
        self._lock = asyncio.Lock()  # the judge's timer and process() both settle turns
        self.verdicts: dict[str, int] = {v.value: 0 for v in Verdict if v is not Verdict.PENDING}

    # ------------------------------------------------------------ replies in flight

    def _in_flight(self) -> bool:
        now = now_ns()
        for turn, at in list(self._ended.items()):
            if now - at > ECHO_TAIL_NS:
                del self._ended[turn]
                self._replies.pop(turn, None)
        for turn, r in list(self._replies.items()):
            if now > r.expires_ns:
                del self._replies[turn]
        return bool(self._replies)

    def _expect_reply(self, turn: int) -> None:
        """A final transcript went to the LLM: a reply to it is coming."""
        self._replies.setdefault(turn, _Reply()).extend("", now_ns())

    async def _handle_system(self, frame: SystemFrame) -> bool:
        if isinstance(frame, ReplyWords):  # from the LLM, for this stage only
            if frame.turn_id not in self._ended and frame.turn_id >= self.current_turn:
                self._replies.setdefault(frame.turn_id, _Reply()).extend(frame.text, now_ns())
            if self._held is not None and self.speaker is None:
                self._held.judge.add_reference(frame.text)
            return True
        return await super()._handle_system(frame)

    async def on_system(self, frame: SystemFrame) -> None:
        if isinstance(frame, PlaybackReport) and frame.done:
            self._ended.setdefault(frame.reply_turn, now_ns())
        elif isinstance(frame, Interrupt):
            # Older replies are void (cut by this stage or by the client's stop).
            for turn in [t for t in self._replies if t < frame.turn_id]:
                self._ended.setdefault(turn, now_ns())
        elif (
            isinstance(frame, SpanFrame)
            and frame.name == "asr.final"
            and frame.attrs.get("empty")
            and self._held is not None
            and self._held.turn == frame.turn_id
        ):
            # The ASR heard no words in the turn (a cough, laughter): no final follows.
            await self._judge(frame.turn_id, lambda j, t: j.on_end("", t))

    # ------------------------------------------------------------ frames

    async def process(self, frame: Frame) -> None:
        if isinstance(frame, SessionSetup) and frame.barge_in is not None:
            self.enabled = frame.barge_in
        if isinstance(frame, SpeechStart) and frame.turn_id > 0:
            await self._speech_start(frame)
            return
        if not isinstance(frame, TURN_FRAMES):
            await self.push(frame)
            return
        if frame.turn_id in self._dropped:
            self._no_estimate(frame)
            return  # the rest of a backchannel or echo turn
        held = self._held
        if held is None or frame.turn_id != held.turn:
            if isinstance(frame, TranscriptFinal) and frame.text.strip():
                self._expect_reply(frame.turn_id)
                self.user_level.observe(frame.level_db)
            await self.push(frame)
            return
        held.frames.append(frame)
        self._no_estimate(frame)
        if isinstance(frame, TranscriptPartial):
            level = frame.level_db
            await self._judge(held.turn, lambda j, t: j.on_partial(frame.text, t, level))
        elif isinstance(frame, SpeechEnd):
            if held.timer is not None:
                held.timer.cancel()  # speech is over: the duration rule no longer applies
            if not frame.accepted:  # too short to transcribe: a click, a cough
                await self._judge(held.turn, lambda j, t: j.on_end("", t))
        elif isinstance(frame, TranscriptFinal):
            level = frame.level_db
            await self._judge(held.turn, lambda j, t: j.on_end(frame.text, t, level))

    def _no_estimate(self, frame: Frame) -> None:
        """A pause's transcript kept from the LLM: its P(end) will not come."""
        if isinstance(frame, TranscriptStable) and self.eot is not None:
            self.eot.decline(frame.turn_id, frame.speech_end_media_ns)

    async def _speech_start(self, frame: SpeechStart) -> None:
        if self._held is not None:  # (the ASR ends a turn before it starts the next)
            await self._judge(self._held.turn, lambda j, t: j.on_end("", t))
        if not self.enabled:
            await self.push(frame)
            return
        if not self.judging or not self._in_flight():
            await self.push(Interrupt(turn_id=frame.turn_id, reason="barge-in"))
            await self.push(frame)
            return
        reference = "" if self.speaker else " ".join(r.text for r in self._replies.values())
        judge = OverlapJudge(self.overlap, reference, self.user_level.typical())
        held = _Held(frame.turn_id, judge, frame.t_ns, [frame])
        held.timer = asyncio.create_task(self._wait(held), name=f"turns:overlap:{held.turn}")
        self._held = held
        if self.pause:
            await self.push(PlayoutHold(turn_id=frame.turn_id, hold=True))

    async def _wait(self, held: _Held) -> None:
        """The duration rule: speech that goes on past ``max_wait_ms`` undecided, and (with
        a ``Speaker``) ``AFTER_SPEAKER_NS`` past the end of what the client's speaker had
        to play: the reply paused, its echo cannot outlast the audio the client still
        held (a busy client holds seconds of it), the user can."""
        await asyncio.sleep(self.overlap.max_wait_ms / 1000)
        # At most MAX_SPEAKER_WAIT_NS more: a reply not paused (pause_on_speech off, or
        # still being sent) keeps the speaker busy for as long as it lasts.
        give_up = now_ns() + MAX_SPEAKER_WAIT_NS
        while self.speaker is not None:
            wait_ns = min(self.speaker.silent_from() + AFTER_SPEAKER_NS, give_up) - now_ns()
            if wait_ns <= 0:
                break
            await asyncio.sleep(min(wait_ns, 1e9) / 1e9)
        held.timer = None  # (settling cancels the timer: not this very task)
        await self._judge(held.turn, lambda j, t: j.on_time(t))

    async def _judge(self, turn: int, ask: Ask) -> None:
        async with self._lock:
            held = self._held
            if held is None or held.turn != turn:
                return  # settled already
            now = now_ns()
            if self.speaker is not None:
                # Only what was played moments before (and since): not the whole reply.
                since = held.onset_ns - self.echo_words_ns
                held.judge.set_reference(self.speaker.words(since, now))
            verdict = ask(held.judge, held.ms(now))
            if verdict is Verdict.PENDING:
                return
            self._held = None
            if held.timer is not None:
                held.timer.cancel()
            self.verdicts[verdict.value] += 1
            decided = now_ns()
            attrs: dict[str, Any] = {"verdict": verdict.value, "text": held.judge.text}
            # (only the levels known: a trace attribute has no "none")
            for key, db in (
                ("level_db", held.judge.level_db),
                ("quiet_below_db", held.judge.quiet_below_db),
            ):
                if db is not None:
                    attrs[key] = round(db, 1)
            await self.push(
                SpanFrame(
                    turn_id=turn,
                    name=SPAN,
                    start_ns=held.onset_ns,
                    end_ns=max(decided, held.onset_ns),
                    attrs=attrs,
                )
            )
            if verdict is Verdict.INTERRUPT:
                await self.push(Interrupt(turn_id=turn, reason="barge-in"))
                for f in held.frames:
                    await self.push(f)
                    if isinstance(f, TranscriptFinal) and f.text.strip():
                        self._expect_reply(turn)
                        self.user_level.observe(f.level_db)
            else:
                self._dropped.add(turn)
                if self.pause:
                    await self.push(PlayoutHold(turn_id=turn, hold=False))

    async def stop(self) -> None:
        held, self._held = self._held, None
        if held is not None and held.timer is not None:
            held.timer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await held.timer
