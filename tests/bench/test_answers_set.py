"""The answers question set: well formed, and never in a training or distillation prompt."""

from __future__ import annotations

from voicepipe.bench.answer_checks import REPLY
from voicepipe.bench.answers import SET_PATH, load_set
from voicepipe.training.draft_prompts import OPEN_PROMPTS, heldout_prompts, norm, train_prompts

CATEGORIES = {
    "facts", "arithmetic", "units", "dates", "translation", "definitions", "advice",
    "refusals", "followups",
}  # fmt: skip


def _prompt_lists() -> dict[str, list[str]]:
    """Every prompt list the project trains, distils or tunes its drafting on."""
    from voicepipe.bench.llm import PROMPTS
    from voicepipe.training.corpus import sentences

    train, held = sentences()  # the TTS corpus: spoken text the project trains on
    return {
        # 12,000 asks for more than the three series hold: the whole list (the draft's
        # distillation data and its reply store answer a prefix of it).
        "train_prompts": train_prompts(12000),
        "heldout_prompts": heldout_prompts(),
        "OPEN_PROMPTS": OPEN_PROMPTS,
        "bench llm PROMPTS": [p for ps in PROMPTS.values() for p in ps],
        "tts corpus": train + held,
    }


def test_the_set_is_large_and_covers_its_categories() -> None:
    s = load_set(SET_PATH)
    items = s.select()
    assert len(items) >= 100
    assert set(s.categories) >= CATEGORIES
    for cat in CATEGORIES:
        assert sum(i.category == cat for i in items) >= 10, cat
    follow = [i for i in items if i.category == "followups"]
    assert follow and all(len(i.turns) == 2 for i in follow)
    assert all(i.kind == REPLY for i in items)
    # Every question is a different question.
    keys = [norm(" / ".join(i.turns)) for i in items]
    assert len(set(keys)) == len(keys)


def test_no_question_is_in_any_training_or_distillation_prompt_list() -> None:
    turns = [t for i in load_set(SET_PATH).items for t in i.turns]
    for name, prompts in _prompt_lists().items():
        keys = {norm(p) for p in prompts}
        assert len(keys) > 1, name
        same = [t for t in turns if norm(t) in keys]
        assert not same, f"in {name}: {same}"
        # Nor inside a longer prompt (a question with a preamble is the same question).
        long = [norm(t) for t in turns if len(norm(t).split()) >= 4]
        inside = [t for t in long for k in keys if f" {t} " in f" {k} "]
        assert not inside, f"inside {name}: {inside[:5]}"


def test_the_tool_items_ask_each_builtin_ten_ways_at_least() -> None:
    # `bench answers --tools`: ≥ 10 phrasings per tool, each a different request, each
    # naming a built-in and (where it takes any) the arguments a right call gives. The
    # training-prompt check above covers these turns too (it reads every item's kind).
    from voicepipe.tools import BUILTINS

    items = load_set(SET_PATH).select(kinds=("tool",))
    by_tool: dict[str, list[str]] = {}
    for i in items:
        assert i.category == "tools" and len(i.turns) == 1, i.id
        assert i.raw["tool"] in BUILTINS, i.id
        by_tool.setdefault(i.raw["tool"], []).append(norm(i.turns[0]))
    assert set(by_tool) == {"set_timer", "get_current_time", "calculate"}
    for name, asks in by_tool.items():
        assert len(asks) >= 10 and len(set(asks)) == len(asks), name
    assert {i.raw.get("seconds") for i in items if i.raw["tool"] == "set_timer"} == {600}
    assert {i.raw.get("value") for i in items if i.raw["tool"] == "calculate"} == {391}
    # None of them is a reply item's question either.
    replies = {norm(t) for i in load_set(SET_PATH).select() for t in i.turns}
    assert not [a for asks in by_tool.values() for a in asks if a in replies]
