"""OpenAI-compatible HTTP endpoints: ``GET /v1/models``, ``POST /v1/chat/completions``.

Any OpenAI client (the official SDKs, LangChain, curl) can use voicepipe's own
speculative LLM (stages/llm/chat_engine.py) with ``base_url = http://HOST:PORT/v1``.
Requests and shapes are checked in ``core/wire/openai_chat.py``; every error is the
API's error object with its HTTP status. ``stream: true`` answers with
server-sent events (``data: {chunk}`` … ``data: [DONE]``); ``usage`` comes with
the whole completion, or as a last chunk with ``stream_options.include_usage``.
voicepipe's own figures (time to first token, decode speed, where the prompt's
tokens came from, the speculative decoder's drafted/accepted counts) ride in an
extra ``voicepipe`` field of the completion or of the stream's last chunks.

With ``server.auth_token`` set, requests need ``Authorization: Bearer TOKEN``
(the SDKs' ``api_key``), else 401.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from voicepipe.core.wire import openai_chat as O
from voicepipe.frames import MetricsFrame
from voicepipe.stages.llm.chat_engine import ChatEngine, Finished, Job
from voicepipe.stages.llm.voice_first import ApiBudget, VoiceFirst

if TYPE_CHECKING:
    from voicepipe.server.app import Server

log = logging.getLogger(__name__)
ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
Handler = Callable[[Request], Awaitable[Response]]


def _error(e: O.ApiError) -> JSONResponse:
    headers = {"Retry-After": "1"} if e.status == 429 else None
    return JSONResponse(e.body(), e.status, headers=headers)


def _sse(obj: object) -> str:
    return f"data: {json.dumps(obj, separators=(',', ':'))}\n\n"


class OpenAIApi:
    def __init__(self, server: Server) -> None:
        self.server = server
        self.cfg = server.cfg
        budget = ApiBudget(server.cfg.server.api_share_while_voice)
        self.chat = ChatEngine(
            server.cfg,
            max_waiting=max(1, server.cfg.server.max_sessions),
            voice_first=VoiceFirst(budget, server.voice_busy),
        )
        self.created = int(time.time())

    def _authorize(self, request: Request) -> None:
        token = self.cfg.server.auth_token
        if not token:
            return
        given = request.headers.get("authorization", "")
        scheme, _, value = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip(), token):
            raise O.ApiError(401, "Incorrect API key provided.", code="invalid_api_key")

    async def _body(self, request: Request) -> object:
        """The JSON body: at most ``server.max_message_bytes``, all of it within
        ``server.handshake_timeout_s`` (a body trickled byte by byte holds nothing long)."""
        limit = self.cfg.server.max_message_bytes
        parts: list[bytes] = []
        size = 0

        async def read() -> None:
            nonlocal size
            async for part in request.stream():
                parts.append(part)
                size += len(part)
                if size > limit:
                    raise O.ApiError(413, f"the request body is over {limit} bytes")

        try:
            await asyncio.wait_for(read(), self.cfg.server.handshake_timeout_s)
        except asyncio.TimeoutError:
            raise O.ApiError(408, "the request body did not arrive in time") from None
        body = b"".join(parts)
        try:
            return json.loads(body)
        except (ValueError, RecursionError):
            raise O.ApiError(400, "We could not parse the JSON body of your request.") from None

    def _observe(self, end: Finished) -> None:
        """The request's drafted/accepted tokens into /metrics, under source "api"."""
        spec = {k: v for k, v in end.stats.get("speculation", {}).items() if k != "accept_by_pos"}
        self.server.metrics.observe(MetricsFrame(turn_id=0, source="api", values=spec))

    async def models(self, request: Request) -> Response:
        try:
            self._authorize(request)
        except O.ApiError as e:
            return _error(e)
        model = O.model_object(self.chat.model_id, self.created)
        return JSONResponse({"object": "list", "data": [model]})

    async def model(self, request: Request) -> Response:
        try:
            self._authorize(request)
            name = request.path_params["model"]
            if name != self.chat.model_id:
                raise O.ApiError(
                    404, f"The model '{name[:100]}' does not exist", code="model_not_found"
                )
        except O.ApiError as e:
            return _error(e)
        return JSONResponse(O.model_object(self.chat.model_id, self.created))

    async def not_found(self, request: Request) -> Response:
        path = request.scope["path"][:200]
        return _error(O.ApiError(404, f"Unknown request URL: {request.method} {path}."))

    async def completions(self, request: Request) -> Response:
        if request.method != "POST":
            return _error(O.ApiError(405, f"{request.method} is not allowed here; use POST"))
        try:
            self._authorize(request)
            req = O.parse_chat_request(await self._body(request), {self.chat.model_id})
            self.chat.check_capacity()
            job = await self.chat.prepare(req)
        except ClientDisconnect:
            return Response(status_code=400)
        except O.ApiError as e:
            return _error(e)
        except Exception as e:  # the model failed to load: the server is fine, say so
            log.exception("chat completion failed before generating")
            return _error(O.ApiError(500, f"the model failed: {e}"[:300], type="server_error"))
        cid = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        created = int(time.time())
        if req.stream:
            return StreamingResponse(
                self._stream(job, cid, created),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        try:
            text, end = await self._whole(request, job)
        except ClientDisconnect:  # nobody is waiting for it: generation stopped
            return Response(status_code=499)
        except Exception as e:
            log.exception("chat completion failed")
            return _error(O.ApiError(500, f"the model failed: {e}"[:300], type="server_error"))
        usage = O.usage(end.prompt_tokens, end.completion_tokens)
        body = O.completion(cid, created, req.model, text, end.finish_reason, usage, end.stats)
        return JSONResponse(body)

    async def _whole(self, request: Request, job: Job) -> tuple[str, Finished]:
        """The whole completion; ClientDisconnect (and generation stopped after the current
        step) if the client hangs up first. (A stream stops by itself: Starlette cancels it.)"""

        async def generate() -> tuple[str, Finished]:
            parts: list[str] = []
            async for item in self.chat.run(job):
                if isinstance(item, Finished):
                    self._observe(item)
                    return "".join(parts), item
                parts.append(item)
            raise RuntimeError("the generator ended without its Finished")

        async def hung_up() -> None:
            # The body was read already: the next message is the disconnect (should a
            # server answer with empty bodies instead, this does not spin).
            while (await request.receive())["type"] != "http.disconnect":  # noqa: ASYNC110
                await asyncio.sleep(0.05)

        work = asyncio.create_task(generate())
        watch = asyncio.create_task(hung_up())
        try:
            await asyncio.wait({work, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watch.cancel()
            if not work.done():
                work.cancel()
            await asyncio.gather(work, watch, return_exceptions=True)
        if work.cancelled():
            raise ClientDisconnect()
        return work.result()

    async def _stream(self, job: Job, cid: str, created: int) -> AsyncIterator[str]:
        req: O.ChatRequest = job.request
        model = req.model
        yield _sse(O.chunk(cid, created, model, {"role": "assistant", "content": ""}))
        try:
            async for item in self.chat.run(job):
                if isinstance(item, Finished):
                    self._observe(item)
                    usage = O.usage(item.prompt_tokens, item.completion_tokens)
                    yield _sse(
                        O.chunk(cid, created, model, {}, item.finish_reason, extra=item.stats)
                    )
                    if req.include_usage:
                        yield _sse(
                            O.chunk(cid, created, model, None, usage_=usage, extra=item.stats)
                        )
                else:
                    yield _sse(O.chunk(cid, created, model, {"content": item}))
        except Exception as e:  # headers are out: the error goes in the stream
            log.exception("chat completion stream failed")
            yield _sse(O.ApiError(500, f"the model failed: {e}"[:300], type="server_error").body())
        yield "data: [DONE]\n\n"


def routes(api: OpenAIApi) -> list[Any]:
    def counted(handler: Handler) -> Handler:
        async def endpoint(request: Request) -> Response:
            response = await handler(request)
            api.server.metrics.api.labels(str(response.status_code)).inc()
            return response

        return endpoint

    return [
        Route("/v1/models", counted(api.models), methods=["GET", "HEAD"]),
        Route("/v1/models/{model:path}", counted(api.model), methods=["GET", "HEAD"]),
        Route("/v1/chat/completions", counted(api.completions), methods=ALL_METHODS),
        Route("/v1/{rest:path}", counted(api.not_found), methods=ALL_METHODS),
    ]
