"""``[llm] drafter``, parsed once into a typed spec that owns its K ceiling and tunings.

The setting is a small language: ``none``; ``ngram`` (prompt lookup); a draft's
name (an EAGLE-style draft trained for the target, e.g. ``smollm2-draft``, or a
smaller GGUF model sharing its tokenizer, e.g. ``qwen2.5-coder-0.5b``); or
``ngram+<draft>`` (prompt lookup where the context has a match, the draft
elsewhere, and for an EAGLE draft its reply store in between). ``parse`` reads
it once; the engine (nn/llm/engine.py) builds proposers from the result and the
decoder takes its K ceiling and pause threshold from it, so no constant hides
elsewhere.

Every tuning below was chosen by measurement; the runs are in
docs/BENCHMARKS.md (LLM section: prompt lookup, the EAGLE draft, draft trees,
the reply store, cost-aware K).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

HYBRID = "ngram+"
NONE = ("", "none", "off")

Kind = Literal["none", "ngram", "eagle", "model"]


@dataclass(frozen=True)
class Tunings:
    # Prompt lookup in front of a draft acts on matches of at least this many tokens.
    lookup_min_n: int = 2
    # The EAGLE draft proposes at most eagle_k tokens, a further one only while its own
    # probability of the whole proposal stays >= eagle_min_path ...
    eagle_k: int = 3
    eagle_min_path: float = 0.4
    # ... and verifies each guess's runner-ups as sibling leaves while it gives one
    # >= eagle_alt_min.
    eagle_alt_min: float = 0.15
    # The EAGLE draft reads at most the last eagle_window positions of a context it has
    # not seen (a session's served prompt): see draft_spec.EagleProposer.
    eagle_window: int = 24
    # Prompt lookup's longest proposal behind the hybrid (matches copy long spans).
    lookup_k_max: int = 6
    # The reply store drafts after a match of >= store_min_n tokens while the agreeing
    # share (multiplied over the tokens) stays >= store_min_path, and before a lookup
    # match of <= store_first_order tokens where >= store_first_share agree.
    store_min_n: int = 2
    store_min_path: float = 0.5
    store_first_order: int = 3
    store_first_share: float = 0.8
    # Tool-call skeletons (spec.skeleton) draft after a match of >= skeleton_min_n of
    # their tokens: two can be speech (' "', ','), three are a call's JSON.
    skeleton_min_n: int = 3


@dataclass(frozen=True)
class DrafterSpec:
    text: str  # as configured
    kind: Kind  # what drafts when lookup has nothing: none, ngram, an EAGLE draft, a model
    name: str = ""  # the draft's name (eagle, model)
    lookup: bool = False  # prompt lookup in front (``ngram+``)
    reply_store: bool = False  # an EAGLE draft's reply store behind the lookup
    tunings: Tunings = Tunings()

    @property
    def k_max(self) -> int:
        """The longest proposal this drafter makes (the decoder's K ceiling)."""
        if self.lookup:
            return self.tunings.lookup_k_max
        if self.kind == "eagle":
            return self.tunings.eagle_k
        return 8

    @property
    def verify_cost(self) -> float:
        """Break-even of the decoder's AdaptiveK (a pass pays when it accepts more than
        verify_cost - 1 drafts). 1.0: never pause — prompt lookup drafts for free and
        proposes no more than its match's order; the EAGLE draft's misses come in
        short runs (pausing cost more than it saved); behind lookup a draft model's
        own CostAwareK pauses it. A lone draft model is priced by CostAwareK."""
        return 1.0 if self.kind in ("ngram", "eagle") or self.lookup else 1.5

    @classmethod
    def parse(
        cls,
        text: str,
        *,
        is_eagle: Callable[[str], bool],
        reply_store: bool = True,
        tunings: Tunings | None = None,
    ) -> DrafterSpec:
        """``is_eagle(name)``: whether a name is an EAGLE draft (else a GGUF model)."""
        t = tunings or Tunings()
        raw = text.strip()
        if raw in NONE:
            return cls(raw, "none", tunings=t)
        if raw == "ngram":
            return cls(raw, "ngram", tunings=t)
        lookup = raw.startswith(HYBRID)
        name = raw.removeprefix(HYBRID)
        if lookup and (name in NONE or name == "ngram"):
            raise ValueError(f"drafter {text!r}: name a draft model after {HYBRID!r}")
        if not name or "+" in name:
            raise ValueError(
                f"drafter {text!r}: expected none, ngram, a draft's name, or {HYBRID}<draft>"
            )
        kind: Kind = "eagle" if is_eagle(name) else "model"
        return cls(raw, kind, name, lookup, lookup and kind == "eagle" and reply_store, t)
