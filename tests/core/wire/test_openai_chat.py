"""The Chat Completions request checker and stop sequences (core/wire/openai_chat.py)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voicepipe.core.wire import openai_chat as O

MODELS = {"smollm2-135m"}
MISSING, BAD = "missing_required_parameter", "invalid_value"


def _req(**kw: object) -> dict:
    return {"model": "smollm2-135m", "messages": [{"role": "user", "content": "hi"}], **kw}


def _text(t: str) -> dict:
    return {"type": "text", "text": t}


def test_a_full_request_is_read() -> None:
    body = _req(
        messages=[
            {"role": "developer", "content": "Be brief."},
            {"role": "user", "content": [_text("Hello "), _text("there")]},
            {"role": "assistant", "content": "Hi."},
        ],
        stream=True,
        stream_options={"include_usage": True},
        max_completion_tokens=12,
        temperature=0.5,
        top_p=0.9,
        seed=3,
        stop=["\n"],
        user="ignored",
        n=1,
    )  # fmt: skip
    r = O.parse_chat_request(body, MODELS)
    assert r.messages == (("system", "Be brief."), ("user", "Hello there"), ("assistant", "Hi."))
    assert (r.stream, r.include_usage, r.max_tokens) == (True, True, 12)
    assert (r.temperature, r.top_p, r.seed, r.stop) == (0.5, 0.9, 3, ("\n",))
    assert O.parse_chat_request(_req(max_tokens=7), MODELS).max_tokens == 7


@pytest.mark.parametrize(
    ("body", "status", "param", "code"),
    [
        ([], 400, None, "invalid_type"),
        ({"messages": [{"role": "user", "content": "x"}]}, 400, "model", MISSING),
        (_req(model="gpt-4o"), 404, "model", "model_not_found"),
        ({"model": "smollm2-135m"}, 400, "messages", MISSING),
        (_req(messages=[]), 400, "messages", "invalid_type"),
        (_req(messages=[{"role": "wiz", "content": "x"}]), 400, "messages[0].role", BAD),
        (_req(messages=[{"role": "user", "content": [{"type": "image_url"}]}]), 400,
         "messages[0].content[0]", BAD),
        (_req(temperature=2.5), 400, "temperature", "invalid_value"),
        (_req(temperature=True), 400, "temperature", "invalid_type"),
        (_req(max_tokens=0), 400, "max_tokens", "invalid_value"),
        (_req(max_tokens=1.5), 400, "max_tokens", "invalid_type"),
        (_req(stream="yes"), 400, "stream", "invalid_type"),
        (_req(n=2), 400, "n", "unsupported_value"),
        (_req(tools=[{"type": "function"}]), 400, "tools", "unsupported_parameter"),
        (_req(stop=["a", "b", "c", "d", "e"]), 400, "stop", "invalid_value"),
        (_req(response_format={"type": "json_object"}), 400, "response_format", "invalid_value"),
    ],
)  # fmt: skip
def test_bad_requests_get_the_apis_error(body: object, status: int, param: str, code: str) -> None:
    with pytest.raises(O.ApiError) as e:
        O.parse_chat_request(body, MODELS)
    assert (e.value.status, e.value.param, e.value.code) == (status, param, code)
    err = e.value.body()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"]


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)  # fmt: skip
_fields = ["model", "messages", "stream", "stream_options", "max_tokens", "temperature", "top_p",
           "seed", "stop", "n", "tools", "response_format", "max_completion_tokens"]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(_fields), _json, max_size=6), st.booleans())
def test_no_body_raises_anything_but_api_error(body: dict, valid_base: bool) -> None:
    if valid_base:
        body = {**_req(), **body}
    try:
        r = O.parse_chat_request(body, MODELS)
    except O.ApiError as e:
        assert 400 <= e.status < 500
        json.dumps(e.body())
        return
    assert r.model in MODELS and r.messages


def test_stop_scanner_holds_back_a_possible_stop_and_cuts_at_it() -> None:
    s = O.StopScanner(("END", "\n\n"))
    assert s.push("Hello E") == ("Hello ", False)  # "E" may start "END"
    assert s.push("xit") == ("Exit", False)
    assert s.push(" now\n") == (" now", False)
    assert s.push("\nmore") == ("", True)
    s = O.StopScanner(("END",))
    assert s.push("abcEN") == ("abc", False)
    assert s.flush() == "EN"
    assert O.StopScanner(()).push("anything") == ("anything", False)


@given(st.text(alphabet="abE ND", max_size=30), st.lists(st.integers(1, 5), max_size=10))
def test_stop_scanner_matches_cutting_the_whole_text(text: str, cuts: list[int]) -> None:
    """However the text is split into deltas, what is sent is the text up to the first
    stop sequence (all of it when there is none)."""
    stops = ("END", "b a")
    s = O.StopScanner(stops)
    out, i, hit = "", 0, False
    for n in [*cuts, len(text)]:
        piece, hit = s.push(text[i : i + n])
        out += piece
        i += n
        if hit or i >= len(text):
            break
    if not hit:
        out += s.flush()
    firsts = [j for j in (text.find(x) for x in stops) if j >= 0]
    assert out == (text[: min(firsts)] if firsts else text)
