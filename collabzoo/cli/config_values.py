"""`--set FIELD=VALUE` read by the type of the config field it names (train, sft).

A value is parsed as its field's annotation says (int, float, bool, str, None in a union, a
Literal's choices, a JSON object or list), so `--set max_new_tokens=abc` is refused here, in
one line naming the field, its type and the value, before any model loads, instead of reaching
the learner as a str and failing deep inside it. Ranges are the configs' own checks
(`validate` / `__post_init__`), which the commands report the same way.

`--set FIELD@AGENT=VALUE` gives one agent its own value of a field its config lists in
`agent_fields` (sampling, the policies' learning rate): it goes into the config's
`per_agent` (over a `--set per_agent={...}` given too). A list of names
(`--set trainable_agents=coder,tester`) is JSON or comma-separated text.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import types
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from collabzoo.cli.usage import UsageError

NONE_WORDS = ("none", "null")
TRUE_WORDS = ("true", "yes", "on", "1")
FALSE_WORDS = ("false", "no", "off", "0")
UNION_TYPES = (Union, types.UnionType)


class Mismatch(ValueError):
    """The text is not a value of the type tried."""


def type_name(hint: Any) -> str:
    """The annotation as it is written in the config (`int | None`, `dict[str, Any]`)."""
    if get_origin(hint) in UNION_TYPES:
        return " | ".join(type_name(member) for member in get_args(hint))
    if hint is type(None):
        return "None"
    if isinstance(hint, type) and not get_args(hint):
        return hint.__name__
    return str(hint).replace("typing.", "")


def describe(hint: Any) -> str:
    """What a value of `hint` looks like on the command line."""
    origin = get_origin(hint)
    if origin in UNION_TYPES:
        return " or ".join(describe(member) for member in get_args(hint))
    if origin is Literal:
        return "one of " + ", ".join(str(choice) for choice in get_args(hint))
    if hint is type(None):
        return "none"
    if hint is bool:
        return "true or false"
    if hint is int:
        return "an integer"
    if hint is float:
        return "a number"
    if hint is str:
        return "text"
    if origin is dict or origin is Mapping or hint is dict:
        return "a JSON object"
    if origin in (list, tuple) or hint in (list, tuple):
        return "a JSON list"
    return "a value"


def _conforms(value: Any, hint: Any) -> bool:
    """Whether a JSON-decoded value is of `hint` (the items of an object or list)."""
    origin, args = get_origin(hint), get_args(hint)
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    if origin in UNION_TYPES:
        return any(_conforms(value, member) for member in args)
    if origin is Literal:
        return value in args
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if origin in (dict, Mapping) or hint is dict:
        key, item = args or (Any, Any)
        return isinstance(value, dict) and all(
            _conforms(k, key) and _conforms(v, item) for k, v in value.items()
        )
    if origin in (list, tuple, Sequence) or hint in (list, tuple):
        if not isinstance(value, list):
            return False
        if origin is tuple and args and args[-1] is not Ellipsis:
            return len(value) == len(args) and all(map(_conforms, value, args))
        item = args[0] if args else Any
        return all(_conforms(v, item) for v in value)
    return isinstance(hint, type) and isinstance(value, hint)


def read_value(raw: str, hint: Any) -> Any:
    """`raw` as a value of `hint`; `Mismatch` when it is not one."""
    text = raw.strip()
    origin, args = get_origin(hint), get_args(hint)
    if hint is Any:
        try:
            return json.loads(raw)
        except json.JSONDecodeError:
            return raw
    if hint is type(None):
        if text.lower() in NONE_WORDS:
            return None
        raise Mismatch(raw)
    if origin in UNION_TYPES:  # None first, text last: "none" is None, "8" an int
        for member in sorted(args, key=lambda m: (m is not type(None), m is str)):
            try:
                return read_value(raw, member)
            except Mismatch:
                continue
        raise Mismatch(raw)
    if origin is Literal:
        for choice in args:
            if text == str(choice) or (isinstance(choice, bool) and text.lower() == str(choice)):
                return choice
        raise Mismatch(raw)
    if hint is bool:
        if text.lower() in TRUE_WORDS:
            return True
        if text.lower() in FALSE_WORDS:
            return False
        raise Mismatch(raw)
    if hint is int:
        try:
            return int(text)
        except ValueError:
            raise Mismatch(raw) from None
    if hint is float:
        try:
            value = float(text)
        except ValueError:
            raise Mismatch(raw) from None
        if math.isnan(value):
            raise Mismatch(raw)
        return value
    if hint is str:
        return raw
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        if origin is list and args == (str,):  # names, comma-separated
            return [part.strip() for part in raw.split(",") if part.strip()]
        raise Mismatch(raw) from None
    if not _conforms(value, hint):
        raise Mismatch(raw)
    return tuple(value) if origin is tuple or hint is tuple else value


def config_settings(config: type, pairs: Sequence[str], example: str) -> dict[str, Any]:
    """The fields `--set FIELD=VALUE` pairs give `config` (a dataclass), each value read by its
    field's type; a `UsageError` for a pair that is not FIELD=VALUE, an unknown field (with the
    close names) or a value its field's type cannot hold."""
    hints = get_type_hints(config)
    fields = sorted(f.name for f in dataclasses.fields(config) if f.init)
    name = config.__name__
    settings: dict[str, Any] = {}
    own: dict[str, dict[str, Any]] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"--set takes FIELD=VALUE (e.g. {example}), got {pair!r}")
        if "@" in key:
            field_name, agent, value = _agent_setting(config, key, raw, hints)
            own.setdefault(agent, {})[field_name] = value
            continue
        if key not in fields:
            close = difflib.get_close_matches(key, fields, n=3)
            known = f"did you mean {' or '.join(close)}?" if close else f"{name} fields: "
            if not close:
                known += ", ".join(fields)
            raise UsageError(f"--set {key}: {name} has no field {key!r}; {known}")
        hint = hints[key]
        try:
            settings[key] = read_value(raw, hint)
        except Mismatch:
            raise UsageError(
                f"--set {key}: {name}.{key} is {type_name(hint)} ({describe(hint)}), got {raw!r}"
            ) from None
    if own:
        merged = {
            agent: dict(values) for agent, values in (settings.get("per_agent") or {}).items()
        }
        for agent, values in own.items():
            merged.setdefault(agent, {}).update(values)
        settings["per_agent"] = merged
    return settings


def _agent_setting(config: type, key: str, raw: str, hints: dict[str, Any]) -> tuple[str, str, Any]:
    """(field, agent, value) of `--set FIELD@AGENT=VALUE`, the value read by the field's type.
    The agent's name is checked against the env's once the env is known."""
    field_name, _, agent = (part.strip() for part in key.partition("@"))
    allowed = getattr(config, "agent_fields", ())
    name = config.__name__
    if not allowed:
        raise UsageError(f"--set {key}: {name} has no per-agent fields")
    if field_name not in allowed or not agent:
        raise UsageError(
            f"--set {key}: FIELD@AGENT=VALUE gives one agent its own value of "
            f"{', '.join(allowed)} ({name}), e.g. --set temperature@{agent or 'AGENT'}=0.8"
        )
    hint = hints[field_name]
    try:
        return field_name, agent, read_value(raw, hint)
    except Mismatch:
        raise UsageError(
            f"--set {key}: {name}.{field_name} is {type_name(hint)} ({describe(hint)}), got {raw!r}"
        ) from None


__all__ = ["Mismatch", "config_settings", "describe", "read_value", "type_name"]
