"""OpenAI Chat Completions, sans-I/O: the request checked field by field, the error,
completion, chunk and model shapes, and stop sequences over streamed text.

``parse_chat_request(body, models)`` turns a decoded JSON body into a
``ChatRequest`` or raises ``ApiError`` (HTTP status + the API's error object:
``message``, ``type``, ``param``, ``code``); it raises nothing else, whatever the
body. What this server cannot honour is refused by name rather than ignored
(``n`` > 1, ``tools``, ``logprobs``, non-text content parts, JSON response
formats); fields that only tune an API-side behaviour (``user``, penalties,
``store``, ``metadata``, …) are ignored, as lenient OpenAI-compatible servers do.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

MAX_MESSAGES = 1024
MAX_STOP = 4
MAX_STOP_CHARS = 64
MAX_TOKENS_CAP = 1 << 16
ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
_REFUSED = {  # field → why; present and not null/false/empty: 400
    "tools": "tools (function calling) are not supported by this endpoint",
    "functions": "functions (function calling) are not supported by this endpoint",
    "tool_choice": "tool_choice is not supported by this endpoint",
    "logprobs": "logprobs are not supported",
    "top_logprobs": "logprobs are not supported",
    "audio": "audio output is not supported by this endpoint (use /ws)",
}


class ApiError(Exception):
    """An error answered with ``status`` and the API's error object."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


@dataclass(frozen=True)
class ChatRequest:
    model: str
    messages: tuple[tuple[str, str], ...]  # (role: system|user|assistant, text)
    stream: bool = False
    include_usage: bool = False
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()

    def chat_messages(self) -> list[dict[str, str]]:
        return [{"role": r, "content": c} for r, c in self.messages]


def _bad(param: str, message: str, code: str | None = None) -> ApiError:
    return ApiError(400, message, param=param, code=code or "invalid_value")


def _number(body: Mapping[str, Any], name: str, lo: float, hi: float) -> float | None:
    v = body.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise _bad(name, f"'{name}' must be a number", "invalid_type")
    if not lo <= v <= hi:
        raise _bad(name, f"'{name}' must be between {lo:g} and {hi:g}, got {v!r}")
    return float(v)


def _integer(body: Mapping[str, Any], name: str, lo: int, hi: int) -> int | None:
    v = body.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise _bad(name, f"'{name}' must be an integer", "invalid_type")
    if not lo <= v <= hi:
        raise _bad(name, f"'{name}' must be between {lo} and {hi}, got {v}")
    return v


def _flag(body: Mapping[str, Any], name: str) -> bool:
    v = body.get(name)
    if v is None:
        return False
    if not isinstance(v, bool):
        raise _bad(name, f"'{name}' must be a boolean", "invalid_type")
    return v


def _content(i: int, content: object) -> str:
    param = f"messages[{i}].content"
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _bad(param, f"'{param}' must be a string or an array of text parts", "invalid_type")
    texts = []
    for j, part in enumerate(content):
        if not isinstance(part, dict) or part.get("type") != "text":
            raise _bad(f"{param}[{j}]", "only text content parts are supported")
        text = part.get("text")
        if not isinstance(text, str):
            raise _bad(f"{param}[{j}].text", "a text part needs a string 'text'", "invalid_type")
        texts.append(text)
    return "".join(texts)


def _messages(raw: object) -> tuple[tuple[str, str], ...]:
    if raw is None:
        missing = "missing_required_parameter"
        raise _bad("messages", "Missing required parameter: 'messages'.", missing)
    if not isinstance(raw, list) or not raw:
        raise _bad("messages", "'messages' must be a non-empty array", "invalid_type")
    if len(raw) > MAX_MESSAGES:
        raise _bad("messages", f"at most {MAX_MESSAGES} messages")
    out = []
    for i, m in enumerate(raw):
        if not isinstance(m, dict):
            raise _bad(f"messages[{i}]", f"'messages[{i}]' must be an object", "invalid_type")
        role = m.get("role")
        if not isinstance(role, str) or role not in ROLES:
            roles = ", ".join(sorted(ROLES))
            raise _bad(f"messages[{i}].role", f"role must be one of {roles} (got {role!r})")
        if m.get("tool_calls"):
            raise _bad(f"messages[{i}].tool_calls", "tool calls are not supported")
        out.append((ROLES[role], _content(i, m.get("content"))))
    return tuple(out)


def _stop(raw: object) -> tuple[str, ...]:
    if raw is None:
        return ()
    stops = [raw] if isinstance(raw, str) else raw
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise _bad("stop", "'stop' must be a string or an array of strings", "invalid_type")
    if len(stops) > MAX_STOP or any(not s or len(s) > MAX_STOP_CHARS for s in stops):
        raise _bad("stop", f"at most {MAX_STOP} stop sequences of 1-{MAX_STOP_CHARS} characters")
    return tuple(stops)


def parse_chat_request(body: object, models: Collection[str]) -> ChatRequest:
    """A decoded JSON body → ``ChatRequest``; anything else raises ``ApiError``."""
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object", code="invalid_type")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise _bad("model", "Missing required parameter: 'model'.", "missing_required_parameter")
    if model not in models:
        raise ApiError(
            404,
            f"The model '{model[:100]}' does not exist (available: {', '.join(sorted(models))})",
            param="model",
            code="model_not_found",
        )
    messages = _messages(body.get("messages"))
    for name, why in _REFUSED.items():
        if body.get(name) not in (None, False, [], {}):
            raise _bad(name, why, "unsupported_parameter")
    n = _integer(body, "n", 1, 128)
    if n is not None and n != 1:
        raise _bad("n", "only n = 1 is supported", "unsupported_value")
    fmt = body.get("response_format")
    if fmt is not None and (not isinstance(fmt, dict) or fmt.get("type") != "text"):
        raise _bad("response_format", "only response_format {'type': 'text'} is supported")
    options = body.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise _bad("stream_options", "'stream_options' must be an object", "invalid_type")
    max_tokens = _integer(body, "max_completion_tokens", 1, MAX_TOKENS_CAP)
    if max_tokens is None:
        max_tokens = _integer(body, "max_tokens", 1, MAX_TOKENS_CAP)
    seed = _integer(body, "seed", -(2**63), 2**63 - 1)
    return ChatRequest(
        model=model,
        messages=messages,
        stream=_flag(body, "stream"),
        include_usage=_flag(options or {}, "include_usage"),
        max_tokens=max_tokens,
        temperature=_number(body, "temperature", 0.0, 2.0),
        top_p=_number(body, "top_p", 0.0, 1.0),
        seed=seed,
        stop=_stop(body.get("stop")),
    )


# ---------------------------------------------------------------- responses


def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def completion(
    id: str,
    created: int,
    model: str,
    text: str,
    finish_reason: str,
    usage_: Mapping[str, int],
    extra: Mapping[str, Any],
) -> dict[str, Any]:
    """A whole ``chat.completion``; ``extra`` goes under ``voicepipe``."""
    return {
        "id": id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
        "usage": dict(usage_),
        "voicepipe": dict(extra),
    }


def chunk(
    id: str,
    created: int,
    model: str,
    delta: Mapping[str, str] | None,
    finish_reason: str | None = None,
    *,
    usage_: Mapping[str, int] | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One ``chat.completion.chunk``: a delta (None: the usage-only last chunk, no choices)."""
    out: dict[str, Any] = {
        "id": id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": []
        if delta is None
        else [{"index": 0, "delta": dict(delta), "logprobs": None, "finish_reason": finish_reason}],
    }
    if usage_ is not None:
        out["usage"] = dict(usage_)
    if extra is not None:
        out["voicepipe"] = dict(extra)
    return out


def model_object(model: str, created: int, owned_by: str = "voicepipe") -> dict[str, Any]:
    return {"id": model, "object": "model", "created": created, "owned_by": owned_by}


# ---------------------------------------------------------------- stop sequences


class StopScanner:
    """Stop sequences over streamed text: ``push`` returns the text that is safe to send
    (never a stop sequence, nor the start of one that the next delta might complete) and
    whether a stop sequence was reached; ``flush`` the text held back at the end."""

    def __init__(self, stops: tuple[str, ...]) -> None:
        self.stops = stops
        self.held = ""

    def push(self, text: str) -> tuple[str, bool]:
        buf = self.held + text
        hits = [i for i in (buf.find(s) for s in self.stops) if i >= 0]
        if hits:
            self.held = ""
            return buf[: min(hits)], True
        keep = 0
        for s in self.stops:  # the longest tail of buf that starts some stop sequence
            for n in range(min(len(s) - 1, len(buf)), keep, -1):
                if s.startswith(buf[len(buf) - n :]):
                    keep = n
                    break
        self.held = buf[len(buf) - keep :] if keep else ""
        return buf[: len(buf) - keep], False

    def flush(self) -> str:
        out, self.held = self.held, ""
        return out
