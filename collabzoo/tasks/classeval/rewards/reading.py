"""The reference's text rules for ClassEval (tasks-2.md section 6 and its Corrections): which
methods are to be written, who owns each, how an answer is read, and how the accepted methods
are merged into the skeleton.

Every rule here is a text rule, kept as the reference applies it, quirks included, so that the
merged program (and so the reward) is the reference's on any answer:

* the class is the first `class Name:` line (a class with bases is skipped);
* an answer keeps only its first fenced block when it holds three backticks;
* a method block runs from a `def NAME(` line up to the next line starting with `def ` at any
  indentation (a nested helper cuts it short, prose after the last method stays in it);
* a decorated stub has only its decorator lines replaced, so the stub itself, defined later,
  overrides the agent's method, and a method's region reaches over the next decorator;
* once any block is accepted the merged file is normalized and passed through autopep8.
"""

from __future__ import annotations

import ast
import re
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

AGENTS = 2
"""The partition has two owners: agent 0 (one-parameter methods) and agent 1 (the rest)."""
_ASCII = str.maketrans(
    {
        "\u201c": '"',
        "\u201d": '"',
        "\u2018": "'",
        "\u2019": "'",
        "\u2013": "-",
        "\u2014": "-",
        "\u2026": "...",
        "\u00a0": " ",
        "\u200b": None,
    }
)
_CLASS_NAME = re.compile(r"\bclass\s+([A-Za-z_][A-Za-z0-9_]*)\s*:\s*")
_ANY_DEF_NAME = re.compile(r"^\s*def\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(.*")
_DEF_START = re.compile(r"^\s*def\s+[A-Za-z_]")
FENCE = "```"
_AST_LOCK = threading.Lock()


def parse(code: str) -> ast.Module:
    """`ast.parse`, one call at a time: CPython 3.11's parser can fail with a SystemError when
    threads parse concurrently, and envs are stepped from worker threads."""
    with _AST_LOCK, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escapes and the like: not our answer's fault
        return ast.parse(code)


def parses(code: str) -> bool:
    """Whether `code` parses on its own (any failure of the parser counts as not parsing)."""
    try:
        parse(code)
    except Exception:
        return False
    return True


def sanitize(text: str) -> str:
    """Smart quotes, dashes, ellipses, non-breaking and zero-width spaces mapped to ASCII, as
    the reference does to a skeleton before reading it."""
    return text.translate(_ASCII) if isinstance(text, str) else text


def class_name(skeleton: str) -> str | None:
    """The first `class Name:` of the (sanitized) skeleton, by the reference's regex."""
    found = _CLASS_NAME.search(sanitize(skeleton))
    return found.group(1) if found else None


def _class_node(skeleton: str) -> ast.ClassDef | None:
    name = class_name(skeleton)
    if name is None:
        return None
    try:
        tree = parse(sanitize(skeleton))
    except Exception:
        return None
    return next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)


def _is_stub(function: ast.FunctionDef) -> bool:
    body = list(function.body)
    first = body[0] if body else None
    docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
    if docstring and isinstance(first.value.value, str):  # type: ignore[union-attr]
        body = body[1:]
    if not body:
        return True
    if len(body) != 1:
        return False
    only = body[0]
    if isinstance(only, ast.Pass):
        return True
    return (
        isinstance(only, ast.Raise)
        and isinstance(only.exc, ast.Call)
        and getattr(only.exc.func, "id", None) == "NotImplementedError"
    )


def methods_to_write(skeleton: str) -> tuple[str, ...]:
    """V: the methods of the skeleton's class whose body (after a docstring) is empty, a lone
    `pass` or a lone `raise NotImplementedError(...)`, in class order. Empty when the sanitized
    skeleton does not parse (ClassEval_5 and ClassEval_22)."""
    node = _class_node(skeleton)
    if node is None:
        return ()
    return tuple(
        item.name for item in node.body if isinstance(item, ast.FunctionDef) and _is_stub(item)
    )


def parameter_counts(skeleton: str) -> dict[str, int]:
    """Parameters of each method of the class, `self` included, `*args` and `**kwargs` one
    each."""
    node = _class_node(skeleton)
    if node is None:
        return {}
    counts = {}
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = item.args
            counts[item.name] = (
                len(a.posonlyargs)
                + len(a.args)
                + len(a.kwonlyargs)
                + (a.vararg is not None)
                + (a.kwarg is not None)
            )
    return counts


def owners(skeleton: str) -> dict[str, int]:
    """The reference's partition: a method with exactly one parameter goes to agent 0, every
    other method to agent 1."""
    counts = parameter_counts(skeleton)
    return {m: 0 if counts.get(m, -1) == 1 else 1 for m in methods_to_write(skeleton)}


# ----- reading an answer ------------------------------------------------------------------------
def strip_fence(text: str) -> str:
    """The code of an answer: when it holds three backticks, the inside of its first fenced
    block (the rest of the opening line dropped; unclosed, everything after it; an opening
    fence on the last line gives nothing); otherwise the whole answer. Stripped."""
    s = (text or "").replace("\r\n", "\n").strip()
    opening = s.find(FENCE)
    if opening < 0:
        return s
    newline = s.find("\n", opening + len(FENCE))
    if newline < 0:
        return ""
    closing = s.find(FENCE, newline + 1)
    return (s[newline + 1 :] if closing < 0 else s[newline + 1 : closing]).strip()


@dataclass(frozen=True)
class Block:
    """One `def` block of an answer: the method it names, its text (first line unindented,
    the rest as written) and where it sat among the answer's code lines."""

    name: str
    code: str
    first_line: int
    last_line: int


def def_lines(code: str) -> Iterator[tuple[int, str]]:
    """(line index, name) of every `def NAME(` line of an answer's code."""
    for index, line in enumerate(code.splitlines()):
        found = _ANY_DEF_NAME.match(line)
        if found:
            yield index, found.group(1)


def blocks(text: str, names: Sequence[str] | set[str]) -> list[Block]:
    """Every block of `text` that starts at a `def NAME(` line for a NAME in `names`, in order
    (a name written twice gives two blocks; the reference keeps the last)."""
    wanted = set(names)
    if not wanted:
        return []
    lines = strip_fence(text).splitlines()
    found = []
    index = 0
    while index < len(lines):
        head = _ANY_DEF_NAME.match(lines[index])
        if head is None or head.group(1) not in wanted:
            index += 1
            continue
        end = index + 1
        while end < len(lines) and not _DEF_START.match(lines[end]):
            end += 1
        code = "\n".join(line.rstrip() for line in lines[index:end]).strip()
        found.append(Block(head.group(1), code, index, end - 1))
        index = end
    return found


def snippets(text: str, names: Sequence[str] | set[str]) -> dict[str, str]:
    """{method: its last block} for the methods of `names` an answer writes."""
    return {block.name: block.code for block in blocks(text, names)}


def accepted_methods(
    answers: Sequence[str],
    methods: Sequence[str],
    owner: Mapping[str, int],
    *,
    self_select: bool = False,
    choose: Callable[[list[str]], str] | None = None,
) -> dict[str, str]:
    """{method: the block that is built}: per method, the blocks of the agents allowed to
    write it (its owner only; every agent with `self_select`) that parse on their own; none
    parsing, the stub stays. With more than one, `choose(list)` picks (the reference: an
    unseeded `random.choice`; only `self_select` can have more than one)."""
    wanted = set(methods)
    candidates: dict[str, list[str]] = {m: [] for m in methods}
    for agent, text in enumerate(answers):
        allowed = wanted if self_select else {m for m in methods if owner.get(m) == agent}
        for name, code in snippets(text or "", allowed).items():
            candidates[name].append(code)
    chosen = {}
    for name, options in candidates.items():
        valid = [code for code in options if parses(code)]
        if len(valid) == 1 or (valid and choose is None):
            chosen[name] = valid[0]
        elif valid:
            chosen[name] = choose(valid)
    return chosen


def overlap(answers: Sequence[str], methods: Sequence[str]) -> tuple[str, ...]:
    """The methods that appear, by name, in more than one answer, every method allowed to
    every agent (so writing a teammate's method counts even though the build ignores it)."""
    written = [set(snippets(text or "", methods)) for text in answers]
    return tuple(m for m in methods if sum(m in names for names in written) > 1)


# ----- merging into the skeleton ----------------------------------------------------------------
def _spaces(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _class_span(lines: Sequence[str], name: str) -> tuple[int, int, int] | None:
    """(header line, end line exclusive, body indentation) of the class, by the reference's
    text rules: the body indentation is the first non-blank line's after the header, and the
    class ends at the first non-blank line indented less that is not a decorator."""
    header = re.compile(rf"^\s*class\s+{re.escape(name)}\s*:\s*")
    start = next((i for i, line in enumerate(lines) if header.match(line)), None)
    if start is None:
        return None
    body = next((_spaces(line) for line in lines[start + 1 :] if line.strip()), 4)
    end = next(
        (
            k
            for k in range(start + 1, len(lines))
            if lines[k].strip()
            and _spaces(lines[k]) < body
            and not lines[k].lstrip().startswith("@")
        ),
        len(lines),
    )
    return start, end, body


def _method_span(
    lines: Sequence[str], span: tuple[int, int, int], name: str
) -> tuple[int, int, int]:
    """(first line, end exclusive, def indentation) of a method's region: from the decorators
    right above its first `def NAME(` line to the next `def` at the same indentation (so a
    decorated method's region is its decorators alone, and a region reaches over the next
    method's decorators); (-1, -1, body + 4) where the class has no such line."""
    start, end, body = span
    head = re.compile(rf"^\s*def\s+{re.escape(name)}\s*\(")
    at = next((i for i in range(start + 1, end) if head.match(lines[i])), None)
    if at is None:
        return -1, -1, body + 4
    indent = _spaces(lines[at])
    first = at
    while first - 1 > start and lines[first - 1].lstrip().startswith("@"):
        first -= 1
    stop = next(
        (
            j
            for j in range(first + 1, end)
            if _DEF_START.match(lines[j]) and _spaces(lines[j]) == indent
        ),
        end,
    )
    return first, stop, indent


def _indented(code: str, indent: int) -> list[str]:
    pad = " " * indent
    return [pad + line if line.strip() else line for line in code.splitlines()]


def normalize(code: str, *, use_autopep8: bool = True) -> str:
    """The reference's lenient normalization of a merged file: CRLF and CR to LF, tabs
    expanded (stops of 4), trailing spaces stripped, then autopep8 (aggressive level 1)."""
    text = code.replace("\r\n", "\n").replace("\r", "\n").expandtabs(4)
    text = "\n".join(line.rstrip() for line in text.splitlines())
    if use_autopep8:
        try:
            import autopep8  # the reference's hard dependency; it may rewrite the submitted code
        except ImportError as error:
            raise ImportError(
                "ClassEval's reference reward formats the merged class with autopep8: "
                "pip install autopep8 (or make the env with use_autopep8=False, which is not "
                "the reference)"
            ) from error

        fixed = autopep8.fix_code(text, options={"aggressive": 1})
        if isinstance(fixed, str) and fixed:
            text = fixed
    return text


def merge(
    skeleton: str, name: str, methods: Mapping[str, str], *, use_autopep8: bool = True
) -> str:
    """The skeleton with each accepted method in place of its stub's region (re-indented to
    the stub's `def`), then normalized; the skeleton untouched when nothing was accepted or
    its class is not found."""
    if not methods:
        return skeleton
    lines = skeleton.splitlines()
    span = _class_span(lines, name)
    if span is None:
        return skeleton
    order = sorted(
        (first if first >= 0 else 10**9, m)
        for m in methods
        for first in (_method_span(lines, span, m)[0],)
    )
    for _, method in order:
        code = methods[method]
        if not code:
            continue
        current = _class_span(lines, name)
        assert current is not None  # the header line is never replaced
        first, stop, indent = _method_span(lines, current, method)
        if first < 0:
            lines[current[1] : current[1]] = [*_indented(code.strip(), current[2] + 4), ""]
        else:
            lines[first:stop] = _indented(code.strip(), indent)
    merged = "\n".join(lines)
    if not merged.endswith("\n"):
        merged += "\n"
    formatted = normalize(merged, use_autopep8=use_autopep8)
    if formatted and not formatted.endswith("\n"):
        formatted += "\n"
    return formatted or merged


def program(merged: str, test: str) -> str:
    """What runs: the merged class, a blank line, the benchmark's tests."""
    return (merged or "").rstrip() + "\n\n" + (test or "").lstrip()


def compile_error(code: str) -> str | None:
    """None if `code` compiles, else the error, as the reference's check sees it (any
    exception of `compile` counts)."""
    try:
        with _AST_LOCK, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ClassEval's own invalid escapes, say
            compile(code, "<combined>", "exec")
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return None
