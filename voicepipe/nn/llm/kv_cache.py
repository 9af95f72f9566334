"""Preallocated KV cache with rollback of rejected speculative positions.

One tensor holds every layer's keys and values so that rollback is a single
in-place op. Positions at or beyond ``length`` are always zero: after a
rollback the cache is bit-for-bit what it would be had the rejected tokens
never been fed (for the positions that were kept, provided they were
computed the same way).
"""

from __future__ import annotations

import torch


class CacheFull(RuntimeError):
    pass


class KVCache:
    def __init__(
        self, n_layer: int, n_kv_head: int, max_len: int, head_dim: int, dtype: torch.dtype
    ) -> None:
        self.max_len = max_len
        self.kv = torch.zeros(n_layer, 2, n_kv_head, max_len, head_dim, dtype=dtype)
        # Per-layer views, built once: decode touches them 2 × n_layer times per token.
        self._k = [self.kv[i, 0] for i in range(n_layer)]  # (Hkv, Tmax, D)
        self._v = [self.kv[i, 1] for i in range(n_layer)]
        self.length = 0  # positions [0, length) hold real keys/values

    def update(
        self, layer: int, pos: int, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Write k, v (Hkv, T, D) at positions [pos, pos+T); return keys/values [0, pos+T)."""
        end = pos + k.shape[1]
        if end > self.max_len:
            raise CacheFull(f"KV cache full: {end} > {self.max_len} positions")
        kc, vc = self._k[layer], self._v[layer]
        kc[:, pos:end] = k
        vc[:, pos:end] = v
        return kc[:, :end], vc[:, :end]

    def advance(self, end: int) -> None:
        """All layers have been written up to ``end``."""
        self.length = max(self.length, end)

    def rollback(self, length: int) -> None:
        """Forget positions [length, …): rejected drafts leave no trace."""
        if length < 0 or length > self.length:
            raise ValueError(f"cannot roll back to {length} (cache holds {self.length})")
        if length < self.length:
            self.kv[:, :, :, length : self.length].zero_()
        self.length = length

    def move(self, src: int, dst: int) -> None:
        """Every layer's key and value at position src are copied to dst (< length):
        a draft tree's accepted side branch takes the position its path gives it."""
        if not (0 <= dst < self.length and 0 <= src < self.length):
            raise ValueError(f"cannot move position {src} to {dst} (cache holds {self.length})")
        self.kv[:, :, :, dst] = self.kv[:, :, :, src]

    def reset(self) -> None:
        self.rollback(0)

    def rows(self, start: int, end: int) -> torch.Tensor:
        """A copy of every layer's keys and values at positions [start, end) (a prefix to
        share with other caches of the same model: ``voicepipe.nn.llm.prefix``)."""
        if not 0 <= start <= end <= self.length:
            raise ValueError(f"no positions [{start}, {end}) (cache holds {self.length})")
        return self.kv[:, :, :, start:end].clone()

    def put_rows(self, start: int, kv: torch.Tensor) -> None:
        """Write rows (n_layer, 2, Hkv, T, D) at positions [start, start+T) right after what
        the cache holds (start == length): as if those tokens had been fed."""
        if start != self.length:
            raise ValueError(f"rows must follow the cache's {self.length} positions, not {start}")
        end = start + kv.shape[3]
        if end > self.max_len:
            raise CacheFull(f"KV cache full: {end} > {self.max_len} positions")
        self.kv[:, :, :, start:end] = kv
        self.length = end
