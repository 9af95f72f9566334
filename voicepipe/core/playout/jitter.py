"""Adaptive playout buffer (docs/DESIGN.md §8), sans-I/O, in the spirit of WebRTC NetEq.

``push`` reply-audio frames as they arrive, ``pull`` samples when the speaker
wants them; both take ``now_ns`` and nothing here reads a clock. The same
algorithm runs in the browser's playback worklet (``web/jitter.js``); the shared
vectors in ``tests/data/jitter_vectors.json`` keep the two bit-identical.

How it decides:

* Relative delay ``r`` of each new frame: its arrival time minus its media time,
  minus the smallest such value over the last ``history`` frames; the wire's
  output timeline advances at real time (docs/PROTOCOL.md), so ``r`` is how late
  the network delivered it. Target delay = the ``quantile`` (0.95) of recent
  ``r`` plus one pull block, clamped to [min_delay_ms, max_delay_ms].
* Peak mode: delay peaks well above that target (TCP stalls) that recur within
  ``peak_period_ms`` raise the target to the highest peak, as NetEq does.
* Current delay ``D`` = what will play before a new frame's first sample, plus
  its ``r``: constant for a fixed playout, so it is measured on each arrival and
  moved by every time-scale operation in between.
* Playout starts when one frame plus ``start_margin_ms`` is buffered (or that
  long after the first frame arrived, or once the reply is complete).
* ``D`` well above target (``accel_above_ms``) → accelerate (remove one pitch
  period, cross-faded); below target → stretch (add one): the target is a floor,
  the tolerance band lies above it; dry mid-reply → conceal (repeat the last
  period, fading out to silence) without advancing the media position, then
  cross-fade back into real audio. Nothing received is ever skipped, except a
  frame missing while later ones keep arriving (a loss).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import asdict, dataclass, field

import numpy as np

from voicepipe.core.playout import tsm


@dataclass(frozen=True)
class JitterParams:
    sample_rate: int
    frame_ms: int = 20
    quantile: float = 0.95
    min_delay_ms: int = 20
    max_delay_ms: int = 400
    start_margin_ms: int = 20
    history: int = 200
    accel_above_ms: int = 20  # accelerate while D > target + this
    # stretch while D < target - this. 0: the target (0.95 quantile + a block) is the
    # floor D must keep, not a midpoint; with 10, a buffer that started shallow settled
    # up to 10 ms under it and ran dry on late frames under 40 ± 20 ms jitter (bench jitter)
    stretch_below_ms: int = 0
    peak_above_ms: int = 60  # r this far above the quantile target is a delay peak
    peak_period_ms: int = 10000  # peaks recurring within this keep peak mode on
    peak_merge_ms: int = 1000  # late frames of one stall form one peak
    fade_ms: int = 40  # concealment fades to silence over this
    xfade_ms: int = 5  # concealment → real audio cross-fade
    pitch_min_ms: float = 2.5
    pitch_max_ms: float = 15.0
    window_ms: float = 10.0  # correlation window of the pitch search
    min_corr: float = 0.5  # below this a voiced splice would be audible: don't
    silence_rms: int = 64  # quieter windows are spliced anywhere
    stretch_hold: int = 2  # after a stretch of T, play k·T normally first (≤ 1.5x slower)
    accel_hold: int = 1  # after an accelerate of T, play k·T normally (≤ 1.5x faster)
    learn_frames: int = 50  # no accelerating before this many delay observations

    @classmethod
    def from_config(cls, cfg: object, sample_rate: int, frame_ms: int = 20) -> JitterParams:
        """From a ``voicepipe.config.JitterConfig``."""
        keys = ("quantile", "min_delay_ms", "max_delay_ms", "start_margin_ms", "history")
        return cls(sample_rate=sample_rate, frame_ms=frame_ms, **{k: getattr(cfg, k) for k in keys})


@dataclass
class ReplyPlayout:
    """What the listener got of one reply (``turn_id``)."""

    first_play_ns: int | None = None  # when its first sample reached the speaker
    played_samples: int = 0  # media samples of the reply played so far
    done: bool = False


@dataclass
class _Reply:
    packets: dict[int, tuple[int, np.ndarray]] = field(default_factory=dict)  # seq → (media, pcm)
    ended: bool = False
    first_arrival_ns: int = 0
    started: bool = False
    next_seq: int = 0
    idx: int = 0  # offset into packet next_seq
    play_media: int = 0  # media index of the next sample to consume
    gap_wait: int = 0  # samples concealed while waiting for a missing frame


class JitterBuffer:
    def __init__(self, params: JitterParams, record_ops: bool = False) -> None:
        p = self.p = params
        sr = p.sample_rate
        self.frame = tsm.ms_to_samples(p.frame_ms, sr)
        self.pmin = tsm.ms_to_samples(p.pitch_min_ms, sr)
        self.pmax = tsm.ms_to_samples(p.pitch_max_ms, sr)
        self.win = tsm.ms_to_samples(p.window_ms, sr)
        self.silence = self.win * p.silence_rms * p.silence_rms
        self.fade = tsm.ms_to_samples(p.fade_ms, sr)
        self.xfade = max(1, tsm.ms_to_samples(p.xfade_ms, sr))
        self.replies: dict[int, _Reply] = {}
        self.playouts: dict[int, ReplyPlayout] = {}
        self.cur: int | None = None  # turn_id being played
        self.finished_upto = -1  # replies ≤ this are over; their frames are late
        self.origin_ns: int | None = None
        self.max_seq: int | None = None
        self.offsets: deque[int] = deque()  # arrival - media (samples), last `history`
        self.rel: deque[int] = deque()  # r of the last `history` new frames
        self.peaks: list[tuple[int, int]] = []  # (arrival ns, r)
        self.delay = 0  # D, samples
        self.block = 0
        self.pending = np.zeros(0, dtype=np.int16)
        self.last_pull_ns = 0
        self.last_pull_n = 0
        self.hist = np.zeros(0, dtype=np.int16)  # last real samples played
        self.hold = 0  # normal samples to play before the next TSM operation
        self.concealing = False
        self.conc_period = 0
        self.conc_k = 0
        self.hist_len = self.pmax + self.win
        self.c = dict(
            underruns=0,
            concealed=0,
            accelerated=0,
            stretched=0,
            played=0,
            lost=0,
            late=0,
            duplicates=0,
        )
        self.ops: list[str] | None = [] if record_ops else None

    # ------------------------------------------------------------------ input

    def push(
        self,
        seq: int,
        media_ts: int,
        pcm: np.ndarray,
        now_ns: int,
        reply: int = 0,
        last: bool = False,
    ) -> None:
        """A reply-audio frame arrived at ``now_ns``; ``last`` ends reply ``reply``."""
        pcm = np.asarray(pcm, dtype=np.int16)
        if self.origin_ns is None:
            self.origin_ns = now_ns
        if reply <= self.finished_upto:
            self.c["late"] += 1
            return
        r = self.replies.get(reply)
        if r is None:
            r = self.replies[reply] = _Reply(first_arrival_ns=now_ns)
        if last:
            r.ended = True
        if seq in r.packets:
            self.c["duplicates"] += 1
            return
        if r.started and seq < r.next_seq:
            self.c["late"] += 1
            return
        if len(pcm):
            r.packets[seq] = (media_ts, pcm)
        if self.max_seq is None or seq > self.max_seq:
            self.max_seq = seq
            self._observe(media_ts, now_ns, reply, r)

    def _observe(self, media: int, now_ns: int, reply: int, r: _Reply) -> None:
        assert self.origin_ns is not None
        sr = self.p.sample_rate
        arr = math.floor((now_ns - self.origin_ns) * sr / 1e9)
        self.offsets.append(arr - media)
        if len(self.offsets) > self.p.history:
            self.offsets.popleft()
        rel = arr - media - min(self.offsets)
        self.rel.append(rel)
        if len(self.rel) > self.p.history:
            self.rel.popleft()
        base = self._base_target()
        if rel > base + tsm.ms_to_samples(self.p.peak_above_ms, sr):
            if self.peaks and now_ns - self.peaks[-1][0] < self.p.peak_merge_ms * 1_000_000:
                t0, h = self.peaks[-1]
                self.peaks[-1] = (t0, max(h, rel))
            else:
                if self.peaks and now_ns - self.peaks[-1][0] > self.p.peak_period_ms * 1_000_000:
                    self.peaks = []
                self.peaks = (self.peaks + [(now_ns, rel)])[-8:]
        if reply == self.cur and r.started:
            # what plays before this frame's first sample: pending output, the rest of the
            # block now at the speaker, and the media between the play position and it
            el = math.floor((now_ns - self.last_pull_ns) * sr / 1e9)
            ahead = len(self.pending) + max(0, self.last_pull_n - el) + (media - r.play_media)
            self.delay = ahead + rel

    def end_reply(self, reply: int) -> None:
        """Reply ``reply`` has no more audio (its LAST frame may have carried no samples)."""
        if reply > self.finished_upto:
            self.replies.setdefault(reply, _Reply()).ended = True

    def clear(self, upto_reply: int | None = None) -> None:
        """Barge-in: drop every queued sample of replies ≤ ``upto_reply`` (None: all)."""
        for t in sorted(self.replies):
            if upto_reply is None or t <= upto_reply:
                self._finish(t)
        self.pending = np.zeros(0, dtype=np.int16)
        self.concealing = False

    # ----------------------------------------------------------------- output

    def _base_target(self) -> int:
        if not self.rel:
            return self.block
        s = sorted(self.rel)
        k = max(0, math.ceil(self.p.quantile * len(s)) - 1)
        return s[k] + self.block

    def target(self, now_ns: int | None = None) -> int:
        """Target delay in samples."""
        sr = self.p.sample_rate
        t = self._base_target()
        if len(self.peaks) >= 2 and (
            now_ns is None or now_ns - self.peaks[-1][0] <= 2 * self.p.peak_period_ms * 1_000_000
        ):
            t = max(t, max(h for _, h in self.peaks) + self.block)
        lo = tsm.ms_to_samples(self.p.min_delay_ms, sr)
        return min(max(t, lo), tsm.ms_to_samples(self.p.max_delay_ms, sr))

    def pull(self, n: int, now_ns: int) -> np.ndarray:
        """The next ``n`` samples (int16) for the speaker; the first plays at ``now_ns``."""
        self.block = max(self.block, n)
        parts = [self.pending]
        have = len(self.pending)
        while have < n:
            seg = self._step(n - have, now_ns, have)
            parts.append(seg)
            have += len(seg)
        out = np.concatenate(parts)
        self.pending = out[n:]
        self.last_pull_ns, self.last_pull_n = now_ns, n
        return out[:n]

    def _op(self, code: str, k: int) -> None:
        if self.ops is not None:
            if self.ops and self.ops[-1][0] == code and code in "NZC":
                self.ops[-1] = f"{code}{int(self.ops[-1][1:]) + k}"
            else:
                self.ops.append(f"{code}{k}")

    def _step(self, need: int, now_ns: int, offset: int) -> np.ndarray:
        if self.cur is None and not self._start(now_ns):
            self._op("Z", need)
            return np.zeros(need, dtype=np.int16)
        assert self.cur is not None
        r = self.replies[self.cur]
        avail = self._avail(r)
        if avail == 0:
            later = [s for s in r.packets if s > r.next_seq]
            if not later and r.ended:
                self._finish(self.cur)
                self.concealing = False
                return np.zeros(0, dtype=np.int16)
            tgt = self.target(now_ns)
            if later and (sum(len(r.packets[s][1]) for s in later) >= tgt or r.gap_wait >= tgt):
                nxt = min(later)
                self.c["lost"] += nxt - r.next_seq
                self._op("L", nxt - r.next_seq)
                self.delay -= r.packets[nxt][0] - r.play_media
                r.next_seq, r.idx, r.play_media, r.gap_wait = nxt, 0, r.packets[nxt][0], 0
                return np.zeros(0, dtype=np.int16)
            if not self.concealing:
                self.concealing = True
                self.c["underruns"] += 1
                self.conc_k = 0
                self.conc_period = tsm.period_of(
                    self.hist, self.pmin, self.pmax, self.win, self.silence
                )
            seg = tsm.conceal(self.hist, self.conc_period, self.conc_k, need, self.fade)
            self.conc_k += need
            self.c["concealed"] += need
            self.delay += need
            if later:
                r.gap_wait += need
            self._op("C", need)
            return seg
        if self.concealing:
            m = min(avail, self.xfade)
            conc = tsm.conceal(self.hist, self.conc_period, self.conc_k, m, self.fade)
            seg = tsm.crossfade(conc, self._take(r, m))
            self.concealing = False
            return self._emit(seg, now_ns, offset, "F", m)
        tgt = self.target(now_ns)
        need_tsm = max(2 * self.pmax, self.pmax + self.win)
        if self.hold <= 0 and avail >= need_tsm:
            sr = self.p.sample_rate
            if len(self.rel) >= self.p.learn_frames and self.delay > tgt + tsm.ms_to_samples(
                self.p.accel_above_ms, sr
            ):
                t, corr = tsm.best_lag(
                    self._peek(r, need_tsm), self.pmin, self.pmax, self.win, self.silence
                )
                if corr >= self.p.min_corr and avail >= 2 * t:
                    seg = tsm.accelerate(self._take(r, 2 * t), t)
                    self.delay -= t
                    self.c["accelerated"] += t
                    self.hold = self.p.accel_hold * t
                    return self._emit(seg, now_ns, offset, "A", t)
            elif self.delay < tgt - tsm.ms_to_samples(self.p.stretch_below_ms, sr):
                x = self._peek(r, need_tsm)
                t, corr = tsm.best_lag(x, self.pmin, self.pmax, self.win, self.silence)
                if corr >= self.p.min_corr:
                    seg = tsm.stretch(x, t)
                    self._take(r, t)
                    self.delay += t
                    self.c["stretched"] += t
                    self.hold = self.p.stretch_hold * t
                    return self._emit(seg, now_ns, offset, "S", t)
        k = min(avail, need)
        self.hold -= k
        return self._emit(self._take(r, k), now_ns, offset, "N", k)

    def _emit(self, seg: np.ndarray, now_ns: int, offset: int, code: str, k: int) -> np.ndarray:
        assert self.cur is not None
        pl = self.playouts[self.cur]
        if pl.first_play_ns is None:
            pl.first_play_ns = now_ns + math.floor(offset * 1e9 / self.p.sample_rate)
        self.hist = np.concatenate((self.hist, seg))[-self.hist_len :]
        self._op(code, k)
        return seg

    def _start(self, now_ns: int) -> bool:
        waiting = sorted(t for t in self.replies if t > self.finished_upto)
        if not waiting:
            return False
        t = waiting[0]
        r = self.replies[t]
        if not r.packets:
            if r.ended:  # an empty reply
                self._finish(t)
            return False
        first = min(r.packets)
        r.next_seq, r.idx, r.play_media = first, 0, r.packets[first][0]
        avail = self._avail(r)
        start = self.frame + tsm.ms_to_samples(self.p.start_margin_ms, self.p.sample_rate)
        waited = now_ns - r.first_arrival_ns >= (self.p.frame_ms + self.p.start_margin_ms) * 1e6
        if not (avail >= start or r.ended or waited):
            return False
        r.started = True
        self.cur = t
        self.playouts[t] = ReplyPlayout()
        self.delay = avail + len(self.pending)
        self.hist = np.zeros(0, dtype=np.int16)
        self.hold = 0
        self._op("P", t)
        return True

    def _finish(self, t: int) -> None:
        self.replies.pop(t, None)
        self.finished_upto = max(self.finished_upto, t)
        if t in self.playouts:
            self.playouts[t].done = True
        if self.cur == t:
            self.cur = None

    def _avail(self, r: _Reply) -> int:
        n, s, idx = 0, r.next_seq, r.idx
        while s in r.packets:
            n += len(r.packets[s][1]) - idx
            s, idx = s + 1, 0
        return n

    def _peek(self, r: _Reply, k: int) -> np.ndarray:
        parts, s, idx, n = [], r.next_seq, r.idx, 0
        while n < k and s in r.packets:
            pcm = r.packets[s][1][idx : idx + k - n]
            parts.append(pcm)
            n += len(pcm)
            s, idx = s + 1, 0
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int16)

    def _take(self, r: _Reply, k: int) -> np.ndarray:
        out = self._peek(r, k)
        left = len(out)
        while left > 0:
            pcm = r.packets[r.next_seq][1]
            use = min(left, len(pcm) - r.idx)
            r.idx += use
            left -= use
            if r.idx >= len(pcm):
                del r.packets[r.next_seq]
                r.next_seq, r.idx = r.next_seq + 1, 0
        r.play_media += len(out)
        r.gap_wait = 0
        self.c["played"] += len(out)
        assert self.cur is not None
        self.playouts[self.cur].played_samples += len(out)
        return out

    # ---------------------------------------------------------------- reports

    def stats(self, now_ns: int | None = None) -> dict[str, float | int]:
        """Counters (docs/DESIGN.md §8). ``*_ms`` are sample counts converted at the
        output rate; ``played_ms`` counts reply media played, concealment excluded."""
        sr = self.p.sample_rate
        c = self.c

        def ms(k: int) -> float:
            return k * 1000 / sr

        return {
            "underruns": c["underruns"],
            "concealed_ms": ms(c["concealed"]),
            "accelerated_ms": ms(c["accelerated"]),
            "stretched_ms": ms(c["stretched"]),
            "played_ms": ms(c["played"]),
            "current_delay_ms": ms(self.delay),
            "target_delay_ms": ms(self.target(now_ns)),
            "lost_frames": c["lost"],
            "late_frames": c["late"],
            "duplicate_frames": c["duplicates"],
        }

    def playout_dict(self) -> dict[str, dict[str, int | bool | None]]:
        return {str(t): asdict(p) for t, p in self.playouts.items()}
