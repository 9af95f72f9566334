"""The draft-data prompts: tens of thousands, distinct, and never a benchmark's prompt."""

from __future__ import annotations

from voicepipe.training.draft_data_prompts import benchmark_prompts, data_prompts, overlaps
from voicepipe.training.draft_prompts import OPEN_PROMPTS, norm, train_prompts


def test_no_data_prompt_is_or_contains_a_benchmark_prompt() -> None:
    prompts = data_prompts()
    sets = benchmark_prompts()
    assert all(len(v) >= 4 for v in sets.values()), {k: len(v) for k, v in sets.items()}
    for name, bench in sets.items():
        keys = {norm(p) for p in bench}
        assert not [p for p in prompts if norm(p) in keys], name
        assert not overlaps(prompts, bench), name
    # The matcher finds a benchmark question behind an opener and a closer, in other case.
    q = OPEN_PROMPTS[0]
    assert overlaps([f"Hey, {q.upper()} Thanks!"], [q])


def test_the_data_prompts_are_many_distinct_and_a_stable_prefix() -> None:
    prompts = data_prompts()
    assert len(prompts) >= 20000
    assert len({norm(p) for p in prompts}) == len(prompts)
    assert data_prompts(500) == prompts[:500]
    # The fourth series is most of them, and any prefix mixes it with the older three.
    old = {norm(p) for p in train_prompts(12000)}
    head = prompts[:1000]
    assert 150 < sum(norm(p) in old for p in head) < 500


def test_the_open_set_is_large_and_written_apart_from_all_training_prompts() -> None:
    assert len(OPEN_PROMPTS) >= 40
    assert len({norm(p) for p in OPEN_PROMPTS}) == len(OPEN_PROMPTS)
    for prompts in (train_prompts(12000), data_prompts()):
        assert not overlaps(prompts, OPEN_PROMPTS)
