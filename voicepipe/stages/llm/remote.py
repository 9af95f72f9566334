"""The LLM stage on any OpenAI-compatible server (``llm.backend = "openai"``).

    [llm]
    backend = "openai"
    base_url = "http://127.0.0.1:8080/v1"   # llama.cpp server, vLLM, Ollama, another voicepipe
    model = "smollm2-135m"                   # the server's model name
    api_key = ""                             # empty: $OPENAI_API_KEY, else none

``RemoteEngine`` is the token source an ``LlmStage`` holds in place of its local
engine (stages/llm/local.py); everything else is the stage's (stages/llm/stage.py): the
conversation and what is remembered of a cut-off reply, preemptive replies,
the clause chunker feeding the TTS, barge-in (the base Stage cancels the reply
task; cancelling the stream closes the HTTP response, and the server stops
generating), and the spans ``llm.ttft`` / ``llm.first_chunk`` / ``llm.tpot``
(measured here, so they include the network). The reply streams with the
``openai`` SDK's chat completions (``stream: true``, usage included). A
conversation too long for the server's context (400
``context_length_exceeded``) forgets its oldest turns and asks again; a server
that cannot be reached fails with its URL in the error (at start-up, ``check``).
"""

from __future__ import annotations

import os
from typing import Any

from voicepipe.clock import now_ns
from voicepipe.config import Config
from voicepipe.core.text.chunker import Chunker
from voicepipe.stages.llm.context import Conversation
from voicepipe.stages.llm.reply import Reply
from voicepipe.stages.llm.tools import SessionTools

BACKENDS = ("local", "openai")
TIMEOUT_S = 30.0  # connect/read bound per request (a voice reply cannot wait longer anyway)
WARM_UP_TIMEOUT_S = 600.0  # the start-up check's one-token completion may load the model


class LlmBackendError(RuntimeError):
    """The configured LLM server cannot be used (unreachable, refused, unknown model)."""


def _api_key(cfg: Config) -> str:
    return cfg.llm.api_key or os.environ.get("OPENAI_API_KEY", "") or "none"


def _unreachable(cfg: Config, e: Exception) -> LlmBackendError:
    return LlmBackendError(f"the LLM server at {cfg.llm.base_url} cannot be reached: {e}")


def check(cfg: Config) -> None:
    """Start-up check of an ``openai`` backend: the server answers, serves the model, and
    completes one token. That last step also warms it: servers that load a model on its
    first request (Ollama, voicepipe's own /v1 when its pipeline has no LLM) take seconds
    there, which the first spoken turn would otherwise wait for; and the system prompt is
    then in the server's prompt cache, where it has one."""
    import openai

    client = openai.OpenAI(
        base_url=cfg.llm.base_url, api_key=_api_key(cfg), timeout=TIMEOUT_S, max_retries=0
    )
    try:
        ids = [m.id for m in client.models.list()]
        if ids and cfg.llm.model not in ids:
            raise LlmBackendError(
                f"the LLM server at {cfg.llm.base_url} has no model {cfg.llm.model!r} "
                f"(it serves: {', '.join(ids[:10])}); set llm.model"
            )
        head = [{"role": "system", "content": cfg.llm.system_prompt}]
        messages: Any = [*head[: bool(cfg.llm.system_prompt)], {"role": "user", "content": "Hi."}]
        client.chat.completions.create(
            model=cfg.llm.model, messages=messages, max_tokens=1, timeout=WARM_UP_TIMEOUT_S
        )
    except openai.APIConnectionError as e:
        raise _unreachable(cfg, e) from None
    except openai.APIStatusError as e:
        raise LlmBackendError(f"the LLM server at {cfg.llm.base_url} refused: {e}") from None
    finally:
        client.close()


class RemoteEngine:
    """An OpenAI-compatible server as the stage's token source (no model in this process,
    no tools: the remote template's tools are not ours to render)."""

    engine = None  # (the local engine's place: nothing loaded here)

    def __init__(self, cfg: Config, conv: Conversation, tools: SessionTools) -> None:
        import openai

        self.cfg = cfg
        self.conv = conv
        self.client = openai.AsyncOpenAI(
            base_url=cfg.llm.base_url, api_key=_api_key(cfg), timeout=TIMEOUT_S, max_retries=0
        )
        tools.setup(None, conv)  # tools off, the plain system prompt

    async def start(self) -> None:
        pass  # the server was checked at start-up (``check``); nothing to load per session

    async def stop(self) -> None:
        await self.client.close()

    async def _open(self, user_text: str) -> Any:
        """The streamed completion; the oldest turns go while the server finds it too long."""
        import openai

        c = self.cfg.llm
        while True:
            try:
                messages: Any = self.conv.with_user(user_text)
                return await self.client.chat.completions.create(
                    model=c.model,
                    messages=messages,
                    stream=True,
                    stream_options={"include_usage": True},
                    max_tokens=self.conv.max_new_tokens,
                    temperature=c.temperature,
                    top_p=c.top_p,
                    seed=c.seed,
                )
            except openai.APIConnectionError as e:
                raise _unreachable(self.cfg, e) from None
            except openai.BadRequestError as e:
                if e.code != "context_length_exceeded" or not self.conv.forget_oldest_turn():
                    raise

    async def generate(self, r: Reply) -> None:
        chunker = Chunker()
        first_ns = last_ns = 0
        deltas = 0
        usage: Any = None
        extra: dict[str, Any] = {}
        try:
            stream = await self._open(r.text)
            try:
                async for chunk in stream:
                    usage = chunk.usage or usage
                    extra = (chunk.model_extra or {}).get("voicepipe") or extra
                    delta = chunk.choices[0].delta.content if chunk.choices else None
                    if not delta:
                        continue
                    t = now_ns()
                    deltas += 1
                    if not first_ns:
                        first_ns = r.first_tok_ns = t
                        await r.span("llm.ttft", r.request_ns, t, backend="openai")
                    last_ns = t
                    await r.say(chunker, delta)
            finally:
                await stream.close()  # cancelled (barge-in): the server stops generating
            await r.end(chunker)
        finally:
            n_tokens = usage.completion_tokens if usage is not None else deltas
            r.metrics, r.tpot = _metrics(n_tokens, first_ns, last_ns, extra)


def _metrics(
    n_tokens: int, first_ns: int, last_ns: int, extra: dict[str, Any]
) -> tuple[dict[str, Any], tuple[int, int, dict[str, Any]] | None]:
    """The reply's metrics and llm.tpot span (a remote voicepipe adds its speculation)."""
    m: dict[str, Any] = {}
    spec = extra.get("speculation")
    if isinstance(spec, dict):
        m.update({k: v for k, v in spec.items() if isinstance(v, (int, float))})
    m["tokens"] = n_tokens  # the reply's (the decoder's count includes its stop token)
    if n_tokens <= 1 or last_ns <= first_ns:
        return m, None
    m["tpot_ms"] = round((last_ns - first_ns) / 1e6 / (n_tokens - 1), 3)
    mean_ns = (last_ns - first_ns) // (n_tokens - 1)
    attrs = {"tokens": n_tokens, "decode_ms": round((last_ns - first_ns) / 1e6, 3)}
    return m, (last_ns - mean_ns, last_ns, attrs)
