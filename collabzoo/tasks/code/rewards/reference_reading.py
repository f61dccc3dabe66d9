"""The reference's reading of code answers, reproduced rule for rule.

The published code reward (the reference task repository's `execution_reward_aux`) reads an
answer with line and regex rules rather than a parser, and its numbers are defined by those
rules, quirks included. `answer_reading="reference"` (the default of the code envs and of
`collabzoo.tasks.code.rewards`) reads answers this way, so that rewards equal the published ones on
what real models write; `answer_reading="clean"` is collabzoo's parser-based reading (see
`collabzoo.tasks.code.rewards`). What the reference does, and so what this module does:

* **Fences.** Every ```` ```python ```` and ```` ``` ```` marker is deleted wherever it stands,
  with the whitespace after it up to one newline; prose around the code stays. An answer with
  one stray closing fence keeps its code.
* **Functions, by indentation.** A line matching `def NAME(` (at any indentation) opens a block
  that takes every following blank line, every line indented deeper than the `def` (or starting
  with a tab), and a docstring that starts at the `def`'s level (up to the line closing it). Any
  other line closes the block and is dropped. Lines of the form `Capitalised prose ending in
  . ! ? or :` without code characters are then dropped, even inside docstrings. A nested `def`
  closes the enclosing block: the enclosing function's lines after it are dropped.
* **The function NAME** is the first block of the cleaned code whose `def` line names it,
  replaced by each adjacent block with the same name (the last of the first run of copies):
  models that repeat a definition until cut off are scored on that copy.
* **"With a return"**: the word `return` followed by whitespace anywhere in the function's text,
  docstring included, once the text is stripped: a bare `return` ending a truncated answer does
  not count, "Return the sum" in a docstring does.
* **The program**: the prompt's import lines (by two regular expressions), then the cleaned aux
  function, then the cleaned entry point, with `math` bound for both the program and its tests.
* **Tests**: each line of `check(candidate)`'s body (up to the next blank line before a `def`)
  that starts with `assert` + whitespace and mentions `candidate`, first occurrences only, with
  every `candidate` in its text replaced by the entry point's name. When a test reads
  `assert NAME(ARGS) == EXPECTED` (ARGS without a closing parenthesis), the reference evaluates
  `NAME(ARGS)` and `EXPECTED` before the assert: the call runs twice, and a fragment that does
  not compile fails the test.
* **Calls aux**: `aux(` anywhere in the entry point's text (comments and strings included).
  **Thin wrapper**: after dropping blank lines, comments, docstrings and the `def` line, the
  body is one line starting with `return ` that mentions `aux`, or `x = aux(...)` then exactly
  `return x`.

Each function accepts any string and executes nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FENCE_PYTHON = re.compile(r"```python\s*\n?")
_FENCE = re.compile(r"```\s*\n?")
_ANY_DEF = re.compile(r"^(\s*)def\s+\w+\s*\(")
_HAS_DEF = re.compile(r"def\s+\w+\s*\(")
_PROSE = re.compile(r"^[A-Z][a-z].*[.!?:]$")
_CODE_MARKS = ("def ", "return ", "if ", "for ", "while ", "=", "(", ")", "[", "]")
_RETURN = re.compile(r"return\s+")
_IMPORTS = (re.compile(r"^from\s+[\w\.]+\s+import\s+.*$"), re.compile(r"^import\s+[\w\.,\s]+$"))
_CHECK_BODY = re.compile(r"def check\(candidate\):(.*?)(?=\n\ndef|\Z)", re.DOTALL)
_TEST_LINE = re.compile(r"assert\s+[^\n]*candidate[^\n]*")
_EQUALITY = re.compile(r"assert\s+(\w+)\(([^)]*)\)\s*==\s*(.+)")
_DOCSTRING_QUOTES = ('"""', "'''")
PRELOADED_MODULES = ("math",)
"""Bound in the reference's program namespace before the program runs."""


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _deeper(line: str, base: int) -> bool:
    return line.startswith(" " * (base + 1)) or line.startswith("\t")


def _is_prose(line: str) -> bool:
    stripped = line.strip()
    return bool(
        stripped
        and not stripped.startswith(("#", *_DOCSTRING_QUOTES))
        and not any(mark in line for mark in _CODE_MARKS)
        and _PROSE.match(stripped)
    )


def clean_reference(text: object) -> str:
    """The function blocks of an answer, as the reference cleans it ("" when none)."""
    if not isinstance(text, str) or not text:
        return ""
    lines = _FENCE.sub("", _FENCE_PYTHON.sub("", text)).split("\n")
    blocks: list[list[str]] = []
    current: list[str] = []
    inside, base, i = False, 0, 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if _ANY_DEF.match(line):
            if inside and current:
                blocks.append(current)
            current, inside, base = [line], True, _indent(line)
        elif inside:
            if not stripped or _deeper(line, base):
                current.append(line)
            elif stripped.startswith(_DOCSTRING_QUOTES):
                current.append(line)
                quote = stripped[:3]
                if not (stripped.endswith(quote) and len(stripped) > 3):
                    i += 1
                    while i < len(lines):  # the docstring's other lines, whatever their indent
                        current.append(lines[i])
                        if quote in lines[i]:
                            break
                        i += 1
            else:
                if current:
                    blocks.append(current)
                current, inside = [], False
        i += 1
    if inside and current:
        blocks.append(current)
    joined = "\n\n".join("\n".join(block) for block in blocks)
    kept = "\n".join(line for line in joined.split("\n") if not _is_prose(line)).strip()
    return kept if _HAS_DEF.search(kept) else ""


def function_reference(text: object, name: str) -> str:
    """The function `name` of an answer as the reference extracts it ("" when missing)."""
    if not isinstance(text, str) or not text or not name:
        return ""
    opening = re.compile(rf"^(\s*)def\s+{re.escape(name)}\s*\(")
    found: list[str] = []
    inside, base = False, 0
    for line in clean_reference(text).split("\n"):
        if opening.match(line):  # an adjacent copy replaces what was found
            found, inside, base = [line], True, _indent(line)
        elif inside:
            if not line.strip() or _deeper(line, base):
                found.append(line)
            else:
                break
    return "\n".join(found).strip()


def has_return_reference(source: str) -> bool:
    return _RETURN.search(source) is not None


def imports_reference(prompt: object) -> tuple[str, ...]:
    """The prompt's import lines by the reference's two patterns, stripped, first copies."""
    if not isinstance(prompt, str):
        return ()
    found: dict[str, None] = {}
    for line in prompt.split("\n"):
        text = line.strip()
        if any(pattern.match(text) for pattern in _IMPORTS):
            found.setdefault(text, None)
    return tuple(found)


@dataclass(frozen=True)
class ReferenceTest:
    """One reference test: `code` runs at module level after the program; `shown` is the
    dataset's line."""

    code: str
    shown: str


def _compiles(expression: str) -> bool:
    try:
        compile(expression, "<test>", "eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError, OverflowError):
        return False
    return True


def _reference_test(line: str, entry_point: str) -> ReferenceTest:
    test = line.replace("candidate", entry_point)
    equality = _EQUALITY.search(test)
    if equality is None:
        return ReferenceTest(test, line)
    call = f"{equality.group(1)}({equality.group(2)})"
    expected = equality.group(3)
    steps = []
    for fragment in (call, expected):
        if not _compiles(fragment):
            message = f"the reference cannot evaluate {fragment!r}"
            steps.append(f"raise SyntaxError({message!r})")
            break
        steps.append(f"({fragment}\n)")
    else:
        steps.append(test)
    return ReferenceTest("\n".join(steps), line)


def tests_reference(test_code: object, entry_point: str) -> tuple[ReferenceTest, ...]:
    """The tests the reference extracts from a dataset's `check(candidate)` (see the module
    notes); empty when it finds none."""
    if not isinstance(test_code, str) or not test_code or not entry_point:
        return ()
    body = _CHECK_BODY.search(test_code)
    if body is None:
        return ()
    lines: dict[str, None] = {}
    for raw in body.group(1).strip().split("\n"):
        line = raw.strip()
        if line.startswith("assert") and "candidate" in line and _TEST_LINE.match(line):
            lines.setdefault(line, None)
    return tuple(_reference_test(line, entry_point) for line in lines)


def calls_aux_reference(main_source: str) -> bool:
    return bool(main_source) and re.search(r"\baux\s*\(", main_source) is not None


def is_wrapper_reference(main_source: str) -> bool:
    """The reference's thin-wrapper test, line by line (see the module notes)."""
    if not main_source:
        return False
    body: list[str] = []
    in_docstring = False
    for line in main_source.split("\n"):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith(_DOCSTRING_QUOTES):
            quote = stripped[:3]
            if not (stripped.endswith(quote) and len(stripped) > 3):
                in_docstring = True
            continue
        if in_docstring:
            if any(q in stripped for q in _DOCSTRING_QUOTES):
                in_docstring = False
            continue
        if stripped.startswith("#") or stripped.startswith("def "):
            continue
        body.append(stripped)
    if not body:
        return True  # an empty body counts as a wrapper
    if len(body) == 1:
        return body[0].startswith("return ") and "aux" in body[0]
    if len(body) == 2:
        assigned = re.search(r"(\w+)\s*=\s*aux\s*\(", body[0])
        return assigned is not None and body[1] == f"return {assigned.group(1)}"
    return False
