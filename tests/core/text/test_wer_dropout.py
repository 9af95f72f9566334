"""core.wer.dropout: whole phrases not heard, as opposed to scattered word errors."""

from __future__ import annotations

from voicepipe.core.text.wer import dropout, unmatched_runs


def test_a_missing_sentence_counts_scattered_errors_do_not() -> None:
    ref = "The tower opened in 1889. It was built for the fair in Paris. Today it is famous."
    hyp = "The tower opened in 1889. Today it is famous."
    words = 22  # after normalize: "1889" is "one thousand eight hundred eighty nine"
    assert dropout(ref, hyp) == 8 / words
    garbled = "The tower opens in 1889. It was build for a fair in Paris. Today it's famous."
    assert dropout(ref, garbled) == 0.0
    assert dropout(ref, ref) == 0.0
    assert dropout(ref, "") == 1.0


def test_substituted_runs_count_as_lost_and_min_run_is_respected() -> None:
    ref = "one two three four five six seven"
    assert unmatched_runs(ref.split(), "one a b c d e seven".split()) == [5]
    assert dropout(ref, "one a b c d e seven") == 5 / 7
    # "two three four" lost (an inserted word does not lengthen the run)
    assert unmatched_runs(ref.split(), "one a b c d five six seven".split()) == [3]
    assert dropout(ref, "one a b c d five six seven") == 0.0
    assert dropout(ref, "one a b c d five six seven", min_run=3) == 3 / 7
