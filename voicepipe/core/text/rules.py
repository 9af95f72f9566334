"""The rewrite rules of the TTS text front-end (core/text/norm.py), in priority order.

Each rule is a regex tried at a word start of the *original* text and a
handler that returns the spoken words for the match, or None to let later
rules try. Outputs are final (never rescanned), so a rule's words can't be
re-read by another rule. Word tables live in core/text/tables.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import partial

from voicepipe.core.text.numwords import TENS, cardinal, digits, number, ordinal, plural, year
from voicepipe.core.text.tables import (
    ABBREV,
    ABBREV_STOP,
    CURRENCY,
    FRACTIONS,
    FULL_MONTHS,
    MONTH_OF,
    PER,
    SCALE,
    SYMBOLS,
    TITLES,
    TLDS,
    UNITS,
)

Handler = Callable[[re.Match[str]], "str | None"]
Normalize = Callable[[str], str]  # the front-end itself (norm.normalize), for nested text

NUM = r"(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
SIGN = r"(?:(?<![\w.])[-−](?=\d))?"
_MONTHS = "|".join(
    [*FULL_MONTHS, *[rf"{a.capitalize()}\." for a in MONTH_OF if a != "may"], "Sept"]
)


def _alt(keys: Iterable[str]) -> str:
    return "|".join(re.escape(k) for k in sorted(keys, key=len, reverse=True))


def _sentence_stop(m: re.Match[str]) -> str:
    """'.' when the match swallowed a period that also ends the sentence."""
    if not m.group(0).endswith("."):
        return ""
    rest = m.string[m.end() :]
    nxt = rest.lstrip()
    return "." if not nxt or (rest[:1].isspace() and (nxt[0].isupper() or nxt[0] == "\n")) else ""


def _is1(num: str) -> bool:
    return num.lstrip("-−") == "1"


def _num(sign: str | None, num: str) -> str:
    return ("minus " if sign else "") + number(num)


def _list_marker(m: re.Match[str]) -> str:
    if m.group(1):  # "1." "2)" → "First," "Second,"
        return ordinal(int(m.group(1))).capitalize() + ", "
    return " "  # bullets and "a)" are dropped


def _link(normalize: Normalize, m: re.Match[str]) -> str:
    return " " + normalize(m.group(1)) + " "


def _spell_address(normalize: Normalize, parts: list[str]) -> str:
    """Address pieces joined with "dot" and read by the front-end itself (digits, "_")."""
    return " " + normalize(" dot ".join(p for p in parts if p).replace("_", " underscore ")) + " "


def _url(normalize: Normalize, m: re.Match[str]) -> str:
    host = re.sub(r"^(?:https?://)?(?:www\.)?", "", m.group(0), flags=re.I)
    host = re.split(r"[/?#:]", host, maxsplit=1)[0]
    return _spell_address(normalize, host.split("."))


def _email(normalize: Normalize, m: re.Match[str]) -> str:
    user, _, host = m.group(0).partition("@")
    spell = partial(_spell_address, normalize)
    return f"{spell(user.split('.'))} at {spell(host.split('.'))}"


def _ampm(ap: str | None, m: re.Match[str]) -> str:
    return f" {ap.upper()}M{_sentence_stop(m)}" if ap else ""


def _time(m: re.Match[str]) -> str | None:
    h, mi, sec, ap = int(m.group(1)), int(m.group(2)), m.group(3), m.group(4)
    if h > 24 or mi > 59 or (sec and int(sec) > 59) or (ap and not 1 <= h <= 12):
        return None
    words = cardinal(h)
    if mi == 0:
        words += "" if ap or sec else " o'clock"
    else:
        words += f" oh {cardinal(mi)}" if mi < 10 else f" {cardinal(mi)}"
    if sec:
        words += f" and {cardinal(int(sec))} second" + ("" if int(sec) == 1 else "s")
    return words + _ampm(ap, m)


def _hour(m: re.Match[str]) -> str | None:
    h = int(m.group(1))
    return f"{cardinal(h)}{_ampm(m.group(2), m)}" if 1 <= h <= 12 else None


def _date(y: str | None, mo: int, d: int) -> str | None:
    if not (1 <= mo <= 12 and 1 <= d <= 31):
        return None
    return f"{FULL_MONTHS[mo - 1]} {ordinal(d)}" + (f", {year(int(y))}" if y else "")


def _date_iso(m: re.Match[str]) -> str | None:
    return _date(m.group(1), int(m.group(2)), int(m.group(3)))


def _date_us(m: re.Match[str]) -> str | None:
    a, b, y = int(m.group(1)), int(m.group(2)), m.group(3)
    if len(y) == 2:
        y = ("19" if int(y) > 30 else "20") + y
    return _date(y, *((a, b) if a <= 12 else (b, a)))


def _month(name: str) -> str:
    key = name.rstrip(".").lower()
    return MONTH_OF["sept" if key.startswith("sept") else key[:3]]


def _month_day(m: re.Match[str]) -> str | None:
    d = int(m.group(2))
    if not 1 <= d <= 31:
        return None
    y = f", {year(int(m.group(3)))}" if m.group(3) else ""
    return f"{_month(m.group(1))} {ordinal(d)}{y}"


def _day_month(m: re.Match[str]) -> str | None:
    d = int(m.group(1))
    if not 1 <= d <= 31:
        return None
    the = "" if m.string[: m.start()].lower().endswith("the ") else "the "
    y = f", {year(int(m.group(3)))}" if m.group(3) else ""
    return f"{the}{ordinal(d)} of {_month(m.group(2))}{y}{_sentence_stop(m) if not y else ''}"


def _money(m: re.Match[str]) -> str:
    sign, sym, num, big, letter = m.groups()
    one, many, sub1, subn = CURRENCY[sym]
    minus = "minus " if sign else ""
    scale = big or (SCALE[letter.lower()] if letter else "")
    if scale:
        return f"{minus}{number(num)} {scale} {many}"
    whole, _, frac = num.replace(",", "").partition(".")
    if len(frac) == 2 and sub1:
        w, c = int(whole or 0), int(frac)
        parts = [f"{cardinal(w)} {one if w == 1 else many}"] if w else []
        if c or not w:
            parts.append(f"{cardinal(c)} {sub1 if c == 1 else subn}")
        return minus + " and ".join(parts)
    return f"{minus}{number(num)} {one if _is1(num) else many}"


def _unit(m: re.Match[str]) -> str:
    one, many = UNITS[m.group(3)]
    return f"{_num(m.group(1), m.group(2))} {one if _is1(m.group(2)) else many}"


def _degrees(m: re.Match[str]) -> str:
    scale = {"C": " Celsius", "F": " Fahrenheit", None: ""}[m.group(3)]
    return f"{_num(m.group(1), m.group(2))} degree{'' if _is1(m.group(2)) else 's'}{scale}"


def _decade(m: re.Match[str]) -> str | None:
    century, decade = m.group(1), int(m.group(2))
    if century:
        return plural(year(int(century + f"{decade}0")))
    return plural(TENS[decade]) if decade >= 2 else ("tens" if decade == 1 else None)


def _fraction(m: re.Match[str]) -> str:
    a, b = int(m.group(1)), int(m.group(2))
    if 0 < a < b <= 10:
        one, many = FRACTIONS.get(b, (ordinal(b), ordinal(b) + "s"))
        return f"{cardinal(a)} {one if a == 1 else many}"
    return f"{cardinal(a)} {cardinal(b)}"  # "24/7", "50/50", "9/11"


def _plain_number(m: re.Match[str]) -> str:
    sign, num = m.group(1), m.group(2)
    if not sign and len(num) == 4 and num.isdigit() and 1100 <= int(num) <= 2099:
        return year(int(num))  # "1969", "2024": a bare four-digit number is usually a year
    return _num(sign, num)


def _abbrev_stop(m: re.Match[str]) -> str:
    return ABBREV_STOP[m.group(0)] + _sentence_stop(m)


def _apostrophe(m: re.Match[str]) -> str:
    s, i = m.string, m.start()
    inside = i > 0 and s[i - 1].isalpha() and i + 1 < len(s) and s[i + 1].isalpha()
    return "'" if inside else " "


def _dash(m: re.Match[str]) -> str:
    s, i = m.string, m.start()
    between = 0 < i < len(s) - 1 and s[i - 1].isalpha() and s[i + 1].isalpha()
    if between:
        return "-"  # "well-known"
    if 0 < i < len(s) - 1 and s[i - 1].isalnum() and s[i + 1].isalnum():
        return " "  # "COVID-19"
    return ", "  # " - " between clauses


def _bracket(m: re.Match[str]) -> str:
    """A parenthesis between words is a pause ("The tower, built in 1889, is"); one
    inside a word ("file(s)") is nothing."""
    s, i = m.string, m.start()
    if m.group(0) in "([{":
        return ", " if i == 0 or s[i - 1].isspace() else " "
    after = s[i + 1 : i + 2]
    return ", " if after and (after.isspace() or after in ".,!?;:") else " "


def _ellipsis(m: re.Match[str]) -> str:
    rest = m.string[m.end() :].lstrip()
    return ". " if not rest or rest[0].isupper() else ", "


def _sym(m: re.Match[str]) -> str:
    return SYMBOLS[m.group(0)]


def _c(pattern: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(pattern, flags)


_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?:,?[ \t]+(\d{4})(?!\d))?"
_AMPM = r"(?:\s?([AaPp])\.?[Mm]\b\.?)"


def build(normalize: Normalize) -> list[tuple[re.Pattern[str], Handler]]:
    """The rules; those that read a part of their match as text (a link's words, an
    address's pieces) read it with ``normalize`` (handed in by norm.py, which imports
    this module: no import back)."""
    return [*_markup(normalize), *_RULES]


def _markup(normalize: Normalize) -> list[tuple[re.Pattern[str], Handler]]:
    return [
        # layout and markup
        (_c(r"^[ \t]*(?:(\d{1,2})[.)]|[-*+•‣◦▪]|[a-z]\))(?:[ \t]+|$)", re.M), _list_marker),
        (_c(r"(?<=[:;] )(\d{1,2})[.)](?=\s|$)"), _list_marker),  # "tips: 1. Sleep"
        (_c(r"^[ \t]*(?:#{1,6}|>)[ \t]+", re.M), lambda m: " "),
        (_c(r"\[([^\]\n]+)\]\([^)\s]*\)"), partial(_link, normalize)),
        (_c(r"\*{1,3}|_{2,3}|`+"), lambda m: " "),
        # addresses
        (_c(r"[A-Za-z0-9_.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+"), partial(_email, normalize)),
        (
            _c(r"(?:https?://|www\.)[^\s<>\"'()\[\]]*[^\s<>\"'()\[\].,!?;:]", re.I),
            partial(_url, normalize),
        ),
        (
            _c(rf"(?<![\w.@])[a-z0-9-]+(?:\.[a-z0-9-]+)*\.(?:{TLDS})(?![\w@])(?:/[\w/.-]*[\w/])?"),
            partial(_url, normalize),
        ),
    ]


_RULES: list[tuple[re.Pattern[str], Handler]] = [
    # abbreviations (before numbers: "No. 5")
    (_c(rf"(?<![\w.])({_alt(TITLES)})\.?(?=[ \t]+[A-Z])"), lambda m: TITLES[m.group(1)]),
    (_c(rf"(?<![\w.])(?:{_alt(ABBREV)})(?![\w])"), lambda m: f" {ABBREV[m.group(0)]} "),
    (_c(rf"(?<![\w.])(?:{_alt(ABBREV_STOP)})"), _abbrev_stop),
    (_c(r"(?<![\w.])(?:No|no|Nos|nos)\.[ \t]?(?=\d)"), lambda m: "number "),
    (_c(r"#(?=\d)"), lambda m: "number "),
    # dates and times
    (_c(rf"(\d{{1,2}}):(\d{{2}})(?::(\d{{2}}))?(?!\d){_AMPM}?"), _time),
    (_c(rf"(\d{{1,2}})\.(\d{{2}})()(?=\s?[AaPp]\.?[Mm]\b){_AMPM}"), _time),  # "9.30 am"
    (_c(rf"(\d{{1,2}}){_AMPM}"), _hour),
    (_c(r"(\d+):(\d)(?!\d)"), lambda m: f"{number(m.group(1))} to {number(m.group(2))}"),
    (_c(r"(\d{4})-(\d{1,2})-(\d{1,2})(?!\d)"), _date_iso),
    (_c(r"(\d{1,2})/(\d{1,2})/(\d{4}|\d{2})(?![\d/])"), _date_us),
    (_c(rf"({_MONTHS})[ \t]+{_DAY}(?![\d:.,]?\d){_YEAR}"), _month_day),
    (_c(rf"{_DAY}[ \t]+(?:of[ \t]+)?({_MONTHS})(?!\w){_YEAR}"), _day_month),
    # amounts
    (
        _c(r"\+?1?[ .-]?\(?\d{3}\)?[ .-]\d{3}[ .-]\d{4}(?![\d-])"),
        lambda m: ", ".join(digits(g) for g in re.findall(r"\d+", m.group(0))) + ",",
    ),
    (
        _c(
            rf"({SIGN})([$€£¥₹])[ \t]?({NUM})(?:[ \t]?(hundred|thousand|million|billion|trillion)"
            r"\b|([kKmMbB]n?)(?![A-Za-z]))?"
        ),
        _money,
    ),
    (_c(rf"({SIGN})({NUM})[ \t]?%"), lambda m: f"{_num(m.group(1), m.group(2))} percent"),
    (_c(rf"({SIGN})({NUM})[ \t]?°[ \t]?([CF])?(?![A-Za-z])"), _degrees),
    (_c(rf"({SIGN})({NUM})[ \t]?({_alt(UNITS)})(?![\w/²])"), _unit),
    (
        _c(rf"({SIGN})({NUM})(k|M|B|bn)(?![\w])"),
        lambda m: f"{_num(m[1], m[2])} {SCALE[m[3].lower()]}",
    ),
    (
        _c(r"(\d{1,3}(?:,\d{3})+|\d+)(?:st|nd|rd|th)(?![A-Za-z])"),
        lambda m: ordinal(int(m.group(1).replace(",", ""))),
    ),
    (_c(r"'?(1[1-9]|20)?(\d)0'?s(?![A-Za-z])"), _decade),
    (_c(r"(?<![\d/])(\d{1,2})/(\d{1,2})(?![\d/])"), _fraction),
    (_c(rf"(?<![\w.-])({NUM})[ \t]?[-–][ \t]?(?=\d)"), lambda m: f"{number(m.group(1))} to "),
    (_c(r"\d+(?:\.\d+){2,}"), lambda m: " point ".join(number(p) for p in m.group(0).split("."))),
    (_c(rf"({SIGN})({NUM})"), _plain_number),
    (_c(r"(?<![\w.])\.(\d+)"), lambda m: f"point {digits(m.group(1))}"),
    # punctuation and symbols
    (_c(r"\.{3,}|…"), _ellipsis),
    (_c(r"[’'‘]"), _apostrophe),
    (_c(r"[\"“”„«»‹›]"), lambda m: " "),
    (_c(r"[(\[{]|[)\]}]"), _bracket),
    (_c(rf"/(?=(?:{PER})\b)"), lambda m: " per "),  # "people/year"
    (_c(r"(?<=\w)[ \t]?(?:<=|≤)[ \t]?(?=\w)"), lambda m: " is at most "),
    (_c(r"(?<=\w)[ \t]?(?:>=|≥)[ \t]?(?=\w)"), lambda m: " is at least "),
    (_c(r"(?<=[\w ])<(?=[ \d])"), lambda m: " less than "),
    (_c(r"(?<=[\w ])>(?=[ \d])"), lambda m: " greater than "),
    (_c(r"~(?=[ \t]?\d)"), lambda m: "about "),
    (_c(r"-(?!-)"), _dash),
    (_c(_alt(SYMBOLS)), _sym),
]
