"""Reference checks for spoken answers (sans-I/O): does a reply say the right thing?

A question set (``voicepipe/bench/answers_set.toml``, parsed by the caller) holds
items; each item has the user's turns and a check on the reply to the last one:

- ``any``: at least one of these regexes must match (omitted: no such rule);
- ``all``: every one of these must match;
- ``none``: none of these may match: the plausible wrong answers, so that a check
  for "12 times 15" that wants 180 also refuses a reply saying 150.

Regexes are searched in the *normalised* reply (``normalise``): lower case, accents
stripped, curly quotes straightened, thousands separators dropped ("5,280" → "5280"),
whitespace collapsed. A reply that matches nothing is wrong: a check only passes on
what it was written to accept.

Items carry a ``kind``; ``"reply"`` (the default) is checked here. Other kinds
(tool calls, say) can live in the same set for other modes: ``parse_set`` keeps
them, with their raw fields, and callers pick the kinds they score.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

REPLY = "reply"
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})
_THOUSANDS = re.compile(r"(?<=\d)[,\u202f\u00a0](?=\d{3}\b)")
_SPACES = re.compile(r"\s+")


class SetError(ValueError):
    """A malformed question set: names the item and the field."""


def normalise(text: str) -> str:
    """The form checks are matched against (see the module docstring)."""
    t = unicodedata.normalize("NFKD", text.translate(_QUOTES))
    t = "".join(c for c in t if not unicodedata.combining(c))
    t = _THOUSANDS.sub("", t.lower())
    return _SPACES.sub(" ", t).strip()


@dataclass(frozen=True)
class Check:
    any: tuple[re.Pattern[str], ...] = ()
    all: tuple[re.Pattern[str], ...] = ()
    none: tuple[re.Pattern[str], ...] = ()

    def verdict(self, reply: str) -> tuple[bool, str]:
        """(passed, why): why names the first rule that failed, or what matched."""
        t = normalise(reply)
        for p in self.none:
            m = p.search(t)
            if m:
                return False, f"says {m.group(0)!r} (none: {p.pattern})"
        for p in self.all:
            if not p.search(t):
                return False, f"lacks {p.pattern!r} (all)"
        if self.any:
            for p in self.any:
                m = p.search(t)
                if m:
                    return True, f"says {m.group(0)!r}"
            return False, "matches none of the accepted answers (any)"
        return True, "all rules hold"

    def passes(self, reply: str) -> bool:
        return self.verdict(reply)[0]


@dataclass(frozen=True)
class Item:
    id: str
    category: str
    turns: tuple[str, ...]
    kind: str = REPLY
    check: Check = field(default_factory=Check)
    raw: Mapping[str, Any] = field(default_factory=dict)  # every field, for other kinds


@dataclass(frozen=True)
class QuestionSet:
    version: int
    categories: Mapping[str, str]
    items: tuple[Item, ...]

    def select(
        self, kinds: Iterable[str] = (REPLY,), categories: Iterable[str] | None = None
    ) -> list[Item]:
        ks, cs = set(kinds), None if categories is None else set(categories)
        if cs is not None and (unknown := cs - set(self.categories)):
            raise SetError(f"unknown categories {sorted(unknown)}")
        return [i for i in self.items if i.kind in ks and (cs is None or i.category in cs)]


def _patterns(item_id: str, key: str, value: Any) -> tuple[re.Pattern[str], ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SetError(f"item {item_id!r}: {key} must be a list of regex strings")
    try:
        return tuple(re.compile(v) for v in value)
    except re.error as e:
        raise SetError(f"item {item_id!r}: bad regex in {key}: {e}") from e


def parse_set(data: Mapping[str, Any]) -> QuestionSet:
    """A question set from its parsed TOML/JSON; raises SetError naming what is wrong."""
    cats = data.get("categories")
    if not isinstance(cats, Mapping) or not cats:
        raise SetError("the set needs a [categories] table")
    items: list[Item] = []
    seen: set[str] = set()
    for n, d in enumerate(data.get("items") or []):
        iid = d.get("id")
        if not isinstance(iid, str) or not iid:
            raise SetError(f"item #{n} has no id")
        if iid in seen:
            raise SetError(f"item {iid!r} appears twice")
        seen.add(iid)
        if d.get("category") not in cats:
            raise SetError(f"item {iid!r}: category {d.get('category')!r} is not in [categories]")
        turns = d.get("turns")
        if (
            not isinstance(turns, list)
            or not turns
            or not all(isinstance(t, str) and t.strip() for t in turns)
        ):
            raise SetError(f"item {iid!r}: turns must be a non-empty list of strings")
        kind = d.get("kind", REPLY)
        check = Check()
        if kind == REPLY:
            check = Check(*(_patterns(iid, k, d.get(k)) for k in ("any", "all", "none")))
            if not check.any and not check.all:
                raise SetError(f"item {iid!r}: a reply check needs `any` or `all`")
        items.append(Item(iid, d["category"], tuple(turns), kind, check, dict(d)))
    if not items:
        raise SetError("the set has no items")
    return QuestionSet(int(data.get("version", 1)), dict(cats), tuple(items))


@dataclass
class Tally:
    """Pass counts overall and per category."""

    passed: int = 0
    total: int = 0
    by_category: dict[str, list[int]] = field(default_factory=dict)  # category → [passed, n]

    def add(self, category: str, ok: bool) -> None:
        self.passed += ok
        self.total += 1
        c = self.by_category.setdefault(category, [0, 0])
        c[0] += ok
        c[1] += 1

    def as_dict(self) -> dict[str, Any]:
        def acc(p: int, n: int) -> float:
            return round(p / n, 3) if n else 0.0

        return {
            "accuracy": acc(self.passed, self.total),
            "passed": self.passed,
            "total": self.total,
            "by_category": {
                c: {"accuracy": acc(p, n), "passed": p, "total": n}
                for c, (p, n) in sorted(self.by_category.items())
            },
        }
