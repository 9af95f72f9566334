"""The TTS batch scheduler: every speaking session's codec-LM synthesis on shared workers.

With ``tts.batching = true`` a TTS stage hands each text chunk to the process's
``TtsBatcher`` instead of advancing its own synthesis on a thread of its own. Each
worker repeats, while any session has speech to make:

1. drop the syntheses of interrupted sessions (a barge-in cancels the job);
2. pick the syntheses that are due (core/tts_schedule.py: earliest run-dry first,
   none that is more than ``tts.batch_ahead_ms`` ahead of its playout);
3. the most urgent synthesis's next piece of work: its vocoder push if it has the
   frames, else one codec-LM step for every due synthesis short of frames for its
   next push: the drafts of all of them in lockstep draft passes, then all verify
   rows in one target pass (nn/tts/codec_lm_batch.py), each judged by the [tts]
   acceptance rule on its own rows; failing that, the next most urgent push.

Two workers (one per core) take tasks this way: one LM step at a time, and a
synthesis is in at most one task; a third takes only the tasks of sessions with no
audio left to play (a reply's first audio, a session running dry), so those need not
wait for the pushes in flight. The vocoder is not batched: its convolutions are
compute-bound here, a batch of 4 costs 4 single pushes (docs/BENCHMARKS.md); two
pushes run side by side instead. Nothing due: the workers sleep until the first
synthesis becomes due or new work arrives. Sessions join and leave between tasks,
as in the LLM's batcher (schedulers/llm_batch.py).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import deque
from collections.abc import Hashable
from typing import TYPE_CHECKING

import numpy as np
import torch

from voicepipe.config import TtsConfig
from voicepipe.core.tts_schedule import RunDry, Want
from voicepipe.nn.threads import BUDGET
from voicepipe.nn.tts.codec_lm_batch import Draft, Verify, run_calls
from voicepipe.nn.tts.codec_synthesis import Synthesis
from voicepipe.schedulers.jobs import DONE, Job

if TYPE_CHECKING:
    from voicepipe.nn.tts.codec_tts import CodecLMTTS

_IDLE_EXIT_S = 30.0  # an idle worker thread ends; the next job starts a new one


class _Speak(Job):
    """One text chunk of one session being spoken; yields float32 audio chunks."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, syn: Synthesis, session: Hashable, rate: int
    ) -> None:
        super().__init__(loop)
        self.syn = syn
        self.want = Want(self.id, session, time.monotonic())
        self.rate = rate
        self.busy = False  # a worker is running its LM step or vocoder push


class TtsBatcher:
    """The process's TTS workers for one shared codec LM (``tts_batcher_for``)."""

    def __init__(self, ahead_s: float = 2.0, workers: int | None = None) -> None:
        self.dry = RunDry(ahead_s)
        # Two cores: one worker can run the batched LM step or a vocoder push while the
        # other pushes another session's audio (a push is compute-bound and 20-90 ms).
        # One more worker serves only sessions with no audio left to play (a reply's first
        # audio, a session running dry): they need not wait for a push in flight.
        self.workers = workers or min(2, os.cpu_count() or 1)
        self._jobs: dict[int, _Speak] = {}
        self._new: deque[_Speak] = deque()
        self._cv = threading.Condition()
        self._running = 0  # worker threads alive (not counting the urgent one)
        self._urgent = False  # the urgent worker is alive
        self._lm_running = 0  # LM steps in flight (the workers': one at a time, batched)
        self._wait_s = _IDLE_EXIT_S  # how long nothing is due (``_next_task``)
        # counters for tests, metrics and `voicepipe bench tts-batch`
        self.lm_steps = 0  # batched codec-LM steps (draft passes + a verify pass)
        self.rows = 0  # syntheses in those steps, summed
        self.max_batch = 0
        self.pushes = 0

    # ------------------------------------------------------------ asyncio side

    def speak(
        self,
        tts: CodecLMTTS,
        text: str,
        cfg: TtsConfig,
        session: Hashable,
        stats: dict | None = None,
    ) -> Job:
        """Speak ``text`` for ``session`` (a key: one synthesis at a time per session);
        the job yields its audio chunks, then ``DONE``."""
        syn = Synthesis(tts, text, cfg, stats)
        job = _Speak(asyncio.get_running_loop(), syn, session, 22050)
        with self._cv:
            self._new.append(job)
            while self._running < self.workers:
                self._running += 1
                threading.Thread(target=self._run, name="tts-batch", daemon=True).start()
            if not self._urgent:
                self._urgent = True
                threading.Thread(
                    target=self._run, args=(True,), name="tts-urgent", daemon=True
                ).start()
            self._cv.notify_all()
        return job

    # ------------------------------------------------------------ workers

    def _run(self, urgent: bool = False) -> None:
        while True:
            with self._cv:
                task = self._next_task(urgent)
                while task is None:
                    if not self._jobs and not self._new:
                        if not self._cv.wait(_IDLE_EXIT_S) and not self._jobs and not self._new:
                            if urgent:  # idle: the next job starts new workers
                                self._urgent = False
                            else:
                                self._running -= 1
                            return
                    else:
                        self._cv.wait(self._wait_s)
                    task = self._next_task(urgent)
            kind, jobs = task
            try:
                done = self._lm_step(jobs) if kind == "lm" else self._push(jobs[0])
            except Exception as e:
                done = [(j, e) for j in jobs]
            with self._cv:
                if kind == "lm":
                    self._lm_running -= 1
                for j in jobs:
                    j.busy = False
                for j, item in done:
                    self._finish(j, item)
                self._cv.notify_all()

    def _next_task(self, urgent: bool = False) -> tuple[str, list[_Speak]] | None:
        """Under the lock: the next thing to run (marking its jobs busy), or None (then
        ``_wait_s`` says how long nothing is due). ``urgent``: only for sessions with no
        audio left to play, and an LM step even while another is in flight."""
        while self._new:
            job = self._new.popleft()
            self._jobs[job.id] = job
            BUDGET.start_session()  # (nn/threads.py: a session mid-reply)
        for job in list(self._jobs.values()):  # barge-ins since the last task
            if job.cancelled and not job.busy:
                self._finish(job, DONE)
        self._wait_s = _IDLE_EXIT_S
        now = time.monotonic()
        wants = [j.want for j in self._jobs.values() if not j.busy]
        due = [self._jobs[w.job] for w in self.dry.due(wants, now)]
        if not due:
            wake = self.dry.wake_s(wants)
            if wake is not None:
                self._wait_s = max(0.001, wake - now)
            return None
        if urgent:
            due = [j for j in due if self.dry.deadline(j.want) <= now]
            self._wait_s = _IDLE_EXIT_S  # (a new job or any task's end wakes it)
            if not due:
                return None
        short = [j for j in due if j.syn.wants_frames()]
        ready = [j for j in due if j.syn.can_push()]
        # The most urgent first: its push, or the LM step that gives it frames (every
        # due synthesis short of frames joins that step); else someone else's push.
        if ready and ready[0] is due[0]:
            return self._take("push", ready[:1])
        if short and (urgent or not self._lm_running):
            self._lm_running += 1
            return self._take("lm", short)
        if ready:
            return self._take("push", ready[:1])
        return None  # (the LM step in flight will notify)

    @staticmethod
    def _take(kind: str, jobs: list[_Speak]) -> tuple[str, list[_Speak]]:
        for j in jobs:
            j.busy = True
        return kind, jobs

    def _finish(self, job: _Speak, item: object = DONE) -> None:
        """Under the lock: the job leaves (``item``: DONE, or the error its session sees)."""
        if job.finished:
            return
        job.finished = True
        self._jobs.pop(job.id, None)
        BUDGET.end_session()
        try:
            job.syn.close()  # (its generator's cleanup runs here)
        finally:
            job.deliver(item)

    def _lm_step(self, jobs: list[_Speak]) -> list[tuple[_Speak, object]]:
        """One batched LM step of ``jobs``; returns the jobs that failed, with their error."""
        failed: list[tuple[_Speak, object]] = []
        # (the LM's ops are tiny: it runs on one thread, nn/tts/codec_tts.py)
        with BUDGET.claim(jobs[0].syn.lm_threads) as n:
            torch.set_num_threads(n)
            for job in jobs:  # a new synthesis: plan it and run to its first call
                if not job.syn.started:
                    _guard(job, job.syn.advance, failed)
            # Drafts first (lockstep passes of the draft model), then every verify row of
            # the step, the drafters' and those not drafting this step, in one pass.
            for kind in (Draft, Verify):
                live = [j for j in jobs if isinstance(j.syn.call, kind)]
                live = [j for j in live if all(j is not f for f, _ in failed)]
                if not live:
                    continue
                try:
                    results = run_calls([j.syn.call for j in live])  # type: ignore[misc]
                except Exception as e:
                    failed += [(j, e) for j in live]
                    continue
                for j, r in zip(live, results, strict=True):
                    _guard(j, lambda j=j, r=r: j.syn.advance(r), failed)
        self.lm_steps += 1
        self.rows += len(jobs)
        self.max_batch = max(self.max_batch, len(jobs))
        return failed

    def _push(self, job: _Speak) -> list[tuple[_Speak, object]]:
        """One vocoder push of ``job``; returns it with DONE when its audio is complete."""
        with BUDGET.claim(job.syn.threads) as n:  # (the vocoder's convs scale to 2 threads)
            torch.set_num_threads(n)
            waves = job.syn.push()
        now = time.monotonic()
        with self._cv:
            self.pushes += 1
            for w in waves:
                self.dry.sent(job.want.session, now, len(w) / job.rate)
        for w in waves:
            job.deliver(np.asarray(w, dtype=np.float32))
        return [(job, DONE)] if job.syn.done else []


def _guard(job: _Speak, fn, failed: list) -> None:
    try:
        fn()
    except Exception as e:
        failed.append((job, e))


_BATCHERS: dict[int, tuple[object, TtsBatcher]] = {}
_LOCK = threading.Lock()


def tts_batcher_for(tts: CodecLMTTS, ahead_s: float = 2.0) -> TtsBatcher:
    """The process's TTS batcher for ``tts``'s shared models (every session's TTS over the
    same weights shares one)."""
    with _LOCK:
        got = _BATCHERS.get(id(tts.m))
        if got is None or got[0] is not tts.m:
            got = _BATCHERS[id(tts.m)] = (tts.m, TtsBatcher(ahead_s))
        got[1].dry.ahead_s = ahead_s
        return got[1]
