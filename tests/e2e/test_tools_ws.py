"""A spoken timer request over /ws with Qwen2.5-Coder-1.5B: the call, then the alert.

A real server (the assistant pipeline) and the headless client: the question is
spoken (the hibari teacher voices it), the reply says the timer is set, and
three seconds later the session gets the `alert` message and hears it as a reply
of its own turn. Loads Whisper, the 1.5B and the TTS and streams ~30 s of audio
at real time: `pytest -m slow`.
"""

from __future__ import annotations

import numpy as np
import pytest

from voicepipe import config
from voicepipe.client import ClientSession
from voicepipe.server.app import Server

pytestmark = pytest.mark.slow


async def test_a_spoken_timer_request_sets_the_timer_and_the_alert_is_spoken() -> None:
    from hibari import Hibari

    cfg = config.load(
        None, ["llm.model=qwen2.5-coder-1.5b", "llm.drafter=ngram", "llm.max_new_tokens=60"]
    )
    pcm = np.asarray(Hibari()("Please set a timer for three seconds.", seed=1), np.float32)
    server = Server(cfg, pipeline="assistant", port=0)
    await server.start()
    try:
        # The silence after the question keeps the session open while the reply is
        # written and spoken and the timer runs (the client sends `end` after it).
        res = await ClientSession(
            server.ws_url, pcm, 24000, cfg, trailing_silence_s=30.0, timeout_s=180
        ).run()
    finally:
        await server.close()
    out = res.to_json()
    assert out["ok"], out
    asked = [t for t in res.turns.values() if t.transcript]
    assert len(asked) == 1 and "timer" in asked[0].transcript.lower()
    tool = [s for s in res.spans if s.name == "llm.tool" and s.turn_id == asked[0].turn_id]
    assert tool and tool[0].attrs["calls"][0]["name"] == "set_timer"
    assert "{" not in asked[0].reply_text and "tool_call" not in asked[0].reply_text
    (alert,) = res.alerts
    assert alert["kind"] == "timer" and alert["data"]["seconds"] == 3
    assert alert["turn_id"] > asked[0].turn_id  # a turn of its own
    spoken = res.turns[alert["turn_id"]]
    assert spoken.reply_text == alert["text"] and len(spoken.audio()) > 0.5 * res.output_sample_rate
