"""Prompt-lookup drafting: propose what followed the last n-gram earlier in the context.

No model: replies that quote, summarise or repeat their input ("input-grounded")
copy long spans of it, and the context already holds those spans. The index
is incremental: each new token adds its n-grams once, so proposing costs a
few dict look-ups whatever the context length.
"""

from __future__ import annotations

from voicepipe.speculative.types import Proposal


class NgramProposer:
    """Matches the longest suffix n-gram (max_n down to min_n), most recent occurrence.

    It proposes at most as many tokens as the n-gram it matched: a continuation
    is trusted about as far as the context that found it. In the default
    model's replies a short match's first token is seldom right and a long
    one's nearly always (``voicepipe bench replay``'s ``first_guess``); and a
    pass over 2 rows costs little more than one over 1 row (the step is
    memory-bound), so even a 1-gram's single guess pays, while many guesses
    after a 2-gram waste a pass that costs twice a decode or more. The replayed
    gain of this cap: docs/BENCHMARKS.md, LLM section (order-capped prompt lookup).
    """

    name = "ngram"

    def __init__(self, max_n: int = 8, min_n: int = 1) -> None:
        if not 1 <= min_n <= max_n:
            raise ValueError("need 1 <= min_n <= max_n")
        self.max_n = max_n
        self.min_n = min_n
        self.reset()

    def reset(self) -> None:
        self._ctx: list[int] = []
        self.last_order = 0
        # n-gram → index of the token that followed its latest occurrence.
        self._index: dict[tuple[int, ...], int] = {}

    def _sync(self, context: list[int]) -> None:
        n_old = len(self._ctx)
        if n_old > len(context) or context[:n_old] != self._ctx:
            self.reset()  # not an extension (a new conversation): re-index
            n_old = 0
        ctx = self._ctx
        ctx.extend(context[n_old:])
        # An n-gram ending just before position e has a continuation iff e < len(ctx).
        for e in range(max(n_old, 1), len(ctx)):
            for n in range(self.min_n, self.max_n + 1):
                if e - n >= 0:
                    self._index[tuple(ctx[e - n : e])] = e

    def lookup(self, context: list[int]) -> tuple[int, int]:
        """(order of the longest suffix n-gram match, start of its continuation), or (0, 0)."""
        self._sync(context)
        ctx = self._ctx
        for n in range(self.max_n, self.min_n - 1, -1):
            if len(ctx) < n:
                continue
            start = self._index.get(tuple(ctx[-n:]))
            if start is not None:
                return n, start
        return 0, 0

    def propose(self, context: list[int], k: int) -> Proposal:
        n, start = self.lookup(context)
        self.last_order = n  # the match behind this proposal (a hybrid weighs it)
        return Proposal(tokens=self._ctx[start : start + min(k, n)], probs=None)
