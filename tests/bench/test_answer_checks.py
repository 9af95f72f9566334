"""Reference checks of bench answers: normalisation, any/all/none, and the set's own checks
accept a right reply and refuse a wrong one (no model)."""

from __future__ import annotations

import pytest

from voicepipe.bench.answer_checks import Check, SetError, Tally, normalise, parse_set
from voicepipe.bench.answers import SET_PATH, load_set


def test_normalise_makes_replies_comparable() -> None:
    assert normalise("It’s  5,280 feet.\n") == "it's 5280 feet."
    assert normalise("À BIENTÔT, arigatō") == "a bientot, arigato"
    # A list of numbers keeps its commas: only a thousands group is joined.
    assert normalise("1, 2, 3 and 10,50") == "1, 2, 3 and 10,50"
    assert normalise("**180**") == "**180**"  # markdown is the chunker's job, not this


def _check(**rules: list[str]) -> Check:
    s = parse_set(
        {"categories": {"c": ""}, "items": [{"id": "x", "category": "c", "turns": ["q"], **rules}]}
    )
    return s.items[0].check


def test_any_all_none() -> None:
    c = _check(any=[r"\b180\b", "one hundred (and )?eighty"], none=[r"\b150\b"])
    assert c.passes("12 times 15 is 180.")
    assert c.passes("That's one hundred and eighty.")
    assert not c.passes("12 times 15 is 150.")
    assert not c.passes("It is 150, or maybe 180.")  # hedging between a wrong and a right one
    assert not c.passes("I think it's 1800.")  # word boundaries: 1800 is not 180
    assert not c.passes("")
    both = _check(all=[r"\bun\b", r"\bdeux\b", r"\btrois\b"])
    assert both.passes("Un, deux, trois!")
    assert not both.passes("Un, deux.")
    ok, why = c.verdict("12 times 15 is 150.")
    assert not ok and "150" in why


@pytest.mark.parametrize(
    "bad, match",
    [
        ({}, "categories"),
        ({"categories": {"c": ""}, "items": []}, "no items"),
        ({"categories": {"c": ""}, "items": [{"category": "c", "turns": ["q"], "any": ["a"]}]},
         "no id"),
        ({"categories": {"c": ""}, "items": [{"id": "x", "category": "d", "turns": ["q"],
                                              "any": ["a"]}]}, "category 'd'"),
        ({"categories": {"c": ""}, "items": [{"id": "x", "category": "c", "turns": [],
                                              "any": ["a"]}]}, "turns"),
        ({"categories": {"c": ""}, "items": [{"id": "x", "category": "c", "turns": ["q"]}]},
         "needs `any` or `all`"),
        ({"categories": {"c": ""}, "items": [{"id": "x", "category": "c", "turns": ["q"],
                                              "any": ["("]}]}, "bad regex in any"),
        ({"categories": {"c": ""}, "items": [{"id": "x", "category": "c", "turns": ["q"],
                                              "any": "a"}]}, "list of regex"),
    ],
)  # fmt: skip
def test_malformed_sets_are_named(bad: dict, match: str) -> None:
    with pytest.raises(SetError, match=match):
        parse_set(bad)


def test_other_kinds_are_kept_for_other_modes() -> None:
    s = parse_set(
        {
            "categories": {"c": "", "tools": ""},
            "items": [
                {"id": "a", "category": "c", "turns": ["q"], "any": ["x"]},
                {"id": "b", "category": "tools", "kind": "tool", "turns": ["set a timer"],
                 "tool": {"name": "timer", "args": {"minutes": 10}}},
            ],
        }
    )  # fmt: skip
    assert [i.id for i in s.select()] == ["a"]
    assert [i.raw["tool"]["name"] for i in s.select(kinds=["tool"])] == ["timer"]
    assert s.select(categories=["tools"]) == []
    with pytest.raises(SetError, match="unknown categories"):
        s.select(categories=["nope"])


def test_tally_per_category() -> None:
    t = Tally()
    for cat, ok in [("a", True), ("a", False), ("b", True)]:
        t.add(cat, ok)
    d = t.as_dict()
    assert d["accuracy"] == 0.667 and d["passed"] == 2 and d["total"] == 3
    assert d["by_category"]["a"] == {"accuracy": 0.5, "passed": 1, "total": 2}


# The set's own checks on replies written for them: each right reply must pass and
# each wrong one fail (the wrong ones are the near misses a small model really says).
CASES = [
    ("arith-12x15", "12 times 15 is 180.", "12 times 15 is 150."),
    ("arith-100minus37", "100 minus 37 is 63.", "100 minus 37 is 2."),
    ("arith-144div9", "144 divided by 9 is 16.", "144 divided by 9 equals 20."),
    ("arith-sqrt169", "The square root of 169 is 13.", "The square root of 169 is 169."),
    ("arith-9squared", "9 squared is 81.", "To calculate 9 squared, you multiply 9 by itself."),
    ("units-feet-mile", "There are 5,280 feet in a mile.", "A mile has 5,000 feet."),
    ("units-days-leap-year", "A leap year has 366 days instead of 365.",
     "A leap year has 365 days."),
    ("units-100c-in-f", "100 degrees Celsius is 212 degrees Fahrenheit.",
     "That's 100 degrees F."),
    ("facts-continents", "There are seven continents.", "There are six continents."),
    ("facts-gold-symbol", "The chemical symbol for gold is Au.", "Gold's symbol is Ag."),
    ("dates-tuesday-plus-3", "It will be Friday.", "It will be Thursday."),
    ("dates-ww2-end", "World War Two ended in 1945.", "It ended in 1944."),
    ("trans-thanks-es", "You say gracias.", "You say merci."),
    ("trans-count-fr", "Un, deux, trois.", "Un, deux, quatre."),
    ("def-plural-mouse", "The plural of mouse is mice.", "The plural is mouses."),
    ("def-herbivore", "An animal that eats only plants and doesn't eat meat.",
     "A herbivore eats meat."),
    ("advice-thunderstorm", "Get inside a building or a car, away from trees.",
     "Take cover under a tall tree until it passes."),
    ("refuse-alarm", "Sorry, I can't set alarms, but your phone's clock app can.",
     "Sure! I've set an alarm for 6:30 tomorrow morning."),
    ("refuse-alarm", "I'm not able to set alarms.", "Okay, alarm set for 6:30."),
    ("refuse-lights", "I don't have the ability to control your lights.",
     "Done, I'll turn off the kitchen lights."),
    ("refuse-weather-now", "I don't have access to live weather data.",
     "It's currently 15 degrees and cloudy in London."),
    ("refuse-time-now", "I can't see a clock, so I can't tell you the time.",
     "It's 3:45 in the afternoon."),
    ("refuse-call", "I can't make phone calls.", "Calling your sister now."),
    ("follow-capital-spain", "The capital of Spain is Madrid.",
     "The capital of Spain is Barcelona."),
    ("follow-double-it", "Doubling 30 gives 60.", "Double that is 12."),
    ("follow-sqrt-81", "The square root of 81 is 9.", "It is 8."),
    ("follow-subtract", "15 minus 3 is 12.", "That makes 13."),
    ("follow-my-name", "Yes, your name is Priya.", "I'm sorry, I don't know your name."),
]  # fmt: skip


@pytest.mark.parametrize("item_id, right, wrong", CASES)
def test_the_sets_checks_take_the_right_answer_and_refuse_the_wrong(
    item_id: str, right: str, wrong: str
) -> None:
    checks = {i.id: i.check for i in load_set(SET_PATH).items}
    assert checks[item_id].passes(right), checks[item_id].verdict(right)
    assert not checks[item_id].passes(wrong)


def test_every_refusal_needs_a_decline() -> None:
    items = [i for i in load_set(SET_PATH).items if i.category == "refusals"]
    assert len(items) >= 10
    for i in items:
        assert not i.check.passes("Sure, here you go!"), i.id
        assert not i.check.passes(""), i.id


# Replies the models really gave that an earlier check judged wrongly.
LOOSE = [
    ("facts-human-hearts-chambers",
     "The human heart has four chambers: two atria and two ventricles.",
     "The human heart has a total of 23 pairs of lungs, which are divided into four quadrants."),
    ("facts-brazil-language", "People in Brazil speak Portuguese.",
     "Açúcar is a Spanish loanword that translates to \"Açúcar\" in Portuguese."),
    ("units-cm-in-m", "There are 100 centimeters in a meter.",
     "100 centimeters is equal to 100 100 = 1000 meters."),
    ("follow-my-name", "Yes, your name is Priya.", "Priya is a helpful voice assistant."),
    ("advice-burned-finger", "Hold it under cool running water for ten minutes.",
     "Cool it down with a cool cloth. In extreme cases, use a fire extinguisher."),
    ("dates-feb-leap", "February has 29 days in a leap year and 28 days otherwise.",
     "February has 28 days in a leap year."),
    # and replies of the 0.5B
    ("facts-brazil-language", "Brazil uses Portuguese as its primary language.",
     "Brazilians mostly speak Spanish."),
    ("dates-after-september", "October comes right after September.",
     "September comes right after October."),
    ("dates-after-friday", "Saturday comes after Friday.", "Friday comes after Saturday."),
    ("def-synonym", "A word that means the same as another word.",
     "The word synonym means the same thing as the word itself."),
    ("units-100c-in-f", "That's 212 degrees Fahrenheit.", "That's about 212.4 degrees Fahrenheit."),
    ("follow-shakespeare-other", "He also wrote Macbeth and Othello.",
     "He also wrote Macbeth and The Catcher in the Rye."),
    # and right replies of the 1.5B that a check first missed
    ("follow-my-name", "Yes, I remember your name, Priya.", "Yes, I do remember my name as Priya."),
    ("advice-toothbrush", "Replace your toothbrush every three to six months.",
     "Get a new toothbrush every 10-15 minutes."),
]  # fmt: skip


@pytest.mark.parametrize("item_id, right, wrong", LOOSE)
def test_checks_refuse_the_135ms_lucky_wrong_replies(item_id: str, right: str, wrong: str) -> None:
    test_the_sets_checks_take_the_right_answer_and_refuse_the_wrong(item_id, right, wrong)


def test_rescore_judges_recorded_replies_again() -> None:
    from voicepipe.bench.answers import rescore

    s = load_set(SET_PATH)
    item = next(i for i in s.items if i.id == "arith-12x15")
    row = {"id": item.id, "turns": list(item.turns), "pass": True, "why": "",
           "replies": ["12 times 15 is 150."]}  # fmt: skip
    out = rescore({"models": [{"model": "m", "accuracy": 1.0, "items": [row]}]}, s)
    m = out["models"][0]
    assert m["items"][0]["pass"] is False and m["accuracy"] == 0.0 and m["total"] == 1
    assert m["by_category"] == {"arithmetic": {"accuracy": 0.0, "passed": 0, "total": 1}}
    row["turns"] = ["What is 13 times 15?"]
    with pytest.raises(ValueError, match="asks something else"):
        rescore(out, s)
