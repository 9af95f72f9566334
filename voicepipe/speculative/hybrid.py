"""Prompt lookup where the context has a long enough match, a drafting model otherwise.

Input-grounded replies (quotes, summaries) copy spans of the prompt, which
n-gram lookup proposes for free and often fully right; elsewhere a model
guesses: the EAGLE draft (``nn.draft_spec``) or a small GGUF model sharing the
tokenizer (``nn.engine.ModelProposer``). Both catch up with the context by
themselves, so a pass the lookup drafted costs the model nothing.

A GGUF draft model pays a step of its own per drafted token (the 0.5B draft
on the 1.5B target: about a third of a target step), so its length is chosen
by a ``CostAwareK`` of its own (``draft_ctl``) that learns from the model's
proposals only: lookup proposals cost nothing and keep their own cap (the
match's order, and the decoder's K). The proposer learns what became of the
model's last proposal from the next context: every accepted token is in it,
and the token after them is the target's correction, which never equals the
rejected draft (greedy: it is the argmax the draft missed; the exact rule: a
rejected token has no mass left in the residual it is resampled from).

Between the two, optionally, a store of the target's own past replies
(``spec.replies``): where the context's last tokens continue the same way in
most of them, that continuation is drafted, again without a model step. A
short lookup match (≤ ``store_first_order`` tokens: right about half the time)
yields to the store where ≥ ``store_first_share`` of its occurrences agree on
the first token.

In front of them all, while tools are on, the session's tool-call skeletons
(``spec.skeleton``, set by the LLM stage as ``skeleton``): the JSON a call is
written in follows from the tools' schemas, which the lookup only half finds
in the prompt. They propose only inside a call (a match of several skeleton
tokens), so ordinary speech never reaches them.
"""

from __future__ import annotations

from voicepipe.speculative.adaptive import CostAwareK
from voicepipe.speculative.types import Proposal, Proposer


class HybridProposer:
    """``skeleton``'s proposal when set and it has one, else ngram's when it has one,
    else ``store``'s (when given and it has one), else ``draft``'s (capped by
    ``draft_k`` > 0, and by ``draft_ctl``'s choice when given)."""

    def __init__(
        self,
        ngram: Proposer,
        draft: Proposer,
        name: str = "",
        draft_k: int = 0,
        draft_ctl: CostAwareK | None = None,
        store: Proposer | None = None,
        store_first_order: int = 0,
        store_first_share: float = 1.0,
    ) -> None:
        self.ngram, self.draft, self.store = ngram, draft, store
        self.store_first_order = store_first_order
        self.store_first_share = store_first_share
        self.draft_k = draft_k
        self.draft_ctl = draft_ctl
        self.name = name or f"ngram+{draft.name}"
        self.used_ngram = 0  # steps the n-gram proposal was taken (for benches)
        self.used_store = 0  # ... and the store's
        self.used_skeleton = 0  # ... and the tool-call skeletons'
        self.skeleton: Proposer | None = None  # tool-call skeletons, per session
        self._pending: tuple[list[int], list[int]] | None = None  # (context, model's drafts)

    def reset(self) -> None:
        self.ngram.reset()
        self.draft.reset()
        if self.store is not None:
            self.store.reset()
        if self.skeleton is not None:
            self.skeleton.reset()
        self.used_ngram = self.used_store = self.used_skeleton = 0
        self._pending = None

    def propose(self, context: list[int], k: int) -> Proposal:
        self._observe(context)
        if self.skeleton is not None:
            p = self.skeleton.propose(context, k)
            if p.tokens:
                self.used_skeleton += 1
                return p
        p = self.ngram.propose(context, k)
        if p.tokens and self.store is not None:
            if getattr(self.ngram, "last_order", 1 << 30) <= self.store_first_order:
                ps = self.store.propose(context, k)
                shares = getattr(self.store, "last_shares", [])
                if ps.tokens and shares and shares[0] >= self.store_first_share:
                    self.used_store += 1
                    return ps
        if p.tokens:
            self.used_ngram += 1
            return p
        if self.store is not None:
            p = self.store.propose(context, k)
            if p.tokens:
                self.used_store += 1
                return p
        kd = min(k, self.draft_k) if self.draft_k else k
        if self.draft_ctl is not None:
            kd = min(kd, self.draft_ctl.next_k())  # 0 while it pauses: a plain pass
            if kd <= 0:
                return Proposal(tokens=[])
        p = self.draft.propose(context, kd)
        if self.draft_ctl is not None and p.tokens:
            self._pending = (context[:], list(p.tokens))
        return p

    def _observe(self, context: list[int]) -> None:
        """Tell draft_ctl how many of the model's last drafts the target kept."""
        if self._pending is None:
            return
        prev, drafted = self._pending
        self._pending = None
        n = len(prev)
        if len(context) <= n or context[:n] != prev:  # another conversation
            return
        kept = 0
        for d, t in zip(drafted, context[n:], strict=False):
            if d != t:
                break
            kept += 1
        assert self.draft_ctl is not None
        self.draft_ctl.update(len(drafted), kept)
