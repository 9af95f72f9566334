"""Tokenizer and chat template from GGUF metadata.

The byte-level BPE (``tokenizer.ggml.model == "gpt2"``) is rebuilt with the
``tokenizers`` library from the vocabulary and merges stored in the GGUF;
the pre-tokenizer follows ``tokenizer.ggml.pre`` the way llama.cpp does
(SmolLM: digits split one by one, then GPT-2 byte-level; Qwen2: the Qwen
split regex with single digits). Control tokens (``<|im_start|>`` …) are
special tokens so they are matched whole and never split.

The chat template the GGUF carries is rendered with jinja2 in a sandbox,
with the same options as Hugging Face (trim_blocks, lstrip_blocks) and its
``tojson`` (keys in the given order, no HTML escaping: Qwen2.5's template
renders tool schemas and calls with it, and the model learnt that form).
A template that reads a ``tools`` variable supports function calling
(``supports_tools``); tools are rendered by the template itself.
"""

from __future__ import annotations

import json
from typing import Any

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

# llama.cpp's pre-tokenizer regex for qwen2 (same as Hugging Face's Qwen2 tokenizer).
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
CONTROL, USER_DEFINED = 3, 4


class TokenizerError(RuntimeError):
    pass


class ChatTokenizer:
    def __init__(self, meta: dict[str, Any]) -> None:
        kind = meta.get("tokenizer.ggml.model")
        if kind != "gpt2":
            raise TokenizerError(f"unsupported GGUF tokenizer model {kind!r} (only gpt2 BPE)")
        tokens: list[str] = list(meta["tokenizer.ggml.tokens"])
        merges = [tuple(m.split(" ", 1)) for m in meta["tokenizer.ggml.merges"]]
        types = list(meta.get("tokenizer.ggml.token_type", [1] * len(tokens)))
        vocab = {t: i for i, t in enumerate(tokens)}
        tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False))
        pre = meta.get("tokenizer.ggml.pre", "gpt2")
        byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        if pre in ("qwen2", "deepseek-llm"):
            tok.pre_tokenizer = pre_tokenizers.Sequence(
                [
                    pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"),
                    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
                ]
            )
        elif pre in ("smollm", "starcoder", "refact"):
            tok.pre_tokenizer = pre_tokenizers.Sequence(
                [pre_tokenizers.Digits(individual_digits=True), byte_level]
            )
        else:
            tok.pre_tokenizer = byte_level
        tok.decoder = decoders.ByteLevel()
        specials = [
            AddedToken(t, special=True, normalized=False)
            for t, ty in zip(tokens, types, strict=False)
            if ty in (CONTROL, USER_DEFINED)
        ]
        tok.add_special_tokens(specials)
        self.tok = tok
        self.tokens = tokens
        self._vocab = vocab
        self.special_ids = {vocab[s.content] for s in specials}
        self.bos_id: int | None = meta.get("tokenizer.ggml.bos_token_id")
        self.eos_id: int | None = meta.get("tokenizer.ggml.eos_token_id")
        self.add_bos = bool(meta.get("tokenizer.ggml.add_bos_token", False))
        self.template: str | None = meta.get("tokenizer.chat_template")
        # Ends a reply: the EOS token plus the turn terminators chat templates use.
        self.stop_ids = {i for i in (self.eos_id,) if i is not None}
        for name in ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end|>"):
            if name in vocab:
                self.stop_ids.add(vocab[name])

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    def encode(self, text: str, add_bos: bool | None = None) -> list[int]:
        ids = self.tok.encode(text, add_special_tokens=False).ids
        if (self.add_bos if add_bos is None else add_bos) and self.bos_id is not None:
            ids = [self.bos_id, *ids]
        return ids

    def decode(self, ids: list[int], skip_special: bool = True) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=skip_special)

    def token_bytes(self, token: int) -> bytes:
        """The raw bytes one token stands for (byte-level BPE symbols → bytes)."""
        return bytes(_UNICODE_TO_BYTE[c] for c in self.tokens[token] if c in _UNICODE_TO_BYTE)

    @property
    def supports_tools(self) -> bool:
        """Whether the chat template renders a ``tools`` list (function calling)."""
        return bool(self.template) and "tools" in _variables(self.template or "")

    def id_of(self, token: str) -> int | None:
        return self._vocab.get(token)

    def render(
        self,
        messages: list[dict[str, Any]],
        add_generation_prompt: bool = True,
        tools: list[dict[str, Any]] | None = None,
    ) -> str:
        """Render the GGUF's chat template (a plain ChatML fallback when it has none);
        ``tools``: OpenAI-style function entries, for a template that supports them."""
        if tools and not self.supports_tools:
            raise TokenizerError("this model's chat template does not render tools")
        if not self.template:
            out = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
            return out + ("<|im_start|>assistant\n" if add_generation_prompt else "")
        return _compile(self.template).render(
            messages=messages,
            add_generation_prompt=add_generation_prompt,
            tools=tools or None,
            bos_token=self.tokens[self.bos_id] if self.bos_id is not None else "",
            eos_token=self.tokens[self.eos_id] if self.eos_id is not None else "",
        )

    def chat_ids(
        self,
        messages: list[dict[str, Any]],
        add_generation_prompt: bool = True,
        tools: list[dict[str, Any]] | None = None,
    ) -> list[int]:
        return self.encode(self.render(messages, add_generation_prompt, tools), add_bos=False)


class StreamDecoder:
    """Turns a token stream into text deltas without splitting UTF-8 characters.

    Special tokens give no text, except those in ``keep`` (e.g. ``<tool_call>``, which
    the LLM stage must see to hold a call's JSON back from speech)."""

    def __init__(self, tok: ChatTokenizer, keep: frozenset[int] = frozenset()) -> None:
        self.tok = tok
        self.keep = keep
        self.buf = b""

    def push(self, token: int) -> str:
        if token in self.tok.special_ids and token not in self.keep:
            return ""
        self.buf += self.tok.token_bytes(token)
        try:
            text = self.buf.decode("utf-8")
        except UnicodeDecodeError as e:
            if e.start == 0 and len(self.buf) < 4 and e.reason == "unexpected end of data":
                return ""  # wait for the rest of the character
            text = self.buf[: e.start].decode("utf-8") if e.start else ""
            if e.reason == "unexpected end of data":
                self.buf = self.buf[e.start :]
                return text
            text = self.buf.decode("utf-8", errors="replace")
        self.buf = b""
        return text


_TEMPLATES: dict[str, Any] = {}
_VARIABLES: dict[str, set[str]] = {}


def _env() -> Any:
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(msg: str) -> None:
        raise TokenizerError(f"chat template: {msg}")

    def tojson(x: Any, ensure_ascii: bool = False, indent: Any = None,
               separators: Any = None, sort_keys: bool = False) -> str:  # fmt: skip
        # Hugging Face's filter (jinja2's own sorts keys and escapes <, >, &, ').
        return json.dumps(
            x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
        )

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    env.filters["tojson"] = tojson
    return env


def _compile(source: str) -> Any:
    if source not in _TEMPLATES:
        _TEMPLATES[source] = _env().from_string(source)
    return _TEMPLATES[source]


def _variables(source: str) -> set[str]:
    """The template's free variables (``messages``, ``tools``, …)."""
    if source not in _VARIABLES:
        from jinja2 import meta

        env = _env()
        _VARIABLES[source] = set(meta.find_undeclared_variables(env.parse(source)))
    return _VARIABLES[source]


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte → printable-character map."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs), strict=True))


_UNICODE_TO_BYTE = {c: b for b, c in _bytes_to_unicode().items()}
