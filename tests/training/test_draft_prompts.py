from voicepipe.training.draft_prompts import (
    FIRST_SERIES,
    OPEN_PROMPTS,
    SECOND_SERIES,
    heldout_prompts,
    norm,
    train_prompts,
)


def test_the_list_continues_past_the_first_series_without_moving_its_prompts() -> None:
    short = train_prompts(FIRST_SERIES - 1)
    long = train_prompts(FIRST_SERIES + 500)
    assert len(long) == FIRST_SERIES + 500
    # Existing data shards index this list: the first series must not move.
    assert long[: len(short)] == short
    keys = [norm(p) for p in long]
    assert len(set(keys)) == len(keys)
    assert not set(keys) & {norm(p) for p in heldout_prompts()}
    # Deterministic: the data's shards are labelled by position in this list.
    assert train_prompts(FIRST_SERIES + 500) == long
    assert len(train_prompts(FIRST_SERIES)) == FIRST_SERIES
    # The third series starts where the second saturates, leaving both in place.
    both = FIRST_SERIES + SECOND_SERIES
    three = train_prompts(both + 300)
    assert len(three) == both + 300 and three[: len(long)] == long
    assert len({norm(p) for p in three}) == len(three)


def test_the_answered_prompts_are_pinned() -> None:
    import hashlib

    # gen shards 0-250 hold the replies to exactly this list (prompt i in shard i // 32):
    # an edit to a template or slot list that moves it would mislabel the data.
    text = "\n".join(train_prompts(8022))
    assert hashlib.sha256(text.encode()).hexdigest() == (
        "b7415b98190d6542b8932cdc67147e03af29d47e16adf2cb9fa3822e5d5b9811"
    )


def test_the_open_prompts_are_none_of_the_training_or_held_out_ones() -> None:
    # Every answer the draft or its reply store learnt from is to a train_prompts prompt
    # (the data so far: the first ~8,000); the open set measures drafting beyond them.
    seen = {norm(p) for p in train_prompts(9000)} | {norm(p) for p in heldout_prompts()}
    keys = [norm(p) for p in OPEN_PROMPTS]
    assert len(set(keys)) == len(keys) == 46
    assert not set(keys) & seen
