"""Tool-call skeletons as drafts: the JSON around a call's values, known from the schemas.

Why: a tool call is ~20-45 tokens the target decoded at ~1.6 a pass (the
default 1.5B's calculator call: 13 passes for 21 tokens). Prompt lookup finds
the system prompt's schemas (``{"type": "function", …``) and the template's
literal ``{{"name": <function-name>, …}}`` and drafts them, mostly wrong, and
the EAGLE draft and the reply store guess JSON poorly. Yet all of
a call but the tool's name and the argument values follows from the tools'
schemas: after ``{{`` comes ``"name": "``, after a tool's name ``", "arguments":
{"`` and its first parameter, after a value the next key or the closing braces
and the end of the turn.

How: each tool gives a few records, the call as the model writes it (the
template's tagged form and the bare doubled-brace ``{{…}}`` Qwen2.5-Coder
emits, core/tools.py) with its arguments in schema order, each encoded
whole by the model's tokenizer so the boundaries are the ones it emits (``"}}``
is one token), then each argument value cut out and replaced by one VALUE
marker. They go into a ``ReplyIndex`` (speculative/replies.py) over local ids (the
skeletons' few distinct tokens: Qwen's ids overflow the index's 16 bits, and
VALUE needs an id of its own). A proposal is the continuation of the longest
match that every matching record agrees on (min_path 1: it stops at a tool's
name), cut at the next VALUE.

After a value the context's last tokens are in no record, so when the last
token is one a record puts after a value (``",``, ``"}}``, ``,``) the match is
tried again on a view that folds the tokens before it into one VALUE, shortest
value first, where the token before that value is one a record puts before one.

Never in speech: a proposal needs a match of at least ``min_n`` skeleton tokens
(a view's: ``min_n`` before its value), and a reply's first token is never
proposed (after the turn's header every reply would match). Measured:
docs/BENCHMARKS.md, Tools (tool calls drafted from the tools' schemas).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from voicepipe.core.tools import CLOSE, OPEN
from voicepipe.speculative.replies import MAX_N, MAX_TOKEN, ReplyIndex
from voicepipe.speculative.types import Proposal

VALUE = -2  # a record's argument value (any number of tokens)
OTHER = MAX_TOKEN  # a context token in no record: no match runs across it
# A value that tokenizes apart from the JSON around it (digits are single tokens in
# Qwen2's and SmolLM2's vocabularies); a boolean's leading space joins it, which the
# cut below allows for.
PLACEHOLDER = {"string": '"1"', "boolean": "true"}  # others (numbers): 1
# The call forms: (text before the JSON object, after it, whether it is bare). A bare
# call only opens a reply, and for a tool without parameters it has no "arguments" (the
# 1.5B wrote 11 of 12 that way, `{{"name": "get_current_time"}}`; the template's tagged
# form always has them). Not the bare single-brace object: its closing ``"}}`` is the
# doubled form's too but ends the turn where the doubled form's goes on with ``}``, so
# after a value the two would never agree (the window cannot see back to the opening
# brace); a bare ``{"name": …`` still matches the tagged records from its third token on.
FORMS = ((OPEN + "\n", "\n" + CLOSE, False), ("{", "}", True))


class Tokenizer(Protocol):
    """What the skeletons need of ``voicepipe.nn.llm.tokenizer.ChatTokenizer``."""

    stop_ids: set[int]

    def encode(self, text: str, add_bos: bool | None = None) -> list[int]: ...

    def token_bytes(self, token: int) -> bytes: ...

    def chat_ids(
        self, messages: list[dict[str, Any]], add_generation_prompt: bool = True
    ) -> list[int]: ...


class SkeletonProposer:
    """Drafts the agreed continuation of the call skeletons the context ends inside."""

    name = "skeleton"

    def __init__(
        self, records: Sequence[tuple[Sequence[int], int]], min_n: int = 3, max_value: int = 24
    ) -> None:
        """``records``: (token ids with VALUE for each argument value, reply_at: tokens
        before it are context only)."""
        if not records:
            raise ValueError("no skeletons")
        self._global = sorted({t for toks, _ in records for t in toks if t != VALUE})
        if len(self._global) >= MAX_TOKEN:
            raise ValueError("too many distinct skeleton tokens")
        self._local = {t: i for i, t in enumerate(self._global)}
        self.value = len(self._global)
        loc = [([self.value if t == VALUE else self._local[t] for t in r], at) for r, at in records]
        self.index = ReplyIndex.from_records(loc, max_n=MAX_N)
        self._before = {r[i - 1] for r, _ in loc for i in range(1, len(r)) if r[i] == self.value}
        self._after = {r[i + 1] for r, _ in loc for i in range(len(r) - 1) if r[i] == self.value}
        self.min_n = min_n
        self.max_value = max_value
        self.records = len(records)

    def reset(self) -> None:
        pass  # no state: the records never change

    def propose(self, context: list[int], k: int) -> Proposal:
        if k <= 0 or not context:
            return Proposal(tokens=[])
        get = self._local.get
        tail = [get(t, OTHER) for t in context[-(MAX_N + self.max_value + 1) :]]
        toks = self._follow(tail[-MAX_N:], self.min_n, k)
        last = tail[-1]
        if not toks and last in self._after:
            for n in range(1, min(self.max_value, len(tail) - 2) + 1):
                before = tail[max(0, len(tail) - 1 - n - (MAX_N - 2)) : len(tail) - 1 - n]
                if before[-1] not in self._before:
                    continue
                view = [*before, self.value, last]
                if self.index.match(view, min_count=1).order >= self.min_n + 2:
                    toks = self._follow(view, self.min_n + 2, k)
                    break  # the shortest value that fits: a longer one is less likely
        return Proposal(tokens=[self._global[t] for t in toks])

    def _follow(self, keys: list[int], min_order: int, k: int) -> list[int]:
        m = self.index.match(keys, min_count=1)
        if m.order < min_order:
            return []
        toks, _ = self.index.continuation(m, k, min_path=1.0, min_count=1)
        return toks[: toks.index(self.value)] if self.value in toks else toks


def build(
    tok: Tokenizer, specs: Sequence[Mapping[str, Any]], min_n: int = 3
) -> SkeletonProposer | None:
    """Skeletons of ``specs`` (the chat template's tool entries: ``{"type": "function",
    "function": {"name", "parameters"}}``) in ``tok``'s tokens; None if none could be
    cut (no tools, or placeholders that merge with the JSON around them)."""
    header, end = turn_tokens(tok)
    records: list[tuple[list[int], int]] = []
    for spec in specs:
        fn = spec.get("function", spec)
        props = (fn.get("parameters") or {}).get("properties") or {}
        for before, after, bare in FORMS:
            body, spans = _call_json(str(fn["name"]), props, with_args=bool(props) or not bare)
            shift = len(before.encode())
            marked = cut_values(
                tok, before + body + after, [(a + shift, b + shift) for a, b in spans]
            )
            if marked is None:
                continue
            marked += end
            records.append((header + marked, len(header) + 1))  # the reply's first token: never
            if not bare:  # a tagged call may follow speech
                records.append((marked, 1))
    return SkeletonProposer(records, min_n) if records else None


def turn_tokens(tok: Tokenizer) -> tuple[list[int], list[int]]:
    """(the tokens that open an assistant turn, the token that ends one: [] if none seen),
    read off the chat template."""
    user = [{"role": "user", "content": "1"}]
    gen = tok.chat_ids(user)
    n = _common(gen, tok.chat_ids(user, add_generation_prompt=False))
    done = tok.chat_ids([*user, {"role": "assistant", "content": "1"}], add_generation_prompt=False)
    end = [t for t in done[len(gen) :] if t in tok.stop_ids][:1] if done[: len(gen)] == gen else []
    return gen[n:], end


def _call_json(
    name: str, props: Mapping[str, Any], with_args: bool = True
) -> tuple[str, list[tuple[int, int]]]:
    """The call's JSON with a placeholder per argument (schema order), as ``json.dumps``
    and the template's ``tojson`` write it, and each value's byte span in it."""
    if not with_args:
        return '{"name": ' + json.dumps(name, ensure_ascii=False) + "}", []
    head = '{"name": ' + json.dumps(name, ensure_ascii=False) + ', "arguments": {'
    out, spans = head, []
    for i, (key, schema) in enumerate(props.items()):
        out += (", " if i else "") + json.dumps(key, ensure_ascii=False) + ": "
        typ = schema.get("type") if isinstance(schema, Mapping) else None
        value = PLACEHOLDER.get(typ, "1") if isinstance(typ, str) else "1"
        a = len(out.encode())
        if value.startswith('"'):  # a string's quotes are the skeleton's: its content is not
            spans.append((a + 1, a + len(value) - 1))
        else:
            spans.append((a, a + len(value)))
        out += value
    return out + "}}", spans


def cut_values(tok: Tokenizer, text: str, spans: Sequence[tuple[int, int]]) -> list[int] | None:
    """``text`` encoded whole, each token that overlaps a value span replaced by VALUE (one
    per value); None when a token spans two values or the bytes do not add up."""
    ids = tok.encode(text, add_bos=False)
    out: list[int] = []
    pos = 0
    last_span = -1
    for t in ids:
        a, b = pos, pos + len(tok.token_bytes(t))
        pos = b
        hit = [i for i, (x, y) in enumerate(spans) if a < y and x < b]
        if len(hit) > 1:
            return None
        if not hit:
            out.append(t)
        elif hit[0] != last_span:
            out.append(VALUE)
            last_span = hit[0]
    return out if pos == len(text.encode()) else None


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
