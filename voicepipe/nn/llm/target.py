"""A GGUF model behind the speculation protocols (``voicepipe.speculative``): a target
whose KV cache persists across calls, and a draft-model proposer built on one.

``ModelTarget`` reuses the longest common prefix of its cache with each new
prompt, so a multi-turn conversation only prefills the new turn; beyond that it
copies prefixes other sessions computed from the model's process-wide prefix
cache (``voicepipe.nn.llm.prefix``), and ``feed`` prefills a prompt in chunks, one
model pass per ``next``. It counts the tokens it ran and copied.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch

from voicepipe.core.tokens import common_prefix
from voicepipe.nn.llm import llama
from voicepipe.nn.llm.prefix import Prefix, PrefixStore, store_for
from voicepipe.nn.threads import BUDGET
from voicepipe.speculative.sampling import SamplingParams, draw, probs
from voicepipe.speculative.types import Proposal, Scores


class ModelTarget:
    tree = False  # scores chains only (FeatureTarget on the fused kernel: trees too)

    def __init__(self, model: llama.Transformer, max_len: int | None = None) -> None:
        self.model = model
        self.cache = model.new_cache(max_len)
        self.fed: list[int] = []  # tokens whose keys/values the cache holds
        # The logits after the last prompt pass's last row (prefill, feed, a batched prompt
        # row): what the model expects after the prompt so far. The streaming prefill reads
        # P(end of the user's turn) from it at no cost (stages/llm/ahead.py).
        self.last_logits: torch.Tensor | np.ndarray | None = None
        # The prompt length last_logits follow (-1: none, or rolled back below it): a
        # prefill of exactly that prompt then needs no pass (the streaming prefill ran
        # the pause's words and the assistant header before the reply asked).
        self._held = -1
        # For drafters that read the target's hidden states (EAGLE style): a
        # (max_len, dim) buffer whose row i is position i's state after the final norm.
        self.feats: torch.Tensor | None = None
        # The model's process-wide prefix cache (None: this target neither reads nor fills it).
        self.prefixes: PrefixStore | None = store_for(model)
        # Counters over the target's life (callers take differences around a turn):
        self.prefilled = 0  # prompt tokens run through the model by prefill / feed / share
        self.shared = 0  # prompt tokens copied from the prefix cache instead
        self.passes = 0  # model passes run
        # passes that wanted several threads and got one, because another model call (the
        # ASR, the TTS, another session) was in flight: what slows a turn's decode in a
        # server against the same pass measured alone (llm.tpot's attributes)
        self.narrowed = 0
        # Threads of the fused kernel for a pass of several prompt tokens (1: the model's
        # own setting). A prompt pass is compute-bound and runs while the other stages
        # wait for the reply, so a second core nearly halves it (a decode pass: see
        # decode_threads below). The kernel splits by output rows and heads: the result
        # does not depend on it.
        self.prefill_threads = 1
        # Threads of a decode (verify) pass when no other model call is in flight: the
        # reply's first clause is decoded while the ASR is done and the TTS still waits
        # for text, so a second core shortens the wait for the first audio. With the TTS
        # (or another session) busy, the budget gives one (voicepipe/nn/threads.py).
        self.decode_threads = 1
        # Prompt rows attended one at a time on aten's path, so a prompt's keys and values
        # do not depend on how it was split into passes (aten's fused attention over a
        # block of rows is not batch-invariant; the fused kernel is row-wise always). Set
        # by the streaming prefill (stages/llm/ahead.py), which splits a turn's prompt
        # wherever the user's words happened to be agreed.
        self.rowwise_prompt = False

    @property
    def length(self) -> int:
        return self.cache.length

    @property
    def max_len(self) -> int:
        return self.cache.max_len

    def _reuse(self, tokens: list[int]) -> int:
        """How many leading tokens the cache can hold without a model pass: its common
        prefix with ``tokens``, extended by a longer prefix from the prefix cache (copied in
        here). The cache may still hold positions past that; callers roll back."""
        n = common_prefix(self.fed, tokens)
        p = None if self.prefixes is None else self.prefixes.longest(tokens, self.feats is not None)
        if p is None or len(p.tokens) <= n:
            return n
        end = len(p.tokens)
        self.rollback(n)
        self.cache.put_rows(n, p.kv[:, :, :, n:end])
        if self.feats is not None and p.feats is not None:
            self.feats[n:end] = p.feats[n:end]
        self.fed = list(p.tokens)
        self.shared += end - n
        return end

    def _run(self, tokens: list[int], start: int, end: int) -> torch.Tensor:
        """Feed tokens[start:end] after the cache's first ``start`` positions."""
        self.rollback(start)
        # A pass of several prompt tokens is compute-bound: prefill_threads when no other
        # model call runs (voicepipe/nn/threads.py), else one. The kernel splits by
        # output rows and heads: the result does not depend on it.
        want = self.prefill_threads if end - start > 1 else 1
        with self._kernel_threads(want) as n:
            logits = llama.prefill(
                self.model, self.cache, tokens[start:end], self.feats, n, self.rowwise_prompt
            )
        self.last_logits = logits
        self._held = end
        self.fed = list(tokens[:end])
        self.prefilled += end - start
        return logits

    def reusable(self, tokens: list[int]) -> int:
        """How many leading tokens of ``tokens`` need no model pass: those the cache holds,
        or a longer prefix the process-wide prefix cache holds (copied in here now)."""
        return self._reuse(tokens)

    def prefill(self, tokens: list[int]) -> np.ndarray:
        n = self._reuse(tokens)
        if n == len(tokens):
            if self._held == n and self.last_logits is not None:  # computed already
                self.rollback(n)
                return np.asarray(self.last_logits)
            n -= 1  # need at least one fed token for its logits
        return self._run(tokens, n, len(tokens)).numpy()

    def hold(self, logits: torch.Tensor | np.ndarray, length: int) -> None:
        """``logits`` follow the cache's first ``length`` tokens (a batched prompt pass)."""
        self.last_logits = logits
        self._held = length

    def prefill_rows(self, tokens: list[int], row: int) -> tuple[np.ndarray, np.ndarray] | None:
        """Make the cache hold all of ``tokens`` in one pass over what it lacks; (the logits
        after ``tokens[:row + 1]``, those after all of them, held for ``prefill``). None,
        nothing run, when the pass would not reach ``row``. The streaming prefill reads
        P(end of the user's turn) at the pause's last word and feeds the assistant header
        in the same pass, so the reply's first token needs no pass of its own."""
        n = min(self._reuse(tokens), len(tokens) - 1)
        if not n <= row < len(tokens):
            return None
        self.rollback(n)
        t = torch.as_tensor(tokens[n:], dtype=torch.long)
        with self._kernel_threads(self.prefill_threads if len(t) > 1 else 1) as th:
            logits = llama.forward(
                self.model, self.cache, t, n, rowwise=True, feats=self.feats, threads=th
            )  # (T, V): every row's head, a few rows
        self.last_logits = logits[-1]
        self._held = len(tokens)
        self.fed = list(tokens)
        self.prefilled += len(tokens) - n
        return logits[row - n].numpy(), logits[-1].numpy()

    def feed(self, tokens: list[int], chunk: int) -> Iterator[int]:
        """Make the cache hold ``tokens[:-1]`` (then ``prefill(tokens)`` runs one token),
        at most ``chunk`` tokens per model pass; yields each pass's token count.

        Chunking changes no result on the fused kernel: each row is computed as a
        one-token decode would be, whatever the pass it is in."""
        end = len(tokens) - 1
        n = min(self._reuse(tokens), max(end, 0))
        self.rollback(n)
        step = max(1, chunk)
        while n < end:
            m = min(end, n + step)
            self._run(tokens, n, m)
            yield m - n
            n = m

    def share(self, tokens: list[int]) -> int:
        """Put ``tokens``' keys and values into the prefix cache unless it has them: one
        model pass in this target's cache, once per model and prefix (a later prefill
        copies them from there). Returns the tokens that needed a model pass."""
        if not tokens or self.prefixes is None:
            return 0
        if self.prefixes.get(tokens, self.feats is not None) is not None:
            return 0
        n = common_prefix(self.fed, tokens)
        if n == len(tokens):
            self.rollback(n)
        else:
            self._run(tokens, n, len(tokens))
        end = len(tokens)
        f = None if self.feats is None else self.feats[:end].clone()
        self.prefixes.add(Prefix(tuple(tokens), self.cache.rows(0, end), f))
        return end - n

    @contextmanager
    def _kernel_threads(self, want: int) -> Iterator[int]:
        """The fused kernel's threads for one pass, claimed from the process's budget
        (voicepipe/nn/threads.py: counted, so other calls then keep to one thread): 0, the
        model's own setting, when one is wanted."""
        with BUDGET.claim(want) as n:
            self.passes += 1
            self.narrowed += n < want
            yield n if want > 1 else 0

    def score(self, tokens: list[int], parents: list[int] | None = None) -> Scores:
        best = torch.empty(len(tokens), dtype=torch.long)  # each row's argmax
        want = self.decode_threads
        with self._kernel_threads(want) as n:
            logits = llama.verify(self.model, self.cache, tokens, self.feats, parents, best, n)
        self.fed += tokens
        return Scores(logits.numpy(), best.numpy())

    def extend(self, tokens: list[int]) -> np.ndarray:
        """Feed tokens after the cache; logits (V,) of the last one only (a tool call's
        forced text, speculative/jump.py: no head rows, no argmax for the others). The
        fused kernel computes each row as a one-token decode would, so the last row's
        choice is the one plain decoding makes."""
        with self._kernel_threads(self.decode_threads) as n:
            logits = llama.forward(
                self.model, self.cache, torch.as_tensor(tokens, dtype=torch.long),
                self.cache.length, last_only=True, rowwise=True, feats=self.feats, threads=n,
            )[0]  # fmt: skip
        self.fed += tokens
        return logits.numpy()  # type: ignore[no-any-return]

    def rollback(self, length: int) -> None:
        if length < self._held:
            self._held = -1
        self.cache.rollback(length)
        del self.fed[length:]

    def move(self, src: int, dst: int) -> None:
        """Slot src's keys, values (and feature) become position dst's (a tree's
        accepted sibling: its keys already carry dst's rotation)."""
        self.cache.move(src, dst)
        if self.feats is not None:
            self.feats[dst] = self.feats[src]
        self.fed[dst] = self.fed[src]


class ModelProposer:
    """Drafts K tokens autoregressively with a small model (greedy or sampled)."""

    def __init__(self, model: llama.Transformer, sampling: SamplingParams, name: str = "") -> None:
        self.name = name or f"draft:{model.args.name}"
        self.target = ModelTarget(model)
        self.sp = sampling
        self.rng = np.random.default_rng(sampling.seed + 1)

    def reset(self) -> None:
        self.target.rollback(0)

    def _pick(self, logits: np.ndarray) -> tuple[int, np.ndarray | None]:
        if self.sp.greedy:
            return int(logits.argmax()), None
        p = probs(logits, self.sp)
        return draw(p, float(self.rng.random())), p

    def propose(self, context: list[int], k: int) -> Proposal:
        if k <= 0 or len(context) + k > self.target.max_len:
            return Proposal(tokens=[])
        logits = self.target.prefill(context)  # feeds only what the cache lacks
        tokens: list[int] = []
        rows: list[np.ndarray] = []
        for i in range(k):
            t, p = self._pick(logits)
            tokens.append(t)
            if p is not None:
                rows.append(p)
            if i < k - 1:
                logits = self.target.score([t]).logits[0]
        return Proposal(tokens=tokens, probs=np.stack(rows) if rows else None)
