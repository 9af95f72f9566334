"""Check realtime JSON against the official ``openai`` SDK's pydantic models (GA types).

The SDK's models accept unknown fields (``extra="allow"``), so validating alone would
not catch a misspelt field: ``assert_known_fields`` walks the parsed model and fails
on any field the SDK does not define.
"""

from __future__ import annotations

import json
from typing import Any

from openai.types.realtime import RealtimeClientEvent, RealtimeServerEvent
from openai.types.realtime.realtime_session_create_response import (
    RealtimeSessionCreateResponse,
)
from pydantic import BaseModel, TypeAdapter

SERVER = TypeAdapter(RealtimeServerEvent)
CLIENT = TypeAdapter(RealtimeClientEvent)
SESSION = TypeAdapter(RealtimeSessionCreateResponse)


def assert_known_fields(value: Any, path: str = "") -> None:
    if isinstance(value, BaseModel):
        extra = value.model_extra or {}
        assert not extra, f"{path or type(value).__name__}: fields unknown to the SDK: {extra}"
        for name in type(value).model_fields:
            assert_known_fields(getattr(value, name), f"{path}.{name}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            assert_known_fields(v, f"{path}[{i}]")


def check_server_json(text: str) -> Any:
    """Parse one server event as the SDK does; returns the SDK model."""
    raw = json.loads(text)
    model = SERVER.validate_json(text)
    assert model.type == raw["type"]
    if raw["type"] in ("session.created", "session.updated"):
        # The event's model holds the *request* shape; the server sends the resource
        # (id, object, expires_at too), which the SDK has as the create response.
        assert_known_fields(SESSION.validate_python(raw["session"]))
        assert model.session.type == "realtime"
    else:
        assert_known_fields(model)
    return model


def check_client_json(text: str) -> Any:
    model = CLIENT.validate_json(text)
    assert_known_fields(model)
    return model
