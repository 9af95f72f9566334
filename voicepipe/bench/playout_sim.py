"""Replay arrival traces through the playout buffer: simulated networks, shared vectors.

An event trace is a list of plain lists (so it serialises to JSON for the
JavaScript port unchanged):

    ["push",  t_ns, reply, seq, media_ts, src_start, n_samples, last]
    ["pull",  t_ns, n_samples]
    ["end",   t_ns, reply]
    ["clear", t_ns, reply]          # reply < 0: everything

A push's samples are ``source[src_start : src_start + n]`` of a shared source
signal (wrapping around), so a trace stays small.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from voicepipe.core.playout.faults import FaultSchedule, FaultSpec, paced_send_times
from voicepipe.core.playout.jitter import JitterBuffer, JitterParams

Event = list[Any]


def source_slice(source: np.ndarray, start: int, n: int) -> np.ndarray:
    idx = (np.arange(start, start + n) % len(source)).astype(np.int64)
    return source[idx]


@dataclass
class Frame:
    arrival_ns: int
    reply: int
    seq: int
    media: int
    src: int
    n: int
    last: bool = False


def frames_for_reply(
    reply: int, seq0: int, media0: int, n_frames: int, frame: int, src0: int = 0
) -> list[Frame]:
    return [
        Frame(0, reply, seq0 + i, media0 + i * frame, src0 + i * frame, frame, i == n_frames - 1)
        for i in range(n_frames)
    ]


def with_arrivals(frames: list[Frame], arrivals: list[int]) -> list[Frame]:
    for f, a in zip(frames, arrivals, strict=True):
        f.arrival_ns = a
    return frames


def through_network(
    frames: list[Frame],
    sr: int,
    spec: FaultSpec,
    start_ns: int = 0,
    produce_ns: list[int] | None = None,
) -> list[Frame]:
    """Server pacing at real time → TCP faults. The output timeline's media 0 is sent at
    ``start_ns`` (a frame of media m at start + m/sr, or when produced if later)."""
    frame_ms = frames[0].n * 1000 / sr
    media0 = frames[0].media
    sends = paced_send_times(len(frames), frame_ms, start_ns + media0 * 10**9 // sr, produce_ns)
    sched = FaultSchedule(spec, start_ns)
    return with_arrivals(frames, [sched.release_ns(t) for t in sends])


def reorder(frames: list[Frame], p: float, seed: int, max_shift_ns: int) -> list[Frame]:
    """Deliver a fraction ``p`` of frames up to ``max_shift_ns`` late (UDP-like reordering)."""
    rng = random.Random(seed)
    for f in frames:
        if rng.random() < p:
            f.arrival_ns += rng.randrange(1, max_shift_ns)
    return frames


def drop(frames: list[Frame], p: float, seed: int, keep_last: bool = True) -> list[Frame]:
    rng = random.Random(seed)
    return [f for f in frames if (keep_last and f.last) or rng.random() >= p]


def duplicate(frames: list[Frame], p: float, seed: int, shift_ns: int) -> list[Frame]:
    rng = random.Random(seed)
    out = list(frames)
    for f in frames:
        if rng.random() < p:
            out.append(Frame(f.arrival_ns + shift_ns, f.reply, f.seq, f.media, f.src, f.n, f.last))
    return out


def build_events(
    frames: list[Frame],
    sr: int,
    pull_n: int,
    t_end_ns: int,
    pull_start_ns: int = 0,
    extra: list[Event] | None = None,
) -> list[Event]:
    """Merge pushes (and ``extra`` events) with pulls every ``pull_n`` samples in real
    time; at equal times pushes come first."""
    ev: list[tuple[int, int, Event]] = []
    for f in frames:
        ev.append(
            (f.arrival_ns, 0, ["push", f.arrival_ns, f.reply, f.seq, f.media, f.src, f.n, f.last])
        )
    for e in extra or []:
        ev.append((e[1], 1, e))
    k = 0
    while True:
        t = pull_start_ns + math.floor(k * pull_n * 1e9 / sr)
        if t > t_end_ns:
            break
        ev.append((t, 2, ["pull", t, pull_n]))
        k += 1
    ev.sort(key=lambda x: (x[0], x[1]))
    return [e for _, _, e in ev]


@dataclass
class Replay:
    out: np.ndarray
    stats: dict[str, float | int]
    playouts: dict[str, dict[str, Any]]
    ops: list[str]
    # one row per pull: (t_ns, current delay ms, target ms, concealed ms so far)
    series: list[tuple[int, float, float, float]] = field(default_factory=list)

    def sha256(self) -> str:
        return hashlib.sha256(self.out.astype("<i2").tobytes()).hexdigest()


def replay(
    events: list[Event], params: JitterParams, source: np.ndarray, record_ops: bool = True
) -> Replay:
    jb = JitterBuffer(params, record_ops=record_ops)
    outs: list[np.ndarray] = []
    series = []
    for e in events:
        kind, t = e[0], e[1]
        if kind == "push":
            _, _, reply, seq, media, src, n, last = e
            jb.push(seq, media, source_slice(source, src, n), t, reply=reply, last=bool(last))
        elif kind == "pull":
            outs.append(jb.pull(e[2], t))
            s = jb.stats(t)
            series.append((t, s["current_delay_ms"], s["target_delay_ms"], s["concealed_ms"]))
        elif kind == "end":
            jb.end_reply(e[2])
        elif kind == "clear":
            jb.clear(None if e[2] < 0 else e[2])
        else:
            raise ValueError(f"unknown event {kind!r}")
    last_t = events[-1][1] if events else None
    out = np.concatenate(outs) if outs else np.zeros(0, dtype=np.int16)
    return Replay(out, jb.stats(last_t), jb.playout_dict(), jb.ops or [], series)
