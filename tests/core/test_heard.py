from voicepipe.core.heard import SpokenReply


def _reply() -> SpokenReply:
    r = SpokenReply()
    r.add("Sure, the capital of France is Paris.", 2.0)  # 7 words
    r.add("It sits on the Seine.", 1.0)  # 5 words
    return r


def test_whole_reply_heard_when_played_to_the_end() -> None:
    r = _reply()
    assert r.seconds == 3.0
    assert r.heard(3.0) == "Sure, the capital of France is Paris. It sits on the Seine."
    assert r.heard(10.0) == r.heard(3.0)


def test_cut_inside_a_chunk_keeps_only_words_whose_audio_ended() -> None:
    r = _reply()
    assert r.heard(0.0) == ""
    assert r.heard(2.0 * 3 / 7) == "Sure, the capital"  # exactly three words' worth
    assert r.heard(2.0 * 3 / 7 - 0.01) == "Sure, the"
    assert r.heard(2.0 + 0.4) == "Sure, the capital of France is Paris. It sits"


def test_empty_and_silent_chunks() -> None:
    r = SpokenReply()
    assert r.heard(5.0) == ""
    r.add("", 0.0)
    r.add("Hello there.", 0.0)  # no audio at all: never heard
    assert r.heard(1.0) == ""
    r.add("Bye now.", 1.0)
    assert r.heard(1.0) == "Bye now."
