"""Reading one JSON object of a Realtime client event, with the API's error for each kind of
bad value (``param`` is the JSON path of the field). Sans-I/O; used by ``realtime_decode``.
"""

from __future__ import annotations

import math

from voicepipe.core.realtime.events import MODALITIES, MaxTokens, RealtimeError

MAX_TEXT = 65_536  # default bound of a string field: one text part, one tool output

_JSON_NAMES = {
    bool: "a boolean",
    int: "an integer",
    float: "a decimal",
    str: "a string",
    list: "an array",
    dict: "an object",
    type(None): "null",
}


def _kind(value: object) -> str:
    return _JSON_NAMES.get(type(value), "a value")


class Reader:
    """One JSON object being read, with the path of its keys for error ``param``s."""

    def __init__(self, data: dict[str, object], path: str, event_id: str | None) -> None:
        self.data = data
        self.path = path
        self.event_id = event_id

    def param(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def error(self, code: str, message: str, key: str) -> RealtimeError:
        return RealtimeError(code, message, param=self.param(key), event_id=self.event_id)

    def has(self, key: str) -> bool:
        """Present and not null (an optional field sent as null counts as absent)."""
        return self.data.get(key) is not None

    def _get(self, key: str, required: bool) -> object:
        if key not in self.data or (self.data[key] is None and required):
            if required:
                raise self.error(
                    "missing_required_parameter",
                    f"Missing required parameter: '{self.param(key)}'.",
                    key,
                )
        return self.data.get(key)

    def _type_error(self, key: str, want: str, value: object) -> RealtimeError:
        return self.error(
            "invalid_type",
            f"Invalid type for '{self.param(key)}': expected "
            f"{want}, but got {_kind(value)} instead.",
            key,
        )

    def string(
        self,
        key: str,
        *,
        required: bool = False,
        max_len: int = MAX_TEXT,
        choices: tuple[str, ...] | None = None,
    ) -> str | None:
        value = self._get(key, required)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self._type_error(key, "a string", value)
        if len(value) > max_len:
            raise self.error(
                "string_above_max_length",
                f"Invalid '{self.param(key)}': string "
                f"too long. Expected a maximum length of {max_len}.",
                key,
            )
        if choices is not None and value not in choices:
            listed = ", ".join(f"'{c}'" for c in choices)
            raise self.error(
                "invalid_value",
                f"Invalid value: '{value[:64]}'. Supported values are: {listed}.",
                key,
            )
        return value

    def req_string(
        self, key: str, *, max_len: int = MAX_TEXT, choices: tuple[str, ...] | None = None
    ) -> str:
        value = self.string(key, required=True, max_len=max_len, choices=choices)
        assert value is not None  # required=True raised otherwise
        return value

    def integer(self, key: str, lo: int, hi: int, *, required: bool = False) -> int | None:
        value = self._get(key, required)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._type_error(key, "an integer", value)
        if not lo <= value <= hi:
            raise self.error(
                "invalid_value",
                f"Invalid '{self.param(key)}': expected an "
                f"integer between {lo} and {hi}, got {value}.",
                key,
            )
        return value

    def number(self, key: str, lo: float, hi: float) -> float | None:
        value = self._get(key, False)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._type_error(key, "a decimal", value)
        if not (math.isfinite(value) and lo <= value <= hi):
            raise self.error(
                "invalid_value",
                f"Invalid '{self.param(key)}': expected a number between {lo} and {hi}.",
                key,
            )
        return float(value)

    def boolean(self, key: str) -> bool | None:
        value = self._get(key, False)
        if value is None:
            return None
        if not isinstance(value, bool):
            raise self._type_error(key, "a boolean", value)
        return value

    def obj(self, key: str, *, required: bool = False) -> Reader | None:
        value = self._get(key, required)
        if value is None:
            return None
        if not isinstance(value, dict):
            raise self._type_error(key, "an object", value)
        return Reader(value, self.param(key), self.event_id)

    def array(self, key: str, max_len: int, *, required: bool = False) -> list[object] | None:
        value = self._get(key, required)
        if value is None:
            return None
        if not isinstance(value, list):
            raise self._type_error(key, "an array", value)
        if len(value) > max_len:
            raise self.error(
                "array_above_max_length",
                f"Invalid '{self.param(key)}': array too "
                f"long. Expected an array with maximum length {max_len}.",
                key,
            )
        return value

    def element(self, key: str, index: int, value: object) -> Reader:
        if not isinstance(value, dict):
            raise self._type_error(f"{key}[{index}]", "an object", value)
        return Reader(value, self.param(f"{key}[{index}]"), self.event_id)

    def max_tokens(self, key: str) -> MaxTokens | None:
        value = self.data.get(key)
        if value == "inf":
            return "inf"
        if isinstance(value, str):
            raise self.error(
                "invalid_value",
                f"Invalid value: '{value[:64]}'. Supported values "
                "are: 'inf' or an integer between 1 and 4096.",
                key,
            )
        return self.integer(key, 1, 4096)

    def modalities(self, key: str) -> tuple[str, ...] | None:
        values = self.array(key, 2)
        if values is None:
            return None
        for i, v in enumerate(values):
            if not isinstance(v, str) or v not in MODALITIES:
                raise self.error(
                    "invalid_value",
                    f"Invalid value in '{self.param(key)}[{i}]': "
                    "supported values are 'text' and 'audio'.",
                    f"{key}[{i}]",
                )
        return tuple(str(v) for v in values)
