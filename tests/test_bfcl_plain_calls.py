"""BFCL's fast reading of plain calls reads exactly what `ast` reads, and leaves the rest to it.

`parse_calls` reads a plain answer (lines of `name(key=literal)`, or a list of such calls) without
compiling it; every answer it reads so must give the calls and rejected parts that the `ast`
reading gives. Checked on every answer of the BFCL conformance set and of the real-model set, on
edge cases of Python's grammar, and on seeded mutations of the conformance answers.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from collabzoo.tasks.bfcl.rewards import parsing
from collabzoo.tasks.bfcl.rewards.plain_calls import MAX_DEPTH, plain_calls
from tests.conftest import REPOSITORY

ORDER = {"f": ["a", "b"], "g.h": ["x"], "light": ["distance", "speed"]}


def _answers() -> list[str]:
    data = REPOSITORY / "tests" / "data"
    cases = json.loads((data / "bfcl_conformance.json").read_text(encoding="utf-8"))
    real = json.loads((data / "real_output_task_conformance.json").read_text(encoding="utf-8"))
    answers = [a or "" for case in cases["reward_cases"] for a in case["answers"]]
    for key, pairs in real.items():
        if key.startswith("bfcl"):
            answers += [a or "" for pair in pairs for a in pair["answers"]]
    return answers


def _reading(text: str, order: dict[str, list[str]]) -> tuple[list[Any], list[Any]]:
    parsed = parsing.parse_calls(text, order)
    calls = [(c.name, repr(c.arguments), c.key) for c in parsed.calls]
    return calls, [(r.line, r.reason) for r in parsed.rejected]


def _by_ast(text: str, order: dict[str, list[str]], monkeypatch: pytest.MonkeyPatch) -> Any:
    with monkeypatch.context() as patch:
        patch.setattr(parsing, "plain_calls", lambda source, order: None)
        return _reading(text, order)


def _order(text: str) -> dict[str, list[str]]:
    """The order the answer's own call names would have, two parameters each, so positional
    arguments are read."""
    names = {line.split("(")[0].strip("[ ") for line in text.splitlines() if "(" in line}
    return {**ORDER, **{n: ["p", "q"] for n in names if n}}


def test_every_recorded_answer_reads_as_ast_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    answers = _answers()
    plain = 0
    for text in answers:
        order = _order(text)
        assert _reading(text, order) == _by_ast(text, order, monkeypatch), text
        plain += plain_calls(parsing.strip_fences(text).strip(), order) is not None
    assert len(answers) > 1000
    assert plain > len(answers) // 2  # the fast reading is the common one


@pytest.mark.parametrize(
    ("text", "calls"),
    [
        ("f(a=1, b='x')", [("f", {"a": 1, "b": "x"})]),
        (
            "f(1, 'two')\ng.h(x=[1, -2.5, {'k': None}])",
            [("f", {"a": 1, "b": "two"}), ("g.h", {"x": [1, -2.5, {"k": None}]})],
        ),
        ("[f(a=True), f(b=false)]", [("f", {"a": True}), ("f", {"b": False})]),
        (
            "f(a=1,\n  b=2,)\n\nf(a=00, b=1.e5)",
            [("f", {"a": 1, "b": 2}), ("f", {"a": 0, "b": 1e5})],
        ),
        ("f(a=1, a=2)", [("f", {"a": 2})]),  # a repeated keyword: ast keeps both, the last wins
        ("f (a = - 3)", [("f", {"a": -3})]),
    ],
)
def test_plain_answers_are_read_without_ast(
    text: str, calls: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert plain_calls(parsing.python_words(text), ORDER) == calls
    assert _reading(text, ORDER) == _by_ast(text, ORDER, monkeypatch)


@pytest.mark.parametrize(
    "text",
    [
        "f(a=007)",  # Python refuses leading zeros
        "ﬁ(a=1)",  # Python NFKC-normalises names: `fi`
        "f(a=1)\n  f(b=2)",  # an indented line
        "f(a=1, 2)",  # positional after keyword
        "f(1, 2, 3)",  # beyond the schema's parameters: reported
        "f(a=-True)",
        "f(a=.5)",
        "f(a=1_000)",
        "f(a='it\\'s')",
        "f(a='x' 'y')",
        "f(a=b'x')",
        "f(a=(1, 2))",
        "f(a={1, 2})",
        "f(a=x)",
        "None(a=1)",
        "f(a=1); f(b=2)",
        "f(a=1) # note",
        "f(a=1)(b=2)",
        "[f(a=1), 3]",
        "f(a='\ud800')",
        "f(a=" + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + ")",
    ],
)
def test_other_answers_are_left_to_ast(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert plain_calls(parsing.python_words(text), ORDER) is None
    assert _reading(text, ORDER) == _by_ast(text, ORDER, monkeypatch)


def test_json_words_are_rewritten_as_the_reference_rewrites_them() -> None:
    # re's case-blind match takes the long s for an s: `falſe` is rewritten too
    assert parsing.python_words("f(a=falſe, b=TRUE, c='null')") == "f(a=False, b=True, c='None')"
    assert parsing.python_words("f(a=untrue)") == "f(a=untrue)"


@pytest.mark.filterwarnings("ignore::SyntaxWarning", "ignore::DeprecationWarning")
def test_mutated_answers_read_as_ast_reads_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seeded edits of recorded answers (inserted brackets, quotes, line breaks, keywords, bad
    characters; deleted characters): the readings never differ."""
    pieces = [*"()[]{},:=.-'\"\n \t_aZ09eE+x#\\", "true", "None", "if", "007", "1_0", "ﬁ", "é"]
    pieces += ["\x00", "\r", "\n  ", "f(", "=="]
    rng = random.Random(7)
    answers = rng.sample(_answers(), 300)
    for text in answers:
        for _ in range(6):
            chars = list(text)
            for _ in range(rng.randint(1, 3)):
                at = rng.randint(0, len(chars))
                if rng.random() < 0.6:
                    chars.insert(at, rng.choice(pieces))
                elif chars:
                    del chars[min(at, len(chars) - 1)]
            mutated = "".join(chars)
            order = _order(mutated)
            assert _reading(mutated, order) == _by_ast(mutated, order, monkeypatch), mutated
