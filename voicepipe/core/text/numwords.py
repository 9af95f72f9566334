"""English number words for the TTS text front-end (core/text/norm.py).

American readings, written out so that both TTS backends see only words:
cardinals without "and" ("three hundred eighty-four thousand four hundred"),
ordinals ("twenty-second"), years ("nineteen sixty-nine", "two thousand five",
"twenty twenty-four"), decimals read digit by digit after "point", and digit
strings ("zero zero seven"). Small enough to own rather than add a dependency.
"""

from __future__ import annotations

ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen"
).split()
TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
SCALES = ("", "thousand", "million", "billion", "trillion", "quadrillion", "quintillion")
_ORD_IRREGULAR = {
    "one": "first",
    "two": "second",
    "three": "third",
    "five": "fifth",
    "eight": "eighth",
    "nine": "ninth",
    "twelve": "twelfth",
}
# Past this many digits a number is read digit by digit (an ID, not a quantity).
MAX_CARDINAL_DIGITS = 21


def _below_1000(n: int) -> list[str]:
    words: list[str] = []
    if n >= 100:
        words += [ONES[n // 100], "hundred"]
        n %= 100
    if n >= 20:
        words.append(TENS[n // 10] + (f"-{ONES[n % 10]}" if n % 10 else ""))
    elif n or not words:
        words.append(ONES[n])
    return words


def cardinal(n: int) -> str:
    """12 → 'twelve'; -2157927 → 'minus two million one hundred fifty-seven thousand ...'."""
    if n < 0:
        return "minus " + cardinal(-n)
    if len(str(n)) > MAX_CARDINAL_DIGITS:
        return digits(str(n))
    if n < 1000:
        return " ".join(_below_1000(n))
    groups: list[str] = []
    scale = 0
    while n:
        n, g = divmod(n, 1000)
        if g:
            groups.append(" ".join(_below_1000(g)) + (f" {SCALES[scale]}" if scale else ""))
        scale += 1
    return " ".join(reversed(groups))


def _ord_word(w: str) -> str:
    if w in _ORD_IRREGULAR:
        return _ORD_IRREGULAR[w]
    if w.endswith("y"):
        return w[:-1] + "ieth"
    return w + "th"


def ordinal(n: int) -> str:
    """1 → 'first', 22 → 'twenty-second', 100 → 'one hundredth'."""
    head, sep, last = cardinal(n).rpartition(" ")
    if "-" in last:
        a, _, b = last.rpartition("-")
        last = f"{a}-{_ord_word(b)}"
    else:
        last = _ord_word(last)
    return head + sep + last


def year(n: int) -> str:
    """1969 → 'nineteen sixty-nine', 1905 → 'nineteen oh five', 1900 → 'nineteen hundred',
    2005 → 'two thousand five', 2024 → 'twenty twenty-four'."""
    if not 1000 <= n <= 9999:
        return cardinal(n)
    high, low = divmod(n, 100)
    if high % 10 == 0 and low < 10:  # 2000-2009, 1000-1009: "two thousand five"
        return cardinal(n)
    if low == 0:
        return f"{cardinal(high)} hundred"
    if low < 10:
        return f"{cardinal(high)} oh {ONES[low]}"
    return f"{cardinal(high)} {cardinal(low)}"


def plural(words: str) -> str:
    """'nineteen ninety' → 'nineteen nineties', 'six' → 'sixes' (decades, "the 1990s")."""
    head, sep, last = words.rpartition(" ")
    if last.endswith("y"):
        last = last[:-1] + "ies"
    elif last.endswith(("x", "s")):
        last += "es"
    else:
        last += "s"
    return head + sep + last


def digits(s: str) -> str:
    """'007' → 'zero zero seven' (the digits of s; anything else is skipped)."""
    return " ".join(ONES[int(c)] for c in s if c.isdigit())


def decimal(s: str) -> str:
    """'3.14' → 'three point one four'; '2,157,927' → the cardinal; '.5' → 'point five'."""
    s = s.replace(",", "")
    whole, _, frac = s.partition(".")
    words = cardinal(int(whole)) if whole else ""
    if frac:
        words = f"{words} point {digits(frac)}".strip()
    return words


def number(s: str) -> str:
    """A written number as words: leading zeros are read as digits ('007'), the rest as a
    cardinal or decimal."""
    plain = s.replace(",", "")
    whole = plain.partition(".")[0]
    if len(whole) > 1 and whole.startswith("0"):
        return digits(whole) + (f" point {digits(plain.partition('.')[2])}" if "." in plain else "")
    return decimal(plain)
