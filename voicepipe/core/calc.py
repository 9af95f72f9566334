"""A safe arithmetic evaluator for the calculator tool (sans-I/O).

The LLM writes the expression (``"17 * 23"``); it is parsed here by a small
recursive-descent parser over numbers, ``+ - * / // % ^ **``, parentheses and
unary signs, plus the spellings a model may use (``×``, ``÷``, ``x`` between
numbers). Nothing is ever handed to ``eval``: a name, a call or an attribute is
a parse error. Sizes are bounded so that ``9 ** 9 ** 9`` cannot tie up the
process: exponents beyond ``MAX_EXPONENT`` and results beyond ``MAX_MAGNITUDE``
are errors, not slow answers.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

MAX_LENGTH = 200  # characters of expression
MAX_EXPONENT = 1000
MAX_MAGNITUDE = 1e100

_TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d*)?|\.\d+)|(\*\*|//|[-+*/%^()×÷x]))")
_ALIASES = {"×": "*", "x": "*", "÷": "/", "^": "**"}


class CalcError(ValueError):
    """The expression is not arithmetic this calculator accepts (the message says why)."""


@dataclass(frozen=True)
class _Tok:
    kind: str  # "num" | "op" | "end"
    text: str
    value: float = 0.0


def _tokens(expr: str) -> list[_Tok]:
    out: list[_Tok] = []
    pos = 0
    s = expr.replace(",", "")  # "1,000" is a thousands separator, never a tuple
    while pos < len(s):
        if s[pos:].strip() == "":
            break
        m = _TOKEN.match(s, pos)
        if m is None:
            raise CalcError(f"unexpected {s[pos:].strip()[:12]!r} at position {pos}")
        num, op = m.group(1), m.group(2)
        if num is not None:
            out.append(_Tok("num", num, float(num)))
        else:
            out.append(_Tok("op", _ALIASES.get(op, op)))
        pos = m.end()
    out.append(_Tok("end", ""))
    return out


class _Parser:
    """expr := term (('+'|'-') term)*; term := unary (('*'|'/'|'//'|'%') unary)*;
    unary := ('+'|'-') unary | power; power := atom ('**' unary)?  (right-associative,
    binds tighter than a leading minus on its left: -2**2 = -4, as in Python)."""

    def __init__(self, toks: list[_Tok]) -> None:
        self.toks = toks
        self.i = 0

    def peek(self) -> _Tok:
        return self.toks[self.i]

    def take(self) -> _Tok:
        t = self.toks[self.i]
        self.i += 1
        return t

    def expr(self) -> float:
        v = self.term()
        while self.peek().text in ("+", "-"):
            op = self.take().text
            v = _check(v + self.term() if op == "+" else v - self.term())
        return v

    def term(self) -> float:
        v = self.unary()
        while self.peek().text in ("*", "/", "//", "%"):
            op = self.take().text
            rhs = self.unary()
            if op == "*":
                v = _check(v * rhs)
            elif rhs == 0:
                raise CalcError("division by zero")
            elif op == "/":
                v = _check(v / rhs)
            elif op == "//":
                v = float(math.floor(v / rhs))
            else:
                v = math.fmod(v, rhs) if v * rhs >= 0 else v - rhs * math.floor(v / rhs)
        return v

    def unary(self) -> float:
        if self.peek().text in ("+", "-"):
            sign = -1.0 if self.take().text == "-" else 1.0
            return sign * self.unary()
        return self.power()

    def power(self) -> float:
        base = self.atom()
        if self.peek().text == "**":
            self.take()
            exp = self.unary()
            if abs(exp) > MAX_EXPONENT:
                raise CalcError(f"exponent {exp:g} is too large")
            if base == 0 and exp < 0:
                raise CalcError("division by zero")
            if base < 0 and not float(exp).is_integer():
                raise CalcError("a negative number to a fractional power is not a real number")
            try:
                return _check(base**exp)
            except OverflowError:
                raise CalcError("the result is too large") from None
        return base

    def atom(self) -> float:
        t = self.take()
        if t.kind == "num":
            return t.value
        if t.text == "(":
            v = self.expr()
            if self.take().text != ")":
                raise CalcError("missing ')'")
            return v
        raise CalcError("expected a number" + (f", got {t.text!r}" if t.text else " at the end"))


def _check(v: float) -> float:
    if math.isnan(v) or abs(v) > MAX_MAGNITUDE:
        raise CalcError("the result is too large")
    return v


def evaluate(expr: str) -> float:
    """The value of an arithmetic expression; CalcError when it is not one."""
    if not isinstance(expr, str) or not expr.strip():
        raise CalcError("empty expression")
    if len(expr) > MAX_LENGTH:
        raise CalcError(f"expression longer than {MAX_LENGTH} characters")
    p = _Parser(_tokens(expr))
    v = p.expr()
    if p.peek().kind != "end":
        raise CalcError(f"unexpected {p.peek().text!r}")
    return v


def format_number(v: float) -> str:
    """How a result is told back: integers without ``.0``, others to 10 significant digits."""
    if float(v).is_integer() and abs(v) < 1e16:
        return str(int(v))
    return f"{v:.10g}"


# How a spoken answer reads each operator (``spoken``); "x" and the like are aliases.
_SPOKEN_OPS = {
    "+": "plus",
    "-": "minus",
    "*": "times",
    "/": "divided by",
    "//": "divided by",  # (a whole-number division: the value says which)
    "%": "modulo",
    "**": "to the power of",
}


def spoken(expr: str) -> str | None:
    """The expression as a sentence says it (``"12 * 15"`` → ``"12 times 15"``), or None
    when it is not a flat chain of numbers and operators (parentheses, signs): then a
    spoken answer gives the value alone rather than misread the grouping."""
    try:
        toks = _tokens(expr)[:-1]
    except CalcError:
        return None
    if len(toks) < 3 or len(toks) % 2 == 0:
        return None
    words: list[str] = []
    for i, t in enumerate(toks):
        if (t.kind == "num") != (i % 2 == 0) or (t.kind == "op" and t.text not in _SPOKEN_OPS):
            return None
        words.append(format_number(t.value) if t.kind == "num" else _SPOKEN_OPS[t.text])
    return " ".join(words)
