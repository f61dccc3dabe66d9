"""ResourceGathering: the reference game's map format, action reading, turn rules and reward.

A map is W x H cells, x from left to right and z from top to bottom, (0, 0) the top-left
corner; a cell holds counts of wood, stone and iron. Agent A (index 0) extracts only wood,
agent B (index 1) only stone and iron. An agent sees every cell within `VIEW` (in x and in z)
of any cell it has stood on or walked through, with the cells' current contents.

A turn, as the reference resolves it: both answers are read against the state before the turn
(messages are checked against what the sender sees then); both agents walk their paths (every
path cell joins what they have seen); work-zone accounting; extraction, A then B, from the final
positions; the messages reach the partner's inbox; the progress is updated. The team reward:

    r = 8 dp + 7 [all goals met, first time] + 0.05 z + u + 0.15 e - 0.1 w

minus move and message costs (0 in the reference), where

- p = the mean over wood, stone and iron of min(1, collected / goal); dp = max(0, p_new - p_old).
- z = the sum over agents of the drop of the Manhattan distance to the agent's work zone (every
  cell within `EXTRACTION_RANGE` of a cell holding a resource it extracts and the team still
  lacks, taken before the move), drops only.
- u = the sum over senders of 0.1 x min(1, sum over new useful facts of min(1, count /
  remaining)): a fact is useful when it names a resource the partner extracts and the team still
  lacks, at a cell the partner neither sees nor was told of.
- e = the agents entering their work zone for the first time; w = wasted extraction targets.

Reference quirks kept: visibility is cumulative and live; one extraction takes all of the
agent's resource types from a cell; `play_turn` has no guard for a finished episode (stepping
after the end still moves, extracts and pays); coordinates go through `int()` (floats
truncated, numeric strings and booleans accepted); an extraction limit of 0 reads as 1.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from collabzoo.rewards import RewardBreakdown

Coord = tuple[int, int]
Counts = tuple[int, int, int]

RESOURCES = ("wood", "stone", "iron")
TOOLS = ((0,), (1, 2))
"""The resource indices each agent extracts: A wood; B stone and iron."""
AGENT_LETTERS = ("A", "B")
VIEW = 2
EXTRACTION_LIMIT = 2
EXTRACTION_RANGE = 2
MAX_PATH_LEN = 4
MAX_TURNS = 4
INITIAL_ZONE_RANGE = 2
"""The reference decides whether an agent starts inside its work zone with range 2, whatever
the configured extraction range."""

PROGRESS_SCALE = 8.0
TERMINAL_BONUS = 7.0
WORK_ZONE_SCALE = 0.05
USEFUL_MESSAGE_SCALE = 0.1
FIRST_ENTRY_SCALE = 0.15
WASTE_PENALTY = 0.1
MOVE_COST = 0.0
MESSAGE_COST = 0.0
WRAPPER_PROGRESS_SCALE = 10.0
WRAPPER_TERMINAL_BONUS = 4.0
"""The reference wrapper's own defaults, used when a config gives no `reward_shaping`."""

FENCE = "```"
_FENCE_TAG = re.compile(r"^\s*[A-Za-z0-9_-]+\s*\n")
_TOKEN = re.compile(r"^\(?\s*(\d+)\s*[,:|]\s*(\d+)\s*[,:|]\s*(\d+)\s*\)?$")
_START_TOKENS = ("A", "B", "AB", "BA")


@dataclass(frozen=True)
class RewardScales:
    """The weights of the reward's terms (the reference config's values by default)."""

    progress: float = PROGRESS_SCALE
    terminal: float = TERMINAL_BONUS
    work_zone: float = WORK_ZONE_SCALE
    useful_message: float = USEFUL_MESSAGE_SCALE
    first_entry: float = FIRST_ENTRY_SCALE
    waste: float = WASTE_PENALTY
    move_cost: float = MOVE_COST
    message_cost: float = MESSAGE_COST


SHAPINGS = {
    "reference": RewardScales(),
    "wrapper_defaults": RewardScales(
        progress=WRAPPER_PROGRESS_SCALE, terminal=WRAPPER_TERMINAL_BONUS
    ),
}
"""Named weight sets: the reference config (default), and the wrapper's fallback defaults."""


# ----- maps ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GatherMap:
    """One task: the grid, the agents' start cells (A, B) and the team goal (wood, stone, iron)."""

    task_id: str
    family: str
    width: int
    height: int
    resources: tuple[tuple[Coord, Counts], ...]
    """The cells holding anything, in (z, x) order."""
    starts: tuple[Coord, Coord]
    goal: Counts


def _row_tokens(row: Any) -> list[str]:
    if isinstance(row, str):
        return row.split()
    if isinstance(row, (list, tuple)):
        return [str(t).strip() for t in row if str(t).strip()]
    raise ValueError(f"a map row must be a string or a list of tokens, got {type(row).__name__}")


def _cell_counts(token: str) -> Counts:
    if token in (".", "_", "0"):
        return (0, 0, 0)
    match = _TOKEN.match(token)
    if not match:
        raise ValueError(f"invalid map token {token!r}: expected '.', 'A', 'B' or '(w,s,i)'")
    return (int(match.group(1)), int(match.group(2)), int(match.group(3)))


def parse_map(record: Mapping[str, Any], index: int = 0) -> GatherMap:
    """A map record of the reference data (`task_id`, `family`, `goal`, `rows` or `map`)."""
    task_id = str(record.get("task_id") or f"resource_gathering_{index + 1:04d}")
    rows_value = record["map"] if "map" in record else record.get("rows")
    if isinstance(rows_value, str):
        rows = [_row_tokens(line) for line in rows_value.splitlines() if line.strip()]
    elif isinstance(rows_value, list):
        rows = [_row_tokens(row) for row in rows_value]
    else:
        raise ValueError(f"{task_id}: 'rows' must be a string or a list of rows")
    if not rows or not rows[0]:
        raise ValueError(f"{task_id}: the map has no cells")
    width = len(rows[0])
    if any(len(row) != width for row in rows):
        raise ValueError(f"{task_id}: every map row needs {width} tokens")
    starts: dict[str, Coord] = {}
    cells = []
    for z, row in enumerate(rows):
        for x, token in enumerate(row):
            if token in _START_TOKENS:
                for letter in token:
                    starts[letter] = (x, z)
                continue
            counts = _cell_counts(token)
            if sum(counts) > 0:
                cells.append(((x, z), counts))
    override = record.get("agent_starts")
    if isinstance(override, list) and override:
        points = [_coord(p) for p in override[:2]]
        if len(points) < 2 or None in points:
            raise ValueError(f"{task_id}: agent_starts must be two [x, z] points")
        starts = {"A": points[0], "B": points[1]}  # type: ignore[dict-item]
    if "A" not in starts or "B" not in starts:
        raise ValueError(f"{task_id}: the map must mark the start cells A and B")
    goal = record.get("goal") if isinstance(record.get("goal"), Mapping) else {}
    return GatherMap(
        task_id=task_id,
        family=str(record.get("family") or ""),
        width=width,
        height=len(rows),
        resources=tuple(sorted(cells, key=lambda c: (c[0][1], c[0][0]))),
        starts=(starts["A"], starts["B"]),
        goal=tuple(max(1, int(goal.get(name, 1))) for name in RESOURCES),  # type: ignore[arg-type]
    )


# ----- state -----------------------------------------------------------------------------------
class Fact(NamedTuple):
    """One sanitized message item: a cell, a resource type and its true count."""

    x: int
    z: int
    type: str
    count: int

    def as_dict(self) -> dict[str, Any]:
        return {"x": self.x, "z": self.z, "type": self.type, "count": self.count}


Message = tuple[Fact, ...]


@dataclass(frozen=True)
class GatherState:
    """Everything a turn reads and writes. Never changed in place: a turn makes a new one."""

    turn: int
    """The turn about to be played, from 1."""
    max_turns: int
    positions: tuple[Coord, Coord]
    origins: tuple[frozenset[Coord], frozenset[Coord]]
    """The cells each agent has stood on or walked through: its view is the union of the windows
    around them."""
    inboxes: tuple[tuple[Message, ...], tuple[Message, ...]]
    resources: Mapping[Coord, Counts]
    collected: Counts
    entered: tuple[bool, bool]
    """Whether each agent has been inside its work zone (a first entry pays once)."""
    completed: bool = False
    terminated: bool = False
    wasted_so_far: int = 0
    useful_so_far: int = 0

    def visible(self, agent: int, width: int, height: int, view: int = VIEW) -> frozenset[Coord]:
        return visible_cells(self.origins[agent], width, height, view)


def initial_state(gmap: GatherMap, max_turns: int = MAX_TURNS) -> GatherState:
    resources = dict(gmap.resources)
    entered = tuple(
        gmap.starts[a]
        in work_zone(resources, needs(a, (0, 0, 0), gmap.goal), gmap, INITIAL_ZONE_RANGE)
        for a in range(2)
    )
    return GatherState(
        turn=1,
        max_turns=max_turns,
        positions=gmap.starts,
        origins=(frozenset({gmap.starts[0]}), frozenset({gmap.starts[1]})),
        inboxes=((), ()),
        resources=resources,
        collected=(0, 0, 0),
        entered=entered,  # type: ignore[arg-type]
    )


@functools.lru_cache(maxsize=4096)
def visible_cells(
    origins: frozenset[Coord], width: int, height: int, view: int
) -> frozenset[Coord]:
    """The union of the (2 view + 1)-wide square windows around `origins`, inside the map."""
    return frozenset(
        (x, z)
        for ox, oz in origins
        for x in range(max(0, ox - view), min(width, ox + view + 1))
        for z in range(max(0, oz - view), min(height, oz + view + 1))
    )


def manhattan(a: Coord, b: Coord) -> int:
    return abs(a[0] - b[0]) + abs(a[1] - b[1])


def needs(agent: int, collected: Counts, goal: Counts) -> tuple[int, ...]:
    """The resources `agent` extracts that the team still lacks."""
    return tuple(k for k in TOOLS[agent] if collected[k] < goal[k])


def work_zone(
    resources: Mapping[Coord, Counts], wanted: Sequence[int], gmap: GatherMap, reach: int
) -> frozenset[Coord]:
    """Every cell within `reach` (Manhattan) of a cell holding one of the `wanted` resources."""
    zone: set[Coord] = set()
    for (cx, cz), counts in resources.items():
        if not any(counts[k] > 0 for k in wanted):
            continue
        for dx in range(-reach, reach + 1):
            rest = reach - abs(dx)
            for dz in range(-rest, rest + 1):
                x, z = cx + dx, cz + dz
                if 0 <= x < gmap.width and 0 <= z < gmap.height:
                    zone.add((x, z))
    return frozenset(zone)


def zone_distance(position: Coord, zone: frozenset[Coord]) -> int | None:
    return min((manhattan(position, cell) for cell in zone), default=None)


def progress(collected: Counts, goal: Counts) -> float:
    return float(
        sum([min(1.0, float(c) / float(max(1, g))) for c, g in zip(collected, goal, strict=True)])
        / 3
    )


# ----- reading an answer -------------------------------------------------------------------------
def action_object(text: str) -> tuple[dict[str, Any], str | None]:
    """The JSON action of an answer, and why it is empty when it is ({} and a reason).

    With at least two fences only the first fenced block is read (a one-word language tag on
    its first line dropped). Then the balanced `{...}` that starts at the first `{` (braces
    inside single- or double-quoted strings not counted) must parse as JSON: no repair, no
    second candidate."""
    raw = str(text or "").strip()
    if not raw:
        return {}, "empty answer"
    if FENCE in raw:
        parts = raw.split(FENCE)
        if len(parts) >= 3:
            raw = _FENCE_TAG.sub("", parts[1].strip()).strip()
    start = raw.find("{")
    if start < 0:
        return {}, "no JSON object in the answer"
    depth = 0
    quote = ""
    escaped = False
    for index in range(start, len(raw)):
        char = raw[index]
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
            continue
        if char in "\"'":
            quote = char
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                try:
                    value = json.loads(raw[start : index + 1])
                except (ValueError, RecursionError) as error:
                    return {}, f"the first {{...}} is not valid JSON ({error}): the action is empty"
                return value, None
    return {}, "the first '{' is never closed: the action is empty"


def _coord(value: Any) -> Coord | None:
    """[x, z] (or longer) or {"x": .., "z": ..}, each read with int(), as the reference does."""
    try:
        if isinstance(value, (list, tuple)) and len(value) >= 2:
            return (int(value[0]), int(value[1]))
        if isinstance(value, Mapping):
            return (int(value.get("x")), int(value.get("z")))  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return None
    return None


def _shown(value: Any, limit: int = 120) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class AgentTurn:
    """What one agent's answer was read into, and what came of its extraction targets."""

    problem: str | None
    """Why the whole action is empty; None when a JSON object was read."""
    facts: Message = ()
    dropped_facts: list[dict[str, str]] = field(default_factory=list)
    targets: list[tuple[Any, Coord | None]] = field(default_factory=list)
    """(as written, the in-bounds cell or None) for the targets that count."""
    ignored_targets: int = 0
    path: tuple[Coord, ...] = ()
    path_valid: bool = True
    notes: list[str] = field(default_factory=list)
    extractions: list[dict[str, Any]] = field(default_factory=list)
    harvested: list[Coord] = field(default_factory=list)

    def report(self) -> dict[str, Any]:
        """A JSON-friendly view for `infos[agent]['parsed']`."""
        return {
            "read": self.problem is None,
            "problem": self.problem,
            "message": [f.as_dict() for f in self.facts],
            "dropped_facts": list(self.dropped_facts),
            "extractions": list(self.extractions),
            "wasted": sum(e["result"] == "wasted" for e in self.extractions),
            "ignored_targets": self.ignored_targets,
            "path": [list(p) for p in self.path],
            "path_valid": self.path_valid,
            "notes": list(self.notes),
        }


def sanitize_message(
    comm: Any, seen: Mapping[Coord, Counts], visible: frozenset[Coord]
) -> tuple[Message, list[dict[str, str]]]:
    """The facts of a `comm` object that pass (about a visible cell, a known type, a positive
    true count, not repeated), with the true count; and the dropped ones with their reason."""
    if not isinstance(comm, Mapping):
        return (), (
            []
            if comm in ({}, None)
            else [{"fact": _shown(comm), "reason": "comm is not an object"}]
        )
    items = comm.get("resource_facts") or []
    if not isinstance(items, list):
        return (), [{"fact": _shown(items), "reason": "resource_facts is not a list"}]
    kept: list[Fact] = []
    dropped: list[dict[str, str]] = []
    keys: set[tuple[Coord, str]] = set()
    for item in items:
        reason = None
        if not isinstance(item, Mapping):
            reason = "not an object"
        else:
            cell = _coord(item)
            kind = str(item.get("type") or "").strip().lower()
            if cell is None:
                reason = "x and z must be integers"
            elif cell not in visible:
                reason = f"cell {list(cell)} is not in your view"
            elif kind not in RESOURCES:
                reason = f"unknown type {kind!r}"
            else:
                count = seen.get(cell, (0, 0, 0))[RESOURCES.index(kind)]
                if count <= 0:
                    reason = f"cell {list(cell)} holds no {kind}"
                elif (cell, kind) in keys:
                    reason = "repeated"
                else:
                    keys.add((cell, kind))
                    kept.append(Fact(cell[0], cell[1], kind, count))
        if reason is not None:
            dropped.append({"fact": _shown(item), "reason": reason})
    return tuple(kept), dropped


def read_path(
    raw: Any, start: Coord, gmap: GatherMap, max_path_len: int
) -> tuple[tuple[Coord, ...], bool, str | None]:
    """(the cells walked, starting at `start`; whether the path was valid; a note). A missing,
    empty or non-list path is a valid stay; a path that breaks a rule means no move."""
    if not isinstance(raw, list) or not raw:
        note = None if isinstance(raw, list) else f"path {_shown(raw)} is not a list: staying"
        return (start,), True, note
    keep = max(1, max_path_len + 1)
    note = f"path truncated to its first {keep} points" if len(raw) > keep else None
    cells = []
    for number, item in enumerate(raw[:keep]):
        cell = _coord(item)
        if cell is None:
            return (start,), False, f"path point {number} {_shown(item)} is not [x, z]: no move"
        cells.append(cell)
    if cells[0] != start:
        return (start,), False, f"path starts at {list(cells[0])}, not at {list(start)}: no move"
    for before, after in itertools.pairwise(cells):
        if max(abs(after[0] - before[0]), abs(after[1] - before[1])) > 1:
            return (start,), False, f"step {list(before)} -> {list(after)} is not 8-connected"
        if not (0 <= after[0] < gmap.width and 0 <= after[1] < gmap.height):
            return (start,), False, f"path leaves the map at {list(after)}: no move"
    return tuple(cells), True, note


def read_agent_action(
    text: str,
    gmap: GatherMap,
    state: GatherState,
    agent: int,
    *,
    view: int = VIEW,
    extraction_limit: int = EXTRACTION_LIMIT,
    max_path_len: int = MAX_PATH_LEN,
) -> AgentTurn:
    """One agent's answer read against the state before the turn (no state is changed)."""
    obj, problem = action_object(text)
    turn = AgentTurn(problem=problem)
    visible = state.visible(agent, gmap.width, gmap.height, view)
    turn.facts, turn.dropped_facts = sanitize_message(obj.get("comm", {}), state.resources, visible)
    cmds = obj.get("cmds", [])
    if isinstance(cmds, list):
        limit = extraction_limit if extraction_limit > 0 else 1
        for item in cmds[:limit]:
            cell = _coord(item)
            inside = cell is not None and 0 <= cell[0] < gmap.width and 0 <= cell[1] < gmap.height
            turn.targets.append((item, cell if inside else None))
        turn.ignored_targets = max(0, len(cmds) - limit)
        if turn.ignored_targets:
            turn.notes.append(f"only the first {limit} extraction targets count")
    else:
        turn.notes.append(f"cmds {_shown(cmds)} is not a list: no extraction")
    start = state.positions[agent]
    turn.path, turn.path_valid, note = read_path(
        obj.get("path", [list(start)]), start, gmap, max_path_len
    )
    if note:
        turn.notes.append(note)
    if obj.get("probe"):
        turn.notes.append("probe is not used in this task")
    return turn


# ----- a turn ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TurnOutcome:
    breakdown: RewardBreakdown
    state: GatherState
    agents: tuple[AgentTurn, AgentTurn]


def _known(
    state: GatherState, agent: int, gmap: GatherMap, view: int
) -> dict[tuple[Coord, int], int]:
    """What `agent` knows before the turn: the facts of its inbox, then what it sees."""
    known: dict[tuple[Coord, int], int] = {}
    for message in state.inboxes[agent]:
        for fact in message:
            key = ((fact.x, fact.z), RESOURCES.index(fact.type))
            known[key] = max(known.get(key, 0), fact.count)
    for cell in state.visible(agent, gmap.width, gmap.height, view):
        counts = state.resources.get(cell)
        if counts:
            for k in range(3):
                if counts[k] > 0:
                    known[(cell, k)] = max(known.get((cell, k), 0), counts[k])
    return known


def _useful(
    gmap: GatherMap, state: GatherState, turns: Sequence[AgentTurn], view: int, scale: float
) -> tuple[int, float]:
    items, bonus = 0, 0.0
    for sender, turn in enumerate(turns):
        if not turn.facts:
            continue
        partner = 1 - sender
        wanted = needs(partner, state.collected, gmap.goal)
        if not wanted:
            continue
        known = _known(state, partner, gmap, view)
        score = 0.0
        for fact in turn.facts:
            k = RESOURCES.index(fact.type)
            if k not in wanted or known.get(((fact.x, fact.z), k), 0) > 0:
                continue
            remaining = gmap.goal[k] - state.collected[k]
            score += min(1.0, float(fact.count) / float(max(1, remaining)))
            items += 1
        bonus += scale * min(1.0, score)
    return items, bonus


def _extract(
    turn: AgentTurn,
    agent: int,
    position: Coord,
    resources: dict[Coord, Counts],
    reach: int,
) -> Counts:
    """Apply one agent's targets to `resources` (changed in place); what it got."""
    got = [0, 0, 0]
    for raw, cell in turn.targets:
        entry: dict[str, Any] = {"target": _shown(raw, 60), "cell": list(cell) if cell else None}
        counts = resources.get(cell) if cell is not None else None
        if cell is None:
            reason = "outside the map" if _coord(raw) else "not an [x, z] coordinate"
        elif manhattan(position, cell) > reach:
            reason = f"farther than {reach} (Manhattan) from {list(position)}"
        elif counts is None:
            reason = "the cell holds nothing"
        elif not any(counts[k] > 0 for k in TOOLS[agent]):
            reason = "nothing there for this agent's tool"
        else:
            reason = None
        if reason is not None or counts is None or cell is None:  # (the last two: for typing)
            turn.extractions.append({**entry, "result": "wasted", "reason": reason})
            continue
        yielded = [counts[k] if k in TOOLS[agent] else 0 for k in range(3)]
        left = tuple(counts[k] - yielded[k] for k in range(3))
        if sum(left) > 0:
            resources[cell] = left  # type: ignore[assignment]
        else:
            del resources[cell]
        for k in range(3):
            got[k] += yielded[k]
        turn.harvested.append(cell)
        turn.extractions.append(
            {
                **entry,
                "result": "valid",
                "reason": None,
                "yield": dict(zip(RESOURCES, yielded, strict=True)),
            }
        )
    return (got[0], got[1], got[2])


def play_turn(
    gmap: GatherMap,
    state: GatherState,
    answers: Sequence[str],
    *,
    scales: RewardScales = SHAPINGS["reference"],
    view: int = VIEW,
    extraction_limit: int = EXTRACTION_LIMIT,
    extraction_range: int = EXTRACTION_RANGE,
    max_path_len: int = MAX_PATH_LEN,
) -> TurnOutcome:
    """Resolve one turn from the two answers (A's first) and score it, as the reference does.

    No guard for a finished episode, as in the reference: the env never plays one."""
    if len(answers) != 2:
        raise ValueError(f"ResourceGathering takes 2 answers (A, B), got {len(answers)}")
    turns = tuple(
        read_agent_action(
            answers[a],
            gmap,
            state,
            a,
            view=view,
            extraction_limit=extraction_limit,
            max_path_len=max_path_len,
        )
        for a in range(2)
    )
    goal = gmap.goal
    before = progress(state.collected, goal)
    zones = [
        work_zone(state.resources, needs(a, state.collected, goal), gmap, extraction_range)
        for a in range(2)
    ]
    positions = list(state.positions)
    origins = list(state.origins)
    move_steps = 0
    for a, turn in enumerate(turns):
        walked = {positions[a], *turn.path} if turn.path_valid else {positions[a]}
        origins[a] = origins[a] | walked
        if turn.path_valid:
            positions[a] = turn.path[-1]
            move_steps += len(turn.path) - 1
    toward = first_entries = 0
    entered = list(state.entered)
    for a in range(2):
        old = zone_distance(state.positions[a], zones[a])
        new = zone_distance(positions[a], zones[a])
        if old is not None and new is not None and new < old:
            toward += old - new
        inside = positions[a] in zones[a]
        if not state.entered[a] and state.positions[a] not in zones[a] and inside:
            first_entries += 1
        entered[a] = state.entered[a] or inside
    resources = dict(state.resources)
    collected = list(state.collected)
    deltas = [0, 0, 0]
    for a, turn in enumerate(turns):
        got = _extract(turn, a, positions[a], resources, extraction_range)
        for k in range(3):
            deltas[k] += got[k]
            collected[k] += got[k]
    inboxes = [list(state.inboxes[0]), list(state.inboxes[1])]
    for a, turn in enumerate(turns):
        if turn.facts:
            inboxes[1 - a].append(turn.facts)
    after = progress(tuple(collected), goal)  # type: ignore[arg-type]
    completed = all(c >= g for c, g in zip(collected, goal, strict=True))
    useful_items, useful_bonus = _useful(gmap, state, turns, view, scales.useful_message)
    valid = sum(len(t.harvested) for t in turns)
    wasted = sum(len(t.targets) for t in turns) - valid
    comm_items = sum(len(t.facts) for t in turns)
    progress_bonus = scales.progress * max(0.0, after - before)
    terminal_bonus = scales.terminal if completed and not state.completed else 0.0
    zone_bonus = scales.work_zone * float(toward)
    entry_bonus = scales.first_entry * float(first_entries)
    move_penalty = scales.move_cost * float(move_steps)
    message_penalty = scales.message_cost * float(comm_items)
    waste_penalty = scales.waste * float(wasted)
    total = (
        progress_bonus
        + terminal_bonus
        + zone_bonus
        + useful_bonus
        + entry_bonus
        - move_penalty
        - message_penalty
        - waste_penalty
    )
    turn_number = state.turn + 1
    next_state = GatherState(
        turn=turn_number,
        max_turns=state.max_turns,
        positions=(positions[0], positions[1]),
        origins=(origins[0], origins[1]),
        inboxes=(tuple(inboxes[0]), tuple(inboxes[1])),
        resources=resources,
        collected=(collected[0], collected[1], collected[2]),
        entered=(entered[0], entered[1]),
        completed=completed,
        terminated=completed or turn_number > state.max_turns,
        wasted_so_far=state.wasted_so_far + wasted,
        useful_so_far=state.useful_so_far + useful_items,
    )
    components = {
        "progress": progress_bonus,
        "terminal": terminal_bonus,
        "work_zone": zone_bonus,
        "useful_messages": useful_bonus,
        "first_entries": entry_bonus,
        "move_cost": 0.0 - move_penalty,
        "message_cost": 0.0 - message_penalty,
        "waste": 0.0 - waste_penalty,
    }
    metrics = {
        "progress_score": after,
        "success": float(completed),
        **{f"collected_{name}": float(c) for name, c in zip(RESOURCES, collected, strict=True)},
        **{f"delta_{name}": float(d) for name, d in zip(RESOURCES, deltas, strict=True)},
        "num_comm_items": float(comm_items),
        "useful_comm_items": float(useful_items),
        "num_valid_extractions": float(valid),
        "wasted_extractions": float(wasted),
        "move_steps": float(move_steps),
        "move_toward_zone_steps": float(toward),
        "first_enter_zone_count": float(first_entries),
        "wasted_extractions_so_far": float(next_state.wasted_so_far),
        "useful_comm_items_so_far": float(next_state.useful_so_far),
    }
    return TurnOutcome(RewardBreakdown(total, components, metrics), next_state, turns)


def max_turn_reward(scales: RewardScales, max_path_len: int = MAX_PATH_LEN) -> float:
    """An upper bound of one turn's team reward: all progress and the terminal bonus at once,
    each agent's zone distance dropping by 2 per move, every useful-message and entry bonus."""
    return (
        scales.progress
        + scales.terminal
        + 2 * 2 * max_path_len * scales.work_zone
        + 2 * scales.useful_message
        + 2 * scales.first_entry
    )
