"""train draft-questions: every topic asked in every style, outputs cleaned to one usable
question, and a file's questions loaded once each and never a benchmark's."""

from __future__ import annotations

import json

from voicepipe.training.draft_data_prompts import benchmark_prompts, file_prompts
from voicepipe.training.draft_questions import clean, done_keys, instructions
from voicepipe.training.draft_topics import ASKERS, STYLES, topics


def test_every_topic_is_asked_once_in_every_style() -> None:
    got = instructions()
    ts = topics()
    assert len(ts) == len({t.lower() for t in ts}) > 300
    n1 = len(ts) * len(STYLES)
    assert len(got) == len({k for k, _ in got}) == n1 * (1 + len(ASKERS))
    # The first round asks each topic once, and already in every style.
    first = got[: len(ts)]
    assert {k.split("|")[0] for k, _ in first} == set(ts)
    assert {k.split("|")[1] for k, _ in first} == set(STYLES)
    key, text = got[0]
    topic, style = key.split("|")
    assert f"{style} {topic}," in text and text.endswith("Reply with the question only.")
    # The second pass: every topic in every (style, asker) pair, its first round all topics.
    second = got[n1:]
    assert all(len(k.split("|")) == 3 for k, _ in second)
    for t in (ts[0], ts[-1]):
        pairs = {tuple(k.split("|")[1:]) for k, _ in second if k.split("|")[0] == t}
        assert pairs == {(s, a) for s in STYLES for a in ASKERS}
    assert {k.split("|")[0] for k, _ in second[: len(ts)]} == set(ts)
    key, text = second[0]
    topic, style, asker = key.split("|")
    assert f"{style} {topic}, asked by someone {asker}, as a person" in text


def test_clean_keeps_one_question_or_request() -> None:
    assert clean('"Why do cats purr?"') == "Why do cats purr?"
    assert clean("Question: How do I descale a kettle?\nOr maybe...") == (
        "How do I descale a kettle?"
    )
    assert clean("1. Can parrots talk?") == "Can parrots talk?"
    assert clean("I'm having trouble connecting to the internet.") == (
        "I'm having trouble connecting to the internet."
    )
    assert clean("Hey, I've tried everything, but my basil keeps wilting. Any advice?") != ""
    # Nothing usable: too short, unfinished, or about the assistant rather than the topic.
    assert clean("Frogs?") == ""
    assert clean("What do frogs eat and") == ""
    assert clean("Can the voice assistant tell me about parrots?") == ""
    assert clean("Hey AI, what's up with those crows?") == ""
    assert clean("") == ""


def test_load_drops_empties_duplicates_and_benchmark_prompts(tmp_path) -> None:
    bench = next(iter(benchmark_prompts()["bench draft --prompts open"]))
    rows = [
        {"key": "a|s", "question": "Why do onions grow in layers?"},
        {"key": "b|s", "question": ""},
        {"key": "c|s", "question": "why do onions grow in layers"},  # the same, normalised
        {"key": "d|s", "question": bench},
        {"key": "e|s", "question": f"Quick one: {bench}"},  # holds a benchmark's prompt
        {"key": "f|s", "question": "How long do tortoises live?"},
    ]
    path = tmp_path / "questions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert file_prompts(path) == ["Why do onions grow in layers?", "How long do tortoises live?"]
    assert done_keys(path) == {r["key"] for r in rows}  # tried, usable or not
    assert done_keys(tmp_path / "none.jsonl") == set()


def test_the_committed_shard_answers_no_benchmark_prompt() -> None:
    """Whatever wrote its prompts (the series or this command), no reply the draft trains
    on answers a benchmark's prompt."""
    import numpy as np

    from voicepipe.training.draft_data_prompts import overlaps
    from voicepipe.training.draft_shard import default_dir

    shard = default_dir("qwen2.5-coder-1.5b")
    asked = [str(q) for f in sorted(shard.glob("part_*.npz")) for q in np.load(f)["question"]]
    assert len(asked) > 15000
    assert len(file_prompts(shard / "questions.jsonl")) > 2000
    for name, bench in benchmark_prompts().items():
        assert not overlaps(asked, bench), name
