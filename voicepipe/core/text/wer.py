"""Word error rate with a normaliser that makes TTS↔ASR round trips comparable.

Whisper writes "42" where the text said "forty-two" (and vice versa), and
punctuation/casing differ; both sides are normalised the same way before the
edit distance: lower case, numbers spelled out, punctuation dropped.
"""

from __future__ import annotations

import re

_ONES = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen"
).split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_SCALES = ((10**9, "billion"), (10**6, "million"), (1000, "thousand"), (100, "hundred"))


def number_to_words(n: int) -> str:
    if n < 0:
        return "minus " + number_to_words(-n)
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + ("" if n % 10 == 0 else " " + _ONES[n % 10])
    for value, name in _SCALES:
        if n >= value:
            rest = n % value
            head = number_to_words(n // value) + " " + name
            return head if rest == 0 else head + " " + number_to_words(rest)
    raise AssertionError(n)


def _spell_number(m: re.Match[str]) -> str:
    whole, _, frac = m.group(0).replace(",", "").partition(".")
    words = number_to_words(int(whole))
    if frac:
        words += " point " + " ".join(_ONES[int(d)] for d in frac)
    return f" {words} "


def normalize(text: str) -> str:
    t = text.lower().replace("%", " percent ").replace("&", " and ")
    t = re.sub(r"(?<=\d)(st|nd|rd|th)\b", "", t)
    t = re.sub(r"\d[\d,]*(\.\d+)?", _spell_number, t)
    t = re.sub(r"[-‐–—/]", " ", t)
    t = re.sub(r"[^a-z' ]+", " ", t)
    t = t.replace("'", "")
    return " ".join(t.split())


def edit_distance(ref: list[str], hyp: list[str]) -> int:
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h))
        prev = cur
    return prev[-1]


def wer(refs: list[str] | str, hyps: list[str] | str) -> float:
    """Corpus WER: total edits / total reference words, after ``normalize``."""
    if isinstance(refs, str):
        refs = [refs]
    if isinstance(hyps, str):
        hyps = [hyps]
    if len(refs) != len(hyps):
        raise ValueError("refs and hyps differ in length")
    edits = words = 0
    for r, h in zip(refs, hyps, strict=True):
        rw, hw = normalize(r).split(), normalize(h).split()
        edits += edit_distance(rw, hw)
        words += len(rw)
    return edits / max(words, 1)


def unmatched_runs(ref: list[str], hyp: list[str]) -> list[int]:
    """Lengths of the runs of consecutive reference words a minimum-edit alignment leaves
    unmatched (deleted or substituted), in order."""
    n, m = len(ref), len(hyp)
    d = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        d[i][0] = i
    for j in range(m + 1):
        d[0][j] = j
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            sub = d[i - 1][j - 1] + (ref[i - 1] != hyp[j - 1])
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, sub)
    matched = [False] * n
    i, j = n, m
    while i > 0 and j > 0:  # backtrace, preferring a match
        if ref[i - 1] == hyp[j - 1] and d[i][j] == d[i - 1][j - 1]:
            matched[i - 1] = True
            i, j = i - 1, j - 1
        elif d[i][j] == d[i - 1][j - 1] + 1:
            i, j = i - 1, j - 1
        elif d[i][j] == d[i - 1][j] + 1:
            i -= 1
        else:
            j -= 1
    runs, cur = [], 0
    for ok in matched:
        if ok:
            if cur:
                runs.append(cur)
            cur = 0
        else:
            cur += 1
    if cur:
        runs.append(cur)
    return runs


def dropout(ref: str, hyp: str, min_run: int = 5) -> float:
    """Share of the reference's words lost in runs of >= ``min_run`` consecutive words the
    transcript does not have (after ``normalize``): whole phrases or sentences that could
    not be heard, as opposed to scattered word errors."""
    rw, hw = normalize(ref).split(), normalize(hyp).split()
    lost = sum(r for r in unmatched_runs(rw, hw) if r >= min_run)
    return lost / max(len(rw), 1)
