"""``llm.backend = "openai"``: the LLM stage streaming from an OpenAI-compatible server —
here voicepipe's own /v1/chat/completions, served by a second process on loopback.

Same model, same greedy sampling, same conversation: the remote stage must say word
for word what the local stage says, with the same frames (deltas, speakable chunks,
spans, metrics), stop at a barge-in, and name the URL when the server is unreachable.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_assistant import _answered, _clip
from tests.profile import FAST_TOML as FAST
from voicepipe import config
from voicepipe.client import ClientSession
from voicepipe.frames import (
    End,
    Frame,
    Interrupt,
    MetricsFrame,
    SpanFrame,
    TextChunk,
    TextDelta,
    TranscriptFinal,
)
from voicepipe.server.app import Server
from voicepipe.stages.llm.engine import engine_for
from voicepipe.stages.llm.remote import LlmBackendError, RemoteEngine, check
from voicepipe.stages.llm.stage import LlmStage

VOICEPIPE = [sys.executable, "-m", "voicepipe.cli"]
QUESTIONS = ("Hi! Which city is the capital of France?", "And of Italy?")


def _cfg(**llm: object) -> config.Config:
    c = config.load(FAST)  # the 135M model, pinned, on both sides
    return dataclasses.replace(c, llm=dataclasses.replace(c.llm, **{"max_new_tokens": 40, **llm}))


@pytest.fixture(scope="module")
def llm_server() -> Iterator[str]:
    """``voicepipe serve`` in its own process: its /v1 base URL."""
    proc = subprocess.Popen(
        [*VOICEPIPE, "serve", "--config", str(FAST), "--pipeline", "loopback", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "serving http://" in line, line
        url = line.split("serving ", 1)[1].split()[0]  # http://127.0.0.1:PORT/
        yield f"{url}v1"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def _dead_url() -> str:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


async def _run(stage: LlmStage, frames: list[Frame], until) -> list[Frame]:
    got: list[Frame] = []
    done = asyncio.Event()

    async def sink(f: Frame) -> None:
        got.append(f)
        if until(f):
            done.set()

    stage.push = sink  # type: ignore[method-assign]
    task = asyncio.create_task(stage.run())
    for f in frames:
        await stage.put(f)
    await asyncio.wait_for(done.wait(), 300)
    await stage.put(End())
    await asyncio.wait_for(task, 60)
    return got


def _texts(got: list[Frame], turn: int) -> str:
    return "".join(f.text for f in got if isinstance(f, TextDelta) and f.turn_id == turn)


async def test_the_remote_stage_says_what_the_local_one_says(llm_server: str) -> None:
    finals = [TranscriptFinal(turn_id=i, text=q) for i, q in enumerate(QUESTIONS, 1)]
    last = lambda f: isinstance(f, TextChunk) and f.last and f.turn_id == 2  # noqa: E731
    remote_cfg = _cfg(backend="openai", base_url=llm_server)
    check(remote_cfg)  # the start-up check passes: reachable, and it serves the model
    remote = LlmStage(remote_cfg)
    assert isinstance(remote.backend, RemoteEngine)
    got = await _run(remote, finals, last)
    local_cfg = _cfg()
    local = LlmStage(local_cfg, engine_for(local_cfg))
    want = await _run(local, finals, last)
    for turn in (1, 2):
        text = _texts(got, turn)
        assert text.strip() and text == _texts(want, turn)
        chunks = [f for f in got if isinstance(f, TextChunk) and f.turn_id == turn]
        assert chunks[-1].last and not any(c.last for c in chunks[:-1])
        assert " ".join(c.text for c in chunks if c.text).split() == text.split()
        spans = {f.name: f for f in got if isinstance(f, SpanFrame) and f.turn_id == turn}
        assert {"llm.ttft", "llm.first_chunk", "llm.tpot"} <= set(spans)
        assert spans["llm.ttft"].attrs["backend"] == "openai"
        (m,) = [f for f in got if isinstance(f, MetricsFrame) and f.turn_id == turn]
        assert m.values["tokens"] > 1 and spans["llm.tpot"].attrs["tokens"] == m.values["tokens"]
        # The remote voicepipe's speculation figures reach this side's metrics.
        assert m.values["drafted"] >= m.values["accepted"] >= 0 and "acceptance_rate" in m.values
    assert "Paris" in _texts(got, 1)
    assert remote.messages == local.messages  # the same conversation remembered


async def test_a_barge_in_stops_the_remote_reply(llm_server: str) -> None:
    stage = LlmStage(_cfg(backend="openai", base_url=llm_server, max_new_tokens=160))
    first = asyncio.Event()

    def until(f: Frame) -> bool:
        if isinstance(f, TextDelta):
            first.set()
        return isinstance(f, Interrupt)

    async def barge_in() -> None:
        await first.wait()
        await stage.put(Interrupt(turn_id=2))

    task = asyncio.create_task(barge_in())
    story = "Write a long story about a dragon who learns to bake bread."
    got = await _run(stage, [TranscriptFinal(turn_id=1, text=story)], until)
    await task
    i = next(i for i, f in enumerate(got) if isinstance(f, Interrupt))
    assert not any(isinstance(f, (TextDelta, TextChunk)) for f in got[i + 1 :])
    assert not any(isinstance(f, TextChunk) and f.last for f in got)
    spoken = " ".join(f.text for f in got if isinstance(f, TextChunk))
    assert stage.messages[-1] == {"role": "assistant", "content": spoken}
    # The server is free again: the next question gets its whole answer.
    again = LlmStage(_cfg(backend="openai", base_url=llm_server))
    q = [TranscriptFinal(turn_id=1, text=QUESTIONS[0])]
    got = await _run(again, q, lambda f: isinstance(f, TextChunk) and f.last)
    assert "Paris" in _texts(got, 1)


async def test_an_unreachable_server_is_named(tmp_path: Path) -> None:
    dead = _dead_url()
    cfg = _cfg(backend="openai", base_url=dead)
    with pytest.raises(LlmBackendError, match=dead):
        check(cfg)
    stage = LlmStage(cfg)
    with pytest.raises(LlmBackendError, match="cannot be reached"):
        await stage.start()
        await stage.reply(1, "Hello?")
    await stage.stop()
    with pytest.raises(LlmBackendError, match="unknown llm.backend"):
        LlmStage(_cfg(backend="gguf-over-carrier-pigeon"))
    # `voicepipe serve` refuses to start, saying which server it could not reach.
    proc = await asyncio.create_subprocess_exec(
        *VOICEPIPE, "serve", "--config", str(FAST), "--pipeline", "text", "--port", "0",
        "--llm.backend=openai", f"--llm.base_url={dead}",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 2 and b"serving" not in out
    assert dead.encode() in err and b"cannot be reached" in err


async def test_the_assistant_speaks_what_the_remote_llm_writes(llm_server: str) -> None:
    """The whole voice pipeline over /ws, its replies from the other process: heard
    right, answered, spoken, every span of the turn back (the LLM's measured here)."""
    c = _cfg(backend="openai", base_url=llm_server)
    pcm, sr, ref = _clip("utt11.wav")  # "Why is the sky blue?"
    server = Server(c, pipeline="assistant", port=0)
    await server.start()  # its start-up check reaches the LLM server
    try:
        res = await ClientSession(server.ws_url, pcm, sr, c, timeout_s=120).run()
    finally:
        await server.close()
    out = res.to_json()
    assert out["ok"], out
    turn = _answered(out, ref)
    ttft = [s for s in res.spans if s.name == "llm.ttft"]
    assert ttft and all(s.attrs["backend"] == "openai" for s in ttft)
    assert "sky" in turn["reply_text"].lower() or "blue" in turn["reply_text"].lower(), turn
