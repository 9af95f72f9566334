"""The LLM stage's engine: shared weights, a per-session fork, the cached system prefix.

Not a stage: the local token source (stages/llm/local.py) builds its fork with it.
"""

from __future__ import annotations

import threading
from typing import Any

from voicepipe.config import Config
from voicepipe.stages.llm.tools import active_tools, system_prompt
from voicepipe.tools import Toolbox

_BASES: dict[tuple, object] = {}  # [llm] settings → the process's base engine
_BASES_LOCK = threading.Lock()


def engine_for(cfg: Config):
    """A per-session engine over process-wide shared weights."""
    from voicepipe.nn.llm.engine import load_engine
    from voicepipe.speculative.sampling import SamplingParams

    c = cfg.llm
    if cfg.tools.enabled:  # a bad [tools] name fails now, before seconds of loading
        Toolbox.build(cfg.tools.builtin, cfg.tools.user)
    sp = SamplingParams(c.temperature, c.top_k, c.top_p, c.seed)
    key = (c.model, c.weights, c.drafter, c.spec_k, c.adaptive_k, c.temperature, c.top_k,
           c.top_p, c.seed, c.reply_store, c.prefix_cache, c.prefill_threads,
           c.decode_threads)  # fmt: skip
    with _BASES_LOCK:
        base = _BASES.get(key)
        if base is None:
            # 2048 positions: a voice conversation's window (older turns are dropped), and
            # a per-session fp32 KV cache of ~95 MB for SmolLM2 rather than twice that.
            # Built once per process: a session only forks it (fresh caches), instead of
            # paying the tokenizer, the model registry's manifests and a second cache
            # each time a client says hello.
            base = _BASES[key] = load_engine(
                c.model, c.weights, c.drafter, c.spec_k, c.adaptive_k, sp, max_len=2048,
                reply_store=c.reply_store, prefix_cache=c.prefix_cache,
                prefill_threads=c.prefill_threads, decode_threads=c.decode_threads,
            )  # fmt: skip
    eng = base.fork()  # type: ignore[attr-defined]
    # The first session of the process (or the server's preload) computes the system
    # prompt's keys and values, with the tools the template shows; every later one
    # copies them.
    tools = active_tools(cfg, eng.tokenizer)
    specs = tools.specs() if tools else None
    eng.share_prefix(system_prefix(eng.tokenizer, system_prompt(cfg, tools), specs))
    return eng


def system_prefix(
    tokenizer,
    system_prompt: str,
    tools: list[dict[str, Any]] | None = None,
) -> list[int]:
    """The tokens every prompt of a conversation starts with: the rendered system prompt
    (and the tools block, if any) and whatever the chat template puts before the user's
    words. Found as the common prefix of two renders that differ only in those words,
    so a template that renders its turns unusually shares what is really common and no
    more."""
    from voicepipe.core.tokens import common_prefix

    head = [{"role": "system", "content": system_prompt}] if system_prompt else []
    kw = {"tools": tools} if tools else {}
    a = tokenizer.chat_ids([*head, {"role": "user", "content": "Hello."}], **kw)
    b = tokenizer.chat_ids([*head, {"role": "user", "content": "2"}], **kw)
    return a[: common_prefix(a, b)]
