"""Reading an agent's answer into tool calls, as the reference task reads it, and saying what was
left out.

The reading is the reference's (tasks-2.md 7a, "Reading an answer"): an empty answer or `[]` is no
call; fenced blocks are joined; the text is tried as JSON (the whole text, then from the first `[`
to the last `]`, then from the first `{` to the last `}`: the first candidate that decodes decides),
and when JSON yields no call, as Python calls (`true`/`false`/`null` rewritten as Python words
everywhere, inside strings too; the whole text, the text in `[...]`, then each balanced
`name(...)` span of a schema function, longest names first: the first candidate that yields a call
is the only one read). Where the reference drops something silently, `ParsedCalls.rejected` says
what and why, so an agent's infos show it; the calls themselves are the reference's.

A JSON call whose `arguments` is not an object: the reference parser pinned by the spec
(`@178b9dc`) raises on it (`dict("...")`), which would end a training run. `string_arguments`
chooses what happens instead: "coerce" (the default) reads the string as JSON, else as a Python
literal, as the reference's own later parser does (`multiturn_flat/parsing.py@9979b13`), and a
string that is neither gives a call with no arguments, reported; "reject" drops that call and
reports it.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from collabzoo.rewards.commands import Rejection
from collabzoo.tasks.bfcl.rewards.plain_calls import plain_calls

STRING_ARGUMENTS = ("coerce", "reject")
"""What a JSON call whose `arguments` is a string (or another non-object) becomes."""
REJECTED_TEXT_CHARS = 200
"""How much of a rejected part the report keeps."""

_FENCED = re.compile(r"```(?:json|python|text)?\s*(.*?)```", re.S | re.I)
_JSON_WORDS = re.compile(r"\b(true|false|null)\b", re.I)
_PYTHON_WORDS = {"t": "True", "f": "False", "n": "None"}
"""By first letter: the case-blind match may hold `ſ` for `s` (`falſe`), never another letter."""
_SPACES = re.compile(r"\s+")
_JSON_STARTS = frozenset('{["-0123456789tfnNI \t\n\r')
"""The characters a JSON text may begin with (`json.loads` also reads NaN and Infinity)."""

ParameterOrder = Mapping[str, Sequence[str]]
"""Each schema function's parameters in the order positional arguments fill them."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call as read: its name, its arguments as written, and their canonical forms (the
    reference's normal form, by which calls are compared and de-duplicated)."""

    name: str
    arguments: dict[Any, Any]
    canonical: dict[Any, Any] = field(compare=False, repr=False)
    key: tuple = field(compare=False, repr=False)


def make_call(name: str, arguments: dict[Any, Any]) -> ToolCall:
    canonical = {k: canonical_value(v) for k, v in arguments.items()}
    items = [(str(k), v) for k, v in canonical.items()]
    try:
        items.sort()
    except TypeError:  # two keys alike as text, values of kinds that do not order
        items.sort(key=repr)
    return ToolCall(name, arguments, canonical, (name, tuple(items)))


@dataclass(slots=True)
class ParsedCalls:
    """An answer's calls in the order read, and the parts of it that gave no call."""

    calls: list[ToolCall] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)

    def report(self) -> dict[str, Any]:
        return {
            "calls": [call_text(c) for c in self.calls],
            "rejected": [{"part": r.line, "reason": r.reason} for r in self.rejected],
        }


def call_text(call: ToolCall) -> str:
    """A call as Python source: `name(arg=value, ...)`."""
    return f"{call.name}({', '.join(f'{k}={v!r}' for k, v in call.arguments.items())})"


def _short(text: str) -> str:
    text = text.strip()
    return text if len(text) <= REJECTED_TEXT_CHARS else text[: REJECTED_TEXT_CHARS - 3] + "..."


# ----- canonical forms ------------------------------------------------------------------------
def canonical_value(value: Any) -> Any:
    """The reference's normal form: strings stripped, outer quotes removed, whitespace
    collapsed, lower-cased; numbers kept; lists and tuples as tuples; dicts as sorted tuples."""
    kind = type(value)
    if kind is str:
        return _SPACES.sub(" ", value.strip().strip("\"'")).lower()
    if kind is int or kind is float or kind is bool or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return tuple(map(canonical_value, value))
    if isinstance(value, dict):
        return tuple(sorted((str(k), canonical_value(v)) for k, v in value.items()))
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float):
        return float(value)
    if isinstance(value, int):
        return int(value)
    return _SPACES.sub(" ", str(value).strip().strip("\"'")).lower()


def dedupe(calls: Iterable[ToolCall]) -> list[ToolCall]:
    """The calls with a repeated key dropped (the first kept). Keys are lower-cased, so calls
    that differ only in case collapse (a reference quirk)."""
    seen: set[tuple] = set()
    unique = []
    for call in calls:
        if call.key not in seen:
            seen.add(call.key)
            unique.append(call)
    return unique


def parameter_order(functions: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Each function's required parameters, then its other properties, in schema order."""
    order: dict[str, list[str]] = {}
    for schema in functions:
        parameters = schema.get("parameters", {}) or {}
        names = list(parameters.get("required", []) or [])
        names += list((parameters.get("properties", {}) or {}).keys())
        order[str(schema.get("name", ""))] = list(dict.fromkeys(names))
    return order


# ----- JSON answers ---------------------------------------------------------------------------
def _coerced(arguments: Any, rejected: list[Rejection], name: str) -> dict[Any, Any] | None:
    """The reference's later reading of a call's `arguments` (`_coerce_arguments@9979b13`)."""
    if arguments is None:
        return {}
    if isinstance(arguments, dict):
        return dict(arguments)
    if isinstance(arguments, str):
        text = arguments.strip()
        if not text:
            return {}
        for loader in (json.loads, ast.literal_eval):
            try:
                parsed = loader(text)
            except (TypeError, ValueError, SyntaxError, MemoryError, RecursionError):
                continue
            return _coerced(parsed, rejected, name)
        rejected.append(
            Rejection(
                _short(arguments),
                f"the arguments of {name} are a string that is neither JSON nor a Python "
                "literal: read as no arguments",
            )
        )
        return {}
    try:
        return dict(arguments)
    except (TypeError, ValueError):
        rejected.append(
            Rejection(_short(json.dumps(arguments)), f"the arguments of {name} are not an object")
        )
        return {}


def _strict(arguments: Any, rejected: list[Rejection], name: str) -> dict[Any, Any] | None:
    """`dict(arguments or {})` as the pinned reference parser reads it; None (the call dropped)
    where that raises."""
    try:
        return dict(arguments or {})
    except (TypeError, ValueError):
        rejected.append(
            Rejection(
                _short(json.dumps(arguments)),
                f"the arguments of {name} are not an object (the reference parser raises here; "
                "string_arguments='reject' drops the call)",
            )
        )
        return None


def _json_calls(value: Any, coerce: bool, calls: list[ToolCall], rejected: list[Rejection]) -> None:
    if isinstance(value, list):
        for item in value:
            _json_calls(item, coerce, calls, rejected)
        return
    if isinstance(value, dict):
        for key in ("name", "function"):
            if key in value:
                name = str(value[key])
                raw = value.get("arguments", value.get("parameters", {}))
                read = _coerced if coerce else _strict
                arguments = read(raw, rejected, name)
                if arguments is not None:
                    calls.append(make_call(name, arguments))
                return
        if len(value) == 1:
            name, arguments = next(iter(value.items()))
            if isinstance(arguments, dict):
                calls.append(make_call(str(name), dict(arguments)))
                return
    rejected.append(Rejection(_short(json.dumps(value)), "not a call object"))


def _read_json(text: str, coerce: bool) -> tuple[list[ToolCall], list[Rejection], str | None]:
    """(calls, rejected parts, why the text is not JSON) of the first JSON candidate."""
    candidates = [text]
    for opening, closing in ("[]", "{}"):
        start, end = text.find(opening), text.rfind(closing)
        if start >= 0 and end > start:
            candidates.append(text[start : end + 1])
    error = None
    for candidate in candidates:
        if not candidate:
            continue
        if candidate[0] not in _JSON_STARTS:  # cannot decode: skip the exception's cost
            error = error or f"{candidate[:1]!r} cannot begin a JSON value"
            continue
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError as failure:
            error = error or str(failure)
            continue
        except RecursionError:
            error = error or "nested too deeply"
            continue
        calls: list[ToolCall] = []
        rejected: list[Rejection] = []
        _json_calls(value, coerce, calls, rejected)
        return calls, rejected, None
    return [], [], error


# ----- Python answers -------------------------------------------------------------------------
def _call_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        parent = _call_name(node.value)
        return f"{parent}.{node.attr}" if parent else node.attr
    return None


def _literal(node: ast.AST, rejected: list[Rejection]) -> Any:
    """Constants, lists, tuples (as lists), dicts and negated numbers as values; any other
    expression as its source text."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal(item, rejected) for item in node.elts]
    if isinstance(node, ast.Dict):
        value = {}
        for key, item in zip(node.keys, node.values, strict=True):
            if key is None:  # `**mapping` inside a dict: the reference parser raises here
                rejected.append(Rejection(_short(ast.unparse(item)), "dict unpacking ignored"))
                continue
            value[_literal(key, rejected)] = _literal(item, rejected)
        return value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        operand = _literal(node.operand, rejected)
        return -operand if isinstance(operand, (int, float)) else operand
    return ast.unparse(node)


def _call(node: ast.Call, order: ParameterOrder, rejected: list[Rejection]) -> ToolCall | None:
    name = _call_name(node.func)
    if not name:
        rejected.append(Rejection(_short(ast.unparse(node)), "not a call of a named function"))
        return None
    arguments: dict[Any, Any] = {}
    names = order.get(name, ())
    for index, value in enumerate(node.args):
        if index < len(names):
            arguments[names[index]] = _literal(value, rejected)
        else:
            rejected.append(
                Rejection(
                    _short(ast.unparse(value)),
                    f"positional argument {index + 1} of {name}: its schema has "
                    f"{len(names)} parameter{'s' if len(names) != 1 else ''}",
                )
            )
    for keyword in node.keywords:
        if keyword.arg is None:
            rejected.append(
                Rejection(_short(ast.unparse(keyword.value)), f"**unpacking in {name} ignored")
            )
        else:
            arguments[keyword.arg] = _literal(keyword.value, rejected)
    return make_call(name, arguments)


def python_words(text: str) -> str:
    """The text with JSON's `true`/`false`/`null` rewritten as Python's, everywhere (inside strings
    too), as the reference does; the regular expression runs only where one of them may appear
    (in ASCII text, where its case-blind match is `lower()`'s; elsewhere `ſ` matches `s`)."""
    if text.isascii():
        lowered = text.lower()
        if "true" not in lowered and "false" not in lowered and "null" not in lowered:
            return text
    return _JSON_WORDS.sub(lambda m: _PYTHON_WORDS[m.group(1)[0].lower()], text)


def _parse(candidate: str) -> ast.AST | None:
    """The candidate as the reference parses it: as an expression, else as statements.

    Parsed as statements first, which gives the same tree with one parse where the reference
    needs two: a text that is not statements is no expression either (candidates never start
    with a space), and statements other than one expression are no expression. Of one
    expression statement, only a list or a tuple reads differently as an expression, and only
    then is the text parsed again as one."""
    source = python_words(candidate)
    try:
        tree = ast.parse(source, mode="exec")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    body = tree.body
    if len(body) == 1 and isinstance(body[0], ast.Expr):
        if isinstance(body[0].value, (ast.List, ast.Tuple)):
            try:
                return ast.parse(source, mode="eval")
            except (SyntaxError, ValueError, MemoryError, RecursionError):
                return tree
        return ast.Expression(body=body[0].value)
    return tree


def _calls_in(tree: ast.AST, order: ParameterOrder, rejected: list[Rejection]) -> list[ToolCall]:
    """The calls of a parsed candidate: an expression that is a call, or a list or tuple of
    calls; or statements that are calls. The other elements are reported where calls were read."""
    nodes: list[ast.Call] = []
    others: list[ast.AST] = []
    if isinstance(tree, ast.Expression):
        body = tree.body
        if isinstance(body, ast.Call):
            nodes.append(body)
        elif isinstance(body, (ast.List, ast.Tuple)):
            for element in body.elts:
                (nodes if isinstance(element, ast.Call) else others).append(element)
    elif isinstance(tree, ast.Module):
        for statement in tree.body:
            if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
                nodes.append(statement.value)
            else:
                others.append(statement)
    calls = [c for c in (_call(node, order, rejected) for node in nodes) if c is not None]
    if calls:
        rejected += [Rejection(_short(ast.unparse(o)), "not a call") for o in others]
    return calls


@lru_cache(maxsize=4096)
def _call_opening(name: str) -> re.Pattern[str]:
    """`name(` not inside a longer name; kept, as a multi-turn row's many names overflow `re`'s
    own cache."""
    return re.compile(rf"(?<![\w.]){re.escape(name)}\s*\(")


def _call_spans(text: str, names: Iterable[str]) -> list[str]:
    """Every balanced `name(...)` span of the text, for each name, longest names first."""
    spans = []
    for name in sorted(set(names), key=len, reverse=True):
        for match in _call_opening(name).finditer(text):
            depth = 0
            for index in range(match.end() - 1, len(text)):
                char = text[index]
                if char == "(":
                    depth += 1
                elif char == ")":
                    depth -= 1
                    if depth == 0:
                        spans.append(text[match.start() : index + 1])
                        break
    return spans


def _plain(text: str, order: ParameterOrder) -> list[ToolCall] | None:
    """The text's calls where it is plain (see `plain_calls`): what `ast` reads, without it."""
    plain = plain_calls(python_words(text), order)
    return None if plain is None else [make_call(name, arguments) for name, arguments in plain]


def _read_python(text: str, order: ParameterOrder) -> tuple[list[ToolCall], list[Rejection]]:
    # Most answers, and most call spans in prose, are plain calls: read without compiling.
    plain = _plain(text, order) if text else None
    if plain is not None:
        return plain, []
    rejected: list[Rejection] = []
    heads = [text] if text else []
    if text and not text.startswith("["):
        heads.append(f"[{text}]")
    for head in heads:
        tree = _parse(head)
        if tree is not None:
            calls = _calls_in(tree, order, rejected)
            if calls:
                return calls, rejected
            rejected.clear()
    spans = _call_spans(text, order)
    for index, span in enumerate(spans):
        calls = _plain(span, order)
        if calls is None:
            tree = _parse(span)
            if tree is None:
                continue
            calls = _calls_in(tree, order, rejected)
        if calls:
            for other in dict.fromkeys(spans[:index] + spans[index + 1 :]):
                if other in span:
                    continue
                readable = other in spans[index + 1 :] and (
                    plain_calls(python_words(other), order) is not None or _parse(other) is not None
                )
                reason = (
                    "not read: the answer is not Python as a whole, and only its first "
                    "readable call is read"
                    if readable
                    else "not valid Python"
                )
                rejected.append(Rejection(_short(other), reason))
            return calls, rejected
        rejected.clear()
    return [], []


# ----- an answer ------------------------------------------------------------------------------
def strip_fences(text: str) -> str:
    stripped = text.strip()
    if "```" not in stripped:
        return stripped
    blocks = _FENCED.findall(stripped)
    return "\n".join(block.strip() for block in blocks) if blocks else stripped


def parse_calls(
    text: str, order: ParameterOrder, *, string_arguments: str = "coerce"
) -> ParsedCalls:
    """An answer's calls as the reference reads them, with the parts that gave none."""
    if not text or text.strip() == "[]":
        return ParsedCalls()
    cleaned = strip_fences(text).strip()
    if not cleaned:
        return ParsedCalls()
    calls, rejected, json_error = _read_json(cleaned, string_arguments == "coerce")
    if calls:
        return ParsedCalls(calls, rejected)
    python_calls, python_rejected = _read_python(cleaned, order)
    if python_calls:
        return ParsedCalls(python_calls, python_rejected)
    why = f"not JSON ({json_error})" if json_error is not None else "JSON holding no readable call"
    reason = f"no tool call read: {why}, and no Python call of a schema function"
    return ParsedCalls([], [*rejected, Rejection(_short(cleaned), reason)])
