"""Plain data across processes: what a program's function may return, and how it travels.

Standalone (standard library only): the executor loads it from its own folder. JSON with tags:
None, bool, str, float and ints below 2**63 are themselves, and anything else is a one-key
object: {"i": hex} (a big int), {"t"|"s"|"fs": items} (tuple, set, frozenset),
{"d": [keys, values]} (two columns of items), {"b": hex} (bytes), {"c": [re, im]}. A list is
its items. Items are a JSON array of values or, where that would cost an object per element on
the other side, a lean form: {"li": [...]} (ints, the big ones as hex text) or
{"lt"|"ll": [width, flat]} (tuples or lists of one width holding only JSON scalars, flattened).
Exact builtin types only: an object whose `__eq__` always says True never crosses. Every bound
raises an error that says which bound.
"""

from __future__ import annotations

import json
import sys

MAX_ELEMENTS = 4_000_000
"""Values (scalars and containers) in one message: a million-entry dict (2,000,001) and a list of
a million pairs (3,000,001) fit."""
MAX_DEPTH = 200
MAX_SHARED_HASH = 64
"""Elements of one set or dict that may share a hash: more is a hash-collision attack, whose
insertions would run quadratic in C code that no timer can interrupt."""
SMALL_INT = 1 << 63
MESSAGE_INT_DIGITS = 640
"""Decimal digits of one int in a message's JSON (the least Python allows). Ints from 2**63 up
cross in hex, so 19 would do; the executor raises its own limit for the tests' `str()`, and a
hostile message of many 99,999-digit ints would hold it for seconds in quadratic C code."""
ERROR_LIMIT = 2000
"""Characters of one error message (the rest is cut, and the cut is said)."""
SEQUENCE_TAGS = {tuple: "t", set: "s", frozenset: "fs"}
LEAN_TAGS = ("li", "lt", "ll")


def cap(text: str, limit: int = ERROR_LIMIT) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"... [{len(text) - limit} more characters cut]"


def loads(text: str | bytes):
    """A message's JSON, with decimal ints bounded by MESSAGE_INT_DIGITS. The limit is the
    interpreter's, lowered only while parsing and restored even when a timer's exception cuts
    the parse short."""
    if not hasattr(sys, "set_int_max_str_digits"):  # Python before 3.10.7: no limit to raise
        return json.loads(text)
    limit = sys.get_int_max_str_digits()
    try:
        sys.set_int_max_str_digits(MESSAGE_INT_DIGITS)
        return json.loads(text)
    finally:
        sys.set_int_max_str_digits(limit)


def _small(value) -> bool:
    kind = type(value)
    return (
        value is None
        or kind is str
        or kind is float
        or kind is bool
        or (kind is int and -SMALL_INT <= value < SMALL_INT)
    )


def _count(count: list, n: int, error: type) -> None:
    count[0] += n
    if count[0] > MAX_ELEMENTS:
        raise error(f"value has more than {MAX_ELEMENTS:,} elements")


def encode(value, depth: int = 0, count: list | None = None):
    """Tagged JSON for plain data; raises TypeError for anything else. Each value counts once
    towards MAX_ELEMENTS; a container's items sit one level below it."""
    count = [0] if count is None else count
    if depth > MAX_DEPTH:
        raise TypeError(f"value nested more than {MAX_DEPTH} deep")
    _count(count, 1, TypeError)
    kind = type(value)
    if _small(value):
        return value
    if kind is int:
        return {"i": hex(value)}
    if kind is list:
        return _encode_items(value, depth, count)
    if kind is complex:
        return {"c": [value.real, value.imag]}
    if kind is bytes:
        return {"b": value.hex()}
    if kind in SEQUENCE_TAGS:
        return {SEQUENCE_TAGS[kind]: _encode_items(list(value), depth, count)}
    if kind is dict:
        keys = _encode_items(list(value), depth, count)
        return {"d": [keys, _encode_items(list(value.values()), depth, count)]}
    raise TypeError(
        f"returned a {kind.__name__} object; only plain data (None, bool, int, float, complex, "
        "str, bytes, list, tuple, dict, set, frozenset) can be checked"
    )


def _encode_items(items: list, depth: int, count: list):
    """The items of a container at `depth`: bare when all are JSON scalars (the common case,
    without a call per element), else lean where a lean form fits, else one value each."""
    if all(map(_small, items)):
        _count(count, len(items), TypeError)
        return items
    if depth < MAX_DEPTH:  # beyond, the items are too deep: the general path says so
        lean = _lean(items, count)
        if lean is not None:
            return lean
    return [encode(v, depth + 1, count) for v in items]


def _lean(items: list, count: list) -> dict | None:
    """A lean form of `items`, counted as the general path would count it, or None. Tagged one
    by one, a million big ints or pairs cost a million JSON objects on the other side: more
    memory than the runner has."""
    kinds = set(map(type, items))
    if kinds == {int}:
        _count(count, len(items), TypeError)
        return {"li": [v if -SMALL_INT <= v < SMALL_INT else hex(v) for v in items]}
    if len(kinds) != 1 or not kinds <= {tuple, list}:
        return None
    widths = set(map(len, items))
    width = widths.pop() if len(widths) == 1 else 0
    flat = [x for item in items for x in item] if width else []
    if not width or not all(map(_small, flat)):
        return None
    _count(count, len(items) + len(flat), TypeError)
    return {"lt" if tuple in kinds else "ll": [width, flat]}


def _json_scalar(value) -> bool:
    kind = type(value)
    return kind is not list and kind is not dict


def _hashed(items: list, kind: str) -> list:
    """`items`, after refusing a hash-collision attack (see MAX_SHARED_HASH)."""
    shared: dict = {}
    for item in items:  # a Python loop: the test's timer can interrupt it
        try:
            h = hash(item)
        except TypeError as error:
            raise ValueError(f"an element of a {kind} is not hashable: {error}") from None
        shared[h] = shared.get(h, 0) + 1
        if shared[h] > MAX_SHARED_HASH:
            raise ValueError(f"more than {MAX_SHARED_HASH} elements of one {kind} share a hash")
    return items


def decode(data, depth: int = 0, count: list | None = None):
    """The value `encode` made, from its parsed JSON; raises ValueError for anything else,
    counting and nesting exactly as `encode` does."""
    count = [0] if count is None else count
    if depth > MAX_DEPTH:
        raise ValueError(f"value nested more than {MAX_DEPTH} deep")
    _count(count, 1, ValueError)
    kind = type(data)
    if data is None or kind in (bool, str, float, int):
        return data
    if kind is list:
        return _decode_items(data, depth, count)
    if kind is not dict or len(data) != 1:
        raise ValueError("malformed value")
    ((tag, body),) = data.items()
    if tag in LEAN_TAGS:
        return _decode_items(data, depth, count)
    if tag == "i" and type(body) is str:
        return int(body, 16)
    if tag == "c" and type(body) is list and len(body) == 2:
        return complex(float(body[0]), float(body[1]))
    if tag == "b" and type(body) is str:
        return bytes.fromhex(body)
    if tag in ("t", "s", "fs"):
        items = _decode_items(body, depth, count)
        if tag == "t":
            return tuple(items)
        made = set()
        for item in _hashed(items, "set"):
            made.add(item)
        return made if tag == "s" else frozenset(made)
    if tag == "d" and type(body) is list and len(body) == 2:
        keys, values = (_decode_items(column, depth, count) for column in body)
        if len(keys) != len(values):
            raise ValueError("malformed dict: its keys and values differ in number")
        made = {}
        for key, value in zip(_hashed(keys, "dict"), values, strict=True):
            made[key] = value
        return made
    raise ValueError(f"malformed value (tag {cap(repr(tag), 40)})")


def _decode_items(body, depth: int, count: list) -> list:
    """The items of a container at `depth`, from any form `_encode_items` makes."""
    if type(body) is list:
        if all(map(_json_scalar, body)):
            _count(count, len(body), ValueError)
            return list(body)  # a copy: the caller may compare the message with the value
        return [decode(v, depth + 1, count) for v in body]
    if type(body) is not dict or len(body) != 1:
        raise ValueError("malformed items: neither a list nor a lean form")
    ((tag, inner),) = body.items()
    if tag not in LEAN_TAGS or type(inner) is not list:
        raise ValueError(f"malformed items (tag {cap(repr(tag), 40)})")
    if depth >= MAX_DEPTH:
        raise ValueError(f"value nested more than {MAX_DEPTH} deep")
    if tag == "li":
        _count(count, len(inner), ValueError)
        return list(map(_int_item, inner))
    width, flat = inner if len(inner) == 2 else (0, None)
    if not (
        type(width) is int
        and type(flat) is list
        and 0 < width <= len(flat)
        and len(flat) % width == 0
        and all(map(_json_scalar, flat))
    ):
        raise ValueError(f"malformed {tag!r} items: [width, flat list of scalars] expected")
    _count(count, len(flat) // width + len(flat), ValueError)
    rows = zip(*[iter(flat)] * width, strict=True)
    return list(rows) if tag == "lt" else list(map(list, rows))


def _int_item(item) -> int:
    if type(item) is int:
        return item
    if type(item) is str:
        return int(item, 16)
    raise ValueError("malformed 'li' items: an element is neither an int nor hex text")


def describe(error: BaseException) -> str:
    try:
        text = str(error)
    except BaseException:  # a program's exception whose __str__ fails
        text = "<unprintable>"
    return cap(f"{type(error).__name__}: {text}" if text else type(error).__name__)
