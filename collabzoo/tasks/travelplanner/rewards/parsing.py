"""Reading each agent's JSON answer, and the deterministic merger that builds the plan.

An answer is one JSON object `{"agent_id": i, "assignments": [{"day": d, "field": f, "value":
v}, ...]}`. It is read as the reference reads it: strictly (the whole text is JSON with exactly
that schema) and, when that fails, by recovery (the fenced blocks joined, then JSON, then a
Python literal, then the first `{` or `[` from which a JSON value decodes), so that the content
of a malformed answer still counts where the reference counts it. Nothing here raises on any
text; what was not used is reported with the reason (`AgentParse.rejected`).

The merger (reference defaults): an answer with more items than its cap is dropped whole; an
item whose day is not a whole number in 1..D or whose field (case-insensitive) is not a plan
field is invalid; an agent's repeated slot keeps its first value; per slot one proposal is
taken, the same value from both agents (whitespace collapsed, case-folded) once, counted as an
overlap, and different values are a conflict that leaves the slot "-". The cap is the
reference's shared ceil(7D/2) (`capacity="reference"`), which agent 1's 4D slots exceed for
every trip of two days or more; `capacity="role"` caps each agent at its own slot count.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from collabzoo.rewards import Rejection
from collabzoo.tasks.travelplanner.rewards.catalog import (
    PLAN_FIELDS,
    Slot,
    canonical,
    owned_fields,
    owned_slots,
    reference_capacity,
)

CAPACITIES = ("reference", "role")
_FIELDS = frozenset(PLAN_FIELDS)
_FENCED = re.compile(r"```(?:json|python|text)?\s*(.*?)```", re.S | re.I)
_DECODER = json.JSONDecoder()
_QUOTED = r"""(?:"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*')"""
_KEY = r"""(?:"{0}"|'{0}'|{0})"""
_TRIPLE = re.compile(
    _KEY.format("day")
    + r"\s*:\s*(?P<day>\d+)\s*,\s*"
    + _KEY.format("field")
    + rf"\s*:\s*(?P<field>{_QUOTED})\s*,\s*"
    + _KEY.format("value")
    + rf"\s*:\s*(?P<value>{_QUOTED})",
    re.I | re.S,
)
_AGENT_ID = re.compile(_KEY.format("agent_id") + r"\s*:\s*(?P<agent_id>\d+)", re.I)
_ASSIGNMENTS = re.compile(_KEY.format("assignments") + r"\s*:\s*(?P<container>.)?", re.I | re.S)
_CLOSERS = {"}": "{", "]": "["}
_UNREADABLE = (ValueError, SyntaxError, TypeError, MemoryError, RecursionError, OverflowError)
"""What reading untrusted text may raise (the reference lets the last three through)."""


@dataclass(frozen=True, slots=True)
class Item:
    """One assignment as written: day, field and value of any JSON type."""

    day: Any
    field: Any
    value: Any

    def text(self) -> str:
        return json.dumps(
            {"day": self.day, "field": self.field, "value": self.value},
            ensure_ascii=False,
            default=repr,
        )


@dataclass(frozen=True)
class AgentParse:
    """What one answer was read into, with the reference's flags and error codes."""

    items: tuple[Item, ...]
    strict: bool
    """The reference's parse success: strict JSON, the schema, the agent's id, within the cap,
    no repeated slot."""
    raw_count: int
    malformed: int
    """Entries of the assignments list that are neither an object with field and value nor a
    [day, field, value] triple."""
    decoded: bool
    strict_json: bool
    schema_valid: bool
    agent_id: Any
    agent_id_match: bool
    capacity_valid: bool
    errors: tuple[str, ...]
    rejected: tuple[Rejection, ...] = ()


def _recover(text: str) -> Any:
    stripped = (text or "").strip()
    if "```" in stripped:
        blocks = _FENCED.findall(stripped)
        if blocks:
            stripped = "\n".join(block.strip() for block in blocks)
    if not stripped:
        raise ValueError("empty answer")
    try:
        return json.loads(stripped)
    except (ValueError, RecursionError):
        pass
    try:
        return ast.literal_eval(stripped)
    except _UNREADABLE:
        pass
    for index, character in enumerate(stripped):
        if character in "[{":
            try:
                return _DECODER.raw_decode(stripped, index)[0]
            except (ValueError, RecursionError):
                continue
    raise ValueError("no JSON object or list in the answer")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_answer(text: str, *, agent: int, days: int, capacity: int) -> AgentParse:
    """One answer read as the reference reads it (`parse_assignments` of its parsing module)."""
    stripped = (text or "").strip()
    payload: Any = None
    strict_json = False
    if stripped:
        try:
            payload = json.loads(stripped)
            strict_json = True
        except (ValueError, RecursionError):
            pass
    if not strict_json:
        try:
            payload = _recover(text)
        except ValueError as error:
            excerpt = stripped[:120] + ("..." if len(stripped) > 120 else "")
            return AgentParse(
                (), False, 0, 0, False, False, False, None, False, True, ("decode_failed",),
                (Rejection(excerpt, str(error)),),
            )  # fmt: skip
    errors = [] if strict_json else ["not_strict_json"]
    agent_id = payload.get("agent_id") if isinstance(payload, dict) else None
    top_level = isinstance(payload, dict) and set(payload) == {"agent_id", "assignments"}
    if not top_level:
        errors.append("top_level_schema")
    id_match = _is_int(agent_id) and agent_id == agent
    if not _is_int(agent_id):
        errors.append("invalid_agent_id")
    elif not id_match:
        errors.append("agent_id_mismatch")
    if isinstance(payload, dict):
        raw_items = payload.get("assignments", payload.get("slots", []))
    elif isinstance(payload, list):
        raw_items = payload
    else:
        return AgentParse(
            (), False, 0, 0, True, strict_json, False, agent_id, id_match, True,
            (*errors, "top_level_type"),
            (Rejection(stripped[:120], "the answer is not a JSON object or list"),),
        )  # fmt: skip
    if not isinstance(raw_items, list):
        return AgentParse(
            (), False, 0, 0, True, strict_json, False, agent_id, id_match, True,
            (*errors, "assignments_type"),
            (Rejection(repr(raw_items)[:120], '"assignments" is not a list'),),
        )  # fmt: skip
    items: list[Item] = []
    rejected: list[Rejection] = []
    malformed = 0
    items_valid = values_valid = True
    seen: set[tuple[Any, str]] = set()
    repeated = False
    for raw in raw_items:
        if isinstance(raw, dict) and "field" in raw and "value" in raw:
            items.append(Item(raw.get("day", raw.get("days")), raw["field"], raw["value"]))
            day, name, value = raw.get("day"), raw.get("field"), raw.get("value")
            if (
                len(raw) != 3
                or set(raw) != {"day", "field", "value"}
                or not _is_int(day)
                or not isinstance(name, str)
                or not isinstance(value, str)
            ):
                items_valid = False
                continue
            slot = (day, name.strip().casefold())
            repeated = repeated or slot in seen
            seen.add(slot)
            if not 1 <= day <= days or name not in _FIELDS or not value.strip():
                values_valid = False
        elif isinstance(raw, (list, tuple)) and len(raw) == 3:
            items.append(Item(raw[0], raw[1], raw[2]))
            items_valid = False
        else:
            malformed += 1
            items_valid = False
            rejected.append(
                Rejection(json.dumps(raw, default=repr)[:120], "not a {day, field, value} object")
            )
    if not items_valid:
        errors.append("assignment_schema")
    if not values_valid:
        errors.append("assignment_value")
    if repeated:
        errors.append("self_duplicate")
    capacity_valid = len(raw_items) <= capacity
    if not capacity_valid:
        errors.append("capacity_exceeded")
    schema_valid = top_level and items_valid and values_valid
    strict = strict_json and schema_valid and id_match and capacity_valid and not repeated
    return AgentParse(
        tuple(items),
        strict,
        len(raw_items),
        malformed,
        True,
        strict_json,
        schema_valid,
        agent_id,
        id_match,
        capacity_valid,
        tuple(errors),
        tuple(rejected),
    )


def slot_of(item: Item, days: int) -> tuple[Slot, str] | None:
    """The merger's reading of an item: (day, field lower-cased) and its value trimmed ("-"
    when empty or null); None for a day that is not a whole number in 1..D or an unknown
    field."""
    try:
        day = int(item.day)
    except (TypeError, ValueError, OverflowError):
        return None
    name = str(item.field).strip().lower()
    if not 1 <= day <= days or name not in _FIELDS:
        return None
    value = "-" if item.value is None else str(item.value).strip() or "-"
    return (day, name), value


def capacities_for(capacity: str, days: int) -> tuple[int, int]:
    if capacity not in CAPACITIES:
        raise ValueError(f"capacity must be one of {CAPACITIES}, got {capacity!r}")
    if capacity == "reference":
        return (reference_capacity(days),) * 2
    return (len(owned_slots(0, days)), len(owned_slots(1, days)))


@dataclass(frozen=True)
class Merge:
    """The merged plan and how the two answers went into it."""

    days: int
    parses: tuple[AgentParse, ...]
    per_agent: tuple[dict[Slot, str], ...]
    """Each agent's accepted slots (first value of a repeated slot), owned or not."""
    merged: dict[Slot, str]
    conflicts: frozenset[Slot]
    overlap: int
    self_duplicates: int
    invalid: int
    extra: int
    rejected: tuple[tuple[Rejection, ...], ...] = field(default=())

    def value(self, day: int, name: str) -> str:
        return self.merged.get((day, name), "-")

    def plan(self) -> list[dict[str, Any]]:
        """The itinerary, one row per day: {"day": d, field: value, ...}, "-" where unset."""
        return [
            {"day": d, **{f: self.value(d, f) for f in PLAN_FIELDS}}
            for d in range(1, self.days + 1)
        ]


def merge(parses: Sequence[AgentParse], days: int, capacities: Sequence[int]) -> Merge:
    """The reference's merger over already-parsed answers (`capacities` per agent)."""
    per_agent: list[dict[Slot, str]] = []
    rejected: list[tuple[Rejection, ...]] = []
    invalid = sum(p.malformed for p in parses)
    extra = duplicates = 0
    for parsed, cap in zip(parses, capacities, strict=True):
        accepted: dict[Slot, str] = {}
        dropped = list(parsed.rejected)
        extra += max(0, parsed.raw_count - cap)
        if not parsed.capacity_valid:
            reason = f"{parsed.raw_count} items, over the cap of {cap}: the whole answer is dropped"
            dropped += [Rejection(item.text(), reason) for item in parsed.items]
        else:
            for item in parsed.items:
                read = slot_of(item, days)
                if read is None:
                    invalid += 1
                    dropped.append(Rejection(item.text(), f"not a day in 1..{days} or a field"))
                elif read[0] in accepted:
                    duplicates += 1
                    dropped.append(Rejection(item.text(), "repeats a slot: the first value kept"))
                else:
                    accepted[read[0]] = read[1]
        per_agent.append(accepted)
        rejected.append(tuple(dropped))
    merged: dict[Slot, str] = {}
    conflicts: set[Slot] = set()
    overlap = 0
    first, *others = per_agent
    merged.update(first)
    for accepted in others:
        for slot, value in accepted.items():
            if slot not in merged and slot not in conflicts:
                merged[slot] = value
            elif slot in merged and canonical(merged[slot]) == canonical(value):
                overlap += 1
            else:
                conflicts.add(slot)
                merged.pop(slot, None)
    return Merge(
        days,
        tuple(parses),
        tuple(per_agent),
        merged,
        frozenset(conflicts),
        overlap,
        duplicates,
        invalid,
        extra,
        tuple(rejected),
    )


def merge_answers(answers: Sequence[str], days: int, capacity: str = "reference") -> Merge:
    """Both answers parsed and merged (agent i's answer at index i)."""
    caps = capacities_for(capacity, days)
    parses = [
        parse_answer(text, agent=i, days=days, capacity=cap)
        for i, (text, cap) in enumerate(zip(answers, caps, strict=True))
    ]
    return merge(parses, days, caps)


# ----- reward-only recovery (the reference's shaping surface) -------------------------------
def _unquote(text: str) -> str | None:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        try:
            value = ast.literal_eval(text)
        except _UNREADABLE:
            return None
    return value if isinstance(value, str) else None


def recover_triples(text: str) -> list[Item]:
    """Every complete `day: N, field: "...", value: "..."` run of the text, quotes decoded."""
    found = []
    for match in _TRIPLE.finditer(text or ""):
        name, value = _unquote(match["field"]), _unquote(match["value"])
        if name is not None and value is not None:
            found.append(Item(int(match["day"]), name, value))
    return found


def balanced_and_closed(text: str) -> bool:
    """Whether the text is `{...}` with every bracket outside strings closed in order."""
    stripped = (text or "").strip()
    if not stripped.startswith("{") or not stripped.endswith("}"):
        return False
    stack: list[str] = []
    quote = ""
    escaped = False
    for character in stripped:
        if quote:
            if escaped:
                escaped = False
            elif character == "\\":
                escaped = True
            elif character == quote:
                quote = ""
        elif character in "\"'":
            quote = character
        elif character in "{[":
            stack.append(character)
        elif character in "}]" and (not stack or stack.pop() != _CLOSERS[character]):
            return False
    return not quote and not stack


@dataclass(frozen=True)
class Recovery:
    """An agent's owned slots recovered from its text even when the strict reading failed."""

    accepted: dict[Slot, str]
    overflow_rate: float
    rejected_rate: float
    object_start: float
    agent_id_key: float
    agent_id_match: float
    assignments_key: float
    assignments_list: float
    owned_progress: float
    closed: float

    @property
    def format_progress(self) -> float:
        return (
            0.10 * self.object_start
            + 0.10 * self.agent_id_key
            + 0.10 * self.agent_id_match
            + 0.10 * self.assignments_key
            + 0.20 * self.assignments_list
            + 0.25 * self.owned_progress
            + 0.15 * self.closed
        )

    @property
    def structure(self) -> float:
        return (self.object_start + self.agent_id_match + self.assignments_list + self.closed) / 4


def recover(text: str, parsed: AgentParse, *, agent: int, days: int) -> Recovery:
    """The reference's per-agent recovery: the parsed items and the regex triples, deduplicated;
    each kept if its day is a whole number (not a bool) in 1..D, its field (case-folded) one of
    the agent's own, and its value a non-blank string; the first value of a slot wins. The cap
    here is the agent's own slot count."""
    triples = recover_triples(text)
    mine = owned_fields(agent)
    expected = len(owned_slots(agent, days))
    seen: set[tuple[str, str, str]] = set()
    accepted: dict[Slot, str] = {}
    for item in (*parsed.items, *triples):
        signature = (repr(item.day), repr(item.field), repr(item.value))
        if signature in seen:
            continue
        seen.add(signature)
        if isinstance(item.day, bool):
            continue
        try:
            day = int(item.day)
        except (TypeError, ValueError, OverflowError):
            continue
        name = str(item.field).strip().casefold()
        if not 1 <= day <= days or name not in mine:
            continue
        if not isinstance(item.value, str) or not item.value.strip():
            continue
        accepted.setdefault((day, name), item.value.strip())
    count = max(parsed.raw_count, len(triples))
    stripped = (text or "").strip()
    agent_id = _AGENT_ID.search(stripped)
    assignments = _ASSIGNMENTS.search(stripped)
    container = assignments["container"] if assignments else ""
    return Recovery(
        accepted,
        max(0, count - expected) / max(1, count),
        max(0, count - len(accepted)) / max(1, count),
        float(stripped.startswith("{")),
        float(agent_id is not None),
        float(agent_id is not None and int(agent_id["agent_id"]) == agent),
        float(assignments is not None),
        float(container == "["),
        len(accepted) / max(1, expected),
        float(balanced_and_closed(stripped)),
    )


def recovered_merge(recovered: Sequence[Recovery], days: int, capacities: Sequence[int]) -> Merge:
    """The plan of the recovered slots, through the merger's cap: an agent that recovered more
    slots than its cap contributes none (the reference rebuilds JSON answers and merges them)."""
    per_agent = tuple(
        dict(sorted(r.accepted.items())) if len(r.accepted) <= cap else {}
        for r, cap in zip(recovered, capacities, strict=True)
    )
    merged: dict[Slot, str] = {}
    for accepted in per_agent:
        merged.update(accepted)  # the agents' recovered slots are their own: disjoint
    return Merge(days, (), per_agent, merged, frozenset(), 0, 0, 0, 0)
