"""OpenAI Realtime API (GA) compatibility, sans-I/O: one import for the ``/v1/realtime`` shell.

- ``realtime_events``: shared shapes, client events, ``RealtimeError`` (the API's error shape)
- ``realtime_decode``: ``decode_client_event`` (validates everything; raises only RealtimeError)
- ``realtime_server``: server events, ``encode_server_event``
- ``realtime_reader``: the field-by-field JSON reader behind the decoder
- ``realtime_actions``: what the session asks of the pipeline
- ``realtime_config``: ``session.update`` applied (what is honoured, what refused)
- ``realtime_items`` / ``realtime_session``: the ``RealtimeSession`` state machine

docs/REALTIME.md is the compatibility table (event by event: supported / ignored / rejected).
"""

from voicepipe.core.realtime.actions import (
    Action,
    AddItem,
    AppendAudio,
    CancelResponse,
    ClearAudio,
    CommitAudio,
    Configure,
    DeleteItem,
    Out,
    SetHeard,
    StartResponse,
)
from voicepipe.core.realtime.config import DEFAULT_VAD, apply_patch
from voicepipe.core.realtime.decode import decode_client_event
from voicepipe.core.realtime.events import (
    BYTES_PER_MS,
    CLIENT_EVENT_TYPES,
    SAMPLE_RATE,
    ClientEvent,
    RealtimeError,
    encode_client_event,
)
from voicepipe.core.realtime.server_events import (
    SERVER_EVENT_TYPES,
    ServerEvent,
    SessionConfig,
    Usage,
    encode_server_event,
)
from voicepipe.core.realtime.session import RealtimeSession

__all__ = [
    "BYTES_PER_MS",
    "CLIENT_EVENT_TYPES",
    "DEFAULT_VAD",
    "SAMPLE_RATE",
    "SERVER_EVENT_TYPES",
    "Action",
    "AddItem",
    "AppendAudio",
    "CancelResponse",
    "ClearAudio",
    "ClientEvent",
    "CommitAudio",
    "Configure",
    "DeleteItem",
    "Out",
    "RealtimeError",
    "RealtimeSession",
    "ServerEvent",
    "SessionConfig",
    "SetHeard",
    "StartResponse",
    "Usage",
    "decode_client_event",
    "apply_patch",
    "encode_client_event",
    "encode_server_event",
]
