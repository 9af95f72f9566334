"""The speculation protocols: what a proposer drafts, what a target scores (vLLM's shape).

A ``Proposer`` drafts up to K tokens after a context (``Proposal``); a ``Target``
scores the last emitted token and the drafts in one pass (``Scores``: K+1 rows).
Text and audio use the same protocols: for the codec LM a token is a frame's
level-0 code, and a target with codebook levels also implements ``Levels``
(the deeper codes of every emitted frame, from its own hidden states).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np


@dataclass(frozen=True)
class Proposal:
    tokens: list[int]  # (K,) drafts, K may be 0 (nothing to propose)
    probs: np.ndarray | None = None  # (K, V) draft distributions; None: deterministic drafter
    # (d, x): x is an alternative to tokens[d] (a draft tree's leaf), verified in the
    # same pass under greedy sampling when the target can (``Target.tree``).
    siblings: tuple[tuple[int, int], ...] = ()
    # The tokens are fixed (a tool call's forced text, speculative/jump.py): the decoder
    # feeds them without verifying them and reads only the pass's last row.
    certain: bool = False


@dataclass(frozen=True)
class Scores:
    logits: np.ndarray  # (K+1, V) target logits; row i scores the token after fed token i
    best: np.ndarray | None = None  # (K+1,) each row's argmax, if the target found it


class Target(Protocol):
    tree: bool  # optional (absent: False): score() takes parents, and move() exists

    @property
    def length(self) -> int:
        """Positions held in the target's KV cache."""
        ...

    def prefill(self, tokens: list[int]) -> np.ndarray | None:
        """Make the cache hold exactly ``tokens``; logits (V,) after the last one (None:
        the cache starts empty and the first step scores the last token itself)."""
        ...

    def score(self, tokens: list[int], parents: list[int] | None = None) -> Scores:
        """Feed tokens after the cache; logits for each. parents: the tokens form a
        tree (token i follows token parents[i]; -1 for the first), each scored on
        its own path."""
        ...

    def rollback(self, length: int) -> None: ...

    def move(self, src: int, dst: int) -> None:
        """Cache slot src now holds position dst (an accepted sibling's keys)."""
        ...


class Proposer(Protocol):
    name: str

    def propose(self, context: list[int], k: int) -> Proposal:
        """Up to k drafts to follow ``context`` (prompt + every token emitted so far)."""
        ...

    def reset(self) -> None: ...


@runtime_checkable
class Levels(Protocol):
    """A target whose tokens are only the first of several codebook levels (codec LM)."""

    def levels(self, tokens: list[int]) -> np.ndarray:
        """(N, Q) full codes of the N tokens just emitted: row i's deeper levels come
        from the hidden state of row i of the last pass (prefill or score), given
        token i."""
        ...
