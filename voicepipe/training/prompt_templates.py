"""Prompt templates of the draft-distillation series after the first (draft_prompts_more,
draft_prompts_third): a module of their own, so those series do not import
draft_prompts, which imports them to continue its list.
"""

from __future__ import annotations

import random
from collections.abc import Callable

Template = Callable[[random.Random], str]


def template(slots: tuple[list[str], ...], *phrasings: str) -> Template:
    """A prompt template: a value drawn from each slot list in turn, then a phrasing
    (``{0}``, ``{1}``: the values), the same draws as the first series' hand-written
    functions make (slots first, then the phrasing)."""

    def make(r: random.Random) -> str:
        values = [r.choice(s) for s in slots]
        return r.choice(phrasings).format(*values)

    return make


def either(a: Template, b: Template) -> Template:
    """Template a or b at even odds (that draw comes before the chosen template's own)."""
    return lambda r: a(r) if r.random() < 0.5 else b(r)
