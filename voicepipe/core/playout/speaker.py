"""What the client's loudspeaker played, and when, on the server's clock. Sans-I/O.

The server knows every sample of reply audio it sent and when its pacer planned each
frame to be heard (stages/output.py: the output timeline); the client reports when the
first sample of each reply actually played (docs/PROTOCOL.md, ``playback``). From these,
``Speaker`` answers two questions about a moment on the server's clock:

- ``reference(t0_ns, n)``: what the speaker played from ``t0_ns`` on, ``n`` samples at
  ``rate``: the far-end reference an echo canceller needs, lined up with the microphone
  (whose capture times ``MicClock`` gives);
- ``words(t0_ns, t1_ns)``: the reply's words played in that span: words the user seems to
  say while the assistant talks that it played moments before are its own voice coming
  back (echo gating in stages/turns.py), whereas the rest of the reply is not.

Timing model: a frame planned for ``p`` plays at ``p + delay_ns``; ``delay_ns`` (the
client's playout buffer plus the downlink) is measured from each reply's first-play
report as (first play) − (plan of its first sample). Until a first report it is 0: too
early rather than too late, which an echo canceller tolerates (a reference that leads the
echo is what its filter models; one that lags it cannot be used). A reply the server held
(stages/output.py pauses sending while the user may be interrupting) resumes on a later
plan, so its frames keep their right times with no further report.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from voicepipe.core.text.wer import normalize

NS = 1_000_000_000
REANCHOR_NS = 5_000_000


@dataclass
class _Chunk:
    at: int  # output sample of the reply where the chunk's audio starts
    words: list[str]


@dataclass
class _Reply:
    turn: int
    out_rate: int
    frame_k: list[int] = field(default_factory=list)  # reply sample (out rate) of each frame
    frame_p: list[int] = field(default_factory=list)  # planned play time of each frame (ns)
    sent: int = 0  # output samples sent
    ref: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float32))  # at Speaker.rate
    ref_n: int = 0  # samples of ``ref`` in use
    chunks: list[_Chunk] = field(default_factory=list)
    finished: bool = False  # all of its audio was sent
    played: int | None = None  # samples the client played, once it said it is done
    first_play_ns: int | None = None
    progress: int = 0  # output samples played, per the latest report

    def planned(self, k: float) -> float:
        """Planned play time (ns) of output sample ``k`` of the reply."""
        if not self.frame_k:
            return math.inf
        i = max(0, bisect.bisect_right(self.frame_k, k) - 1)
        return self.frame_p[i] + (k - self.frame_k[i]) * NS / self.out_rate

    def end_k(self) -> int:
        """The reply's last output sample that plays (exclusive)."""
        return self.sent if self.played is None else min(self.sent, self.played)


class Speaker:
    """The loudspeaker's output for one session; ``rate`` is the reference's sample rate."""

    def __init__(self, rate: int = 16000, keep_s: float = 10.0) -> None:
        if rate <= 0 or keep_s <= 0:
            raise ValueError("rate and keep_s must be > 0")
        self.rate = rate
        self.keep_ns = round(keep_s * NS)
        self.delay_ns = 0
        self._replies: deque[_Reply] = deque()

    # ------------------------------------------------------------ what the server sent

    def _reply(self, turn: int) -> _Reply | None:
        for r in reversed(self._replies):
            if r.turn == turn:
                return r
        return None

    def sent(
        self, turn: int, planned_ns: int, out_samples: int, out_rate: int, ref: np.ndarray
    ) -> None:
        """One frame of reply ``turn``: ``out_samples`` samples at ``out_rate`` planned to
        play from ``planned_ns``, and ``ref``, the same audio resampled to ``rate`` as far
        as the resampler has got (its remainder comes with later frames or ``finish``)."""
        if out_rate <= 0 or out_samples < 0:
            raise ValueError("out_rate must be > 0 and out_samples >= 0")
        r = self._reply(turn)
        if r is None or r.finished:
            r = _Reply(turn, out_rate)
            self._replies.append(r)
        self._forget(planned_ns)
        if not r.frame_k:
            r.out_rate = out_rate  # (a reply whose first chunk came before its audio)
        if out_samples:
            r.frame_k.append(r.sent)
            r.frame_p.append(planned_ns)
            r.sent += out_samples
        self._append(r, ref)

    def chunk(self, turn: int, text: str, at_sample: int) -> None:
        """Reply ``turn``'s text chunk ``text`` starts at its output sample ``at_sample``."""
        r = self._reply(turn)
        if r is None:
            r = _Reply(turn, 1)  # (its rate comes with its first frame)
            self._replies.append(r)
        r.chunks.append(_Chunk(at_sample, normalize(text).split()))

    def finish(self, turn: int, ref_tail: np.ndarray | None = None) -> None:
        """Reply ``turn`` has no more audio (it ended, or was cut)."""
        r = self._reply(turn)
        if r is None:
            return
        if ref_tail is not None:
            self._append(r, ref_tail)
        r.finished = True

    def _append(self, r: _Reply, pcm: np.ndarray) -> None:
        x = np.asarray(pcm, np.float32).reshape(-1)
        if r.ref_n + len(x) > len(r.ref):
            grown = np.zeros(max(2 * len(r.ref), r.ref_n + len(x), self.rate), np.float32)
            grown[: r.ref_n] = r.ref[: r.ref_n]
            r.ref = grown
        r.ref[r.ref_n : r.ref_n + len(x)] = x
        r.ref_n += len(x)

    def _forget(self, now_planned_ns: int) -> None:
        while len(self._replies) > 1:
            r = self._replies[0]
            if r.planned(r.end_k()) + self.delay_ns >= now_planned_ns - self.keep_ns:
                break
            self._replies.popleft()

    # ------------------------------------------------------------ what the client said

    def first_play(self, turn: int, first_play_ns: int) -> None:
        """The client played reply ``turn``'s first sample at ``first_play_ns`` (our clock)."""
        r = self._reply(turn)
        if r is None or not r.frame_p or r.first_play_ns is not None:
            return
        r.first_play_ns = first_play_ns
        self.delay_ns = first_play_ns - r.frame_p[0]

    def progress(self, turn: int, played_samples: int, sample_rate: int, at_ns: int) -> None:
        """The client had played ``played_samples`` of reply ``turn`` (at its
        ``sample_rate``) by ``at_ns``: where its playout really is. Its buffer conceals
        when it runs dry and time-compresses to catch up, so the delay drifts; a report
        moves it when it is off by more than ``REANCHOR_NS`` (the canceller re-adapts to
        every move). A report that played nothing new since the last one is ignored: a
        client with nothing to play (a held reply) is not late. One that played all that
        was sent counts: a TTS slower than real time sends frames after their plan, and
        the client plays each as it comes, later and later."""
        r = self._reply(turn)
        if r is None or not r.frame_k or sample_rate <= 0:
            return
        k = min(round(played_samples * r.out_rate / sample_rate), r.sent)
        if k <= r.progress:
            return
        r.progress = k
        delay = at_ns - round(r.planned(k))
        if abs(delay - self.delay_ns) > REANCHOR_NS:
            self.delay_ns = delay

    def done(self, turn: int, played_samples: int, sample_rate: int) -> None:
        """The client is done with reply ``turn``: it played ``played_samples`` of it (at
        its ``sample_rate``); the rest, flushed by a cut, never reached the speaker."""
        r = self._reply(turn)
        if r is None or sample_rate <= 0:
            return
        r.played = round(played_samples * r.out_rate / sample_rate)

    # ------------------------------------------------------------ questions

    def reference(self, t0_ns: int, n: int) -> np.ndarray:
        """The speaker's output over ``[t0_ns, t0_ns + n / rate)``, float32 at ``rate``
        (zeros where nothing played)."""
        out = np.zeros(n, np.float32)
        if n <= 0:
            return out
        t = t0_ns - self.delay_ns + np.arange(n) * (NS / self.rate)  # planned times
        for r in self._replies:
            if not r.frame_p or r.ref_n == 0:
                continue
            if r.frame_p[0] > t[-1] or r.planned(r.end_k()) <= t[0]:
                continue
            # Only the frames planned within the span (a reply has thousands of them).
            lo = max(0, bisect.bisect_right(r.frame_p, t[0]) - 1)
            hi = max(lo + 1, bisect.bisect_right(r.frame_p, t[-1]))
            p = np.asarray(r.frame_p[lo:hi], np.float64)
            fk = np.asarray(r.frame_k[lo:hi], np.float64)
            # Samples of a frame planned before a later frame's plan (a resumed hold
            # leaves a gap between them): k past the frame's own end is silence.
            ends = r.frame_k[lo + 1 : hi + 1] + ([r.sent] if hi >= len(r.frame_k) else [])
            i = np.clip(np.searchsorted(p, t, side="right") - 1, 0, len(p) - 1)
            k = fk[i] + (t - p[i]) * r.out_rate / NS
            frame_end = np.asarray(ends, np.float64)[i]
            j = np.floor(k * self.rate / r.out_rate).astype(np.int64)
            first = r.frame_p[0]
            ok = (t >= first) & (k < frame_end) & (k < r.end_k()) & (j < r.ref_n) & (j >= 0)
            out[ok] = r.ref[j[ok]]
        return out

    def active(self, t0_ns: int, t1_ns: int) -> bool:
        """Whether any reply audio plays within ``[t0_ns, t1_ns)``."""
        for r in self._replies:
            if not r.frame_p:
                continue
            start = r.frame_p[0] + self.delay_ns
            end = r.planned(r.end_k()) + self.delay_ns
            if start < t1_ns and end > t0_ns:
                return True
        return False

    def silent_from(self) -> float:
        """When the last audio sent so far finishes playing (-inf before any): the
        speaker is silent from then on unless more is sent."""
        ends = [r.planned(r.end_k()) + self.delay_ns for r in self._replies if r.frame_p]
        return max(ends, default=-math.inf)

    def words(self, t0_ns: int, t1_ns: int) -> list[str]:
        """The reply words whose sound falls within ``[t0_ns, t1_ns]``: each chunk's words
        spread evenly over its audio (a chunk still being synthesised: all of them from
        its start on)."""
        out: list[str] = []
        for r in self._replies:
            if not r.frame_p:
                continue
            end = r.end_k()
            for c, chunk in enumerate(r.chunks):
                if c + 1 < len(r.chunks):
                    stop: float = r.chunks[c + 1].at
                elif r.finished:
                    stop = r.sent
                else:
                    stop = math.inf
                n = len(chunk.words)
                for i, w in enumerate(chunk.words):
                    if math.isinf(stop):
                        a, b = float(chunk.at), math.inf
                    else:
                        a = chunk.at + (stop - chunk.at) * i / n
                        b = chunk.at + (stop - chunk.at) * (i + 1) / n
                    if a >= end:
                        break  # never played (cut before it)
                    wa = r.planned(a) + self.delay_ns
                    wb = math.inf if math.isinf(b) else r.planned(min(b, end)) + self.delay_ns
                    if wa <= t1_ns and wb >= t0_ns:
                        out.append(w)
        return out


class MicClock:
    """When the client captured each input sample, on the server's clock.

    An input frame arrives at least as late as its last sample was captured, later by
    the uplink and by any stall of the event loop; the least (arrival − media time) over
    the last ``window_s`` is the best estimate of the offset between the two clocks
    (jitter only ever adds delay), and the window lets it follow a slow drift.
    """

    def __init__(self, window_s: float = 10.0) -> None:
        if window_s <= 0:
            raise ValueError("window_s must be > 0")
        self.window_ns = round(window_s * NS)
        self._seen: deque[tuple[int, int]] = deque()  # (arrival, arrival - media), rising

    def arrived(self, media_end_ns: int, arrival_ns: int) -> None:
        """The input up to media time ``media_end_ns`` arrived at ``arrival_ns``."""
        off = arrival_ns - media_end_ns
        while self._seen and self._seen[-1][1] >= off:
            self._seen.pop()  # (a monotonic deque: the window's minimum stays at the left)
        self._seen.append((arrival_ns, off))
        while self._seen[0][0] < arrival_ns - self.window_ns:
            self._seen.popleft()

    def capture_ns(self, media_ns: int) -> int | None:
        """When the sample at media time ``media_ns`` was captured (None before any input)."""
        return media_ns + self._seen[0][1] if self._seen else None
