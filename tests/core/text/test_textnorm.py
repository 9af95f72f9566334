"""TTS text front-end: what LLMs write → words both TTS backends can say."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from voicepipe.core.text.norm import PUNCT, normalize, normalize_spans
from voicepipe.core.text.numwords import cardinal, decimal, ordinal, year

EXAMPLES = [
    # numbers
    (
        "It is 384,400 km away.",
        "It is three hundred eighty-four thousand four hundred kilometers away.",
    ),
    (
        "2,157,927 people",
        "two million one hundred fifty-seven thousand nine hundred twenty-seven people",
    ),
    ("Pi is 3.14.", "Pi is three point one four."),
    ("It fell to -12 overnight", "It fell to minus twelve overnight"),
    ("0.5 and .5 and 007", "zero point five and point five and zero zero seven"),
    ("the 1st, 22nd, 3rd and 101st", "the first, twenty-second, third and one hundred first"),
    ("In 1969 they landed.", "In nineteen sixty-nine they landed."),
    (
        "by 2024, not 2005 or 1900",
        "by twenty twenty-four, not two thousand five or nineteen hundred",
    ),
    ("the 1990s and '80s", "the nineteen nineties and eighties"),
    ("Python 3.11.2", "Python three point eleven point two"),
    ("pages 10-20", "pages ten to twenty"),
    ("1/2 cup, 3/4 done, 24/7", "one half cup, three quarters done, twenty-four seven"),
    ("Call 555-123-4567 now.", "Call five five five, one two three, four five six seven, now."),
    ("10x faster", "ten times faster"),
    # times and dates
    ("At 10:30 am and 14:05.", "At ten thirty AM and fourteen oh five."),
    ("Meet at 3pm. Then eat.", "Meet at three PM. Then eat."),
    ("Open at 9:00 a.m. sharp", "Open at nine AM sharp"),
    ("Open 9.30 am to 5 pm.", "Open nine thirty AM to five PM."),
    ("It ends at 10:00.", "It ends at ten o'clock."),
    ("On March 3, 2024.", "On March third, twenty twenty-four."),
    ("Due 2024-03-03", "Due March third, twenty twenty-four"),
    ("Due 12/25/2023", "Due December twenty-fifth, twenty twenty-three"),
    ("On 5 May 2021.", "On the fifth of May, twenty twenty-one."),
    ("on the 3rd of March", "on the third of March"),
    ("Jan. 5", "January fifth"),
    # money, percentages, units
    ("$5 or $1", "five dollars or one dollar"),
    ("$3.50", "three dollars and fifty cents"),
    ("$0.99", "ninety-nine cents"),
    ("€20 and £1,000", "twenty euros and one thousand pounds"),
    ("$1.5 million, $5k", "one point five million dollars, five thousand dollars"),
    ("1.5M users, 10k steps", "one point five million users, ten thousand steps"),
    ("50% off, 3.5 % up", "fifty percent off, three point five percent up"),
    ("5 km, 10 kg, 1 kg", "five kilometers, ten kilograms, one kilogram"),
    ("25°C or -3°F", "twenty-five degrees Celsius or minus three degrees Fahrenheit"),
    ("60 mph is 100 km/h", "sixty miles per hour is one hundred kilometers per hour"),
    ("5-10 km", "five to ten kilometers"),
    # abbreviations
    ("Dr. Smith vs. Mr. Jones", "Doctor Smith versus Mister Jones"),
    ("fruit, e.g. apples, i.e. food", "fruit, for example apples, that is food"),
    ("apples, pears, etc. Then more.", "apples, pears, et cetera. Then more."),
    ("apples, pears, etc.", "apples, pears, et cetera."),
    ("St. Louis on Main St.", "Saint Louis on Main Street."),
    ("No. 5 and #1", "number five and number one"),
    # lists, markdown, quotes and brackets
    ("1. You've been great.", "First, You've been great."),
    ("2) Mix the flour.", "Second, Mix the flour."),
    ("- Dash item", "Dash item"),
    ("• bullet item", "bullet item"),
    ("Steps:\n1. Boil\n2. Serve", "Steps: First, Boil. Second, Serve"),
    ("**Bold** and _it_ `code`", "Bold and it code"),
    ("## Header\nText", "Header. Text"),
    ("Three tips: 1. Sleep well.", "Three tips: First, Sleep well."),
    ("3.", "Third,"),  # a marker the chunker cut off on its own
    ('Read "Romeo and Juliet" today.', "Read Romeo and Juliet today."),
    ("It’s “quoted” and ‘single’", "It's quoted and single"),
    ("The play (written in 1597) is long.", "The play, written in fifteen ninety-seven, is long."),
    ("It ends (roughly).", "It ends, roughly."),
    ("one file(s) [sic]", "one file s, sic"),
    ("2 cups (250 g) of flour", "two cups, two hundred fifty grams, of flour"),
    ("1 tbsp, 7M people/year", "one tablespoon, seven million people per year"),
    ("[the docs](https://x.org/a) say", "the docs say"),
    # symbols, URLs, emoji
    ("Rock & roll", "Rock and roll"),
    ("2 + 2 = 4", "two plus two equals four"),
    ("3 × 4", "three times four"),
    ("C++ and R&D", "C plus plus and R and D"),
    ("A/B testing, and/or", "A B testing, and or"),
    ("It — really — works", "It, really, works"),
    ("Wait... what?", "Wait, what?"),
    ("x < 5 and y > 2", "x less than five and y greater than two"),
    ("about ~3 hrs", "about about three hours"),
    ("see https://www.example.com/foo?q=1.", "see example dot com."),
    ("visit openai.com today", "visit openai dot com today"),
    ("mail me@x.org", "mail me at x dot org"),
    ("Great job 😀 👍!", "Great job!"),
    ("GPT4 and COVID-19 in 3D", "GPT four and COVID nineteen in three D"),
    ("well-known", "well-known"),
    ("a 3-year-old", "a three year-old"),
    ("keycap 1️⃣ done", "keycap one done"),
    ("x^2 + y²", "x to the power of two plus y squared"),
]


@pytest.mark.parametrize(("text", "spoken"), EXAMPLES)
def test_examples(text: str, spoken: str) -> None:
    assert normalize(text) == spoken


def test_number_words() -> None:
    assert cardinal(0) == "zero"
    assert cardinal(115) == "one hundred fifteen"
    assert cardinal(1_000_001) == "one million one"
    assert cardinal(-40) == "minus forty"
    assert (
        ordinal(12) == "twelfth"
        and ordinal(20) == "twentieth"
        and ordinal(1000) == "one thousandth"
    )
    assert year(1905) == "nineteen oh five" and year(2010) == "twenty ten"
    assert year(1066) == "ten sixty-six" and year(2000) == "two thousand"
    assert decimal("1,234.50") == "one thousand two hundred thirty-four point five zero"
    assert cardinal(10**30) == "one " + " ".join(["zero"] * 30)  # an ID, read digit by digit


def test_plain_prose_is_left_alone() -> None:
    text = "Sure! The capital of France is Paris: it sits on the Seine, doesn't it?"
    assert normalize(text) == text
    assert normalize("Paris; it sits") == "Paris, it sits"


def test_spans_point_back_at_the_original() -> None:
    text = 'In 1969, "Apollo 11" landed 😀.'
    n = normalize_spans(text)
    assert n.text == "In nineteen sixty-nine, Apollo eleven landed."
    i = n.text.index("sixty")
    assert text[slice(*n.source_span(i, i + 5))] == "1969"
    j = n.text.index("eleven")
    assert text[slice(*n.source_span(j, j + 6))] == "11"
    assert n.source_span(0, len(n.text)) == (0, len(text))


def test_word_weights_count_spoken_words_per_original_word() -> None:
    n = normalize_spans("In 1969 we 😀 won.")
    assert n.word_weights() == [1, 3, 1, 0, 1]  # "nineteen sixty-nine"; the emoji says nothing
    dated = normalize_spans("On March 3, 2024 exactly").word_weights()
    assert len(dated) == 5 and dated[0] == 1 and dated[4] == 1
    assert sum(dated[1:4]) == 5  # March third, twenty twenty-four: one rule, three words
    assert normalize_spans("Plain words, nothing else.").word_weights() == [1, 1, 1, 1]


def test_empty_and_unspeakable() -> None:
    assert normalize("") == ""
    assert normalize("  😀 👍 ") == ""
    assert normalize("...") == ""
    assert normalize_spans("").word_weights() == []


# -- properties ---------------------------------------------------------------------------
def _speakable(c: str) -> bool:
    return c.isalpha() or c in PUNCT or c in " '-" or unicodedata.category(c).startswith("M")


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=80))
def test_any_text_gives_speakable_characters_and_consistent_spans(text: str) -> None:
    n = normalize_spans(text)
    assert all(_speakable(c) for c in n.text), n.text
    assert not any(c.isdigit() for c in n.text) and ";" not in n.text
    assert n.text == n.text.strip() and "  " not in n.text
    assert len(n.spans) == len(n.text)
    assert all(0 <= a <= b <= len(text) for a, b in n.spans)
    weights = n.word_weights()
    assert len(weights) == len(text.split())
    assert sum(weights) == len(re.findall(r"[^\s.,!?;:-]+", n.text))


_TOKENS = st.sampled_from(
    "the cat Paris I'm don't well-known Dr. Smith e.g. etc. vs 1 7 12 42 1969 2024 3.14 "
    "2,157,927 1st 22nd $5 $3.50 €20 £1,000 50% 5 km 25°C 60 mph 10:30 am 14:05 "
    "March 3, 2024-03-03 1. 2) - * • & + = / × ( ) [ ] \" “ ” ' , . ! ? ; : — … 😀 "
    "https://example.com me@x.org 1990s 1/2 10-20 #1 **bold** GPT4".split(" ")
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_TOKENS, max_size=14))
def test_normalizing_twice_changes_nothing_on_llm_like_text(tokens: list[str]) -> None:
    once = normalize(" ".join(tokens))
    assert normalize(once) == once
