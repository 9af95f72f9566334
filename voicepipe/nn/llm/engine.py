"""GGUF models behind the speculation protocols: a target, a draft-model proposer, glue.

``ModelTarget`` (``voicepipe.nn.llm.target``) keeps its KV cache across calls and
reuses the longest common prefix with each new prompt, so a multi-turn
conversation only prefills the new turn. ``ModelProposer`` is a smaller model
sharing the tokenizer (e.g. Qwen2.5-Coder 0.5B for the 1.5B); it keeps its own
cache in sync the same way.
Any object with ``name``, ``propose(context, k) -> Proposal`` and ``reset()``
can stand in for it (``voicepipe.speculative.types.Proposer``).

A new session need not prefill the system prompt either: ``Engine.share_prefix``
keeps a prefix's keys and values in a process-wide store per model
(``voicepipe.nn.llm.prefix``) that every target copies from. And ``Engine.feed``
prefills a long prompt in chunks, one model pass per step, so the caller can
yield between them (the LLM stage runs one step per thread hop).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from voicepipe.nn.llm import llama
from voicepipe.nn.llm.target import ModelProposer, ModelTarget
from voicepipe.nn.llm.tokenizer import ChatTokenizer
from voicepipe.speculative.adaptive import CostAwareK
from voicepipe.speculative.drafter import DrafterSpec, Tunings
from voicepipe.speculative.hybrid import HybridProposer
from voicepipe.speculative.loop import SpeculativeDecoder
from voicepipe.speculative.ngram import NgramProposer
from voicepipe.speculative.replies import ReplyIndex, ReplyProposer
from voicepipe.speculative.sampling import SamplingParams
from voicepipe.speculative.types import Proposer


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
    drafter: DrafterSpec = field(default_factory=lambda: DrafterSpec("none", "none"))
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
    # Fused-kernel threads of a multi-token prompt pass (ModelTarget.prefill_threads).
    prefill_threads: int = 1
    # Fused-kernel threads of a decode pass run alone (ModelTarget.decode_threads).
    decode_threads: int = 1

    def __post_init__(self) -> None:
        for t in self._targets():
            t.prefill_threads = self.prefill_threads
            t.decode_threads = self.decode_threads
            if not self.prefix_cache:
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
    drafter: DrafterSpec,
    sp: SamplingParams,
    draft_model: llama.Transformer | None,
    eagle: Any,
    draft_cost: float = 0.0,
    replies: ReplyIndex | None = None,
) -> tuple[ModelTarget, Proposer | None]:
    """A session's target and proposer: fresh caches over shared weights."""
    t = drafter.tunings
    if eagle is not None:  # the EAGLE draft reads the target's features: built as a pair
        from voicepipe.nn.llm.draft_spec import attach

        target, prop = attach(
            model,
            eagle,
            name=drafter.text,
            min_path=t.eagle_min_path,
            alt_min=t.eagle_alt_min,
            window=t.eagle_window,
        )
        if drafter.lookup:
            store = None
            if replies is not None:
                store = ReplyProposer(replies, min_n=t.store_min_n, min_path=t.store_min_path)
            return target, HybridProposer(
                NgramProposer(min_n=t.lookup_min_n), prop, drafter.text, draft_k=t.eagle_k,
                store=store, store_first_order=t.store_first_order,
                store_first_share=t.store_first_share,
            )  # fmt: skip
        return target, prop
    if drafter.kind == "none":
        return ModelTarget(model), None
    if drafter.kind == "ngram":
        return ModelTarget(model), NgramProposer()
    assert draft_model is not None
    model_prop = ModelProposer(draft_model, sp, name=drafter.name)
    if drafter.lookup:  # a GGUF draft model behind prompt lookup, priced by its own K
        ctl = CostAwareK(draft_cost, k_max=t.lookup_k_max)
        return ModelTarget(model), HybridProposer(
            NgramProposer(min_n=t.lookup_min_n), model_prop, drafter.text, draft_ctl=ctl
        )
    return ModelTarget(model), model_prop


# The drafters' tunings (K ceilings, confidence thresholds, the reply store's rules) live
# with the parsed drafter setting: voicepipe/speculative/drafter.py; the runs that chose them are
# in docs/BENCHMARKS.md (LLM section).
TUNINGS = Tunings()


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
    from voicepipe.nn.llm.draft_spec import draft_path, load_draft, prepare

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
    from voicepipe.nn.llm.draft_spec import DraftError, draft_path

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
    prefill_threads: int = 1,
    decode_threads: int = 1,
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
    keys and values (``Engine.share_prefix``). ``prefill_threads``: fused-kernel threads
    of a prompt pass (``ModelTarget.prefill_threads``), ``decode_threads`` of a decode
    pass that runs alone (``ModelTarget.decode_threads``).
    """
    from voicepipe.nn.llm.draft_spec import is_eagle_draft

    if threads:
        torch.set_num_threads(threads)
    spec = DrafterSpec.parse(
        drafter, is_eagle=is_eagle_draft, reply_store=reply_store, tunings=TUNINGS
    )
    sp = sampling or SamplingParams()
    get = shared_model if cache else (lambda p, w, n: llama.load(p, w, max_len=n))
    m, load_s = get(gguf_path(model), weights, max_len)
    tok = ChatTokenizer(m.metadata)
    draft = eagle = replies = None
    if spec.kind == "eagle":
        eagle = shared_eagle(spec.name, m, cache)
        if spec.reply_store:  # behind lookup, beside the draft
            replies = shared_replies(spec.name)
    elif spec.kind == "model":
        draft, _ = get(gguf_path(spec.name), draft_weights, m.max_len)
        if draft.args.vocab_size > m.args.vocab_size:
            raise ValueError(f"draft {drafter!r} has a larger vocabulary than the target")
    draft_cost = 0.0
    if draft is not None:
        # A draft model's step reads its own weights, as the target's reads the
        # target's: its price per drafted token is the byte ratio (docs/BENCHMARKS.md,
        # cost-aware K).
        draft_cost = (draft.n_params * _BYTES[draft_weights]) / (m.n_params * _BYTES[weights])
    target, proposer = _session(m, spec, sp, draft, eagle, draft_cost, replies)
    return Engine(
        m, tok, target, proposer, sp, k, adaptive, load_s, spec, draft, eagle,
        k_max or spec.k_max, spec.verify_cost, draft_cost, replies, prefix_cache,
        prefill_threads, decode_threads,
    )  # fmt: skip
