"""Tool-call skeletons as drafts (spec.skeleton), on a toy tokenizer that merges JSON
the way Qwen2's BPE does (``"}}``, ``":``, `` {"`` are single tokens)."""

from __future__ import annotations

import json
import string

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.speculative.test_hybrid import Fixed
from voicepipe.speculative import skeleton
from voicepipe.speculative.hybrid import HybridProposer
from voicepipe.speculative.loop import SpeculativeDecoder
from voicepipe.speculative.ngram import NgramProposer
from voicepipe.speculative.types import Scores

SPECIALS = ["<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"]
PIECES = [
    "{{", '{"', ' {"', " {", "}}}}", "}}}", "}}", '"}}\n', '"}}', '",', '":', ' "', "}\n", "\n",
    "name", "arguments", "calculate", "set", "_timer", "get", "_time",
    "expression", "minutes", "label", "assistant", "user", " the", " timer", " for",
    " minutes", " name", " is", " set", " true",
]  # fmt: skip
VOCAB = SPECIALS + PIECES + sorted(set(string.printable) - {"\x0b", "\x0c"})
IDS = {p: i for i, p in enumerate(VOCAB)}
SPECS = [
    {"type": "function", "function": {"name": "set_timer", "parameters": {
        "type": "object", "properties": {"minutes": {"type": "number"},
                                         "label": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {
        "type": "object", "properties": {}}}},
    {"type": "function", "function": {"name": "calculate", "parameters": {
        "type": "object", "properties": {"expression": {"type": "string"}}}}},
]  # fmt: skip


class ToyTokenizer:
    """Greedy longest match over VOCAB (specials first); ChatML turns."""

    stop_ids = {IDS["<|im_end|>"]}

    def encode(self, text: str, add_bos: bool | None = None) -> list[int]:
        out, i = [], 0
        by_len = sorted(VOCAB, key=len, reverse=True)
        while i < len(text):
            piece = next(p for p in by_len if text.startswith(p, i))
            out.append(IDS[piece])
            i += len(piece)
        return out

    def token_bytes(self, token: int) -> bytes:
        return VOCAB[token].encode()

    def chat_ids(self, messages: list[dict], add_generation_prompt: bool = True) -> list[int]:
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        return self.encode(text + ("<|im_start|>assistant\n" if add_generation_prompt else ""))


TOK = ToyTokenizer()
PROMPT = TOK.chat_ids([{"role": "user", "content": "x"}])


def _call(name: str, args: dict, form: str = "bare") -> list[int]:
    body = json.dumps({"name": name, "arguments": args})
    text = "{" + body + "}" if form == "bare" else "<tool_call>\n" + body + "\n</tool_call>"
    return TOK.encode(text) + [IDS["<|im_end|>"]]


def _walk(prop: skeleton.SkeletonProposer, context: list[int], reply: list[int], k: int = 8):
    """Decode ``reply`` as a target would that accepts every right draft: returns the
    passes after the first token and every (position, proposal) made."""
    i, passes, made = 1, 0, []
    while i < len(reply):
        p = prop.propose(context + reply[:i], k).tokens
        made.append((i, p))
        assert p == reply[i : i + len(p)], (i, p)  # never a wrong draft
        i += len(p) + 1
        passes += 1
    return passes, made


def test_turn_tokens_come_from_the_template() -> None:
    header, end = skeleton.turn_tokens(TOK)
    assert header == TOK.encode("<|im_start|>assistant\n") and end == [IDS["<|im_end|>"]]


def test_a_call_is_drafted_up_to_each_value_and_on_to_the_end_of_the_turn() -> None:
    prop = skeleton.build(TOK, SPECS, min_n=3)
    # Per tool: tagged (at a reply's start, and after speech) and bare.
    assert prop is not None and prop.records == 3 * 3
    reply = _call("calculate", {"expression": "2 + 3"})
    passes, made = _walk(prop, PROMPT, reply)
    drafted = ["".join(VOCAB[t] for t in p) for _, p in made if p]
    # The tools' names part after '"name": "', the closing after the value.
    assert drafted == ['"name": "', '", "arguments": {"expression": "', "}<|im_end|>"]
    assert len(reply) - 1 == 21 and passes == 8  # 21 tokens after the first: 21 passes alone
    # A tool with two parameters: each next key (k = 8 stops the first run before the
    # number's space, which the target then adds).
    reply = _call("set_timer", {"minutes": 10, "label": "tea"})
    _, made = _walk(prop, PROMPT, reply)
    drafted = ["".join(VOCAB[t] for t in p) for _, p in made if p]
    assert drafted == [
        '"name": "',
        '_timer", "arguments": {"minutes":',
        ' "label": "',
        "}<|im_end|>",
    ]


def test_a_bare_call_of_a_tool_without_parameters_has_no_arguments() -> None:
    prop = skeleton.build(TOK, SPECS, min_n=3)
    assert prop is not None
    reply = TOK.encode('{{"name": "get_time"}}') + [IDS["<|im_end|>"]]
    passes, made = _walk(prop, PROMPT, reply)
    drafted = ["".join(VOCAB[t] for t in p) for _, p in made if p]
    assert drafted == ['"name": "', '_time"}}<|im_end|>'] and passes == 2


def test_the_tagged_form_at_a_reply_start_and_after_speech() -> None:
    prop = skeleton.build(TOK, SPECS, min_n=3)
    assert prop is not None
    reply = _call("calculate", {"expression": "2"}, form="tagged")
    _, made = _walk(prop, PROMPT, reply)
    drafted = ["".join(VOCAB[t] for t in p) for _, p in made if p]
    assert drafted == ['\n{"name": "', '", "arguments": {"expression": "', "</tool_call><|im_end|>"]
    # After speech only a match of three skeleton tokens drafts: '<tool_call>\n{"'.
    _, made = _walk(prop, PROMPT, TOK.encode("Sure.") + reply)
    drafted = ["".join(VOCAB[t] for t in p) for _, p in made if p]
    assert drafted == ['name": "', '", "arguments": {"expression": "', "</tool_call><|im_end|>"]


def test_calls_disagree_at_the_tool_name_and_short_matches_stay_silent() -> None:
    prop = skeleton.build(TOK, SPECS, min_n=3)
    assert prop is not None
    opened = PROMPT + TOK.encode('{{"name": "')
    assert prop.propose(opened, 8).tokens == []  # which tool: the model's choice
    assert prop.propose(PROMPT + TOK.encode('{{"name": "calculate'), 3).tokens == TOK.encode(
        '", "arguments'
    )  # capped by k
    assert prop.propose(PROMPT + TOK.encode("{{"), 0).tokens == []
    assert prop.propose(PROMPT + TOK.encode('x "name'), 8).tokens == []  # two tokens: speech


# ("{{" or '{"' opening a reply is a call: not speech.)
WORDS = [" the", " timer", " for", " minutes", " is", " set", " name", ' "', ",", ".", " ", "1",
         "0", ":", "a", "\n", '",', "}"]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(WORDS), min_size=1, max_size=40))
def test_speech_is_never_drafted(words: list[str]) -> None:
    """Replies of speech-like tokens (quotes, commas, digits, the tools' words with their
    leading space) never get a skeleton draft, however they end."""
    prop = skeleton.build(TOK, SPECS, min_n=3)
    assert prop is not None
    reply = TOK.encode("".join(words))
    for i in range(1, len(reply) + 1):
        assert prop.propose(PROMPT + reply[:i], 8).tokens == []


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["calculate", "set_timer"]),
    st.text(alphabet="0123456789+-* ()a", min_size=1, max_size=12),
    st.integers(0, 10_000),
    st.sampled_from(["bare", "tagged"]),
)
def test_any_value_any_form_never_a_wrong_draft(name: str, text: str, n: int, form: str) -> None:
    prop = skeleton.build(TOK, SPECS, min_n=3)
    assert prop is not None
    args = {"expression": text} if name == "calculate" else {"minutes": n, "label": text}
    reply = _call(name, args, form)
    passes, made = _walk(prop, PROMPT, reply)
    assert any(p for _, p in made)
    assert passes < len(reply) - 1


def test_values_whose_tokens_join_the_json_cut_as_values() -> None:
    # A boolean's leading space is one token with it (' true', as in Qwen2): the whole
    # token is the value; the key's '":' stays the skeleton's.
    ids = skeleton.cut_values(TOK, '{"a": true}', [(6, 10)])
    assert ids == [IDS['{"'], IDS["a"], IDS['":'], skeleton.VALUE, IDS["}"]]
    assert skeleton.cut_values(TOK, '{"a": true}', [(6, 10), (8, 9)]) is None  # two in one


class ScriptTarget:
    """A 'model' whose greedy reply is ``script``, whatever it is fed before."""

    def __init__(self, prompt_len: int, script: list[int]) -> None:
        self.n0, self.script, self.fed, self.scored = prompt_len, script, 0, 0

    @property
    def length(self) -> int:
        return self.fed

    def _row(self, pos: int) -> np.ndarray:  # logits of the token after position pos
        row = np.zeros(len(VOCAB))
        i = pos + 1 - self.n0
        row[self.script[i] if 0 <= i < len(self.script) else 0] = 1.0
        return row

    def prefill(self, tokens: list[int]) -> np.ndarray:
        self.fed = len(tokens)
        return self._row(self.fed - 1)

    def score(self, tokens: list[int]) -> Scores:
        rows = [self._row(self.fed + i) for i in range(len(tokens))]
        self.fed += len(tokens)
        self.scored += 1
        return Scores(np.stack(rows))

    def rollback(self, length: int) -> None:
        self.fed = length


def test_greedy_through_the_hybrid_is_unchanged_and_takes_fewer_passes() -> None:
    script = _call("set_timer", {"minutes": 10, "label": "tea"})
    out = {}
    for on in (False, True):
        h = HybridProposer(NgramProposer(min_n=2), Fixed([IDS["x"]]), draft_k=2)
        if on:
            h.skeleton = skeleton.build(TOK, SPECS)
        target = ScriptTarget(len(PROMPT), script)
        dec = SpeculativeDecoder(target, h, k=4, k_max=6, verify_cost=1.0)
        got = [t for s in dec.generate(PROMPT, 80, TOK.stop_ids) for t in s]
        out[on] = (got, dec.metrics.target_passes, h.used_skeleton)
    assert out[True][0] == out[False][0] == script
    assert out[True][2] > 0 and out[False][2] == 0
    assert out[True][1] < out[False][1] - 8
