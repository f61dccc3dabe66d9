"""BridgeBuild's rules: the map, the reading of an action, a turn, and the reference's reward.

A map is rows of `#` (static land), `S` / `T` (start and target anchors, also land), `.`
(water, fillable), `Y` (true pillar) and `N` (fake pillar); a cell is (x, z), z the row. The
team links some S to some T, 4-connected, through anchors, pillars of either kind and placed
blocks (static land links nothing). Everything here is pure: a turn takes a state and the two
answers and returns a new state, the reward with every term named, and what each answer was
read into.

The base reward (the CoMLRL trainer's), per turn, deltas clipped at 0 except the gap's:

    5 * gap closed / gap_max + 3 * components merged / max(1, c0 - 1)
    + 5 * new connected Y / |Y| - 8 * new N-adjacent / |N|
    - 5 * new blocks / placeable cells + 2 [S-T connected this turn]

and the CoTI / BCMAAC shaping (`reward="coti"`) rescales three terms and adds movement and
late-quality terms on top (`CotiShaping`).

Reference quirks kept: pillars, fake ones too, count as free cells of the gap; probes need no
sight, and neither probes nor messages cost anything (messages are not checked); a `max_probe`
above the path's cap is clamped to it (3 reads as 2 on the CoMLRL path); CoTI's shaping is still
paid on a turn after the end, at the last turn's index (weight 0.5); `diag.json` reuses map ids,
so ids are prefixed by their file; the feedback modes show the base reward with the clean and
late bonuses at 0, and `position_feedback` reads a sight of 0 as 3.
"""

from __future__ import annotations

import ast
import copy
import functools
import itertools
import json
import re
import threading
import warnings
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from collabzoo.rewards.breakdown import RewardBreakdown

Coord = tuple[int, int]

MAP_SYMBOLS = "#.STYN"
REFERENCE_BLOCKS = ("oak_planks",)
"""What each agent may place in the reference configs."""
AIR_BLOCKS = ("air", "cave_air", "void_air")
"""Blocks that would clear a cell rather than fill it (none is in the reference palette)."""
VIEW = 3
MAX_COMMANDS_TOTAL = 40
REWARD_MODES = ("comlrl", "coti")
MAX_PROBE = {"comlrl": 2, "coti": 3}
"""The probes per agent per turn on each path; a larger setting is clamped to these."""
ACTION_KEYS = ("comm", "probe", "cmds", "path")

GAP_WEIGHT = 5.0
MERGE_WEIGHT = 3.0
PILLAR_WEIGHT = 5.0
FAKE_WEIGHT = 8.0
BLOCK_WEIGHT = 5.0
CONNECT_BONUS = 2.0
BASE_TERMS = (
    "bonus_gap_st",
    "bonus_cc_merge",
    "bonus_y_connected",
    "penalty_n_adjacent",
    "penalty_block_cost",
    "bonus_terminal_connect",
)
COTI_TERMS = (
    "bonus_terminal_clean",
    "bonus_late_quality_clean",
    "bonus_late_quality_compact",
    "bonus_late_quality_ready",
    "bonus_move_progress",
)

# The reference's token count of a message: word runs, single CJK characters, other symbols.
_TOKEN = re.compile(r"[A-Za-z0-9_]+|[\u4e00-\u9fff]|[^\s]")
_FILL = re.compile(
    r"^/?fill\s+(?P<x1>\S+)\s+(?P<z1>\S+)\s+(?P<x2>\S+)\s+(?P<z2>\S+)\s+(?P<block>\S+)\s*$",
    re.IGNORECASE,
)
_COORD_TEXT = re.compile(r"^\s*\(?\s*(-?\d+)\s*,\s*(-?\d+)\s*\)?\s*$")
_FENCE_TAG = re.compile(r"^\s*[a-zA-Z0-9_-]+\s*\n")
_SCAN_SPECIAL = re.compile(r"[\"'\\{}]")
_REPAIR_SPECIAL = re.compile(r"[\"'\\{}\[\]]")
_QUIET = threading.Lock()
CANDIDATE_BUDGET = 4_000_000
"""Characters of balanced-brace candidates an answer may have tried. The reference's scan is
quadratic in the answer's length; past this (only a pathological answer gets there: a model's
512-token answer makes a few thousand) the later balanced candidates are not tried, and the
reading says so."""


# ----- the map --------------------------------------------------------------------------------
def neighbours(cell: Coord) -> tuple[Coord, ...]:
    x, z = cell
    return ((x - 1, z), (x + 1, z), (x, z - 1), (x, z + 1))


def sorted_cells(cells: Iterable[Coord]) -> list[Coord]:
    """Row by row, then by x: the order every list of cells is shown in."""
    return sorted(set(cells), key=lambda c: (c[1], c[0]))


@dataclass(frozen=True, eq=False)
class BridgeMap:
    """One map. `land` holds the anchors too (the reference's land cells)."""

    task_id: str
    rows: tuple[str, ...]
    source: str = ""
    """The file it was read from (map ids repeat across the reference files)."""

    def __post_init__(self) -> None:
        if not self.rows or not self.rows[0]:
            raise ValueError(f"{self.task_id}: a BridgeBuild map needs at least one row")
        width = len(self.rows[0])
        for z, row in enumerate(self.rows):
            if len(row) != width:
                raise ValueError(f"{self.task_id}: row {z} has {len(row)} cells, not {width}")
            odd = set(row) - set(MAP_SYMBOLS)
            if odd:
                raise ValueError(f"{self.task_id}: map symbols must be '#.STYN', got {sorted(odd)}")
        if not self.anchors_s or not self.anchors_t:
            raise ValueError(f"{self.task_id}: a map needs at least one S and one T")

    def __deepcopy__(self, memo: dict[int, Any]) -> BridgeMap:
        return self  # immutable: env copies share it

    def _cells(self, symbols: str) -> tuple[Coord, ...]:
        return tuple(
            (x, z) for z, row in enumerate(self.rows) for x, ch in enumerate(row) if ch in symbols
        )

    @property
    def width(self) -> int:
        return len(self.rows[0])

    @property
    def height(self) -> int:
        return len(self.rows)

    @cached_property
    def anchors_s(self) -> tuple[Coord, ...]:
        return self._cells("S")

    @cached_property
    def anchors_t(self) -> tuple[Coord, ...]:
        return self._cells("T")

    @cached_property
    def anchors(self) -> frozenset[Coord]:
        return frozenset(self.anchors_s + self.anchors_t)

    @cached_property
    def land(self) -> frozenset[Coord]:
        return frozenset(self._cells("#ST"))

    @cached_property
    def true_pillars(self) -> frozenset[Coord]:
        return frozenset(self._cells("Y"))

    @cached_property
    def fake_pillars(self) -> frozenset[Coord]:
        return frozenset(self._cells("N"))

    @cached_property
    def pillars(self) -> frozenset[Coord]:
        return self.true_pillars | self.fake_pillars

    @cached_property
    def fixed(self) -> frozenset[Coord]:
        """Cells a fill skips: land, anchors and pillars."""
        return self.land | self.pillars

    @cached_property
    def placeable(self) -> int:
        return max(1, self.width * self.height - len(self.land) - len(self.pillars))

    @cached_property
    def gap_max(self) -> int:
        """The gap on the empty map, at least 1 (the gap term's denominator)."""
        g = gap(self, frozenset())
        return 1 if g is None or g <= 0 else g

    @cached_property
    def initial_components(self) -> int:
        return components(self, frozenset())

    def in_bounds(self, cell: Coord) -> bool:
        return 0 <= cell[0] < self.width and 0 <= cell[1] < self.height

    @cached_property
    def free_cells(self) -> frozenset[Coord]:
        """Cells the gap crosses for free before any block: anchors and pillars."""
        return self.anchors | self.pillars

    @cached_property
    def steps(self) -> dict[Coord, tuple[Coord, ...]]:
        """Each cell's in-bounds 4-neighbours that are not static land (anchors included):
        where the gap's search may step."""
        walls = self.land - self.anchors
        return {
            (x, z): tuple(nb for nb in neighbours((x, z)) if self.in_bounds(nb) and nb not in walls)
            for z in range(self.height)
            for x in range(self.width)
        }

    def symbol(self, cell: Coord) -> str:
        return self.rows[cell[1]][cell[0]]


def map_rows(value: Any) -> tuple[str, ...]:
    """A map given as a list of rows or as one text (blank lines dropped)."""
    if isinstance(value, str):
        return tuple(line.strip() for line in value.splitlines() if line.strip())
    if isinstance(value, list):
        return tuple(str(r) for r in value if str(r).strip())
    raise ValueError("a BridgeBuild map must be a list of rows or one text of rows")


def map_from_record(record: Mapping[str, Any], number: int, source: str = "") -> BridgeMap:
    """A map from a reference record: `task_id` (default `bridge_build_NNNN`, 1-based) and
    `map` (or `rows`)."""
    task_id = str(record.get("task_id") or f"bridge_build_{number:04d}")
    rows = map_rows(record["map"] if "map" in record else record.get("rows"))
    return BridgeMap(task_id, rows, source)


# ----- state quantities -----------------------------------------------------------------------
def _flood(starts: Iterable[Coord], passable: frozenset[Coord] | set[Coord]) -> set[Coord]:
    seen = set(starts)
    queue = deque(seen)
    while queue:
        for nb in neighbours(queue.popleft()):
            if nb in passable and nb not in seen:
                seen.add(nb)
                queue.append(nb)
    return seen


def is_connected(bmap: BridgeMap, filled: frozenset[Coord]) -> bool:
    """Some S reaches some T through anchors, pillars (Y or N) and filled cells."""
    passable = bmap.anchors | bmap.pillars | filled
    return bool(_flood(bmap.anchors_s, passable) & set(bmap.anchors_t))


def gap(bmap: BridgeMap, filled: frozenset[Coord]) -> int | None:
    """The fewest extra filled cells that would connect S and T: a 0-1 search in which
    anchors, pillars and filled cells cost 0, water 1, and land is a wall; None if none can."""
    free = bmap.free_cells | filled
    targets = bmap.anchors_t
    steps = bmap.steps
    dist = dict.fromkeys(bmap.anchors_s, 0)
    known = dist.get
    queue = deque(bmap.anchors_s)
    pop, push_front, push_back = queue.popleft, queue.appendleft, queue.append
    while queue:
        cell = pop()
        d = dist[cell]
        if cell in targets:
            return d
        for nb in steps[cell]:
            if nb in free:
                if known(nb, d + 1) > d:
                    dist[nb] = d
                    push_front(nb)
            elif known(nb, d + 2) > d + 1:
                dist[nb] = d + 1
                push_back(nb)
    return None


def components(bmap: BridgeMap, filled: frozenset[Coord]) -> int:
    """Connected groups of the anchors and true pillars, joined through filled cells (fake
    pillars do not join anything here)."""
    focus = bmap.anchors | bmap.true_pillars
    passable = focus | filled
    seen: set[Coord] = set()
    count = 0
    for seed in focus:
        if seed not in seen:
            count += 1
            seen |= _flood([seed], passable)
    return count


def connected_true_pillars(bmap: BridgeMap, filled: frozenset[Coord]) -> int:
    """True pillars reachable from any anchor through anchors, true pillars and filled cells."""
    if not bmap.true_pillars:
        return 0
    reached = _flood(bmap.anchors, bmap.anchors | bmap.true_pillars | filled)
    return len(reached & bmap.true_pillars)


def fake_adjacent(bmap: BridgeMap, filled: frozenset[Coord]) -> int:
    """Fake pillars with a filled 4-neighbour."""
    return sum(1 for n in bmap.fake_pillars if any(nb in filled for nb in neighbours(n)))


def visible_cells(origins: Iterable[Coord], view: int, width: int, height: int) -> set[Coord]:
    """The union of the (2 view + 1)-square windows around every origin, clipped to the map."""
    seen: set[Coord] = set()
    for origin in origins:
        seen |= _window(origin, view, width, height)
    return seen


@functools.lru_cache(maxsize=65536)
def _window(origin: Coord, view: int, width: int, height: int) -> frozenset[Coord]:
    v = max(0, view)
    ox, oz = origin
    return frozenset(
        (x, z)
        for x in range(max(0, ox - v), min(width, ox + v + 1))
        for z in range(max(0, oz - v), min(height, oz + v + 1))
    )


# ----- reading an action ----------------------------------------------------------------------
def strip_fences(text: str) -> str:
    """The first fenced block when the text has at least two fences (its one-word tag line
    dropped), else the stripped text."""
    raw = text.strip()
    if "```" not in raw:
        return raw
    parts = raw.split("```")
    if len(parts) < 3:
        return raw
    return _FENCE_TAG.sub("", parts[1].strip(), count=1).strip()


def outside_strings(
    special: re.Pattern[str], text: str, start: int = 0
) -> Iterator[tuple[int, str]]:
    """Where the characters `special` finds from `start` stand outside quoted strings, and
    which: a `"` or `'` opens a string (not given) that its own quote closes, a backslash in
    one skipping the next character, as the reference's scans read them. `special` must find
    both quotes and the backslash."""
    quote, escaped_at = "", -1
    for match in special.finditer(text, start):
        at, ch = match.start(), match.group()
        if quote:
            if at == escaped_at:
                continue
            if ch == "\\":
                escaped_at = at + 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        else:
            yield at, ch


def repair_brackets(text: str) -> str:
    """Close what is left open and drop closers that match nothing, outside quoted strings
    (the reference's repair, read special character by special character)."""
    kept: list[str] = []
    closers: list[str] = []
    segment = 0
    for at, ch in outside_strings(_REPAIR_SPECIAL, text):
        if ch == "{":
            closers.append("}")
        elif ch == "[":
            closers.append("]")
        elif ch in "}]":
            if closers and closers[-1] == ch:
                closers.pop()
            else:  # a closer that closes nothing is dropped
                kept.append(text[segment:at])
                segment = at + 1
    kept.append(text[segment:])
    kept.extend(reversed(closers))
    return "".join(kept)


# Scan states: outside strings, in a "..." or '...' string, or just after a backslash in one.
_OUT, _IN_D, _IN_S, _ESC_D, _ESC_S = range(5)
_QUOTE_STATE = {'"': _IN_D, "'": _IN_S}
_ESCAPED = {_ESC_D: _IN_D, _ESC_S: _IN_S}


def _next_state(state: int, ch: str) -> int:
    if state == _OUT:
        return _QUOTE_STATE.get(ch, _OUT)
    if state in _ESCAPED:
        return _ESCAPED[state]
    if ch == "\\":
        return _ESC_D if state == _IN_D else _ESC_S
    if ch == ('"' if state == _IN_D else "'"):
        return _OUT
    return state


class _Runs:
    """Scans started at different `{` that are in the same string state from here on: they
    see the same characters alike, so they share one brace counter; each waits for the
    counter to come back to where it started (its target)."""

    def __init__(self, counter: int) -> None:
        self.counter = counter
        self.waiting: dict[int, list[int]] = {}

    def absorb(self, other: _Runs) -> _Runs:
        big, small = (self, other) if len(self.waiting) >= len(other.waiting) else (other, self)
        shift = big.counter - small.counter
        for target, starts in small.waiting.items():
            big.waiting.setdefault(target + shift, []).extend(starts)
        return big


FEW_BRACES = 24
"""Up to this many `{` the scans run one by one (cheaper for an answer's few objects); past it,
in one pass."""


def balanced_ends(raw: str) -> dict[int, int]:
    """For each `{` of the text, where the reference's balanced-brace scan started there ends
    (its matching `}`, quotes and backslash escapes respected), for those that end."""
    if raw.count("{") <= FEW_BRACES:
        ends = {}
        for start in [m.start() for m in _OPEN_BRACE.finditer(raw)]:
            end = scan_end(raw, start)
            if end is not None:
                ends[start] = end
        return ends
    return balanced_ends_one_pass(raw)


_OPEN_BRACE = re.compile(r"\{")


def scan_end(raw: str, start: int) -> int | None:
    """Where the reference's scan from the `{` at `start` ends, read special character by
    special character (after a backslash in a string, the next character is skipped)."""
    depth = 0
    for at, ch in outside_strings(_SCAN_SPECIAL, raw, start):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return at
    return None


def balanced_ends_one_pass(raw: str) -> dict[int, int]:
    """For each `{` of the text, where the reference's balanced-brace scan started there ends
    (its matching `}`, quotes and backslash escapes respected), for those that end: the same
    answer as the reference's scan from every `{`, in one pass over the special characters."""
    ends: dict[int, int] = {}
    groups: dict[int, _Runs] = {}
    last = -2
    for match in _SCAN_SPECIAL.finditer(raw):
        at, ch = match.start(), match.group()
        if at != last + 1:  # ordinary characters in between end every pending escape
            groups = _merged((_ESCAPED.get(s, s), g) for s, g in groups.items())
        last = at
        moved = []
        for state, runs in groups.items():
            if state == _OUT and ch == "{":
                runs.counter += 1
            elif state == _OUT and ch == "}":
                runs.counter -= 1
                for start in runs.waiting.pop(runs.counter, ()):
                    ends[start] = at
            moved.append((_next_state(state, ch), runs))
        groups = _merged(moved)
        if ch == "{":  # a new scan starts here, outside any string, at depth 1
            runs = groups.setdefault(_OUT, _Runs(1))
            runs.waiting.setdefault(runs.counter - 1, []).append(at)
        groups = {s: g for s, g in groups.items() if g.waiting}
    return ends


def _merged(pairs: Iterable[tuple[int, _Runs]]) -> dict[int, _Runs]:
    out: dict[int, _Runs] = {}
    for state, runs in pairs:
        out[state] = out[state].absorb(runs) if state in out else runs
    return out


@dataclass(frozen=True)
class ActionReading:
    """The object an answer was read into, and how it was found."""

    obj: dict[Any, Any]
    found: str
    """"action object" (a dict with some of the four keys), "other object" (the last dict
    without them), or "nothing"."""
    candidates: int
    truncated: bool = False
    """The balanced-brace candidates went past `CANDIDATE_BUDGET` characters."""


def action_candidates(raw: str) -> tuple[list[str], bool]:
    """The texts tried as the action object, in the reference's order, each once: the whole
    text and its repair, the text from the first `{` and its repair, the text from the first
    to the last brace and its repair, then every balanced `{...}` and its repair."""
    out: list[str] = []
    seen: set[str] = set()

    def add(text: str) -> None:
        text = text.strip()
        if text and text not in seen:
            seen.add(text)
            out.append(text)

    def add_with_repair(text: str) -> None:
        # a text seen before had its repair added then (the repair of a repair is itself),
        # and a well-nested text is its own repair
        if text.strip() in seen:
            return
        add(text)
        if not well_nested(text):
            add(repair_brackets(text))

    add_with_repair(raw)
    first, last = raw.find("{"), raw.rfind("}")
    if first >= 0:
        add_with_repair(raw[first:])
    if 0 <= first < last:
        add_with_repair(raw[first : last + 1])
    used, truncated = 0, False
    for start, end in sorted(balanced_ends(raw).items()):
        used += 2 * (end - start + 1)
        if used > CANDIDATE_BUDGET:
            truncated = True
            break
        add_with_repair(raw[start : end + 1])
    return out, truncated


_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', re.DOTALL)
_NESTING = re.compile(r"[\[\]{}]")
_OPENER = {"]": "[", "}": "{"}


def well_nested(text: str) -> bool:
    """Whether `repair_brackets` would leave the text as it is: every string closed and every
    bracket and brace outside them matched in order. (A quick sufficient test: False sends the
    text to the repair.)"""
    bare = _QUOTED.sub("", text)
    if "'" in bare or '"' in bare:  # a string left open: the repair decides
        return False
    stack: list[str] = []
    for mark in _NESTING.findall(bare):
        if mark in "[{":
            stack.append(mark)
        elif not stack or stack.pop() != _OPENER[mark]:
            return False
    return not stack


def read_action(text: str, *, shortcut: bool = True) -> ActionReading:
    """The action object of an answer: each candidate is tried with `json.loads` and with
    `ast.literal_eval`; the dict with the most of the four action keys wins, the later
    candidate on a tie; failing that the last dict without them; failing that nothing.

    `shortcut` (the same reading, sooner): when the whole answer is one JSON object with all
    four keys, each named once in the text, it is the answer: every other candidate is a part
    of the text that starts after the first key's name, so it holds at most three of them."""
    raw = strip_fences(text)
    if not raw:
        return ActionReading({}, "nothing", 0)
    if (
        shortcut
        and raw[0] == "{"
        and raw[-1] == "}"
        and all(raw.count(k) == 1 for k in ACTION_KEYS)
    ):
        try:
            whole = json.loads(raw)
        except ValueError:
            whole = None
        if isinstance(whole, dict) and all(k in whole for k in ACTION_KEYS):
            return ActionReading(whole, "action object", 1)
    candidates, truncated = action_candidates(raw)
    best: tuple[int, int, dict[Any, Any]] | None = None
    plain: dict[Any, Any] | None = None
    # compiling an answer warns of its odd escapes and literals; the lock keeps the threads
    # that step env copies at once from restoring each other's warning filters
    with _QUIET, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for index, candidate in enumerate(candidates):
            # only a text opening with a brace (or a parenthesis, for Python) reads as a dict;
            # where JSON reads it, Python reads the same dict or fails, and on a tie the JSON
            # reading wins anyway: it is enough
            if not candidate.startswith(("{", "(")):
                continue
            for reader in (json.loads, ast.literal_eval):
                try:
                    obj = reader(candidate)
                except Exception:  # anything that is not a literal: not this candidate
                    continue
                if not isinstance(obj, dict):
                    continue
                keys = sum(1 for k in ACTION_KEYS if k in obj)
                if keys == 0:
                    plain = obj
                elif best is None or (keys, index) > (best[0], best[1]):  # json first on a tie
                    best = (keys, index, obj)
                break
    if best is not None:
        return ActionReading(best[2], "action object", len(candidates), truncated)
    if plain is not None:
        return ActionReading(plain, "other object", len(candidates), truncated)
    return ActionReading({}, "nothing", len(candidates), truncated)


def int_token(value: Any) -> int | None:
    """An absolute integer as the reference reads one: `int()` of its text, no `~` or `^`."""
    text = str(value).strip()
    if not text or text[0] in "~^":
        return None
    try:
        return int(text)
    except ValueError:
        return None


def read_coord(value: Any) -> Coord | None:
    """A cell given as [x, z] (extra items ignored), {"x": .., "z": ..} or "x,z"."""
    if isinstance(value, (list, tuple)) and len(value) >= 2:
        x, z = int_token(value[0]), int_token(value[1])
    elif isinstance(value, Mapping):
        x, z = int_token(value.get("x")), int_token(value.get("z"))
    elif isinstance(value, str):
        m = _COORD_TEXT.match(value)
        return (int(m.group(1)), int(m.group(2))) if m else None
    else:
        return None
    return None if x is None or z is None else (x, z)


def count_tokens(text: str) -> int:
    return len(_TOKEN.findall(text.strip()))


def normalize_block(block: str) -> str:
    block = block.strip()
    return block[len("minecraft:") :] if block.startswith("minecraft:") else block


def _short(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class ParsedAction:
    """One agent's answer as read for one turn; `report()` is what `infos["parsed"]` holds."""

    reading: ActionReading
    comm: Any = None
    """The message forwarded to the teammate (a non-empty dict), else None."""
    comm_text: str = ""
    comm_tokens: int = 0
    probes: list[Coord] = field(default_factory=list)
    fills: list[tuple[int, int, int, int, str]] = field(default_factory=list)
    path: list[Coord] = field(default_factory=list)
    path_valid: bool = False
    rejected_fills: list[dict[str, str]] = field(default_factory=list)
    rejected_probes: list[dict[str, str]] = field(default_factory=list)
    path_problem: str | None = None
    comm_problem: str | None = None

    def report(self) -> dict[str, Any]:
        return {
            "found": self.reading.found,
            "truncated": self.reading.truncated,
            "message_tokens": self.comm_tokens,
            "message_problem": self.comm_problem,
            "probes": [list(c) for c in self.probes],
            "rejected_probes": list(self.rejected_probes),
            "accepted": [f"/fill {x1} {z1} {x2} {z2} {b}" for x1, z1, x2, z2, b in self.fills],
            "rejected": list(self.rejected_fills),
            "path": [list(c) for c in self.path] if self.path_valid else [],
            "path_problem": self.path_problem,
        }


def _read_comm(parsed: ParsedAction, raw: Any) -> None:
    if raw is None or raw == {} or raw == [] or raw == "":
        return
    if not isinstance(raw, dict):
        parsed.comm_problem = f"comm must be a JSON object, got {type(raw).__name__}: not sent"
        return
    try:
        text = json.dumps(raw, ensure_ascii=False, separators=(",", ":"))
    except Exception:  # keys or values JSON cannot hold (a set, a tuple key): its repr
        text = str(raw)
    text = text.strip()
    parsed.comm = raw
    if text and text not in ("{}", "[]"):
        parsed.comm_text = text
        parsed.comm_tokens = count_tokens(text)


def _read_probes(parsed: ParsedAction, raw: Any, bmap: BridgeMap, max_probe: int) -> None:
    if raw is None:
        return
    if not isinstance(raw, list):
        parsed.rejected_probes.append(
            {"value": _short(raw), "reason": "probe must be a list of cells"}
        )
        return
    for k, value in enumerate(raw):
        if len(parsed.probes) >= max_probe:
            for rest in raw[k:]:
                parsed.rejected_probes.append(
                    {"value": _short(rest), "reason": f"over the cap of {max_probe} probes"}
                )
            return
        cell = read_coord(value)
        if cell is None:
            parsed.rejected_probes.append({"value": _short(value), "reason": "not a cell"})
        elif not bmap.in_bounds(cell):
            parsed.rejected_probes.append({"value": _short(value), "reason": "outside the map"})
        else:
            parsed.probes.append(cell)


def _read_fills(
    parsed: ParsedAction, raw: Any, bmap: BridgeMap, palette: Sequence[str], max_commands: int
) -> None:
    if raw is None:
        return
    if not isinstance(raw, list):
        parsed.rejected_fills.append(
            {"line": _short(raw), "reason": "cmds must be a list of command strings"}
        )
        return
    allowed = {normalize_block(b) for b in palette}
    for item in raw:
        line = str(item).strip()
        if not line:
            continue
        if len(parsed.fills) >= max_commands:
            reason = f"over the cap of {max_commands} fill commands for this agent"
            parsed.rejected_fills.append({"line": line, "reason": reason})
            continue
        m = _FILL.match(line)
        if m is None:
            reason = "not a fill command: expected '/fill x1 z1 x2 z2 block'"
            parsed.rejected_fills.append({"line": line, "reason": reason})
            continue
        corners = [int_token(m.group(k)) for k in ("x1", "z1", "x2", "z2")]
        if any(c is None for c in corners):
            reason = "corners must be absolute integers (no ~ or ^)"
            parsed.rejected_fills.append({"line": line, "reason": reason})
            continue
        block = normalize_block(m.group("block"))
        if block not in allowed:
            reason = f"block {block!r} is not in this agent's palette {sorted(allowed)}"
            parsed.rejected_fills.append({"line": line, "reason": reason})
            continue
        x1, z1, x2, z2 = corners  # type: ignore[misc]
        if not (bmap.in_bounds((x1, z1)) and bmap.in_bounds((x2, z2))):
            parsed.rejected_fills.append({"line": line, "reason": "a corner lies outside the map"})
            continue
        parsed.fills.append((min(x1, x2), min(z1, z2), max(x1, x2), max(z1, z2), block))


def _read_path(parsed: ParsedAction, raw: Any, bmap: BridgeMap, position: Coord) -> None:
    parsed.path = [position]
    if raw is None or (isinstance(raw, list) and not raw):
        return  # no path: stay (not a mistake)
    if not isinstance(raw, list):
        parsed.path_problem = "path must be a list of cells: not moved"
        return
    cells = []
    for k, value in enumerate(raw):
        cell = read_coord(value)
        if cell is None or not bmap.in_bounds(cell):
            parsed.path_problem = f"step {k} ({_short(value)}) is not a cell of the map: not moved"
            return
        cells.append(cell)
    if cells[0] != position:
        parsed.path_problem = f"the path must start at your position {list(position)}: not moved"
        return
    for a, b in itertools.pairwise(cells):
        if abs(a[0] - b[0]) > 1 or abs(a[1] - b[1]) > 1:
            parsed.path_problem = f"{list(a)} -> {list(b)} jumps more than one cell: not moved"
            return
    parsed.path, parsed.path_valid = cells, True


def parse_action(
    text: str,
    *,
    bmap: BridgeMap,
    position: Coord,
    palette: Sequence[str],
    max_commands: int,
    max_probe: int,
) -> ParsedAction:
    """Read one answer: the action object, then each of its four fields on its own."""
    reading = read_action(text)
    obj = reading.obj
    parsed = ParsedAction(reading)
    _read_comm(parsed, obj.get("comm"))
    _read_probes(parsed, obj.get("probe"), bmap, max_probe)
    _read_fills(parsed, obj.get("cmds"), bmap, palette, max_commands)
    _read_path(parsed, obj.get("path"), bmap, position)
    return parsed


def command_limits(total: int, agents: int) -> list[int]:
    """Fill commands per agent: the total split evenly, the first agent taking the rest."""
    per = max(1, max(1, total) // agents)
    limits = [per] * agents
    limits[0] += max(1, total) % agents
    return limits


# ----- a turn ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class CotiShaping:
    """The CoTI / BCMAAC reward shaping (configs/coti, `reward_shaping`)."""

    n_adjacent_penalty_scale: float = 1.5
    cc_merge_bonus_scale: float = 0.5
    y_connected_bonus_scale: float = 1.0
    terminal_clean_bonus_scale: float = 0.0
    move_progress_bonus_total: float = 2.5
    late_quality_turn3_weight: float = 0.5
    late_quality_turn4_weight: float = 1.0
    late_quality_clean_scale: float = 0.3
    late_quality_compact_scale: float = 0.35
    late_quality_ready_scale: float = 0.2

    def late_weight(self, turn_index: int) -> float:
        if turn_index >= 4:
            return self.late_quality_turn4_weight
        if turn_index >= 3:
            return self.late_quality_turn3_weight
        return 0.0


@dataclass(frozen=True)
class BridgeRules:
    """What a game is played with (the reference's task config)."""

    palettes: tuple[tuple[str, ...], ...] = (REFERENCE_BLOCKS, REFERENCE_BLOCKS)
    max_commands_total: int = MAX_COMMANDS_TOTAL
    max_probe: int = MAX_PROBE["comlrl"]
    view: int = VIEW
    reward: str = "comlrl"
    shaping: CotiShaping = CotiShaping()

    @property
    def max_turn_reward(self) -> float:
        """The most one turn can pay: the whole gap, every merge and Y, the connection (and on
        the CoTI path every step toward the far anchors and the best late-quality bonus)."""
        if self.reward == "comlrl":
            return GAP_WEIGHT + MERGE_WEIGHT + PILLAR_WEIGHT + CONNECT_BONUS
        s = self.shaping
        late = max(s.late_quality_turn3_weight, s.late_quality_turn4_weight) * (
            s.late_quality_clean_scale + s.late_quality_compact_scale + s.late_quality_ready_scale
        )
        return (
            GAP_WEIGHT
            + MERGE_WEIGHT * s.cc_merge_bonus_scale
            + PILLAR_WEIGHT * s.y_connected_bonus_scale
            + CONNECT_BONUS
            + s.terminal_clean_bonus_scale
            + s.move_progress_bonus_total
            + late
        )


@dataclass
class BridgeState:
    """Where a game stands (turn_index is the reference's: 1 before the first turn)."""

    turn_index: int
    max_turns: int
    filled: dict[Coord, str]
    positions: list[Coord]
    origins: list[set[Coord]]
    known: list[dict[Coord, str]]
    inbox: list[list[Any]]
    connected: bool
    terminated: bool
    move_norm: float
    probes_so_far: int = 0
    tokens_so_far: int = 0
    quantities: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    """The gap, components, linked Y and fakes touched of `filled` (kept by the turn that
    computed them, for the next turn's "before"; None once `filled` changes)."""

    def filled_cells(self) -> frozenset[Coord]:
        return frozenset(c for c, b in self.filled.items() if b not in AIR_BLOCKS)


def movement_distances(bmap: BridgeMap, positions: Sequence[Coord]) -> list[int]:
    """CoTI's distances: the first agent to the nearest T, the others to the nearest S."""
    out = []
    for k, (x, z) in enumerate(positions):
        targets = bmap.anchors_t if k == 0 else bmap.anchors_s
        out.append(min((abs(x - tx) + abs(z - tz) for tx, tz in targets), default=0))
    return out


def initial_state(bmap: BridgeMap, max_turns: int, agents: int = 2) -> BridgeState:
    """The first agent on the first S, the second on the first T (row by row, then by x)."""
    s0, t0 = sorted_cells(bmap.anchors_s)[0], sorted_cells(bmap.anchors_t)[0]
    positions = [s0 if k != 1 else t0 for k in range(agents)]
    connected = is_connected(bmap, frozenset())
    return BridgeState(
        turn_index=1,
        max_turns=max(1, max_turns),
        filled={},
        positions=positions,
        origins=[{p} for p in positions],
        known=[{} for _ in positions],
        inbox=[[] for _ in positions],
        connected=connected,
        terminated=connected,
        move_norm=float(max(1, sum(movement_distances(bmap, positions)))),
    )


def clone_state(state: BridgeState) -> BridgeState:
    return replace(
        state,
        filled=dict(state.filled),
        positions=list(state.positions),
        origins=[set(o) for o in state.origins],
        known=[dict(k) for k in state.known],
        inbox=[list(m) for m in state.inbox],
    )


@dataclass(frozen=True)
class TurnOutcome:
    state: BridgeState
    breakdown: RewardBreakdown
    parsed: list[ParsedAction]
    base: Mapping[str, float] = field(default_factory=dict)
    """The base (CoMLRL) terms of the turn, whichever reward is paid: what the reference's
    feedback modes report (its simulator computes only these)."""


def _quantities(bmap: BridgeMap, filled: frozenset[Coord]) -> dict[str, Any]:
    return {
        "gap": gap(bmap, filled),
        "components": components(bmap, filled),
        "connected_y": connected_true_pillars(bmap, filled),
        "fake_adjacent": fake_adjacent(bmap, filled),
    }


def _state_quantities(bmap: BridgeMap, state: BridgeState) -> dict[str, Any]:
    """A state's quantities: those the turn that made it computed, else computed now."""
    if state.quantities is None:
        state.quantities = _quantities(bmap, state.filled_cells())
    return state.quantities


def _metrics(
    bmap: BridgeMap, state: BridgeState, q: Mapping[str, Any], **turn: float
) -> dict[str, float]:
    g = q["gap"]
    closed = bmap.gap_max - (bmap.gap_max if g is None else g)
    metrics = {
        # the leaderboard's, episode-level so far
        "connected": float(state.connected),
        "gap_reduced": closed / bmap.gap_max,
        "fake_pillar_hits": float(q["fake_adjacent"]),
        "probes": float(state.probes_so_far),
        "message_tokens": float(state.tokens_so_far),
        # the reference's, of the state after the turn (gap_st -1: S and T cannot be linked)
        "gap_st": float(-1 if g is None else g),
        "max_gap_st": float(bmap.gap_max),
        "cc_component_count": float(q["components"]),
        "initial_cc_component_count": float(bmap.initial_components),
        "connected_y_count": float(q["connected_y"]),
        "n_adjacent_count": float(q["fake_adjacent"]),
        "y_uncovered_count": float(max(0, len(bmap.true_pillars) - q["connected_y"])),
        "terminated": float(state.terminated),
    }
    metrics.update({k: float(v) for k, v in turn.items()})
    return metrics


def play_turn(
    bmap: BridgeMap, state: BridgeState, answers: Sequence[str], rules: BridgeRules
) -> TurnOutcome:
    """One turn: fills of the first agent then the second, probes, messages into the other's
    inbox, movement, then the reward. After the end (S-T connected or the last turn played)
    a turn changes nothing and the base reward is 0 (CoTI's shaping is still added)."""
    n = len(state.positions)
    limits = command_limits(rules.max_commands_total, n)
    parsed = [
        parse_action(
            answers[k] if k < len(answers) else "",
            bmap=bmap,
            position=state.positions[k],
            palette=rules.palettes[k] if k < len(rules.palettes) else (),
            max_commands=limits[k],
            max_probe=rules.max_probe,
        )
        for k in range(n)
    ]
    before = state.filled_cells()
    if state.terminated:
        nxt = clone_state(state)
        q = _state_quantities(bmap, state)
        base = dict.fromkeys(BASE_TERMS, 0.0)
        counts = dict.fromkeys(
            (
                "new_cc_merge_count",
                "new_connected_y_count",
                "new_adjacent_n_count",
                "newly_placed_block_count",
                "num_valid_probes",
                "comm_tokens",
            ),
            0.0,
        )
        turn_index = state.turn_index  # the frozen state's: it no longer advances
        metrics = _metrics(bmap, nxt, q, turn_index=turn_index, **counts)
        return _finish(bmap, state, nxt, base, metrics, q, turn_index, rules, parsed)

    nxt = clone_state(state)
    for action in parsed:
        for x1, z1, x2, z2, block in action.fills:
            for x in range(x1, x2 + 1):
                for z in range(z1, z2 + 1):
                    if (x, z) in bmap.fixed:
                        continue
                    if block in AIR_BLOCKS:
                        nxt.filled.pop((x, z), None)
                    else:
                        nxt.filled[(x, z)] = block
    for k, action in enumerate(parsed):
        for cell in action.probes:
            nxt.known[k][cell] = (
                "Y" if cell in bmap.true_pillars else "N" if cell in bmap.fake_pillars else "none"
            )
    for k, action in enumerate(parsed):
        if action.comm_text:
            for other in range(n):
                if other != k:
                    nxt.inbox[other].append(copy.deepcopy(action.comm))
    for k, action in enumerate(parsed):
        nxt.origins[k].add(nxt.positions[k])
        if action.path_valid:
            nxt.origins[k].update(action.path)
            nxt.positions[k] = action.path[-1]

    after = nxt.filled_cells()
    p = _state_quantities(bmap, state)
    q = nxt.quantities = _quantities(bmap, after) if after != before else p
    connected = is_connected(bmap, after)
    gap_before = bmap.gap_max if p["gap"] is None else p["gap"]
    gap_after = bmap.gap_max if q["gap"] is None else q["gap"]
    merged = max(0, p["components"] - q["components"])
    new_y = max(0, q["connected_y"] - p["connected_y"])
    new_n = max(0, q["fake_adjacent"] - p["fake_adjacent"])
    new_blocks = len(after - before)
    base = {
        "bonus_gap_st": GAP_WEIGHT * (gap_before - gap_after) / bmap.gap_max,
        "bonus_cc_merge": MERGE_WEIGHT * merged / max(1, bmap.initial_components - 1),
        "bonus_y_connected": new_y / max(1, len(bmap.true_pillars)) * PILLAR_WEIGHT,
        "penalty_n_adjacent": 0.0 - new_n / max(1, len(bmap.fake_pillars)) * FAKE_WEIGHT,
        "penalty_block_cost": 0.0 - new_blocks / bmap.placeable * BLOCK_WEIGHT,
        "bonus_terminal_connect": CONNECT_BONUS if connected and not state.connected else 0.0,
    }
    probes = sum(len(a.probes) for a in parsed)
    tokens = sum(a.comm_tokens for a in parsed)
    nxt.turn_index = state.turn_index + 1
    nxt.connected = connected
    nxt.terminated = connected or nxt.turn_index > nxt.max_turns
    nxt.probes_so_far += probes
    nxt.tokens_so_far += tokens
    metrics = _metrics(
        bmap,
        nxt,
        q,
        turn_index=state.turn_index,
        new_cc_merge_count=merged,
        new_connected_y_count=new_y,
        new_adjacent_n_count=new_n,
        newly_placed_block_count=new_blocks,
        num_valid_probes=probes,
        comm_tokens=tokens,
    )
    return _finish(bmap, state, nxt, base, metrics, q, state.turn_index, rules, parsed)


def _finish(
    bmap: BridgeMap,
    state: BridgeState,
    nxt: BridgeState,
    base: dict[str, float],
    metrics: dict[str, float],
    q: Mapping[str, Any],
    turn_index: int,
    rules: BridgeRules,
    parsed: list[ParsedAction],
) -> TurnOutcome:
    components_ = dict(base)
    if rules.reward == "coti":
        components_ = coti_terms(bmap, state, nxt, base, q, turn_index, rules.shaping)
        distances = movement_distances(bmap, nxt.positions)
        metrics["agent_a_target_distance"] = float(distances[0])
        metrics["agent_b_target_distance"] = float(distances[1] if len(distances) > 1 else 0)
        metrics["target_distance_total"] = float(sum(distances))
        metrics["bonus_late_quality"] = sum(
            components_[k]
            for k in (
                "bonus_late_quality_clean",
                "bonus_late_quality_compact",
                "bonus_late_quality_ready",
            )
        )
    total = sum(components_.values())
    metrics["level_total"] = total
    return TurnOutcome(nxt, RewardBreakdown(total, components_, metrics), parsed, dict(base))


def coti_terms(
    bmap: BridgeMap,
    state: BridgeState,
    nxt: BridgeState,
    base: Mapping[str, float],
    q: Mapping[str, Any],
    turn_index: int,
    s: CotiShaping,
) -> dict[str, float]:
    """The base terms rescaled (merge x0.5, Y x1, N x1.5 in the reference config) and the
    shaping terms: a clean-bridge bonus at the connection (off: scale 0), a late-turn quality
    bonus (turn 3 weight 0.5, turn 4 weight 1: clean, compact, ready) and the movement bonus
    (each agent's step toward the other side's anchors). Paid after the end as well: the
    reference adds it to the frozen turn's 0."""
    out = dict(base)
    out["bonus_cc_merge"] = base["bonus_cc_merge"] * s.cc_merge_bonus_scale
    out["bonus_y_connected"] = base["bonus_y_connected"] * s.y_connected_bonus_scale
    out["penalty_n_adjacent"] = base["penalty_n_adjacent"] * s.n_adjacent_penalty_scale
    total_n = max(1, len(bmap.fake_pillars))
    adjacent = float(q["fake_adjacent"])
    clean_bonus = 0.0
    if s.terminal_clean_bonus_scale > 0.0 and nxt.connected:
        clean_bonus = s.terminal_clean_bonus_scale * max(0.0, 1.0 - adjacent / total_n)
    out["bonus_terminal_clean"] = clean_bonus
    weight = s.late_weight(turn_index)
    late = {"clean": 0.0, "compact": 0.0, "ready": 0.0}
    if weight > 0.0:
        clean = max(0.0, min(1.0, 1.0 - adjacent / total_n))
        c0 = max(1.0, float(bmap.initial_components))
        if c0 <= 2.0:
            compact = 1.0
        else:
            excess = max(0.0, q["components"] - 2.0)
            compact = max(0.0, min(1.0, 1.0 - excess / max(1.0, c0 - 2.0)))
        if q["gap"] is None:
            ready = 1.0 if nxt.connected else 0.0
        else:
            ready = max(0.0, min(1.0, 1.0 - q["gap"] / max(1.0, float(bmap.gap_max))))
        late = {
            "clean": weight * s.late_quality_clean_scale * clean,
            "compact": weight * s.late_quality_compact_scale * compact,
            "ready": weight * s.late_quality_ready_scale * ready,
        }
    for name, value in late.items():
        out[f"bonus_late_quality_{name}"] = value
    move = 0.0
    if s.move_progress_bonus_total > 0.0 and state.move_norm > 0.0:
        before = sum(movement_distances(bmap, state.positions))
        after = sum(movement_distances(bmap, nxt.positions))
        move = s.move_progress_bonus_total * (before - after) / state.move_norm
    out["bonus_move_progress"] = move
    return out


# ----- what an agent sees ---------------------------------------------------------------------
def agent_view(
    bmap: BridgeMap, state: BridgeState, agent: int, view: int, *, copy_messages: bool = True
) -> dict[str, Any]:
    """What one agent knows: the reference observation's fields, cells as [x, z] lists (the
    messages shared with the state unless `copy_messages`: a prompt only writes them out)."""
    seen = visible_cells(state.origins[agent], view, bmap.width, bmap.height)
    filled = state.filled_cells()
    anchors = [{"coord": list(c), "kind": "S"} for c in sorted_cells(set(bmap.anchors_s) & seen)]
    anchors += [{"coord": list(c), "kind": "T"} for c in sorted_cells(set(bmap.anchors_t) & seen)]
    known = state.known[agent]
    return {
        "turn_index": state.turn_index,
        "max_turns": state.max_turns,
        "current_pos": list(state.positions[agent]),
        "visible_anchors": anchors,
        "visible_land_coords": [list(c) for c in sorted_cells(bmap.land & seen)],
        "visible_filled_coords": [list(c) for c in sorted_cells(filled & seen)],
        "visible_p_candidates": [list(c) for c in sorted_cells(bmap.pillars & seen)],
        "known_probe_results": [{"coord": list(c), "type": known[c]} for c in sorted_cells(known)],
        "received_messages": (
            copy.deepcopy(state.inbox[agent]) if copy_messages else list(state.inbox[agent])
        ),
        "connected": state.connected,
        "terminated": state.terminated,
    }
