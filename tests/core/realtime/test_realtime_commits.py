"""CommitTracker: manual commits made of the ASR's turns, whatever order finals and
markers arrive in."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from voicepipe.core.realtime.commits import CommitTracker


def test_finals_before_the_marker_and_after() -> None:
    c = CommitTracker()
    c.heard(1)
    assert c.final(1, "hello") == []  # the commit has not reached the ASR yet
    c.heard(2)
    c.commit("item_a")
    assert c.reached("item_a") == []  # turn 2 has no final yet
    assert c.final(2, "there") == [("item_a", "hello there")]


def test_empty_and_dropped_turns_and_a_commit_of_silence() -> None:
    c = CommitTracker()
    c.commit("item_a")
    assert c.reached("item_a") == [("item_a", "")]  # no speech at all: an empty item
    c.heard(3)
    c.heard(4)
    c.commit("item_b")
    assert c.reached("item_b") == []
    assert c.final(3, "") == []  # dropped: too short
    assert c.final(4, "yes") == [("item_b", "yes")]


def test_items_complete_in_commit_order() -> None:
    c = CommitTracker()
    c.heard(1)
    c.commit("a")
    assert c.reached("a") == []
    c.heard(2)
    c.commit("b")
    assert c.reached("b") == []
    assert c.final(2, "second") == []  # b waits for a
    assert c.final(1, "first") == [("a", "first"), ("b", "second")]


def test_clear_forgets_the_turns_heard_since_the_last_commit() -> None:
    c = CommitTracker()
    c.heard(1)
    c.clear()
    c.heard(2)
    c.commit("a")
    assert c.reached("a") == []
    assert c.final(1, "gone") == []
    assert c.final(2, "kept") == [("a", "kept")]


@given(st.permutations(range(6)), st.lists(st.booleans(), min_size=6, max_size=6))
def test_any_order_of_finals_gives_each_item_its_own_turns(
    order: list[int], empty: list[bool]
) -> None:
    # turns 0-2 belong to commit a, 3-5 to commit b; finals arrive in any order
    c = CommitTracker()
    for t in range(3):
        c.heard(t)
    c.commit("a")
    done = c.reached("a")
    for t in range(3, 6):
        c.heard(t)
    c.commit("b")
    done += c.reached("b")
    for t in order:
        done += c.final(t, "" if empty[t] else f"w{t}")
    words = {i: " ".join(f"w{t}" for t in r if not empty[t]) for i, r in
             (("a", range(3)), ("b", range(3, 6)))}  # fmt: skip
    assert done == [("a", words["a"]), ("b", words["b"])]
