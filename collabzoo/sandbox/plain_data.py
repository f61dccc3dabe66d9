"""Plain data across processes: what a program's function may return, and how it travels.

Standalone (standard library only): the executor loads it from its own folder. JSON with tags:
None, bool, str, float and ints below 2**63 are themselves, a list is a JSON array, and anything
else is a one-key object: {"i": hex} (a big int), {"t"|"s"|"fs": [...]} (tuple, set,
frozenset), {"d": [[k, v], ...]}, {"b": hex} (bytes), {"c": [re, im]}. Exact builtin types
only: an object whose `__eq__` always says True never crosses. Every bound raises an error
that says which bound.
"""

from __future__ import annotations

MAX_ELEMENTS = 2_000_000
"""Values (scalars and containers) in one message: a one-million-element list fits."""
MAX_DEPTH = 200
MAX_SHARED_HASH = 64
"""Elements of one set or dict that may share a hash: more is a hash-collision attack, whose
insertions would run quadratic in C code that no timer can interrupt."""
SMALL_INT = 1 << 63
ERROR_LIMIT = 2000
"""Characters of one error message (the rest is cut, and the cut is said)."""


def cap(text: str, limit: int = ERROR_LIMIT) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"... [{len(text) - limit} more characters cut]"


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
    """Tagged JSON for plain data; raises TypeError for anything else."""
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
        if all(map(_small, value)):  # the common case, without a call per element
            _count(count, len(value), TypeError)
            return value
        return [encode(v, depth + 1, count) for v in value]
    if kind is complex:
        return {"c": [value.real, value.imag]}
    if kind is bytes:
        return {"b": value.hex()}
    if kind in (tuple, set, frozenset):
        tag = {tuple: "t", set: "s", frozenset: "fs"}[kind]
        return {tag: encode(list(value), depth, count)}
    if kind is dict:
        return {"d": [[encode(k, depth + 1, count), encode(v, depth + 1, count)]
                      for k, v in value.items()]}  # fmt: skip
    raise TypeError(
        f"returned a {kind.__name__} object; only plain data (None, bool, int, float, complex, "
        "str, bytes, list, tuple, dict, set, frozenset) can be checked"
    )


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
    count = [0] if count is None else count
    if depth > MAX_DEPTH:
        raise ValueError(f"value nested more than {MAX_DEPTH} deep")
    _count(count, 1, ValueError)
    kind = type(data)
    if data is None or kind in (bool, str, float, int):
        return data
    if kind is list:
        if all(map(_json_scalar, data)):
            _count(count, len(data), ValueError)
            return list(data)  # a copy: the caller may compare the message with the value
        return [decode(v, depth + 1, count) for v in data]
    if kind is not dict or len(data) != 1:
        raise ValueError("malformed value")
    ((tag, body),) = data.items()
    if tag == "i" and type(body) is str:
        return int(body, 16)
    if tag == "c" and type(body) is list and len(body) == 2:
        return complex(float(body[0]), float(body[1]))
    if tag == "b" and type(body) is str:
        return bytes.fromhex(body)
    if tag in ("t", "s", "fs") and type(body) is list:
        items = decode(body, depth, count)
        if tag == "t":
            return tuple(items)
        made = set()
        for item in _hashed(items, "set"):
            made.add(item)
        return made if tag == "s" else frozenset(made)
    if tag == "d" and type(body) is list:
        if not all(type(p) is list and len(p) == 2 for p in body):
            raise ValueError("malformed dict: each item must be a [key, value] pair")
        # keys and values one level down, as `encode` put them (a pair is not a level)
        pairs = [(decode(k, depth + 1, count), decode(v, depth + 1, count)) for k, v in body]
        _hashed([key for key, _ in pairs], "dict")
        made = {}
        for key, value in pairs:
            made[key] = value
        return made
    raise ValueError(f"malformed value (tag {cap(repr(tag), 40)})")


def describe(error: BaseException) -> str:
    try:
        text = str(error)
    except BaseException:  # a program's exception whose __str__ fails
        text = "<unprintable>"
    return cap(f"{type(error).__name__}: {text}" if text else type(error).__name__)
