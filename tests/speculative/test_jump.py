"""Jump-forward proposals (speculative/jump.py) and certain proposals in the loop, on the
toy tokenizer of test_skeleton (Qwen2-like merges: ``"}}``, ``":``, `` {"``)."""

from __future__ import annotations

import numpy as np

from tests.speculative.test_loop import MarkovProposer, MarkovTarget, _chains, _plain_greedy
from tests.speculative.test_skeleton import IDS, VOCAB, ToyTokenizer
from tests.speculative.test_skeleton import SPECS as OPTIONAL
from voicepipe.speculative import jump
from voicepipe.speculative.loop import SpeculativeDecoder
from voicepipe.speculative.sampling import SamplingParams
from voicepipe.speculative.types import Proposal


class Tok(ToyTokenizer):
    def decode(self, ids: list[int], skip_special: bool = True) -> str:
        return "".join(VOCAB[i] for i in ids)


TOK = Tok()
# the calculator's expression required, as the built-in's is
SPECS = [*OPTIONAL[:2], {"type": "function", "function": {"name": "calculate", "parameters": {
    "type": "object", "properties": {"expression": {"type": "string"}},
    "required": ["expression"]}}}]  # fmt: skip
PROMPT = TOK.chat_ids([{"role": "user", "content": "x"}])
END = IDS["<|im_end|>"]


def text(ids: list[int]) -> str:
    return "".join(VOCAB[i] for i in ids)


def walk(prop: jump.JumpProposer, reply: list[int]) -> tuple[int, list[str]]:
    """Decode ``reply`` with forcing, the model writing each token no proposal covers:
    (model passes after the first token, the forced pieces). Every forced token must be
    the reply's own."""
    i, passes, pieces = 1, 0, []
    while i < len(reply):
        p = prop.propose(PROMPT + reply[:i], 64)
        assert p.certain or not p.tokens
        assert p.tokens == reply[i : i + len(p.tokens)], (text(reply[:i]), text(p.tokens))
        if p.tokens:
            pieces.append(text(p.tokens))
        i += len(p.tokens)
        if p.tokens and p.tokens[-1] == END:
            break
        i += 1  # the model's own token (the pass that fed the forced ones chose it)
        passes += 1
    return passes, pieces


def test_a_call_costs_a_pass_per_choice() -> None:
    prop = jump.build(TOK, SPECS)
    assert prop is not None
    reply = TOK.encode('{{"name": "calculate", "arguments": {"expression": "2+3"}}}') + [END]
    passes, pieces = walk(prop, reply)
    # forced: the "name" key, the rest of the name up to the value's quote, the closing
    # brace and the end of the turn; decoded: '{{', 'c', the value and its closing '"}}'
    # ('calculate' is one token of the toy vocabulary: the choice of tool is that token)
    assert pieces == ['"name": "', '", "arguments": {"expression": "', "}<|im_end|>"]
    assert passes == 5  # calculate, 2, +, 3, "}} (the closing brace and the end: none)
    assert len(reply) - 1 == 19  # tokens after the first: a pass each without forcing
    # an optional key is the model's choice: forcing stops before the brace it merges with
    prop = jump.build(TOK, OPTIONAL)
    assert prop is not None
    _, pieces = walk(prop, reply)
    assert pieces[1] == '", "arguments":'


def test_forced_text_stops_where_the_next_token_would_merge_with_it() -> None:
    prop = jump.build(TOK, SPECS)
    assert prop is not None
    # the name's closing quote is not forced: the model writes it merged as '"}}'
    reply = TOK.encode('{{"name": "get_time"}}') + [END]
    _, pieces = walk(prop, reply)
    assert pieces == ['"name": "', "_time", "<|im_end|>"]
    # a tool without parameters given empty arguments: the end of the turn comes after
    # the whole closing text, never after the part the empty object's brace left uncut
    reply = TOK.encode('{{"name": "get_time", "arguments": {}}}') + [END]
    _, pieces = walk(prop, reply)
    assert pieces == ['"name": "', "_time", ' "arguments": {}}}<|im_end|>']
    # after a key, '":' then ' ' is cut before a value that could merge (' {"' …)
    got = prop.encode_after(IDS["minutes"], '": ', ("1",))
    assert got is not None and text(got) == '": '
    assert text(prop.encode_after(IDS["set"], '_timer"', ("}}",)) or []) == "_timer"
    # a last token that does not encode back to itself: nothing is forced
    assert prop.encode_after(IDS['"}}'], "x", ()) == TOK.encode("x")
    assert prop.encode_after(IDS["se"] if "se" in IDS else IDS["s"], "t", ()) == TOK.encode("t")


def test_speech_and_the_prompt_are_never_forced() -> None:
    prop = jump.build(TOK, SPECS)
    assert prop is not None
    assert prop.propose(PROMPT, 8).tokens == []
    assert prop.propose(PROMPT + TOK.encode("Sure {{ the"), 8).tokens == []
    # a call in an earlier turn is not this reply's
    old = TOK.encode('{{"name": "') + [END] + TOK.chat_ids([{"role": "user", "content": "x"}])
    assert prop.propose(PROMPT + old, 8).tokens == []
    assert jump.build(TOK, []) is None


class Forcer:
    """Proposes, as certain, the next ``n`` tokens the greedy target would write, at every
    ``every``-th position (a stand-in for a call's fixed text)."""

    name = "forcer"

    def __init__(self, Q: np.ndarray, start: int, n: int, every: int) -> None:
        self.Q, self.start, self.n, self.every = Q, start, n, every

    def reset(self) -> None:
        pass

    def propose(self, context: list[int], k: int) -> Proposal:
        if (len(context) - self.start) % self.every:
            return Proposal(tokens=[])
        toks = _plain_greedy(self.Q, context, min(self.n, k))
        return Proposal(tokens=toks, certain=True)


class ExtendTarget(MarkovTarget):
    def __init__(self, Q: np.ndarray) -> None:
        super().__init__(Q)
        self.extended = 0

    def extend(self, tokens: list[int]) -> np.ndarray:
        self.fed += tokens
        self.extended += 1
        return self.logQ[tokens[-1]]


def test_certain_proposals_keep_greedy_output_and_save_passes() -> None:
    P, Q = _chains(7)
    want = _plain_greedy(Q, [0, 3], 40)
    plain = SpeculativeDecoder(MarkovTarget(Q), None, SamplingParams(), k=0)
    assert [t for s in plain.generate([0, 3], 40) for t in s] == want
    for target in (MarkovTarget(Q), ExtendTarget(Q)):
        dec = SpeculativeDecoder(target, None, SamplingParams(), k=0)
        dec.forcer = Forcer(Q, 2, n=3, every=2)
        got = [t for s in dec.generate([0, 3], 40) for t in s]
        assert got == want
        m = dec.metrics
        assert m.forced > 0 and m.forced_steps > 0
        assert m.target_passes < plain.metrics.target_passes
        assert m.tokens == 40 and m.forced + m.target_passes == 40
        assert target.fed == [0, 3, *got][: target.length]
        if isinstance(target, ExtendTarget):  # only the last row is asked for
            assert target.extended == m.forced_steps
            assert target.scored == m.steps - m.forced_steps  # the plain passes


def test_a_forced_end_of_turn_needs_no_pass_and_the_budget_holds() -> None:
    P, Q = _chains(7)
    want = _plain_greedy(Q, [0], 12)
    stop = want[4]
    target = MarkovTarget(Q)
    dec = SpeculativeDecoder(target, None, SamplingParams(), k=0)
    dec.forcer = Forcer(Q, 1, n=9, every=1)
    got = [t for s in dec.generate([0], 30, {stop}) for t in s]
    assert got == want[: want.index(stop) + 1]
    assert dec.metrics.target_passes == 1  # the prompt's: the forced run held the stop
    dec = SpeculativeDecoder(MarkovTarget(Q), None, SamplingParams(), k=0)
    dec.forcer = Forcer(Q, 1, n=9, every=1)
    assert sum(len(s) for s in dec.generate([0], 5)) == 5


def test_drafts_ride_after_the_forced_run_and_are_verified() -> None:
    P, Q = _chains(7)
    want = _plain_greedy(Q, [0, 3], 60)
    for target in (MarkovTarget(Q), ExtendTarget(Q)):
        dec = SpeculativeDecoder(target, MarkovProposer(P, 0, greedy=True), SamplingParams(), k=3)
        dec.forcer = Forcer(Q, 2, n=2, every=3)
        got = [t for s in dec.generate([0, 3], 60) for t in s]
        assert got == want  # the drafts after a forced run are checked like any others
        m = dec.metrics
        assert m.forced > 0 and m.drafted > 0
        assert target.fed == [0, 3, *got][: target.length]
