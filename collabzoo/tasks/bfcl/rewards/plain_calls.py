"""A fast reading of the answers most agents write: plain Python calls with literal arguments.

Most answers are lines of `name(key=literal, ...)` or a list `[name(...), ...]`, and reading them
with `ast.parse` costs most of a reward's time (compiling the text dominates). This reader takes
the text apart with one regular expression and a small recursive descent, and gives the same
`(name, arguments)` pairs that `ast.parse` and the parser's `_literal` would, or None wherever the
text holds anything outside that plain form, and then the parser reads it with `ast` as before.

What counts as plain, chosen so that Python reads it exactly so: ASCII names that are not Python
keywords (other names are NFKC-normalised or rejected by Python), dotted call names, quoted
strings without backslashes or line breaks (no prefixes, no implicit concatenation), decimal
numbers starting with a digit (no underscores, no leading zeros in integers), optionally
negated, True/False/None, lists and dicts of these (dict keys scalars), keyword arguments after
positional ones, positional arguments no more than the schema's parameters, top-level calls one
a line from the first column (or one list of calls), and brackets nested at most `MAX_DEPTH`
deep. Anything else returns None.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Mapping, Sequence
from typing import Any

MAX_DEPTH = 32
"""Deeper brackets go to `ast` (Python itself refuses beyond 200)."""

_TOKEN = re.compile(
    r"""[ \t]*(
        [()\[\]{},:=.\-]                            # punctuation
      | [A-Za-z_][A-Za-z0-9_]*                      # an ASCII name
      | '[^'\\\n\r\x00]*' | "[^"\\\n\r\x00]*"       # a string without escapes
      | \d+(?:\.\d*)?(?:[eE][+-]?\d+)?              # a decimal number (`.5` is "." and 5)
      | \n[ \t]*                                    # a line break and the next line's indent
      | .                                           # anything else: not plain
    )""",
    re.X | re.S,
)
_KEYWORDS = frozenset(keyword.kwlist)
_CONSTANTS = {"True": True, "False": False, "None": None}
_NUMBER_STARTS = frozenset("0123456789.")
_NAME_STARTS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
"""A token starting with one of these is an ASCII name (the tokens' other kinds start otherwise)."""

Calls = list[tuple[str, dict[Any, Any]]]


class _NotPlain(Exception):
    """The text leaves the plain form: `ast` reads it."""


def plain_calls(source: str, order: Mapping[str, Sequence[str]]) -> Calls | None:
    """The calls of `source` (the answer with JSON's words already rewritten) as `ast` would
    read them, or None where the text is not plain."""
    if not source.isascii():
        try:
            source.encode("utf-8")  # lone surrogates: Python cannot compile the text
        except UnicodeEncodeError:
            return None
    tokens = _TOKEN.findall(source)
    if not tokens:
        return None
    try:
        return _answer(tokens, order)
    except (_NotPlain, IndexError, ValueError):
        pass
    if "\n" not in source:
        return None
    # A line break inside brackets is space to Python: read again without those. (Most answers
    # have none, so the first reading runs on the tokens as they are.)
    joined: list[str] = []
    depth = 0
    for token in tokens:
        first = token[0]
        if first == "\n":
            if depth:
                continue
            if token != "\n":
                return None  # an indented line: Python refuses it
        elif first in "([{":
            depth += 1
        elif first in ")]}":
            depth -= 1
        joined.append(token)
    if depth or len(joined) == len(tokens):
        return None
    try:
        return _answer(joined, order)
    except (_NotPlain, IndexError, ValueError):
        return None


def _answer(tokens: list[str], order: Mapping[str, Sequence[str]]) -> Calls:
    """Calls one a line from the first column, or one list of calls, and nothing else."""
    calls = []
    end = len(tokens)
    if tokens[0] == "[":
        i = 1
        while tokens[i] != "]":
            i = _call(tokens, i, order, calls)
            token = tokens[i]
            if token == ",":
                i += 1
            elif token != "]":
                raise _NotPlain
        i += 1
    else:
        i = _call(tokens, 0, order, calls)
        while i < end:
            if tokens[i] != "\n":
                raise _NotPlain  # also an indented line: Python refuses it
            while tokens[i] == "\n":
                i += 1
            i = _call(tokens, i, order, calls)
    if i != end:
        raise _NotPlain
    return calls


def _name(token: str) -> str:
    if token[0] not in _NAME_STARTS or token in _KEYWORDS:
        raise _NotPlain
    return token


def _call(tokens: list[str], i: int, order: Mapping[str, Sequence[str]], calls: Calls) -> int:
    """Reads the call at `i` into `calls`; the position after it."""
    name = _name(tokens[i])
    i += 1
    while tokens[i] == ".":
        name = f"{name}.{_name(tokens[i + 1])}"
        i += 2
    if tokens[i] != "(":
        raise _NotPlain
    i += 1
    names = order.get(name, ())
    arguments: dict[Any, Any] = {}
    index = 0  # positional arguments read; -1 once a keyword was
    while tokens[i] != ")":
        if tokens[i + 1] == "=" and tokens[i + 2] != "=":
            key = _name(tokens[i])
            arguments[key], i = _value(tokens, i + 2, 2)
            index = -1
        elif 0 <= index < len(names):  # not after keywords, not beyond the schema's parameters
            arguments[names[index]], i = _value(tokens, i, 2)
            index += 1
        else:
            raise _NotPlain
        token = tokens[i]
        if token == ",":
            i += 1
        elif token != ")":
            raise _NotPlain
    calls.append((name, arguments))
    return i + 1


def _value(tokens: list[str], i: int, depth: int) -> tuple[Any, int]:
    """The literal at `i` and the position after it."""
    token = tokens[i]
    first = token[0]
    if (first == "'" or first == '"') and len(token) > 1:
        return token[1:-1], i + 1  # a string token ends with its quote (a lone quote is not one)
    if first in _NUMBER_STARTS:
        return _number(token), i + 1
    if first == "-":
        token = tokens[i + 1]
        if token[0] not in _NUMBER_STARTS:
            raise _NotPlain
        return -_number(token), i + 2
    if token in _CONSTANTS:
        return _CONSTANTS[token], i + 1
    if depth >= MAX_DEPTH:
        raise _NotPlain
    i += 1
    if token == "[":
        items = []
        while tokens[i] != "]":
            item, i = _value(tokens, i, depth + 1)
            items.append(item)
            i = _separator(tokens, i, "]")
        return items, i + 1
    if token == "{":
        mapping: dict[Any, Any] = {}
        while tokens[i] != "}":
            key, i = _value(tokens, i, depth + 1)
            if isinstance(key, (list, dict)) or tokens[i] != ":":
                raise _NotPlain
            mapping[key], i = _value(tokens, i + 1, depth + 1)
            i = _separator(tokens, i, "}")
        return mapping, i + 1
    raise _NotPlain


def _separator(tokens: list[str], i: int, closing: str) -> int:
    token = tokens[i]
    if token == ",":
        return i + 1
    if token != closing:
        raise _NotPlain
    return i


def _number(token: str) -> int | float:
    if token == ".":
        raise _NotPlain  # `.5` (punctuation, then 5): left to ast
    if "." in token or "e" in token or "E" in token:
        return float(token)
    if token[0] == "0" and token.strip("0"):
        raise _NotPlain  # leading zeros: Python refuses `007`
    return int(token)
