"""BFCL's own metric, AST match: the team's calls checked against the possible answers as the
benchmark's checker checks a model's decoded calls (`bfcl_eval.eval_checker.ast_eval`, Python
rules), reimplemented here because the `bfcl-eval` package pins versions (numpy 1.26.4,
networkx 3.3, filelock 3.20.0) that this suite's environment cannot hold.

tests/test_bfcl.py checks that this implementation gives the verdict and error type of
`bfcl-eval` 2026.3.23 on cases built from every shipped possible answer (the script
benchmarks/bfcl_conformance.py made them by running that package).

The rules, as the checker applies them: a category naming "parallel" matches calls to answers in
any order (each answer takes the first unmatched call that satisfies it, greedily), "multiple"
checks one call against the first answer, any other category one call; the numbers of calls must
be equal. A call satisfies an answer when its name is the answer's; every required parameter is
present; every parameter it gives is in the schema and in the answer, of the schema's type
(integers pass as floats; a value of the answer's own type passes as a "variable"), and among the
accepted values (strings compared without spaces and `,./-_*^`, case-insensitively; lists
likewise item by item; dicts key by key); and every parameter it omits is optional (`""` among its
accepted values). Function names are compared as written (no dot-to-underscore renaming: the
checker does that only for models whose APIs cannot carry dots).

The multi-turn flat variant has no AST metric in BFCL (its multi-turn categories are scored by
executing the trajectory); `ordered_ast_match` applies the same per-call rules position by position
to a turn's gold calls, a stricter reading labelled as this suite's own.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

PYTHON_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "float": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "any": str,
}
"""The schema's type names as the checker reads them for Python."""
NESTED_TYPES = ("array", "tuple")
_STANDARDIZE = re.compile(r"[ ,./\-_*^]")

Output = Mapping[str, Mapping[Any, Any]]
"""One decoded call: `{name: {parameter: value}}`."""


@dataclass(frozen=True, slots=True)
class AstVerdict:
    """Whether the calls pass, and the checker's `error_type` where they do not."""

    valid: bool
    error_type: str = ""

    def __bool__(self) -> bool:
        return self.valid


PASS = AstVerdict(True)


@functools.lru_cache(maxsize=1 << 16)
def standardize(text: str) -> str:
    """A string as the checker compares it (kept: the answers' strings recur every step)."""
    return _STANDARDIZE.sub("", text).lower().replace("'", '"')


def _standardized(values: Any) -> list[Any]:
    return [standardize(v) if type(v) is str else v for v in values]


def _answer_type(accepted: Sequence[Any]) -> type | None:
    """The type of the first accepted value that is not the optional marker `""`."""
    return next((type(a) for a in accepted if a != ""), None)


def _type_check(
    value: Any, accepted: Sequence[Any], expected: type, nested: type | None
) -> tuple[bool, bool, str]:
    """(passes, read as a variable, error type) of a value against the schema's type."""
    answer_type = _answer_type(accepted)
    variable = answer_type is not None and answer_type is not expected
    if type(value) is expected:
        if nested is None:
            return True, variable, ""
        for answer in accepted:  # each item must fit one accepted list; a non-list answer passes
            if type(answer) is not list or all(
                _type_check(item, answer, nested, None)[0] for item in value
            ):
                return True, variable, ""
        if answer_type is not None and type(value) is answer_type:
            return False, True, "type_error:nested"
        return False, False, "type_error:simple"
    if answer_type is not None and type(value) is answer_type:
        return True, True, ""
    return False, False, "type_error:simple"


def _dict_check(value: Mapping[Any, Any], accepted: Sequence[Any]) -> AstVerdict:
    verdict = AstVerdict(False, "dict_checker:unclear")
    for answer in accepted:
        if answer == "":
            continue
        verdict = PASS
        for key, item in value.items():
            if key not in answer:
                verdict = AstVerdict(False, "value_error:dict_key")
                break
            item = standardize(item) if type(item) is str else item
            if item not in _standardized(answer[key]):
                verdict = AstVerdict(False, "value_error:dict_value")
                break
        for key, values in answer.items():
            if key not in value and "" not in values:
                verdict = AstVerdict(False, "value_error:dict_key")
                break
        if verdict:
            return verdict
    return verdict


def _list_dict_check(value: Sequence[Any], accepted: Sequence[Any]) -> AstVerdict:
    verdict = AstVerdict(False, "list_dict_checker:unclear")
    for answer in accepted:
        if len(value) != len(answer):
            verdict = AstVerdict(False, "value_error:list_dict_count")
            continue
        verdict = PASS
        for item, answer_item in zip(value, answer, strict=True):
            verdict = _dict_check(item, [answer_item])
            if not verdict:
                break
        if verdict:
            return verdict
    return verdict


def _list_check(value: Sequence[Any], accepted: Sequence[Any]) -> bool:
    standardized = _standardized(value)
    return any(
        standardized == _standardized(answer)
        for answer in accepted
        if isinstance(answer, (list, tuple, str))
    )


def check_call(
    schema: Mapping[str, Any], output: Output, answer: Mapping[str, Mapping[str, Any]]
) -> AstVerdict:
    """One decoded call against one possible answer `{name: {parameter: [accepted]}}`."""
    accepted_by_parameter = next(iter(answer.values()))
    name = schema["name"]
    parameters = schema["parameters"]
    properties = parameters["properties"]
    if name not in output:
        return AstVerdict(False, "simple_function_checker:wrong_func_name")
    given = output[name]
    if any(p not in given for p in parameters.get("required", ())):
        return AstVerdict(False, "simple_function_checker:missing_required")
    for parameter, value in given.items():
        if parameter not in properties or parameter not in accepted_by_parameter:
            return AstVerdict(False, "simple_function_checker:unexpected_param")
        accepted = accepted_by_parameter[parameter]
        kind = properties[parameter]["type"]
        expected = PYTHON_TYPES[kind]
        nested = (
            PYTHON_TYPES[properties[parameter]["items"]["type"]] if kind in NESTED_TYPES else None
        )
        if kind == "tuple" and type(value) is tuple:
            value = list(value)
        if kind == "float" and type(value) is int:
            value = float(value)
        passes, variable, error = _type_check(value, accepted, expected, nested)
        if not passes:
            return AstVerdict(False, error)
        if not variable:
            if expected is dict:
                verdict = _dict_check(value, accepted)
            elif expected is list and nested is dict:
                verdict = _list_dict_check(value, accepted)
            elif expected is str:
                verdict = (
                    PASS
                    if standardize(value) in _standardized(a for a in accepted if type(a) is str)
                    else AstVerdict(False, "value_error:string")
                )
            elif expected is list:
                verdict = (
                    PASS
                    if _list_check(value, accepted)
                    else AstVerdict(False, "value_error:list/tuple")
                )
            else:
                verdict = PASS if value in accepted else AstVerdict(False, "value_error:others")
            if not verdict:
                return verdict
            continue
        if value not in accepted:
            return AstVerdict(False, "value_error:others")
    for parameter, accepted in accepted_by_parameter.items():
        if parameter not in given and "" not in accepted:
            return AstVerdict(False, "simple_function_checker:missing_optional")
    return PASS


def _schema(functions: Sequence[Mapping[str, Any]], name: str) -> Mapping[str, Any] | None:
    return next((f for f in functions if f.get("name") == name), None)


def ast_match(
    functions: Sequence[Mapping[str, Any]],
    outputs: Sequence[Output],
    possible_answers: Sequence[Mapping[str, Mapping[str, Any]]],
    category: str,
) -> AstVerdict:
    """BFCL's verdict on decoded calls for a test entry of `category`."""
    if "parallel" in category:
        if len(outputs) != len(possible_answers):
            return AstVerdict(False, "parallel_function_checker_no_order:wrong_count")
        matched: set[int] = set()
        for answer in possible_answers:
            schema = _schema(functions, next(iter(answer)))
            found = None
            if schema is not None:
                for index, output in enumerate(outputs):
                    if index not in matched and check_call(schema, output, answer):
                        found = index
                        break
            if found is None:
                return AstVerdict(False, "parallel_function_checker_no_order:cannot_find_match")
            matched.add(found)
        return PASS
    if "multiple" in category:
        if len(outputs) != len(possible_answers):
            return AstVerdict(False, "multiple_function_checker:wrong_count")
        schema = _schema(functions, next(iter(possible_answers[0])))
        if schema is None:
            return AstVerdict(False, "simple_function_checker:wrong_func_name")
        return check_call(schema, outputs[0], possible_answers[0])
    if len(outputs) != 1:
        return AstVerdict(False, "simple_function_checker:wrong_count")
    return check_call(functions[0], outputs[0], possible_answers[0])


def ordered_ast_match(
    functions: Sequence[Mapping[str, Any]],
    outputs: Sequence[Output],
    gold_calls: Sequence[Mapping[str, Mapping[str, Any]]],
) -> AstVerdict:
    """The per-call rules applied position by position: as many calls as the gold, in its
    order (this suite's metric for the multi-turn flat variant)."""
    if len(outputs) != len(gold_calls):
        return AstVerdict(False, "ordered:wrong_count")
    for output, answer in zip(outputs, gold_calls, strict=True):
        schema = _schema(functions, next(iter(answer)))
        if schema is None:
            return AstVerdict(False, "ordered:unknown_function")
        verdict = check_call(schema, output, answer)
        if not verdict:
            return verdict
    return PASS
