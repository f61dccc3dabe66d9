"""The executor's plain-data encoding, the only thing that crosses from a program to the harness:
exact types survive the round trip, everything else is refused, and every bound says what was
wrong. No container needed: the image runs this same file."""

from __future__ import annotations

import json
import math
import sys

import pytest

from collabzoo.sandbox import plain_data


def crossed(value):
    """What the other side decodes after the value went through JSON text, as it does."""
    return plain_data.decode(json.loads(json.dumps(plain_data.encode(value))))


def same(a, b) -> bool:
    """Equal, with the exact same type at every level (True is not 1, (1,) is not [1])."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


VALUES = [
    None, True, False, 0, -1, 1 << 62, -(1 << 63), 1 << 63, 7 ** 20000, -(7 ** 300), 0.0, -0.0,
    1.5, 1e300, float("inf"), float("-inf"), float("nan"), 1.0, 3 + 4j, "", "héllo\x00\n",
    b"\x00\xff", [], [1, 2.0, "3", None, True], (1, (2, [3])), {1, 2}, frozenset({"a", (1, 2)}),
    {"k": [1], 2: (3,), (4, 5): {6}}, [[[]]], [1 << 80, 2], {frozenset({1}): b"x"},
    [-(1 << 80), 0, True], {1 << 70: 1, 2: [1 << 64]}, (1 << 64,), {1 << 64, 1},
    [(1, "a"), (2, None)], [[1.5], [2.5]], [(1, 2), [3, 4]], [(1, 2), (3,)], [(1 << 64, 2)],
    ((1, 2), (3, 4)), [()],
]  # fmt: skip


@pytest.mark.parametrize(
    "value", VALUES, ids=[f"{type(v).__name__}{i}" for i, v in enumerate(VALUES)]
)
def test_plain_values_cross_with_their_exact_types(value) -> None:
    assert same(crossed(value), value), crossed(value)


def test_small_ints_cross_bare_and_big_ints_in_hex() -> None:
    assert plain_data.encode((1 << 63) - 1) == (1 << 63) - 1
    assert plain_data.encode(1 << 63) == {"i": hex(1 << 63)}
    assert plain_data.encode(-(1 << 63) - 1) == {"i": hex(-(1 << 63) - 1)}
    assert plain_data.encode(-(1 << 63)) == -(1 << 63)
    assert plain_data.encode([1, 2]) == [1, 2] and plain_data.encode((1,)) == {"t": [1]}


def test_lists_of_big_ints_and_of_pairs_travel_lean() -> None:
    """One JSON object per element would cost a million objects on the other side for a
    million-element argument: big ints go as hex text in one array, rows of one width flat."""
    assert plain_data.encode([1 << 63, 1, -2]) == {"li": [hex(1 << 63), 1, -2]}
    assert plain_data.encode([(1, "a"), (2, None)]) == {"lt": [2, [1, "a", 2, None]]}
    assert plain_data.encode([[1.5], [2.5]]) == {"ll": [1, [1.5, 2.5]]}
    assert plain_data.encode({1: "a", 2: "b"}) == {"d": [[1, 2], ["a", "b"]]}
    assert plain_data.encode({(1 << 64): ()}) == {"d": [{"li": [hex(1 << 64)]}, [{"t": []}]]}
    for mixed in ([(1, 2), [3, 4]], [(1, 2), (3,)], [(1 << 64, 2)], [()], [1 << 64, True]):
        assert "lt" not in json.dumps(plain_data.encode(mixed)), mixed  # the general path
    assert plain_data.encode([1 << 64, True]) == [{"i": hex(1 << 64)}, True]


class Sneaky(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


@pytest.mark.parametrize(
    "value",
    [Sneaky(1), [Sneaky(1)], {"k": object()}, type("S", (str,), {})("x"), bytearray(b"x")],
    ids=["int subclass", "inside a list", "object in a dict", "str subclass", "bytearray"],
)
def test_anything_but_exact_builtins_is_refused(value) -> None:
    with pytest.raises(TypeError, match="only plain data"):
        plain_data.encode(value)


def test_bounds_are_enforced_with_a_clear_error() -> None:
    deep: list = []
    for _ in range(plain_data.MAX_DEPTH + 2):
        deep = [deep]
    with pytest.raises(TypeError, match="nested more than"):
        plain_data.encode(deep)
    with pytest.raises(TypeError, match="more than 4,000,000 elements"):
        plain_data.encode(list(range(plain_data.MAX_ELEMENTS + 1)))
    with pytest.raises(ValueError, match="more than 4,000,000 elements"):
        plain_data.decode([0] * (plain_data.MAX_ELEMENTS + 1))
    fits = plain_data.MAX_ELEMENTS - 1  # the list itself counts as one
    assert len(plain_data.decode([0] * fits)) == fits
    nested = json.loads("[" * (plain_data.MAX_DEPTH + 2) + "]" * (plain_data.MAX_DEPTH + 2))
    with pytest.raises(ValueError, match="nested more than"):
        plain_data.decode(nested)


def test_a_long_unknown_tag_is_quoted_cut() -> None:
    with pytest.raises(ValueError, match=r"malformed value \(tag 'x{39}\.\.\. \[62 more"):
        plain_data.decode({"x" * 100: 1})


def test_a_hash_collision_attack_is_refused_but_a_few_collisions_are_not() -> None:
    assert plain_data.MAX_SHARED_HASH == 64  # the sandbox guide's bound
    big = (1 << 61) - 1  # every multiple of it hashes to 0
    few = [{"i": hex(k * big)} for k in range(plain_data.MAX_SHARED_HASH)]
    assert len(plain_data.decode({"s": few})) == plain_data.MAX_SHARED_HASH
    many = [*few, {"i": hex((plain_data.MAX_SHARED_HASH + 1) * big)}]
    with pytest.raises(ValueError, match="share a hash"):
        plain_data.decode({"s": many})
    keys = [{"i": hex(k * big)} for k in range(plain_data.MAX_SHARED_HASH + 1)]
    with pytest.raises(ValueError, match="share a hash"):
        plain_data.decode({"d": [keys, [0] * len(keys)]})
    lean = {"li": [hex(k * big) for k in range(plain_data.MAX_SHARED_HASH + 1)]}
    for message in ({"s": lean}, {"fs": lean}, {"d": [lean, [0] * len(keys)]}):
        with pytest.raises(ValueError, match="share a hash"):
            plain_data.decode(message)


MALFORMED = {
    "unknown tag": {"x": 1},
    "no tag": {},
    "two tags": {"t": 1, "s": []},
    "int not hex text": {"i": 5},
    "bad hex": {"b": "zz"},
    "bytes not text": {"b": 5},
    "complex of one": {"c": [1]},
    "complex not a list": {"c": "ab"},
    "set of text": {"s": "ab"},
    "tuple of text": {"t": "x"},
    "frozenset of a number": {"fs": 1},
    "unhashable element": {"s": [[1]]},
    "dict of text": {"d": "x"},
    "dict of one column": {"d": [[1]]},
    "dict of three columns": {"d": [[1], [2], [3]]},
    "dict of text columns": {"d": ["ab", "cd"]},
    "more keys than values": {"d": [[1, 2], [3]]},
    "unhashable key": {"d": [[[1]], [2]]},
    "dict of pairs": {"d": [[1, 2], [3, 4], [5, 6]]},
    "columns as a tuple": {"d": [{"t": [1]}, [2]]},
    "complex of three": {"c": [1, 2, 3]},
    "bytes as a list": {"b": [1, 2]},
    "bytes as pairs": {"b": [[1, 2]]},
    "unknown tag with text": {"a": "ff"},
    "unknown tag with pairs": {"x": [[1, 2]]},
    "int as pairs": {"i": [[1, 2]]},
    "ints of text": {"li": "ff"},
    "ints holding a float": {"li": [1.5]},
    "ints holding a list": {"li": [[1]]},
    "ints holding a bool": {"li": [True]},
    "ints in bad hex": {"li": ["0xzz"]},
    "rows of width 0": {"lt": [0, []]},
    "rows of width true": {"lt": [True, [1]]},
    "rows cut short": {"lt": [2, [1, 2, 3]]},
    "rows wider than all": {"lt": [10**18, []]},
    "rows holding a list": {"ll": [1, [[1]]]},
    "rows without width": {"lt": [[1, 2]]},
    "rows of text": {"ll": [1, "ab"]},
    "lean form of an unknown tag": {"t": {"lx": [1]}},
    "lean form with two tags": {"t": {"li": [1], "lt": [1, [1]]}},
    "items of a number": {"t": 5},
}


@pytest.mark.parametrize("message", list(MALFORMED.values()), ids=list(MALFORMED))
def test_malformed_messages_are_refused_as_values(message) -> None:
    with pytest.raises(ValueError):
        plain_data.decode(message)


def test_a_decoded_list_is_a_copy_so_in_place_changes_are_seen() -> None:
    sent = [3, 1, 2]
    received = plain_data.decode(sent)
    received.sort()
    assert sent == [3, 1, 2] and plain_data.encode(received) != sent


def test_errors_are_capped_and_unprintable_ones_still_described() -> None:
    text = plain_data.describe(ValueError("x" * 50_000))
    assert len(text) < plain_data.ERROR_LIMIT + 100 and text.startswith("ValueError: xxx")
    assert "more characters cut" in text

    class Unprintable(Exception):
        def __str__(self):
            raise RuntimeError("no")

    assert plain_data.describe(Unprintable()) == "Unprintable: <unprintable>"


# ----- the bounds, where the sandbox guide puts them, the same on both sides -------------------
def nested(kind: type, levels: int):
    """`levels` containers of `kind`, each inside the next."""
    value = kind()
    for _ in range(levels - 1):
        value = {"k": value} if kind is dict else kind([value])
    return value


def encoded_nested(kind: type, levels: int):
    """The same, as the other side would receive it (built by hand, not by `encode`)."""
    wrap = {
        dict: lambda inner: {"d": [["k"], [inner]]},
        list: lambda inner: [inner],
        tuple: lambda inner: {"t": [inner]},
    }[kind]
    value = {"d": [[], []]} if kind is dict else [] if kind is list else {"t": []}
    for _ in range(levels - 1):
        value = wrap(value)
    return value


@pytest.mark.parametrize("kind", [list, dict, tuple])
def test_nesting_is_allowed_200_deep_and_refused_beyond_on_both_sides(kind: type) -> None:
    assert plain_data.MAX_DEPTH == 200
    deepest = nested(kind, 201)  # the outermost is level 0, the innermost level 200
    assert crossed(deepest) == deepest
    assert plain_data.encode(deepest) == encoded_nested(kind, 201)
    with pytest.raises(TypeError, match="nested more than 200 deep"):
        plain_data.encode(nested(kind, 202))
    with pytest.raises(ValueError, match="nested more than 200 deep"):
        plain_data.decode(encoded_nested(kind, 202))


def test_a_dict_key_is_bounded_one_level_below_its_dict() -> None:
    """Keys count their nesting like values do: a tuple key 200 deep inside a dict is one
    level too many."""
    fits, deep = {nested(tuple, 200): 1}, {nested(tuple, 201): 1}
    assert crossed(fits) == fits
    with pytest.raises(TypeError, match="nested more than 200 deep"):
        plain_data.encode(deep)
    with pytest.raises(ValueError, match="nested more than 200 deep"):
        plain_data.decode({"d": [[encoded_nested(tuple, 201)], [1]]})
    inside = [{nested(tuple, 199): 1}]  # the same one level further down
    assert crossed(inside) == inside
    with pytest.raises(TypeError, match="nested more than 200 deep"):
        plain_data.encode([{nested(tuple, 200): 1}])
    with pytest.raises(ValueError, match="nested more than 200 deep"):
        plain_data.decode([{"d": [[encoded_nested(tuple, 200)], [1]]}])


SMALL = 1000
"""The element bound, lowered for these tests (the counting is the same at any bound)."""


def _grown(message, tag: str | None = None):
    """`message` with one more row of what it holds, added to the message itself."""
    if isinstance(message, list):
        return [*message, message[-1]]
    ((tag, body),) = message.items()
    if tag == "d":
        return {"d": [[*body[0], "x"], [*body[1], body[1][-1]]]}
    if tag in ("lt", "ll"):
        width, flat = body
        return {tag: [width, flat + flat[-width:]]}
    return {tag: _grown(body)}


@pytest.mark.parametrize(
    ("make", "most"),
    [
        (lambda n: list(range(n)), SMALL - 1),  # the list itself is one
        (lambda n: [[]] * n, SMALL - 1),  # one per inner list, no scalars
        (lambda n: tuple(range(n)), SMALL - 1),  # the tuple (not the list it travels as)
        (lambda n: dict.fromkeys(range(n), 0), (SMALL - 1) // 2),  # a key and a value each
        (lambda n: [1 << 64] * n, SMALL - 1),  # lean: ints as hex text
        (lambda n: [(i, -i) for i in range(n)], (SMALL - 1) // 3),  # lean: rows, each three
        (lambda n: [[i] for i in range(n)], (SMALL - 1) // 2),  # lean: rows of one, each two
    ],
    ids=["flat list", "list of lists", "tuple", "dict", "big ints", "pairs", "rows of one"],
)
def test_elements_are_counted_the_same_on_both_sides(make, most: int, monkeypatch) -> None:
    assert plain_data.MAX_ELEMENTS == 4_000_000  # the sandbox guide's bound
    monkeypatch.setattr(plain_data, "MAX_ELEMENTS", SMALL)
    fits = make(most)
    message = json.loads(json.dumps(plain_data.encode(fits)))
    assert plain_data.decode(message) == fits
    with pytest.raises(TypeError, match="more than 1,000 elements"):
        plain_data.encode(make(most + 1))
    with pytest.raises(ValueError, match="more than 1,000 elements"):
        plain_data.decode(_grown(message))


def test_lean_and_general_forms_decode_alike_and_count_alike(monkeypatch) -> None:
    """A hostile side may send either form: the same value, the same count, the same bound."""
    monkeypatch.setattr(plain_data, "MAX_ELEMENTS", SMALL)
    most = (SMALL - 1) // 3
    pairs = [(i, -i) for i in range(most)]
    general = [{"t": [i, -i]} for i in range(most)]
    assert plain_data.decode(general) == pairs == plain_data.decode(plain_data.encode(pairs))
    with pytest.raises(ValueError, match="more than 1,000 elements"):
        plain_data.decode([*general, {"t": [0, 0]}])
    bigs = [1 << 64] * (SMALL - 1)
    assert plain_data.decode([{"i": hex(v)} for v in bigs]) == bigs
    assert plain_data.decode({"li": [hex(v) for v in bigs]}) == bigs


def test_lean_forms_are_bounded_in_depth_like_the_general_ones() -> None:
    """Rows and big ints sit one level below their list, whichever form carries them: inside a
    list at level 199 they fit, inside one at level 200 they are too deep, on both sides."""
    for items in ([(1, 2)], [[1]], [1 << 64]):
        fits, deep = nested(list, 200), nested(list, 201)
        _innermost(fits).extend(items)
        _innermost(deep).extend(items)
        message = json.loads(json.dumps(plain_data.encode(fits)))
        assert plain_data.decode(message) == fits
        with pytest.raises(TypeError, match="nested more than 200 deep"):
            plain_data.encode(deep)
        with pytest.raises(ValueError, match="nested more than 200 deep"):
            plain_data.decode([message])


def _innermost(value: list) -> list:
    while value:
        value = value[0]
    return value


def test_a_message_carries_no_decimal_int_beyond_640_digits() -> None:
    """Ints from 2**63 up cross in hex; a long decimal in a message is refused at once (the
    executor's raised limit would parse 99,999 digits in quadratic time), and the process's own
    limit is back afterwards, for the tests' str()."""
    before = sys.get_int_max_str_digits()
    assert plain_data.loads("[" + "9" * 640 + "]") == [10**640 - 1]
    for text in ("[" + "9" * 641 + "]", "[" + ",".join(["9" * 99_999] * 20) + "]"):
        with pytest.raises(ValueError, match="640 digits"):
            plain_data.loads(text)
    assert sys.get_int_max_str_digits() == before
    sys.set_int_max_str_digits(100_000)
    try:
        with pytest.raises(ValueError, match="640 digits"):
            plain_data.loads(b"9" * 5000)
        assert sys.get_int_max_str_digits() == 100_000
        big = 7**20000
        assert plain_data.decode(plain_data.loads(json.dumps(plain_data.encode(big)))) == big
    finally:
        sys.set_int_max_str_digits(before)


def test_errors_are_cut_at_2000_characters_and_say_how_much_was_cut() -> None:
    assert plain_data.ERROR_LIMIT == 2000
    assert plain_data.cap("x" * 2000) == "x" * 2000
    assert plain_data.cap("x" * 2005) == "x" * 2000 + "... [5 more characters cut]"
    assert plain_data.cap("abcdef", 4) == "abcd... [2 more characters cut]"
    assert plain_data.cap("x" * 5000).endswith("... [3000 more characters cut]")
    assert plain_data.describe(ValueError()) == "ValueError"
