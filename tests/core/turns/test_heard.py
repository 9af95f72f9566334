from voicepipe.core.turns.heard import SpokenReply


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


def test_weighted_words_end_where_their_spoken_form_ends() -> None:
    """The TTS front-end says "1969" as three words: it takes three words' time."""
    r = SpokenReply()
    r.add("In 1969 we won.", 6.0, [1, 3, 1, 1])  # one second per spoken word
    assert r.heard(1.0) == "In"
    assert r.heard(3.9) == "In"  # "nineteen sixty-nine" still playing
    assert r.heard(4.0) == "In 1969"
    assert r.heard(5.0) == "In 1969 we"
    r2 = SpokenReply()
    r2.add("In 1969 we won.", 6.0)  # unweighted: 1.5 s a word
    assert r2.heard(3.0) == "In 1969"


def test_weights_that_do_not_fit_fall_back_to_even_spreading() -> None:
    r = SpokenReply()
    r.add("one two three", 3.0, [1, 1])  # wrong length
    r.add("four five", 2.0, [0, 0])  # nothing to go by
    assert r.heard(2.0) == "one two"
    assert r.heard(4.0) == "one two three four"


def test_normalised_speech_is_trimmed_on_the_original_text() -> None:
    from voicepipe.core.text.norm import normalize_spans

    text = '1. Read "Romeo and Juliet" (1597) for $3.50 😀'
    norm = normalize_spans(text)
    assert norm.text == (
        "First, Read Romeo and Juliet, fifteen ninety-seven, for three dollars and fifty cents"
    )
    r = SpokenReply()
    r.add(text, 14.0, norm.word_weights())  # 14 spoken words, one second each
    assert r.heard(4.5) == '1. Read "Romeo and'  # "First, Read Romeo and" played
    assert r.heard(7.9) == '1. Read "Romeo and Juliet"'  # mid "fifteen ninety-seven"
    assert r.heard(8.0) == '1. Read "Romeo and Juliet" (1597)'
    assert r.heard(13.9) == '1. Read "Romeo and Juliet" (1597) for'
    assert r.heard(14.0) == text  # the emoji ends with the last spoken word
