"""Cooperative code generation (CoopHumanEval, HumanEval, MBPP): the reference reward and feedback.

Agent 1 ("aux") writes a helper `aux(...)`; agent 2 ("main") writes the problem's entry-point
function and may call `aux(...)`. The program under test is

    the import lines of the problem prompt + the `aux` function of answer 1
                                           + the entry-point function of answer 2

(`prompt_context="definitions"` adds the prompt's other top-level functions and classes before
aux: a cleaner variant, off by default), and the team earns, level by level (tasks.md
section 3; max 4.0):

    +0.4  answer 1 defines `aux` with a `return`           (missing: no points, scoring goes on)
    +0.6  answer 2 defines the entry point with a `return` (missing: stop)
    +0.5  the program parses                               (syntax error: stop)
    +p/t  p of the t tests of `check(candidate)` pass, each run on its own in a sandbox
    then, only if p >= 1 and answer 1 defines `aux` at all:
    +0.5  the entry point calls `aux(...)`, and if it does:
    +1.0  the entry point is not a thin wrapper (`return aux(...)`, or `x = aux(...)`; `return x`)
    -0.5  the reference's narrow "aux result ignored" pattern (see `aux_ignored_reference`)

Two readings of the answers and tests. `answer_reading="reference"`, the default, reproduces
the reference's text rules (`collabzoo.tasks.code.rewards.reference_reading`: all fence markers
deleted, functions found by indentation, "return" found as text, the tests split line by line,
`math` bound for the program), so the rewards equal the published ones on what real models
write, quirks included: on the 149 real answer pairs of SmolLM2-135M-Instruct in the tests'
conformance set, the clean reading below scores 57 (38%) differently from the reference.
`answer_reading="clean"` is this module's parser-based reading, described in the rest of these
notes.

Reading an answer, clean (every function here accepts any string and never executes it):

* Fences (`clean_answer`): a fence is a line that starts (after optional indentation) with
  three or more backticks or tildes; a block runs to the next line starting with three of the
  same character, or to the end of the answer when it is never closed. If the answer has at
  least one fence, its code is the contents of ALL its fenced blocks, each dedented, joined by
  blank lines, and everything outside them is dropped; otherwise the whole answer is the code.
  (All blocks rather than the first: a solver may put aux and the entry point in two blocks,
  and only the named functions are taken from the code anyway, the last definition winning,
  so a usage example in another block is harmless.)
* Chatter (`find_function`): the answer is dedented and parsed; if it parses, the function is
  the LAST top-level `def name(...)` (what Python itself would bind), decorators included. If it
  does not parse (prose around unfenced code, or a real syntax error), the function is found by
  its lines: the least-indented `def name(` line (the last one of those), then every following
  line that is blank or indented deeper than the `def`; when that block does not parse (say, a
  docstring with lines at column 0), it is extended past the next shallower lines, a bounded
  number of times, until it does; if it never does, the first block is kept (and the syntax
  level reports where it breaks). Only this function enters the program: other helpers and
  module-level lines of an answer are left out, as in the reference. Code longer than
  `MAX_CODE_CHARS` (256 KiB) after cleaning is not read at all (its functions count as missing).
* "With a return": an `ast.Return` anywhere in the function, nested functions included like
  the reference's text search (a `\\breturn\\b` token when the function's text does not parse).
* Main and `aux`: a top-level `def aux` in answer 2 is left out of the program like any other
  extra code (so it cannot replace answer 1's helper), and is reported. A `def aux` (or any
  other binding of the name) INSIDE the entry point is kept, as main's text is never edited,
  but it hides answer 1's helper: calls to it do not count as calling `aux`, so such a main
  earns no collaboration bonus.
* "Calls aux": an `ast.Call` of the bare name `aux` anywhere in the entry point (a text match
  of `\\baux\\s*\\(` when the entry point's text does not parse). Unlike the reference's text
  search, a mention in a comment or string does not count.
* Thin wrapper: after dropping a leading docstring, the body is exactly `return aux(...)`, or
  `x = aux(...)` (also `x: T = aux(...)`) followed by `return x`. (The reference's line-based
  test also calls a one-line `return <anything mentioning aux>` a wrapper, e.g.
  `return aux(x) + 1`; tasks.md's definition is followed here.)

Tests (`check_tests`): the dataset's `def check(candidate)` is split into independent tests.
Each top-level `assert` of check's body that mentions `candidate` and reads no name bound by
another statement of check's body (a local variable, an import or a loop variable inside
check) is its own test, run at module level with `candidate` bound, as in the reference.
Asserts not mentioning `candidate` (HumanEval's `assert True, "..."`; MBPP/26's first assert,
which names the function directly) are dropped, and repeated identical asserts count once
(HumanEval/31, HumanEval/116), both as in the reference. All remaining statements of check,
in order, form ONE more test when they mention `candidate`: `def check(candidate): <those
statements>` then `check(candidate)`. This keeps loops and local setup runnable where the
reference ran their asserts alone (always failing with a NameError). Affected ids:
HumanEval/44 and /53 (top-level asserts + one loop test), HumanEval/151 (six asserts + one
test for the `lst`/`odd_sum` setup and its assert), HumanEval/32, /38, /50 (the whole check is
one test). Those last three tests call a helper of the prompt (`poly`, `encode_cyclic`,
`encode_shift`) that the reference program leaves out, so they cannot pass with the default
`prompt_context="imports"` (nor could they in the reference; HumanEval/32 is outside both
reference splits); HumanEval/10's canonical solution likewise calls the prompt's
`is_palindrome`, which a team can provide as `aux`. Multi-line asserts (HumanEval/1, /87,
/113) run whole; the reference's line-based split truncated them to their first line (and
counted /87's three multi-line asserts once, as their first lines are identical).
CoopHumanEval and MBPP checks hold only top-level asserts: their test counts equal the
reference's.
"""

from __future__ import annotations

import ast
import functools
import re
import textwrap
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from collabzoo.rewards.breakdown import RewardBreakdown
from collabzoo.sandbox import ExecResult, Job, default_sandbox
from collabzoo.tasks.code.rewards import reference_reading as reference

AUX_NAME = "aux"
MAX_SCORE = 4.0
AUX_DEFINED_REWARD = 0.4
MAIN_DEFINED_REWARD = 0.6
SYNTAX_REWARD = 0.5
TESTS_REWARD = 1.0
AUX_CALLED_REWARD = 0.5
NOT_WRAPPER_REWARD = 1.0
AUX_IGNORED_PENALTY = -0.5
DEFAULT_TEST_TIMEOUT = 10.0
DEFAULT_MAX_TIMEOUTS = 3
AUX_IGNORED_RULES = ("reference", "statement", "off")
"""`reference`: the reference's pattern (fires almost never); `statement`: any call of aux used
as a bare statement, its result thrown away; `off`: no penalty."""
ANSWER_READINGS = ("reference", "clean")
"""How answers are read: `reference`, the reference's text rules (`code_reference_reading`:
its rewards, quirks included), or `clean`, the parser-based reading of this module's notes."""
PROMPT_CONTEXTS = ("imports", "definitions")
"""What of the problem prompt joins the program: its import lines (reference), or its imports
and its other top-level functions and classes (which some HumanEval tests and solutions need)."""
COMPONENTS = (
    "aux_defined",
    "main_defined",
    "syntax_ok",
    "tests",
    "aux_called",
    "not_wrapper",
    "aux_ignored_penalty",
)

# Parsing any text can fail in more ways than SyntaxError: NUL bytes and lone surrogates raise
# ValueError (UnicodeEncodeError), very deep nesting MemoryError or RecursionError.
_PARSE_ERRORS = (SyntaxError, ValueError, MemoryError, RecursionError, OverflowError)
_FENCE = re.compile(r"[ \t]*(`{3,}|~{3,})")
_MAX_BLOCK_EXTENSIONS = 20
_MAX_BLOCK_CHARS = 200_000
MAX_CODE_CHARS = 1 << 18
"""Longer code (after cleaning) is not read: its functions count as missing. A completion of
16k tokens is about 64k characters; this only bounds the time spent on pathological answers."""
_RETURN_TOKEN = re.compile(r"\breturn\b")
# The reference's "aux result ignored" pattern as it behaves on a stripped line: exactly one
# whitespace character between the name and "(", exactly one character inside the parentheses.
_REFERENCE_IGNORED = re.compile(rf"{AUX_NAME}\s\([^)]\)")


class CodeRunner(Protocol):
    """What scoring needs of a sandbox (`collabzoo.sandbox`): run jobs, one result per job."""

    def run_many(self, jobs: Sequence[Job]) -> list[ExecResult]: ...


# ----- reading answers --------------------------------------------------------------------------
_AST_LOCK = threading.Lock()


def parse_python(code: str) -> ast.Module:
    """`ast.parse`, one call at a time: CPython 3.11's parser can fail with "SystemError: AST
    constructor recursion depth mismatch" when threads parse concurrently, and envs are stepped
    from worker threads by the learners."""
    with _AST_LOCK:
        return ast.parse(code)


def _parse(code: str) -> ast.Module | None:
    try:
        return parse_python(code)
    except _PARSE_ERRORS:
        return None


def _lines(text: str) -> list[str]:
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _dedent(lines: list[str]) -> list[str]:
    """Remove the whitespace prefix common to every non-blank line (blank lines keep only what
    follows it); unlike `textwrap.dedent`, nothing else is touched."""
    prefix: str | None = None
    for line in lines:
        if line.strip():
            margin = line[: _indent(line)]
            if prefix is None:
                prefix = margin
            else:
                same = 0
                while same < min(len(prefix), len(margin)) and prefix[same] == margin[same]:
                    same += 1
                prefix = prefix[:same]
            if not prefix:
                return lines
    if not prefix:
        return lines
    return [
        line[len(prefix) :] if line.startswith(prefix) else line.lstrip(" \t") for line in lines
    ]


def clean_answer(text: str) -> str:
    """The code part of an answer: its fenced blocks, or the whole text (module notes)."""
    if not isinstance(text, str):
        return ""
    lines = _lines(text)
    blocks: list[list[str]] = []
    current: list[str] | None = None
    mark = ""
    for line in lines:
        if current is None:
            opening = _FENCE.match(line)
            if opening is not None:
                current, mark = [], opening.group(1)[0] * 3
        elif line.lstrip(" \t").startswith(mark):
            blocks.append(current)
            current = None
        else:
            current.append(line)
    if current is not None:
        blocks.append(current)
    if not blocks:
        return "\n".join(lines)
    return "\n\n".join("\n".join(_dedent(block)) for block in blocks)


@dataclass(frozen=True)
class FoundFunction:
    """A function found in an answer: its source (dedented, decorators included)."""

    name: str
    source: str
    has_return: bool
    parses: bool
    """Whether `source` parses on its own."""


def _function_node(tree: ast.Module | None, name: str) -> ast.FunctionDef | None:
    if tree is None:
        return None
    defs = [
        node
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name
    ]
    return defs[-1] if defs else None


def _found(name: str, source: str) -> FoundFunction:
    node = _function_node(_parse(source), name)
    if node is not None:
        has_return = any(isinstance(n, ast.Return) for n in ast.walk(node))
        return FoundFunction(name, source, has_return, parses=True)
    return FoundFunction(name, source, bool(_RETURN_TOKEN.search(source)), parses=False)


def _block_from_lines(lines: Sequence[str], start: int) -> str:
    """The function starting at `lines[start]`, found by indentation (see the module notes)."""
    base = _indent(lines[start])
    first: str | None = None
    attempts = 0
    end = start + 1
    while True:
        while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > base):
            end += 1
        block = "\n".join(_dedent(list(lines[start:end]))).rstrip()
        if first is None:
            first = block
        attempts += 1
        if _parse(block) is not None:
            return block
        if end >= len(lines) or attempts >= _MAX_BLOCK_EXTENSIONS or len(block) > _MAX_BLOCK_CHARS:
            return first
        end += 1


@functools.lru_cache(maxsize=4)
def _read_answer(code: str) -> tuple[tuple[str, ...], ast.Module | None]:
    """An answer's dedented lines and its parse tree (None if it does not parse); cached, as
    the same answer is read for several names (and twice in single-agent mode)."""
    lines = tuple(_dedent(_lines(code)))
    return lines, _parse("\n".join(lines))


def find_function(code: str, name: str) -> FoundFunction | None:
    """The function `name` defined in `code` (an answer, cleaned or not), or None. Code longer
    than `MAX_CODE_CHARS` is not read (None)."""
    if not isinstance(code, str) or not isinstance(name, str) or not name.isidentifier():
        return None
    if len(code) > MAX_CODE_CHARS:
        return None
    lines, tree = _read_answer(code)
    if tree is not None:
        node = _function_node(tree, name)
        if node is None:
            return None
        first_line = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        source = "\n".join(lines[first_line - 1 : node.end_lineno])
        has_return = any(isinstance(n, ast.Return) for n in ast.walk(node))
        return FoundFunction(name, source, has_return, parses=True)
    pattern = re.compile(rf"[ \t]*(?:async[ \t]+)?def[ \t]+{re.escape(name)}[ \t]*\(")
    starts = [i for i, line in enumerate(lines) if pattern.match(line)]
    if not starts:
        return None
    least = min(_indent(lines[i]) for i in starts)
    start = [i for i in starts if _indent(lines[i]) == least][-1]
    return _found(name, _block_from_lines(lines, start))


# ----- static analysis of the entry point -------------------------------------------------------
def _main_node(source: str | None) -> ast.FunctionDef | None:
    if not isinstance(source, str) or len(source) > MAX_CODE_CHARS:
        return None
    return _last_function(source)


@functools.lru_cache(maxsize=4)
def _last_function(source: str) -> ast.FunctionDef | None:
    tree = _parse(source)
    if tree is None:
        return None
    defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return defs[-1] if defs else None


def _is_aux_call(node: ast.AST | None) -> bool:
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == AUX_NAME
    )


def binds_aux(main_source: str | None) -> bool:
    """Whether the function in `main_source` binds the name `aux` itself (a nested def, an
    assignment, a parameter, an import...), hiding the partner's helper."""
    fn = _main_node(main_source)
    if fn is None:
        return False
    for node in ast.walk(fn):
        if (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and node.name == AUX_NAME
            and node is not fn
        ):
            return True
        if isinstance(node, ast.Name) and node.id == AUX_NAME and isinstance(node.ctx, ast.Store):
            return True
        if isinstance(node, ast.arg) and node.arg == AUX_NAME:
            return True
        if isinstance(node, ast.alias) and (node.asname or node.name.split(".")[0]) == AUX_NAME:
            return True
    return False


def calls_aux(main_source: str | None) -> bool:
    """Whether the function in `main_source` calls `aux(...)` (see the module notes)."""
    if not isinstance(main_source, str):
        return False
    fn = _main_node(main_source)
    if fn is None:
        return re.search(rf"\b{AUX_NAME}\s*\(", main_source) is not None
    return any(_is_aux_call(node) for node in ast.walk(fn))


def _body_without_docstring(fn: ast.FunctionDef) -> list[ast.stmt]:
    body = list(fn.body)
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]
    return body


def is_thin_wrapper(main_source: str | None) -> bool:
    """Whether the function's body (docstring aside) is just `return aux(...)`, or
    `x = aux(...)` followed by `return x`."""
    fn = _main_node(main_source)
    if fn is None:
        return False
    body = _body_without_docstring(fn)
    if len(body) == 1:
        return isinstance(body[0], ast.Return) and _is_aux_call(body[0].value)
    if len(body) == 2 and isinstance(body[1], ast.Return):
        first, returned = body[0], body[1].value
        if isinstance(first, ast.Assign) and len(first.targets) == 1:
            target, value = first.targets[0], first.value
        elif isinstance(first, ast.AnnAssign) and first.value is not None:
            target, value = first.target, first.value
        else:
            return False
        return (
            isinstance(target, ast.Name)
            and _is_aux_call(value)
            and isinstance(returned, ast.Name)
            and returned.id == target.id
        )
    return False


def discarded_aux_calls(main_source: str | None) -> tuple[int, ...]:
    """Lines (1-based, in `main_source`) where `aux(...)` is a bare statement: its result is
    thrown away."""
    fn = _main_node(main_source)
    if fn is None:
        return ()
    return tuple(
        sorted(
            node.lineno
            for node in ast.walk(fn)
            if isinstance(node, ast.Expr) and _is_aux_call(node.value)
        )
    )


def aux_ignored_reference(main_source: str | None) -> bool:
    """The reference's -0.5 "aux called but its result ignored" rule, faithfully narrow.

    The reference looks for lines that, once stripped, consist of `aux`, exactly ONE whitespace
    character, and `(` + exactly ONE character other than `)` + `)`: e.g. `aux (x)`. Its other
    two patterns need whitespace at the ends of a stripped line and so never match. A bare
    `aux(x)` or `aux(a, b)` statement does not fire it.
    """
    if not isinstance(main_source, str) or AUX_NAME not in main_source:
        return False
    return any(_REFERENCE_IGNORED.fullmatch(line.strip()) for line in _lines(main_source))


# ----- the problem: imports and tests -----------------------------------------------------------
def prompt_imports(prompt: str) -> tuple[str, ...]:
    """The import lines of a problem prompt, stripped, first occurrences in order: every line
    that on its own is one `import ...` or `from ... import ...` statement (indented ones
    included, as in the reference)."""
    if not isinstance(prompt, str):
        return ()
    found: dict[str, None] = {}
    for line in _lines(prompt):
        text = line.strip()
        if not text.startswith(("import ", "from ")) or text in found:
            continue
        tree = _parse(text)
        if tree is not None and [type(s) for s in tree.body] in ([ast.Import], [ast.ImportFrom]):
            found[text] = None
    return tuple(found)


def prompt_helpers(prompt: str, entry_point: str) -> tuple[str, ...]:
    """The source of each top-level function or class of a prompt except `entry_point`."""
    lines = _lines(prompt) if isinstance(prompt, str) else []
    tree = _parse("\n".join(lines))
    if tree is None:
        return ()
    return tuple(
        "\n".join(lines[min([n.lineno, *(d.lineno for d in n.decorator_list)]) - 1 : n.end_lineno])
        for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and n.name != entry_point
    )


@dataclass(frozen=True)
class CheckTest:
    """One test of a problem: `code` runs after the program with `candidate` bound."""

    code: str
    shown: str
    """The dataset's text for it (shown in feedback)."""


def _names_bound(node: ast.AST) -> set[str]:
    bound: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
            bound.add(sub.id)
        elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(sub.name)
        elif isinstance(sub, ast.alias):
            bound.add(sub.asname or sub.name.split(".")[0])
        elif isinstance(sub, ast.arg):
            bound.add(sub.arg)
        elif isinstance(sub, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and sub.name:
            bound.add(sub.name)
        elif isinstance(sub, ast.MatchMapping) and sub.rest:
            bound.add(sub.rest)
    return bound


def _names_read(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _shown(source: str, node: ast.stmt) -> str:
    segment = ast.get_source_segment(source, node, padded=True)
    return textwrap.dedent(segment).strip() if segment else ast.unparse(node)


def check_tests(test_code: str) -> tuple[CheckTest, ...]:
    """The independent tests of a dataset's `check(candidate)` (see the module notes).

    Raises ValueError when the test code does not parse or defines no `check(candidate)`.
    """
    tree = _parse(test_code) if isinstance(test_code, str) else None
    if tree is None:
        raise ValueError("the problem's test code does not parse as Python")
    checks = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"]
    if not checks or not checks[-1].args.args:
        raise ValueError("the problem's test code defines no `def check(candidate): ...`")
    check = checks[-1]
    param = check.args.args[0].arg
    setup = [
        n
        for n in tree.body
        if isinstance(n, (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.ClassDef))
        or (isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name != "check")
    ]
    prefix = ast.unparse(ast.Module(body=setup, type_ignores=[])) if setup else ""
    if param != "candidate":
        prefix = f"{prefix}\n{param} = candidate".strip()
    body = [
        s
        for s in check.body
        if not isinstance(s, ast.Pass)
        and not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
    ]
    scoped = any(isinstance(n, (ast.Global, ast.Nonlocal)) for s in body for n in ast.walk(s))
    bound = [_names_bound(s) for s in body]
    placed: list[tuple[int, CheckTest]] = []
    seen: set[str] = set()
    rest: list[ast.stmt] = []
    for i, statement in enumerate(body):
        elsewhere = set().union(*(b for j, b in enumerate(bound) if j != i)) - {param}
        reads = _names_read(statement)
        standalone = (
            isinstance(statement, ast.Assert)
            and not scoped
            and not any(isinstance(n, ast.NamedExpr) for n in ast.walk(statement))
            and not reads & elsewhere
        )
        if not standalone:
            rest.append(statement)
            continue
        if param not in reads:
            continue
        shown = _shown(test_code, statement)
        if shown in seen:
            continue
        seen.add(shown)
        code = f"{prefix}\n{ast.unparse(statement)}".strip()
        placed.append((statement.lineno, CheckTest(code, shown)))
    users = [s for s in rest if param in _names_read(s)]
    if users:
        runner = "__collabzoo_check__"
        function = ast.FunctionDef(
            name=runner,
            args=check.args,
            body=rest,
            decorator_list=[],
            returns=None,
            type_comment=None,
        )
        module = ast.fix_missing_locations(ast.Module(body=[function], type_ignores=[]))
        code = f"{prefix}\n{ast.unparse(module)}\n{runner}(candidate)".strip()
        shown = "\n".join(_shown(test_code, s) for s in rest)
        placed.append((users[0].lineno, CheckTest(code, shown)))
    placed.sort(key=lambda pair: pair[0])
    return tuple(test for _, test in placed)


@dataclass(frozen=True)
class CodeProblem:
    """One problem: the prompt shown to the agents, its entry point and its tests."""

    task_id: str
    prompt: str
    test: str
    entry_point: str
    solution: str = ""
    """The dataset's reference solution where it has one (HumanEval's `canonical_solution`, the
    body that completes `prompt`); never shown to the agents, only the scripted oracle reads it."""
    tests: tuple[CheckTest, ...] = field(init=False)
    imports: tuple[str, ...] = field(init=False)
    helpers: tuple[str, ...] = field(init=False)
    """The prompt's top-level functions and classes other than the entry point (HumanEval/10's
    `is_palindrome`, /32's `poly`...): in the program only with prompt_context="definitions"."""
    reference_tests: tuple[CheckTest, ...] = field(init=False)
    """The tests as the reference splits `check` (answer_reading="reference"); may be empty."""
    reference_imports: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        for name in ("task_id", "prompt", "test", "entry_point", "solution"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"a code problem's {name} must be a str")
        if not self.entry_point.isidentifier():
            raise ValueError(f"{self.task_id}: entry_point {self.entry_point!r} is not a name")
        try:
            tests = check_tests(self.test)
        except ValueError as error:
            raise ValueError(f"{self.task_id}: {error}") from None
        if not tests:
            raise ValueError(f"{self.task_id}: check(candidate) holds no test using candidate")
        object.__setattr__(self, "tests", tests)
        object.__setattr__(self, "imports", prompt_imports(self.prompt))
        object.__setattr__(self, "helpers", prompt_helpers(self.prompt, self.entry_point))
        found = reference.tests_reference(self.test, self.entry_point)
        object.__setattr__(
            self, "reference_tests", tuple(CheckTest(t.code, t.shown) for t in found)
        )
        object.__setattr__(self, "reference_imports", reference.imports_reference(self.prompt))

    def tests_for(self, answer_reading: str) -> tuple[CheckTest, ...]:
        """The tests scored under an answer reading (see `ANSWER_READINGS`)."""
        return self.reference_tests if answer_reading == "reference" else self.tests

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> CodeProblem:
        missing = [k for k in ("task_id", "prompt", "test", "entry_point") if k not in record]
        if missing:
            raise ValueError(f"a code problem record lacks {missing}: {str(record)[:200]}")
        return cls(
            str(record["task_id"]),
            str(record["prompt"]),
            str(record["test"]),
            str(record["entry_point"]),
            str(record.get("canonical_solution") or ""),
        )


# ----- the joint program ------------------------------------------------------------------------
@dataclass(frozen=True)
class SyntaxProblem:
    """Where the joint program stops parsing: `line`/`column` (1-based) in the program, and
    the part that holds it ("imports", "aux" or "main") with the line inside that part."""

    message: str
    line: int
    column: int
    part: str
    part_line: int


@dataclass(frozen=True)
class CodeAnalysis:
    """Everything about an answer pair that can be known without running it."""

    aux: FoundFunction | None
    main: FoundFunction | None
    program: str | None
    """imports + aux + main, or None when main is missing (scoring stopped)."""
    parts: tuple[tuple[str, int, int], ...]
    """(part, first line, last line) of each part of `program`."""
    syntax: SyntaxProblem | None
    main_answer_defines_aux: bool
    """Answer 2 also defines a top-level `aux` (left out of the program)."""
    aux_shadowed: bool
    """The entry point binds `aux` itself, hiding answer 1's helper."""
    aux_called: bool
    thin_wrapper: bool
    discarded_calls: tuple[int, ...]
    aux_ignored_reference: bool

    @property
    def aux_defined(self) -> bool:
        return self.aux is not None and self.aux.has_return

    @property
    def main_defined(self) -> bool:
        return self.main is not None and self.main.has_return

    @property
    def runs_tests(self) -> bool:
        return self.main_defined and self.program is not None and self.syntax is None


def build_program(
    imports: Sequence[str], aux: str | None, main: str, helpers: Sequence[str] = ()
) -> tuple[str, tuple]:
    """The joint program and the line span of each of its parts."""
    pieces = [
        ("imports", "\n".join(imports)),
        ("prompt", "\n\n".join(helpers)),
        ("aux", aux or ""),
        ("main", main),
    ]
    text_parts, spans, line = [], [], 1
    for name, text in pieces:
        if not text:
            continue
        count = text.count("\n") + 1
        spans.append((name, line, line + count - 1))
        text_parts.append(text)
        line += count + 1  # parts are joined by a blank line
    return "\n\n".join(text_parts), tuple(spans)


def syntax_problem(
    program: str, parts: Sequence[tuple[str, int, int]] = ()
) -> SyntaxProblem | None:
    """None if `program` parses, else where and why it does not."""
    if not isinstance(program, str):
        return SyntaxProblem("not text", 1, 1, "program", 1)
    try:
        parse_python(program)
    except SyntaxError as error:
        line, column = error.lineno or 1, error.offset or 1
        message = error.msg or "invalid syntax"
    except (ValueError, MemoryError, RecursionError, OverflowError) as error:
        line, column, message = 1, 1, f"{type(error).__name__}: {error}"[:300]
    else:
        return None
    part, part_line = "program", line
    for name, first, last in parts:
        if first <= line <= last:
            part, part_line = name, line - first + 1
    return SyntaxProblem(message, line, column, part, part_line)


def _defines_aux_elsewhere(found: FoundFunction | None, main: FoundFunction | None) -> bool:
    """Whether answer 2's `aux` (found by either reading) stands outside its entry point."""
    if found is None or found.name == (main.name if main else None):
        return False
    return main is None or found.source.strip() not in main.source


def _found_reference(answer: str, name: str) -> FoundFunction | None:
    source = reference.function_reference(answer, name)
    if not source:
        return None
    parses = len(source) <= MAX_CODE_CHARS and _parse(source) is not None
    return FoundFunction(name, source, reference.has_return_reference(source), parses)


def _analyze_reference(
    problem: CodeProblem, aux_answer: str, main_answer: str, prompt_context: str
) -> CodeAnalysis:
    """`analyze_code` with the reference's reading (`code_reference_reading`)."""
    aux = _found_reference(aux_answer, AUX_NAME)
    main = _found_reference(main_answer, problem.entry_point)
    main_source = main.source if main is not None else None
    program, parts, syntax = None, (), None
    if main is not None and main.has_return:
        imports = problem.reference_imports + tuple(
            f"import {name}"
            for name in reference.PRELOADED_MODULES
            if f"import {name}" not in problem.reference_imports
        )
        helpers = problem.helpers if prompt_context == "definitions" else ()
        aux_code = reference.clean_reference(aux.source) if aux is not None else ""
        main_code = reference.clean_reference(main.source)
        program, parts = build_program(imports, aux_code or None, main_code, helpers)
        syntax = syntax_problem(program, parts)
    return CodeAnalysis(
        aux=aux,
        main=main,
        program=program,
        parts=parts,
        syntax=syntax,
        main_answer_defines_aux=_defines_aux_elsewhere(
            _found_reference(main_answer, AUX_NAME), main
        ),
        aux_shadowed=binds_aux(main_source),
        aux_called=reference.calls_aux_reference(main_source or ""),
        thin_wrapper=reference.is_wrapper_reference(main_source or ""),
        discarded_calls=discarded_aux_calls(main_source),
        aux_ignored_reference=aux_ignored_reference(main_source),
    )


def analyze_code(
    problem: CodeProblem,
    aux_answer: str,
    main_answer: str,
    prompt_context: str = "imports",
    answer_reading: str = "reference",
) -> CodeAnalysis:
    """The static part of scoring an answer pair: nothing is executed. `prompt_context`:
    what of the prompt joins the program: "imports" (reference) or "definitions" (its imports
    and its other top-level functions and classes). `answer_reading`: see `ANSWER_READINGS`."""
    if prompt_context not in PROMPT_CONTEXTS:
        raise ValueError(f"prompt_context must be one of {PROMPT_CONTEXTS}")
    if answer_reading not in ANSWER_READINGS:
        raise ValueError(f"answer_reading must be one of {ANSWER_READINGS}")
    if answer_reading == "reference":
        return _analyze_reference(problem, aux_answer, main_answer, prompt_context)
    aux_code = clean_answer(aux_answer)
    main_code = clean_answer(main_answer)
    aux = find_function(aux_code, AUX_NAME)
    main = find_function(main_code, problem.entry_point)
    main_source = main.source if main is not None else None
    shadowed = binds_aux(main_source)
    program, parts, syntax = None, (), None
    if main is not None and main.has_return:
        helpers = problem.helpers if prompt_context == "definitions" else ()
        program, parts = build_program(
            problem.imports, aux.source if aux else None, main.source, helpers
        )
        syntax = syntax_problem(program, parts)
    return CodeAnalysis(
        aux=aux,
        main=main,
        program=program,
        parts=parts,
        syntax=syntax,
        main_answer_defines_aux=_defines_aux_elsewhere(find_function(main_code, AUX_NAME), main),
        aux_shadowed=shadowed,
        aux_called=calls_aux(main_source) and not shadowed,
        thin_wrapper=is_thin_wrapper(main_source),
        discarded_calls=() if shadowed else discarded_aux_calls(main_source),
        aux_ignored_reference=aux_ignored_reference(main_source),
    )


# ----- scoring ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class CodeOutcome:
    """A scored answer pair: the reward, the static analysis and what the sandbox saw."""

    breakdown: RewardBreakdown
    analysis: CodeAnalysis
    problem: CodeProblem
    result: ExecResult | None
    """None when the tests did not run (main missing, a syntax error, or no tests)."""
    tests: tuple[CheckTest, ...] = ()
    """The tests scored (the answer reading's split of the problem's `check`)."""


def _breakdown(
    analysis: CodeAnalysis, result: ExecResult | None, n_tests: int, aux_ignored_rule: str
) -> RewardBreakdown:
    parts = dict.fromkeys(COMPONENTS, 0.0)
    passed = sum(result.passed) if result is not None else 0
    if analysis.aux_defined:
        parts["aux_defined"] = AUX_DEFINED_REWARD
    if analysis.main_defined:
        parts["main_defined"] = MAIN_DEFINED_REWARD
        if analysis.syntax is None:
            parts["syntax_ok"] = SYNTAX_REWARD
            if n_tests:
                parts["tests"] = TESTS_REWARD * passed / n_tests
            if passed > 0 and analysis.aux is not None and analysis.aux_called:
                parts["aux_called"] = AUX_CALLED_REWARD
                if not analysis.thin_wrapper:
                    parts["not_wrapper"] = NOT_WRAPPER_REWARD
                ignored = {
                    "reference": analysis.aux_ignored_reference,
                    "statement": bool(analysis.discarded_calls),
                    "off": False,
                }[aux_ignored_rule]
                if ignored:
                    parts["aux_ignored_penalty"] = AUX_IGNORED_PENALTY
    metrics = {
        "pass": float(result is not None and n_tests > 0 and passed == n_tests),
        "pass_fraction": passed / n_tests if n_tests else 0.0,
        "aux_used": float(analysis.aux_called),
        "aux_defined": float(analysis.aux_defined),
        "main_defined": float(analysis.main_defined),
        "syntax_ok": float(analysis.runs_tests),
        "thin_wrapper": float(analysis.aux_called and analysis.thin_wrapper),
        "tests_passed": float(passed),
        "tests_total": float(n_tests),
        "timed_out": float(result is not None and result.timed_out),
    }
    return RewardBreakdown(total=sum(parts.values()), components=parts, metrics=metrics)


def _check_options(timeout: float, max_timeouts: int, aux_ignored_rule: str) -> None:
    if aux_ignored_rule not in AUX_IGNORED_RULES:
        raise ValueError(f"aux_ignored_rule must be one of {AUX_IGNORED_RULES}")
    if not (isinstance(timeout, (int, float)) and timeout > 0):
        raise ValueError(f"timeout must be positive seconds, got {timeout!r}")
    if isinstance(max_timeouts, bool) or not isinstance(max_timeouts, int) or max_timeouts < 1:
        raise ValueError(f"max_timeouts must be a positive int, got {max_timeouts!r}")


def evaluate_code_batch(
    pairs: Sequence[tuple[CodeProblem, str, str]],
    sandbox: CodeRunner | None = None,
    *,
    timeout: float = DEFAULT_TEST_TIMEOUT,
    max_timeouts: int = DEFAULT_MAX_TIMEOUTS,
    aux_ignored_rule: str = "reference",
    prompt_context: str = "imports",
    answer_reading: str = "reference",
) -> list[CodeOutcome]:
    """Score (problem, aux answer, main answer) triples, running every needed test job in ONE
    `sandbox.run_many` call. `sandbox=None`: `collabzoo.sandbox.default_sandbox()`, made only
    if some pair reaches the tests. `answer_reading`: see `ANSWER_READINGS`."""
    _check_options(timeout, max_timeouts, aux_ignored_rule)
    analyses = [
        analyze_code(p, aux, main, prompt_context, answer_reading) for p, aux, main in pairs
    ]
    jobs, owners = [], []
    for index, ((problem, _, _), analysis) in enumerate(zip(pairs, analyses, strict=True)):
        tests = problem.tests_for(answer_reading)
        if analysis.runs_tests and tests:
            jobs.append(
                Job(
                    program=analysis.program,
                    tests=tuple(t.code for t in tests),
                    entry_point=problem.entry_point,
                    timeout=timeout,
                    max_timeouts=max_timeouts,
                )
            )
            owners.append(index)
    results: list[ExecResult | None] = [None] * len(pairs)
    if jobs:
        ran = (sandbox if sandbox is not None else default_sandbox()).run_many(jobs)
        if len(ran) != len(jobs):
            raise RuntimeError(f"the sandbox returned {len(ran)} results for {len(jobs)} jobs")
        for index, result in zip(owners, ran, strict=True):
            results[index] = result
    return [
        CodeOutcome(
            breakdown=_breakdown(
                analysis, result, len(problem.tests_for(answer_reading)), aux_ignored_rule
            ),
            analysis=analysis,
            problem=problem,
            result=result,
            tests=problem.tests_for(answer_reading),
        )
        for (problem, _, _), analysis, result in zip(pairs, analyses, results, strict=True)
    ]


def evaluate_code(
    problem: CodeProblem,
    aux_answer: str,
    main_answer: str,
    sandbox: CodeRunner | None = None,
    **options,
) -> CodeOutcome:
    """`evaluate_code_batch` for one answer pair."""
    return evaluate_code_batch([(problem, aux_answer, main_answer)], sandbox, **options)[0]


def score_code_batch(
    pairs: Sequence[tuple[CodeProblem, str, str]],
    sandbox: CodeRunner | None = None,
    **options: Any,
) -> list[RewardBreakdown]:
    """The reference reward of each (problem, aux answer, main answer), one sandbox call."""
    return [o.breakdown for o in evaluate_code_batch(pairs, sandbox, **options)]


def score_code(
    problem: CodeProblem,
    aux_answer: str,
    main_answer: str,
    sandbox: CodeRunner | None = None,
    **options,
) -> RewardBreakdown:
    """The reference reward of one answer pair (max 4.0) with its named components."""
    return evaluate_code(problem, aux_answer, main_answer, sandbox, **options).breakdown


# ----- turn feedback ----------------------------------------------------------------------------
FEEDBACK_ROLES = ("aux", "main", "solver")


def _definition_line(found: FoundFunction | None, label: str, hint: str) -> str:
    if found is None:
        return f"- {label}: MISSING. {hint}"
    if not found.has_return:
        return f"- {label}: found, but it has no return statement."
    return f"- {label}: found, with a return statement."


def _where(problem: SyntaxProblem, role: str) -> str:
    owner = {
        "aux": "the aux code",
        "main": "the main code",
        "imports": "the prompt's imports",
        "prompt": "the prompt's helper code",
    }
    text = owner.get(problem.part, "the program")
    if role != "solver" and problem.part in ("aux", "main"):
        text += " (yours)" if problem.part == role else " (your partner's)"
    return f"{text}, line {problem.part_line}, column {problem.column}"


def level_feedback(outcome: CodeOutcome, role: str, *, tests_shown: int | None = 1) -> str:
    """The reference "level feedback" for one agent after a turn: diagnostics of the joint
    program, then a request for a revised answer. `tests_shown` limits the test report to the
    first tests (the reference shows only the first one; None: all)."""
    if role not in FEEDBACK_ROLES:
        raise ValueError(f"role must be one of {FEEDBACK_ROLES}")
    a, problem = outcome.analysis, outcome.problem
    entry = problem.entry_point
    if role == "aux":
        lead = f"Diagnostics of your team's program (your aux function + your partner's {entry}):"
    elif role == "main":
        lead = f"Diagnostics of your team's program (your partner's aux function + your {entry}):"
    else:
        lead = "Diagnostics of your program:"
    lines = [
        lead,
        _definition_line(a.aux, "aux", "Define `def aux(...)` with a return statement."),
        _definition_line(a.main, entry, f"Define `def {entry}(...)` with a return statement."),
    ]
    tests = outcome.tests
    n = len(tests)
    shown = n if tests_shown is None else max(0, min(int(tests_shown), n))
    if a.program is None:
        lines.append(f"- Syntax and tests: not checked ({entry} with a return is missing).")
    elif a.syntax is not None:
        lines.append(f"- Syntax: ERROR in {_where(a.syntax, role)}: {a.syntax.message}.")
        lines.append("- Tests: not run (the program does not parse).")
    else:
        lines.append("- Syntax: OK.")
        result = outcome.result
        if result is not None and result.load_error:
            lines.append(f"- The program failed to load: {result.load_error[:500]}")
        if result is not None and shown:
            passed = sum(result.passed[:shown])
            if shown == n:
                note = ""
            elif shown == 1:
                note = f" (only the first of the {n} tests is reported)"
            else:
                note = f" (only the first {shown} of the {n} tests are reported)"
            lines.append(f"- Tests: {passed}/{shown} passed{note}.")
            failed = result.failed_test
            if failed is not None and failed < shown and not result.load_error:
                error = (result.error or "failed")[:500]
                lines.append(f"- First failing test: {tests[failed].shown} -> {error}")
    if role in ("main", "solver") and a.main is not None:
        if a.aux_shadowed:
            usage = f"{entry} defines its own aux, which hides the shared helper"
        elif not a.aux_called:
            usage = f"{entry} does not call aux"
        elif a.discarded_calls:
            where = ", ".join(str(x) for x in a.discarded_calls[:3])
            usage = f"{entry} calls aux but throws its result away (line {where})"
        else:
            usage = f"{entry} calls aux and uses its result"
        lines.append(f"- Use of aux: {usage}.")
        if a.aux_called and a.thin_wrapper:
            lines.append(
                f"- {entry} is a thin wrapper: it only returns aux(...)'s result; give it logic "
                "of its own."
            )
        if role == "main" and a.main_answer_defines_aux:
            lines.append(
                "- Your answer also defines aux: that copy is ignored; your partner writes aux."
            )
    target = {"aux": "aux(...) function", "main": f"{entry}(...) function"}.get(
        role, f"solution (aux(...) and {entry}(...))"
    )
    lines.append(f"\nRevise your {target}. Answer with the code only, no explanation.")
    return "\n".join(lines)


def plain_feedback(role: str, entry_point: str) -> str:
    """The reference "plain" feedback: no diagnostics, just a request to revise."""
    if role not in FEEDBACK_ROLES:
        raise ValueError(f"role must be one of {FEEDBACK_ROLES}")
    target = {"aux": "aux(...) function", "main": f"{entry_point}(...) function"}.get(
        role, "solution"
    )
    return f"Revise your {target} if needed. Answer with the code only, no explanation."
