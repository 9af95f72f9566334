"""/v1/models and /v1/chat/completions on a real server on loopback, driven by the
official ``openai`` SDK, with voicepipe's own engine (the fast profile's 135M LLM).
A voice session meanwhile keeps its /ws endpoint on the same port."""

from __future__ import annotations

import asyncio
import dataclasses
import http.client
import json
from collections.abc import AsyncIterator

import numpy as np
import openai
import pytest
import pytest_asyncio
from openai import AsyncOpenAI

from tests.profile import FAST_TOML as FAST
from voicepipe import config
from voicepipe.client import run_sessions
from voicepipe.core.wire import protocol as P
from voicepipe.server.app import Server

MODEL = "smollm2-135m"
QUESTION = [{"role": "user", "content": "Name three colours of the rainbow."}]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server() -> AsyncIterator[Server]:
    cfg = config.load(FAST)  # pinned: the 135M model whatever the default becomes
    assert cfg.llm.model == MODEL and cfg.llm.temperature == 0.0
    s = Server(cfg, pipeline="loopback", port=0)
    await s.start()
    yield s
    await s.close(drain_s=0)


def _client(s: Server, key: str = "unused") -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"http://127.0.0.1:{s.port}/v1", api_key=key, max_retries=0)


pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_models_lists_the_served_model(server: Server) -> None:
    page = await _client(server).models.list()
    assert [m.id for m in page.data] == [MODEL]
    assert (await _client(server).models.retrieve(MODEL)).id == MODEL


async def test_completion_streamed_and_whole_agree(server: Server) -> None:
    c = _client(server)
    whole = await c.chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=48)
    choice = whole.choices[0]
    text = choice.message.content
    assert text and choice.message.role == "assistant"
    assert choice.finish_reason in ("stop", "length")
    u = whole.usage
    assert u is not None and u.prompt_tokens > 5 and 0 < u.completion_tokens <= 48
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens
    stats = whole.model_extra["voicepipe"]
    spec = stats["speculation"]
    assert spec["tokens"] >= u.completion_tokens and 0 <= spec["accepted"] <= spec["drafted"]
    assert sum(stats["prompt"].values()) == u.prompt_tokens

    stream = await c.chat.completions.create(
        model=MODEL, messages=QUESTION, max_tokens=48, stream=True,
        stream_options={"include_usage": True},
    )  # fmt: skip
    deltas, finish, usage, extra = [], None, None, None
    async for chunk in stream:
        assert chunk.object == "chat.completion.chunk" and chunk.model == MODEL
        if chunk.choices:
            deltas.append(chunk.choices[0].delta.content or "")
            finish = chunk.choices[0].finish_reason or finish
        else:
            usage, extra = chunk.usage, chunk.model_extra["voicepipe"]
    assert len(deltas) > 3  # streamed in pieces, not in one go
    # Greedy decoding: the same question gives the same words, streamed or not.
    assert "".join(deltas) == text and finish == choice.finish_reason
    assert usage is not None and usage.completion_tokens == u.completion_tokens
    # The second time the engine's cache held the prompt already.
    assert extra["prompt"]["reused"] > stats["prompt"]["reused"]


async def test_max_tokens_and_stop(server: Server) -> None:
    c = _client(server)
    r = await c.chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=3)
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 3
    full = await c.chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=48)
    text = full.choices[0].message.content
    word = text.split()[2]  # a stop sequence from inside the greedy reply
    cut = await c.chat.completions.create(
        model=MODEL, messages=QUESTION, max_tokens=48, stop=[word]
    )
    assert cut.choices[0].finish_reason == "stop"
    assert cut.choices[0].message.content == text[: text.index(word)]


async def test_errors_have_the_apis_shape(server: Server) -> None:
    c = _client(server)
    with pytest.raises(openai.NotFoundError) as nf:
        await c.chat.completions.create(model="gpt-4o", messages=QUESTION)
    assert nf.value.body["code"] == "model_not_found"
    with pytest.raises(openai.BadRequestError) as bad:
        await c.chat.completions.create(model=MODEL, messages=QUESTION, temperature=3.0)
    assert bad.value.body["param"] == "temperature"
    assert bad.value.body["type"] == "invalid_request_error"

    def call(method: str, path: str, body: bytes | None = None) -> tuple[int, dict]:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        conn.request(method, path, body=body)
        r = conn.getresponse()
        return r.status, json.loads(r.read())

    async def status_and_error(method: str, path: str, body: bytes | None = None) -> int:
        status, out = await asyncio.to_thread(call, method, path, body)
        assert set(out["error"]) == {"message", "type", "param", "code"}, out
        return status

    assert await status_and_error("POST", "/v1/chat/completions", b"{not json") == 400
    assert await status_and_error("GET", "/v1/chat/completions") == 405
    assert await status_and_error("GET", "/v1/embeddings") == 404
    big = b'{"model": "x", "pad": "' + b"a" * (2 << 20) + b'"}'
    assert await status_and_error("POST", "/v1/chat/completions", big) == 413


async def test_a_voice_session_beside_the_api(server: Server) -> None:
    rate = 16000
    pcm = (0.3 * np.sin(2 * np.pi * 300 * np.arange(rate) / rate)).astype(np.float32)
    (res,) = await run_sessions(
        server.ws_url, pcm, rate, server.cfg, output_sample_rate=rate, trailing_silence_s=0.1
    )
    out = res.to_json()
    assert out["ok"] and out["close_code"] == P.CLOSE_NORMAL, out
    np.testing.assert_array_equal(res.reply_audio()[: len(pcm)], P.pcm16_from_float(pcm))


async def test_the_auth_token_guards_the_api() -> None:
    cfg = config.load(FAST)
    cfg = dataclasses.replace(cfg, server=dataclasses.replace(cfg.server, auth_token="sesame"))
    s = Server(cfg, pipeline="loopback", port=0)
    await s.start()
    try:
        with pytest.raises(openai.AuthenticationError) as e:
            await _client(s, key="wrong").models.list()
        assert e.value.body["code"] == "invalid_api_key"
        assert [m.id for m in (await _client(s, key="sesame").models.list()).data] == [MODEL]
    finally:
        await s.close(drain_s=0)


async def test_metrics_count_api_requests_and_their_speculation(server: Server) -> None:
    c = _client(server)
    await c.chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=16)
    with pytest.raises(openai.NotFoundError):
        await c.models.retrieve("gpt-4o")
    text = server.metrics.render().decode()

    def value(name: str) -> float:
        line = next((x for x in text.splitlines() if x.startswith(name + " ")), None)
        return float(line.split()[1]) if line else 0.0

    assert value('voicepipe_api_requests_total{status="200"}') >= 1
    assert value('voicepipe_api_requests_total{status="404"}') >= 1
    drafted = value('voicepipe_spec_drafted_tokens_total{source="api"}')
    assert drafted >= value('voicepipe_spec_accepted_tokens_total{source="api"}') >= 0
    assert drafted > 0


async def test_a_client_that_hangs_up_stops_its_generation(server: Server) -> None:
    """Not streamed: the server notices the client gone, stops generating (status 499 in
    /metrics) and the next request is served."""
    counted = 'voicepipe_api_requests_total{status="499"}'

    def hung_up() -> float:
        line = next((x for x in server.metrics.render().decode().splitlines()
                     if x.startswith(counted + " ")), None)  # fmt: skip
        return float(line.split()[1]) if line else 0.0

    before = hung_up()
    impatient = AsyncOpenAI(
        base_url=f"http://127.0.0.1:{server.port}/v1", api_key="x", max_retries=0, timeout=1.0
    )
    # Greedy, this story runs to the 1500 tokens asked for (seconds, not one): the client
    # gives up first, and had the server not stopped, its answer would count as a 200.
    story = [
        {
            "role": "user",
            "content": "Write a very long story about a dragon who learns to bake bread.",
        }
    ]
    with pytest.raises(openai.APITimeoutError):
        await impatient.chat.completions.create(model=MODEL, messages=story, max_tokens=1500)
    await impatient.close()
    for _ in range(600):  # the handler returns once the step in flight is done
        if hung_up() > before:
            break
        await asyncio.sleep(0.05)
    assert hung_up() == before + 1
    r = await _client(server).chat.completions.create(model=MODEL, messages=QUESTION, max_tokens=8)
    assert r.usage is not None and r.usage.completion_tokens == 8
