"""Whether the user's words ask for what a built-in tool does (``[tools] grounded``).

With tools shown, the 1.5B default sometimes calls one nobody asked for: a
calculation for a history question ("When did the Second World War end?" →
``calculate`` → "The result of the calculation is 6."), timers inside first-aid
advice, the clock for a weekday puzzle (docs/BENCHMARKS.md, "the default's
answers as served"). Each built-in only makes sense when the user's own words
carry what it works on: numbers to calculate with, a duration or a timer to
set, a question about the time or the date. A call whose turn holds none of
that is not run; the model is told why and answers in words instead.

Deliberately loose: a word such as "one" or "day" is enough to let a call
through, because refusing a real request (a timer nobody gets) costs more than
letting a needless call run (what happens without this rule). Sans-I/O: the
LLM stage's tool shell (voicepipe/stages/llm_tools.py) applies it to built-in
tools only; a user's or a client's tools are theirs to judge.
"""

from __future__ import annotations

import re

from voicepipe.core.numwords import ONES, TENS

_WORDS = [*ONES[1:], *TENS[2:], "hundred", "thousand", "million", "billion", "half"]
_WORDS += ["quarter", "dozen", "twice", "double", "triple", "squared", "cubed"]
# A number the user said: digits, or a cardinal (not "second", "first": ordinals).
NUMBER = re.compile(r"\d|\b(?:" + "|".join(_WORDS) + r")s?\b", re.IGNORECASE)
# A timer or a duration.
DURATION = re.compile(
    r"\b(?:timers?|countdown|count down|alarm|seconds?|secs?|minutes?|mins?|hours?|hrs?)\b",
    re.IGNORECASE,
)
_DAYS = "monday tuesday wednesday thursday friday saturday sunday"
_MONTHS = "january february march april may june july august september october november december"
# The time or the date.
CLOCK = re.compile(
    r"\b(?:time|clock|o'?clock|date|day|days|today|tonight|tomorrow|yesterday|week|"
    r"weekend|month|year|now|morning|afternoon|evening|noon|midnight|"
    + "|".join((_DAYS + " " + _MONTHS).split())
    + r")\b",
    re.IGNORECASE,
)

# Per built-in: what the user's words must hold, and what the model is told otherwise.
RULES: dict[str, tuple[re.Pattern[str], str]] = {
    "calculate": (NUMBER, "the user gave no numbers to calculate with"),
    "set_timer": (DURATION, "the user asked for no timer and named no duration"),
    "get_current_time": (CLOCK, "the user asked nothing about the time or the date"),
}


def ungrounded(name: str, user_text: str) -> str | None:
    """Why a call of built-in ``name`` should not run for a turn whose words are
    ``user_text`` (the model reads it as the call's result), or None: run it. A tool
    without a rule, or a turn without words (a reply an API client asked for), runs."""
    rule = RULES.get(name)
    if rule is None or not user_text.strip():
        return None
    pattern, why = rule
    if pattern.search(user_text):
        return None
    return f"not run: {why}. Answer the user in words, without tools."
