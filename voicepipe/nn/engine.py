"""GGUF models behind the speculation protocols: a target, a draft-model proposer, glue.

``ModelTarget`` (``voicepipe.nn.target``) keeps its KV cache across calls and
reuses the longest common prefix with each new prompt, so a multi-turn
conversation only prefills the new turn. ``ModelProposer`` is a smaller model
sharing the tokenizer (e.g. Qwen2.5-Coder 0.5B for the 1.5B); it keeps its own
cache in sync the same way.
Any object with ``name``, ``propose(context, k) -> Proposal`` and ``reset()``
can stand in for it (``voicepipe.spec.types.Proposer``).

A new session need not prefill the system prompt either: ``Engine.share_prefix``
keeps a prefix's keys and values in a process-wide store per model
(``voicepipe.nn.prefix``) that every target copies from. And ``Engine.feed``
prefills a long prompt in chunks, one model pass per step, so the caller can
yield between them (the LLM stage runs one step per thread hop).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from voicepipe.nn import llama
from voicepipe.nn.target import ModelProposer, ModelTarget
from voicepipe.nn.tokenizer import ChatTokenizer
from voicepipe.spec.adaptive import CostAwareK
from voicepipe.spec.hybrid import HybridProposer
from voicepipe.spec.loop import SpeculativeDecoder
from voicepipe.spec.ngram import NgramProposer
from voicepipe.spec.replies import ReplyIndex, ReplyProposer
from voicepipe.spec.sampling import SamplingParams
from voicepipe.spec.types import Proposer


def gguf_path(name_or_path: str) -> Path:
    """The GGUF file of a registry model name, a directory holding one, or a file path."""
    from voicepipe import registry

    p = registry.resolve(name_or_path)
    if p.is_file():
        return p
    try:
        gguf = registry.get(name_or_path).extra.get("gguf")
    except Exception:  # a plain directory, not a manifest name
        gguf = None
    if gguf:
        return p / gguf
    found = sorted(p.glob("*.gguf"))
    if not found:
        raise FileNotFoundError(f"no .gguf file in {p}")
    return found[0]


@dataclass
class Engine:
    """A loaded target model with its tokenizer and drafter, ready to decode.

    Weights are shared between sessions (``load_engine`` caches them); each
    session takes its own ``fork()`` with its own KV caches.
    """

    model: llama.Transformer
    tokenizer: ChatTokenizer
    target: ModelTarget
    proposer: Proposer | None
    sampling: SamplingParams
    k: int = 4
    adaptive: bool = True
    load_s: float = 0.0
    drafter: str = "none"
    draft_model: llama.Transformer | None = None
    # An EAGLE draft's inference weights (draft_spec.prepare), shared by every fork.
    eagle: Any = None
    k_max: int = 8
    verify_cost: float = 1.5  # AdaptiveK pauses speculation below this break-even
    draft_cost: float = 0.0  # target decodes per drafted token (draft models: spec.adaptive)
    # The EAGLE draft's reply store (spec.replies), shared by every fork; None: none.
    replies: ReplyIndex | None = None
    # Targets read and fill the model's process-wide prefix cache (share_prefix).
    prefix_cache: bool = True

    def __post_init__(self) -> None:
        if not self.prefix_cache:
            for t in self._targets():
                t.prefixes = None

    def _targets(self) -> list[ModelTarget]:
        """The target's and a GGUF draft model's (its own KV cache over the same prompt)."""
        out = [self.target]
        p = self.proposer
        if isinstance(p, HybridProposer):
            p = p.draft
        if isinstance(p, ModelProposer):
            out.append(p.target)
        return out

    def share_prefix(self, tokens: list[int]) -> int:
        """Keep ``tokens`` (e.g. the rendered system prompt) in the process-wide prefix
        cache, computed on the first call per model and prefix (in this session's caches);
        later sessions' prefills copy it from there. Returns the target tokens that
        needed a model pass here."""
        if not self.prefix_cache or not tokens:
            return 0
        n = self.target.share(tokens)
        for t in self._targets()[1:]:
            t.share(tokens)
        return n

    def feed(self, tokens: list[int], chunk: int) -> Iterator[int]:
        """Prefill a prompt's all but last token, ``chunk`` tokens per model pass (the
        draft model's cache too); a generator: one pass per ``next``. The decoder's own
        prefill then runs only the last token; output is unchanged (``ModelTarget.feed``)."""
        for t in self._targets():
            yield from t.feed(tokens, chunk)

    def decoder(self) -> SpeculativeDecoder:
        # Behind prompt lookup a draft model's length is its proposer's own choice
        # (spec.hybrid): the decoder's K only caps it, and never pauses.
        hybrid = isinstance(self.proposer, HybridProposer)
        return SpeculativeDecoder(
            self.target,
            self.proposer,
            self.sampling,
            k=self.k,
            adaptive=self.adaptive,
            k_max=self.k_max,
            verify_cost=self.verify_cost,
            draft_cost=0.0 if hybrid else self.draft_cost,
        )

    def fork(
        self, sampling: SamplingParams | None = None, prefix_cache: bool | None = None
    ) -> Engine:
        """Same weights, fresh caches (one per session)."""
        sp = sampling or self.sampling
        target, proposer = _session(
            self.model, self.drafter, sp, self.draft_model, self.eagle, self.draft_cost,
            self.replies,
        )  # fmt: skip
        share = self.prefix_cache if prefix_cache is None else prefix_cache
        return replace(  # __post_init__ detaches the new caches from the prefix cache if off
            self, target=target, proposer=proposer, sampling=sp, prefix_cache=share
        )


def _session(
    model: llama.Transformer,
    drafter: str,
    sp: SamplingParams,
    draft_model: llama.Transformer | None,
    eagle: Any,
    draft_cost: float = 0.0,
    replies: ReplyIndex | None = None,
) -> tuple[ModelTarget, Proposer | None]:
    """A session's target and proposer: fresh caches over shared weights."""
    if eagle is not None:  # the EAGLE draft reads the target's features: built as a pair
        from voicepipe.nn.draft_spec import attach

        target, prop = attach(
            model, eagle, name=drafter, min_path=EAGLE_MIN_PATH, alt_min=EAGLE_ALT_MIN
        )
        if drafter.startswith(HYBRID):
            ngram = NgramProposer(min_n=HYBRID_MIN_N)
            store = None
            if replies is not None:
                store = ReplyProposer(replies, min_n=STORE_MIN_N, min_path=STORE_MIN_PATH)
            return target, HybridProposer(
                ngram, prop, drafter, draft_k=EAGLE_K, store=store,
                store_first_order=STORE_FIRST_ORDER, store_first_share=STORE_FIRST_SHARE,
            )  # fmt: skip
        return target, prop
    if drafter.startswith(HYBRID):  # a GGUF draft model behind prompt lookup
        prop = _proposer(drafter.removeprefix(HYBRID), sp, draft_model)
        assert prop is not None
        ctl = CostAwareK(draft_cost, k_max=HYBRID_K_MAX)
        return ModelTarget(model), HybridProposer(
            NgramProposer(min_n=HYBRID_MIN_N), prop, drafter, draft_ctl=ctl
        )
    return ModelTarget(model), _proposer(drafter, sp, draft_model)


def _proposer(
    drafter: str, sp: SamplingParams, draft_model: llama.Transformer | None
) -> Proposer | None:
    if drafter in ("", "none", "off"):
        return None
    if drafter == "ngram":
        return NgramProposer()
    assert draft_model is not None
    return ModelProposer(draft_model, sp, name=drafter)


# "ngram+<draft>": prompt lookup where the context has a match of HYBRID_MIN_N tokens
# or more (quotes, repeats), the draft (EAGLE or a GGUF model) otherwise. 2, not 3:
# replayed over 40 held-out prompts and bench llm's grounded set (bench replay), 2
# gave 1.53x / 1.77x where 3 gave 1.53x / 1.68x with the EAGLE draft.
HYBRID = "ngram+"
HYBRID_MIN_N = 2
EAGLE_K = 3  # the EAGLE draft's longest proposal in the engine
# ... drafting on only while its own probability of the proposal is ≥ this: replayed
# over 40 held-out prompts (bench replay), 0.4 gave 1.37x where always drafting 2
# gave 1.34x and always 3 1.33x.
EAGLE_MIN_PATH = 0.4
# ... and each guess's two runner-ups as sibling leaves (a verify row each, no draft
# step) while the draft's probability of one is ≥ this: where the first guess is
# wrong the second likeliest token is right a third of the time. A row's price
# depends on the host: inside real loops ~0.05 decodes while the weight stream is
# slow (plain decoding ~130 tok/s here), ~0.09-0.13 when it is fast (~200 tok/s),
# where its products are no longer hidden. Replayed with those prices, 0.15 gives
# +3 % / +1.4 % over no siblings, 0.05 +5.7 % / -1.5 %; by wall clock (bench draft
# --siblings 0.15,0.05,off, four runs rotating the order, plain 155-193 tok/s) 0.15
# gave 1.43x, 0.05 1.39x, none 1.39x.
EAGLE_ALT_MIN = 0.15
HYBRID_K_MAX = 6  # prompt lookup's, in the hybrid
# Where lookup has no match, the draft's reply store (spec.replies) drafts the
# continuation most of the target's past replies had after the context's longest
# match of ≥ STORE_MIN_N tokens, while the share of them that agree (multiplied
# over the tokens) stays ≥ STORE_MIN_PATH; else the EAGLE draft. Replayed on the
# 40 held-out prompts at real-loop pass prices: 0.5 +10.3 %, 0.7 +8.4 %, 0.8
# +7.4 % over no store (30 open questions: +3.4 / +1.6 / +1.5 %); min_n 3 and 4
# gave less (bench replay's hybrid_store_* rows; docs/BENCHMARKS.md, session 10).
STORE_MIN_N = 2
STORE_MIN_PATH = 0.5
# ... and it drafts instead of a lookup match of ≤ STORE_FIRST_ORDER tokens (right
# 49-54 % of the time) where ≥ STORE_FIRST_SHARE of its occurrences agree on the
# first token (right ~92 %): replayed +1.3 % on the held-out prompts, +0.2 % on
# open questions, ±0 on grounded ones (bench replay's hybrid_lookup_first row).
STORE_FIRST_ORDER = 3
STORE_FIRST_SHARE = 0.8


_MODELS: dict[tuple[str, str, int], tuple[llama.Transformer, float]] = {}
_EAGLES: dict[tuple[str, int], Any] = {}
_REPLIES: dict[str, ReplyIndex] = {}
REPLIES_FILE = "replies.npz"
_LOCK = threading.Lock()


def shared_model(path: Path, weights: str, max_len: int) -> tuple[llama.Transformer, float]:
    """Load once per process; (model, seconds the first load took)."""
    key = (str(path), weights, max_len)
    with _LOCK:
        if key not in _MODELS:
            _MODELS[key] = llama.load(path, weights, max_len=max_len)
        return _MODELS[key]


def shared_eagle(name: str, model: llama.Transformer, cache: bool = True) -> Any:
    """An EAGLE draft's inference weights for ``model``, prepared once per process."""
    from voicepipe.nn.draft_spec import draft_path, load_draft, prepare

    path = str(draft_path(name))
    key = (path, id(model))
    with _LOCK:
        if key not in _EAGLES or not cache:
            runner = prepare(load_draft(path), model)
            if not cache:
                return runner
            _EAGLES[key] = (runner, model)  # the model ref keeps id(model) from being reused
        return _EAGLES[key][0]


def shared_replies(name: str) -> ReplyIndex | None:
    """The reply store beside an EAGLE draft's checkpoint (``replies.npz``: ``voicepipe
    train draft --stage replies``), indexed once per process; None if it has none."""
    from voicepipe.nn.draft_spec import DraftError, draft_path

    path = draft_path(name).parent / REPLIES_FILE
    if not path.exists():
        return None
    key = str(path)
    with _LOCK:
        if key not in _REPLIES:
            try:
                _REPLIES[key] = ReplyIndex.load(key)
            except (OSError, ValueError, KeyError) as e:  # truncated, not an npz, wrong arrays
                fix = (
                    "rebuild it with: voicepipe train draft --stage replies"
                    if Path(name).exists()  # a checkpoint path, not a registry model
                    else f"fetch it again with: voicepipe models pull {name}"
                )
                raise DraftError(
                    f"reply store {path} is unreadable ({e}); {fix}, "
                    "or set [llm] reply_store = false"
                ) from e
        return _REPLIES[key]


# Bytes per weight of each format (int4: Q4_1-shaped, scale and min per 32).
_BYTES = {"fp32": 4.0, "bf16": 2.0, "int8": 1.0, "int4": 0.69}


def load_engine(
    model: str = "smollm2-135m",
    weights: str = "int8",
    drafter: str = "ngram",
    k: int = 4,
    adaptive: bool = True,
    sampling: SamplingParams | None = None,
    max_len: int = 4096,
    threads: int | None = None,
    cache: bool = True,
    draft_weights: str = "int4",
    k_max: int = 0,
    reply_store: bool = True,
    prefix_cache: bool = True,
) -> Engine:
    """Target (+ drafter: "none", "ngram", an EAGLE draft (e.g. "smollm2-draft") or a
    GGUF draft model's name/path sharing the tokenizer; "ngram+<either>": prompt
    lookup where the context has a 2-token match, the draft otherwise).

    A GGUF draft model runs in ``draft_weights`` (int4 by default): its tokens are
    only proposals, so its precision barely moves acceptance, while its decode
    cost is paid K times per step. An EAGLE draft's weights are prepared once per
    process and target model (``shared_eagle``); each fork has its own caches.
    Behind prompt lookup an EAGLE draft's reply store drafts too (``shared_replies``),
    unless ``reply_store`` is False. ``prefix_cache``: sessions share prompt prefixes'
    keys and values (``Engine.share_prefix``).
    """
    from voicepipe.nn.draft_spec import is_eagle_draft

    if threads:
        torch.set_num_threads(threads)
    sp = sampling or SamplingParams()
    get = shared_model if cache else (lambda p, w, n: llama.load(p, w, max_len=n))
    m, load_s = get(gguf_path(model), weights, max_len)
    tok = ChatTokenizer(m.metadata)
    draft = eagle = replies = None
    name = drafter.removeprefix(HYBRID)
    if drafter.startswith(HYBRID) and name in ("", "none", "off", "ngram"):
        raise ValueError(f"drafter {drafter!r}: name a draft model after {HYBRID!r}")
    if is_eagle_draft(name):
        eagle = shared_eagle(name, m, cache)
        if drafter.startswith(HYBRID) and reply_store:  # behind lookup, beside the draft
            replies = shared_replies(name)
    elif name not in ("", "none", "off", "ngram"):
        draft, _ = get(gguf_path(name), draft_weights, m.max_len)
        if draft.args.vocab_size > m.args.vocab_size:
            raise ValueError(f"draft {drafter!r} has a larger vocabulary than the target")
    verify_cost = 1.5
    draft_cost = 0.0
    if draft is not None:
        # A draft model's step reads its own weights, as the target's reads the
        # target's: its price per drafted token is the byte ratio (0.35 for the
        # Qwen 0.5B on the 1.5B; bench llm measured 26 vs 77 ms per token).
        draft_cost = (draft.n_params * _BYTES[draft_weights]) / (m.n_params * _BYTES[weights])
    target, proposer = _session(m, drafter, sp, draft, eagle, draft_cost, replies)
    if drafter == "ngram":
        # Prompt lookup costs nothing to draft and proposes no more than its
        # match's order (spec/ngram.py), and a pass over 2-4 rows costs about one
        # decode on the fused step (bench llm verify_cost): pausing only lost the
        # long matches that came after a run of misses.
        verify_cost = 1.0
    if eagle is not None:
        # Measured (docs/BENCHMARKS.md, bench draft): the EAGLE draft's third guess is
        # right < 10 % of the time, so it drafts at most EAGLE_K, and a third only when
        # it is sure (EAGLE_MIN_PATH; the hybrid lets prompt lookup go longer); and
        # speculation never pauses (break-even 0):
        # pausing below 0.5 accepted per pass (AdaptiveK's default) cost 0.1-0.15x
        # with this drafter, whose misses come in short runs.
        k_max = k_max or (HYBRID_K_MAX if drafter.startswith(HYBRID) else EAGLE_K)
        verify_cost = 1.0
    elif drafter.startswith(HYBRID):
        # Lookup proposals are free and the draft model's own CostAwareK pauses it
        # where it does not pay (spec.hybrid), so the decoder never pauses.
        k_max = k_max or HYBRID_K_MAX
        verify_cost = 1.0
    return Engine(
        m, tok, target, proposer, sp, k, adaptive, load_s, drafter, draft, eagle,
        k_max or 8, verify_cost, draft_cost, replies, prefix_cache,
    )  # fmt: skip
