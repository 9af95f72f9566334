"""Process-wide prefix cache: the keys and values of shared prompt prefixes, per model.

Every session of a voice assistant starts its prompt with the same rendered
system prompt. A session's own KV cache already keeps its conversation across
turns (``ModelTarget`` reuses the common prefix), but a *new* session would
prefill the system prompt again. Here the KV rows of such a prefix are
computed once per model and prefix and copied into each new session's cache
(a memory copy of a few MB instead of a model pass over tens of tokens).

Rows are position-dependent (RoPE is applied before they are cached), so an
entry only serves prompts that start with exactly its tokens, at position 0.
On the fused kernel every prefilled row is computed exactly as a one-token
decode would (``llama.forward``), so a copied prefix is bit-identical to the
rows the session would have computed itself; greedy output is unchanged.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from voicepipe.nn.llm.llama import Transformer


@dataclass(frozen=True)
class Prefix:
    tokens: tuple[int, ...]
    kv: torch.Tensor  # (n_layer, 2, Hkv, T, D): every layer's keys and values
    feats: torch.Tensor | None = None  # (T, dim): the target's features (EAGLE drafts read them)


class PrefixStore:
    """A few prefixes of one model, least recently used dropped first."""

    def __init__(self, limit: int = 8) -> None:
        self.limit = limit
        self._entries: OrderedDict[tuple[int, ...], Prefix] = OrderedDict()
        self._lock = threading.Lock()  # sessions run their model passes on worker threads

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, tokens: list[int] | tuple[int, ...], feats: bool = False) -> Prefix | None:
        """The entry of exactly these tokens (one with features if ``feats``), or None."""
        with self._lock:
            p = self._entries.get(tuple(tokens))
        return p if p is not None and (p.feats is not None or not feats) else None

    def longest(self, tokens: list[int], feats: bool = False) -> Prefix | None:
        """The longest entry the prompt starts with (one with features if ``feats``)."""
        best: Prefix | None = None
        with self._lock:
            for p in self._entries.values():
                n = len(p.tokens)
                if best is not None and n <= len(best.tokens):
                    continue
                if n <= len(tokens) and (p.feats is not None or not feats):
                    if tuple(tokens[:n]) == p.tokens:
                        best = p
            if best is not None:
                self._entries.move_to_end(best.tokens)
        return best

    def add(self, p: Prefix) -> None:
        with self._lock:
            self._entries[p.tokens] = p
            self._entries.move_to_end(p.tokens)
            while len(self._entries) > self.limit:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


_STORES: weakref.WeakKeyDictionary[Transformer, PrefixStore] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def store_for(model: Transformer) -> PrefixStore:
    """The process-wide prefix store of a loaded model (gone with the model)."""
    with _LOCK:
        s = _STORES.get(model)
        if s is None:
            s = _STORES[model] = PrefixStore()
        return s
