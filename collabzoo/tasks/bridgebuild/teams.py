"""BridgeBuild's scripted teams. The heuristic and naive teams read only their own observation
(the newest prompt in it); the oracle is privileged: built from the env (`env_oracle`), it
knows every map's pillar types.

The heuristic team is sound: it never places a block beside a pillar whose type it does not know
to be true (its own probes or its partner's reports), so it never touches a fake pillar,
whatever the hidden types are. On turn 1 each worker walks a loop that brings the whole map into
sight and probes the pillars nearest its start (which anyone who knows the layout can work out).
From turn 2 on both derive the same meeting cell M from the layout alone: a water cell with no
pillar beside it, halfway along the least risky S-T route (the pillars probed on turn 1 counted
as free). Each worker plans its half (A from S to M, B from T to M) with the types it knows:
unknown pillars cost a probe, more so near a known fake (fakes cluster), known fakes are never
touched. A half that touches no unknown pillar is built at once; otherwise the worker probes the
unknown pillars on it, nearest its anchor first, and gives spare probes to its partner's half
from M's end. On the last turn (what the partner probes then reaches it too late) a worker also
builds its partner's half where it knows every pillar beside it, or else a whole S-T route it
knows to be safe, if there is one. Every message carries the sender's probe results. Walking on
to the far anchor earns CoTI's walking bonus.

The naive team fills straight lines blind: worker A the column below its S, worker B the whole
row above its T, on turn 1, fake pillars or not.

The oracle finds its map among the env's by what its prompt shows and builds the map's best
bridge (`plan_bridge`: every group of anchors and true pillars it can reach joined,
no fake pillar touched) as text actions the env reads like any other answer. On its first turn
each worker walks to the far anchor (CoTI's walking bonus); on every turn but the last it
probes its half of the pillars the bridge touches (probes are how a worker comes to know a
pillar), and it tells its partner what it has found. On the last turn the two fill the whole
bridge, linking S and T: that turn pays the reward's most less the blocks. On the CoTI path,
which pays a late bonus for a compact bridge close to done, they first fill all of it but one
cell on the turn before the last. With one turn they fill it all at once.
"""

from __future__ import annotations

import heapq
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from collabzoo.tasks.bridgebuild import rewards as rules
from collabzoo.tasks.bridgebuild.envs import HEADER, LETTERS
from collabzoo.tasks.bridgebuild.rewards import BridgeMap

Coord = tuple[int, int]
_TURN = re.compile(r"worker ([AB]) of (\d+), turn (\d+) of (\d+)\.")
_SIZE = re.compile(r"The map is (\d+) x (\d+) cells")
_SIGHT = re.compile(r"^- Sight: (\d+) cells", re.MULTILINE)
_PROBES = re.compile(r"^- probe: at most (\d+) cells", re.MULTILINE)
_FILLS = re.compile(r"^- cmds: at most (\d+) fill commands", re.MULTILINE)
_BLOCKS = re.compile(r"^Blocks you may place: (.*)$", re.MULTILINE)
FIELDS = {
    "position": "Position",
    "anchors": "Anchors in sight",
    "land": "Land in sight",
    "filled": "Placed blocks in sight",
    "pillars": "Candidate pillars in sight (type hidden)",
    "probed": "Your probe results",
}
RISK = 1_000
"""The cost of touching one pillar of unknown type (a route's blocks count first by these)."""
FAKE = 1_000_000
"""The cost of touching a known fake pillar."""


@dataclass
class View:
    """What one prompt says."""

    me: int
    turn: int
    turns: int
    width: int
    height: int
    sight: int
    max_probe: int
    max_fills: int
    block: str
    position: Coord
    anchors: dict[str, set[Coord]]
    land: set[Coord]
    filled: set[Coord]
    pillars: set[Coord]
    types: dict[Coord, str] = field(default_factory=dict)
    """Pillar types known: own probes, then what the teammate reported."""
    own: dict[Coord, str] = field(default_factory=dict)


def _newest_prompt(observation: str) -> str:
    at = observation.rfind(HEADER)
    if at < 0:
        raise ValueError("no BridgeBuild prompt ('BridgeBuild - worker A of 2, ...') in view")
    return observation[at:]


def _field(prompt: str, label: str) -> Any:
    match = re.search(rf"^- {re.escape(label)}: (.*)$", prompt, re.MULTILINE)
    if match is None:
        raise ValueError(f"no '{label}:' line in the BridgeBuild prompt")
    return json.loads(match.group(1))


def _cells(values: Iterable[Any]) -> set[Coord]:
    return {(int(v[0]), int(v[1])) for v in values}


def read_view(observation: str) -> View:
    prompt = _newest_prompt(observation)
    turn, size = _TURN.search(prompt), _SIZE.search(prompt)
    numbers = [_SIGHT.search(prompt), _PROBES.search(prompt), _FILLS.search(prompt)]
    blocks = _BLOCKS.search(prompt)
    if turn is None or size is None or blocks is None or any(m is None for m in numbers):
        raise ValueError("a BridgeBuild prompt without its turn, size, sight or budget lines")
    me = LETTERS.index(turn.group(1))
    other = LETTERS[1 - me]
    anchors: dict[str, set[Coord]] = {"S": set(), "T": set()}
    for anchor in _field(prompt, FIELDS["anchors"]):
        anchors[anchor["kind"]].add((int(anchor["coord"][0]), int(anchor["coord"][1])))
    view = View(
        me=me,
        turn=int(turn.group(3)),
        turns=int(turn.group(4)),
        width=int(size.group(1)),
        height=int(size.group(2)),
        sight=int(numbers[0].group(1)),  # type: ignore[union-attr]
        max_probe=int(numbers[1].group(1)),  # type: ignore[union-attr]
        max_fills=int(numbers[2].group(1)),  # type: ignore[union-attr]
        block=json.loads(blocks.group(1))[0],
        position=tuple(_field(prompt, FIELDS["position"])),  # type: ignore[arg-type]
        anchors=anchors,
        land=_cells(_field(prompt, FIELDS["land"])),
        filled=_cells(_field(prompt, FIELDS["filled"])),
        pillars=_cells(_field(prompt, FIELDS["pillars"])),
    )
    for result in _field(prompt, FIELDS["probed"]):
        cell = (int(result["coord"][0]), int(result["coord"][1]))
        view.own[cell] = result["type"]
    for message in _field(prompt, f"Messages from worker {other}, oldest first"):
        facts = message.get("discovered_pillars", []) if isinstance(message, dict) else []
        for fact in facts:
            if isinstance(fact, dict) and fact.get("type") in ("Y", "N"):
                view.types[(int(fact["x"]), int(fact["z"]))] = fact["type"]
    view.types.update({c: t for c, t in view.own.items() if t in ("Y", "N")})
    return view


def _neighbours(cell: Coord) -> tuple[Coord, ...]:
    x, z = cell
    return ((x - 1, z), (x + 1, z), (x, z - 1), (x, z + 1))


def _walk(start: Coord, goal: Coord) -> list[Coord]:
    """King steps from start to goal (start excluded)."""
    (x, z), out = start, []
    while (x, z) != goal:
        x += (goal[0] > x) - (goal[0] < x)
        z += (goal[1] > z) - (goal[1] < z)
        out.append((x, z))
    return out


def _stops(size: int, sight: int) -> list[int]:
    """Rows (or columns) to walk along so that every row is within sight of one."""
    stops, at = [], min(sight, size - 1)
    while True:
        stops.append(at)
        if at + sight >= size - 1:
            return stops
        at = min(at + 2 * sight + 1, max(size - 1 - sight, 0))


def exploration_path(view: View) -> list[Coord]:
    """A loop that sees every cell, from my side of the map to the far anchor."""
    rows = _stops(view.height, view.sight)
    columns = _stops(view.width, view.sight)
    mine = view.anchors["S" if view.me == 0 else "T"]
    far_side = view.position[1] < view.height / 2
    if not far_side:
        rows = rows[::-1]
    waypoints = []
    for k, z in enumerate(rows):
        waypoints += [(x, z) for x in (columns if k % 2 == 0 else columns[::-1])]
    # the far anchor: the map's other edge, straight across from my own anchor
    anchor = min(mine) if mine else view.position
    target = (anchor[0], view.height - 1 if far_side else 0)
    path = [view.position]
    for point in [*waypoints, target]:
        path += _walk(path[-1], point)
    return path


def _layout(view: View) -> tuple[set[Coord], set[Coord]]:
    """(cells a route may use, water cells) of the map as seen."""
    cells = {(x, z) for x in range(view.width) for z in range(view.height)}
    anchors = view.anchors["S"] | view.anchors["T"]
    water = cells - view.land - view.pillars
    return water | view.pillars | anchors, water


def _route(
    view: View, starts: set[Coord], goals: set[Coord], cost_of: Any, usable: set[Coord]
) -> list[Coord]:
    """The cheapest route from any start to any goal (ties: row then column order)."""
    best = {s: 0 for s in starts}
    heap = [(0, s[1], s[0], s) for s in sorted(starts)]
    back: dict[Coord, Coord] = {}
    while heap:
        cost, _, _, cell = heapq.heappop(heap)
        if cost > best.get(cell, cost):
            continue
        if cell in goals:
            route = [cell]
            while route[-1] in back:
                route.append(back[route[-1]])
            return route[::-1]
        for nb in _neighbours(cell):
            if nb not in usable or nb in starts:
                continue
            step = cost + cost_of(nb)
            if step < best.get(nb, step + 1):
                best[nb] = step
                back[nb] = cell
                heapq.heappush(heap, (step, nb[1], nb[0], nb))
    return []


def start_cell(view: View, side: int) -> Coord:
    """Where a worker starts: A on the first S, B on the first T (row by row, then by x)."""
    return min(view.anchors["S" if side == 0 else "T"], key=lambda c: (c[1], c[0]))


def first_probes(view: View, side: int) -> list[Coord]:
    """A worker's turn-1 probes: the pillars nearest its start, among those in its first sight
    (what it could see then). Anyone who knows the layout can work them out."""
    sx, sz = start_cell(view, side)
    seen = [p for p in view.pillars if max(abs(p[0] - sx), abs(p[1] - sz)) <= view.sight]
    return sorted(seen, key=lambda p: (abs(p[0] - sx) + abs(p[1] - sz), p[1], p[0]))[
        : view.max_probe
    ]


def meeting_cell(view: View) -> Coord | None:
    """The cell both workers meet at, from the layout alone (both see the same layout)."""
    usable, water = _layout(view)

    probed_first = set(first_probes(view, 0)) | set(first_probes(view, 1))

    def risk(cell: Coord) -> int:
        if cell in view.pillars:
            return 0 if cell in probed_first else 2 * RISK
        if cell in water:
            return 1 + RISK // 20 * sum(nb in view.pillars for nb in _neighbours(cell))
        return 0

    route = _route(view, view.anchors["S"], view.anchors["T"], risk, usable)
    fills = [c for c in route if c in water]
    if not fills:
        return None
    safe = [c for c in fills if not any(nb in view.pillars for nb in _neighbours(c))]
    middle = (len(fills) - 1) / 2
    pool = safe or fills
    return min(pool, key=lambda c: (abs(fills.index(c) - middle), fills.index(c)))


def half_route(view: View, goal: Coord, side: int | None = None) -> tuple[list[Coord], list[Coord]]:
    """A worker's half as I know the pillars (mine by default; `side` 0 for A's, from S, 1
    for B's, from T): (water cells to fill, in order from that anchor; pillars of unknown
    type it touches, in the same order)."""
    usable, water = _layout(view)
    fake = {p for p, t in view.types.items() if t == "N"}
    # an unknown pillar costs a probe, more so near known fakes (fakes come in clusters on the
    # shipped maps): a route likely to need fewer probes and fewer detours comes first
    doubt = {
        p: RISK * (1 + sum(max(abs(p[0] - n[0]), abs(p[1] - n[1])) <= 2 for n in fake))
        for p in view.pillars
        if p not in view.types
    }

    def cost(cell: Coord) -> int:
        if cell in view.pillars:
            return FAKE if cell in fake else doubt.get(cell, 0)
        if cell in view.filled or cell not in water:
            return 0
        beside = _neighbours(cell)
        return 1 + FAKE * sum(nb in fake for nb in beside) + sum(doubt.get(nb, 0) for nb in beside)

    side = view.me if side is None else side
    starts = view.anchors["S" if side == 0 else "T"]
    route = _route(view, starts, {goal}, cost, usable)
    to_fill = [c for c in route if c in water and c not in view.filled]
    touched: list[Coord] = []
    for cell in route:
        around = [cell] if cell in view.pillars else []
        around += [nb for nb in _neighbours(cell) if cell in to_fill]
        touched += [p for p in around if p in doubt and p not in touched]
    return to_fill, touched


def safe_to_fill(view: View, cells: list[Coord]) -> bool:
    """Every cell is water whose pillar neighbours are all known true pillars: filling them
    touches no fake pillar, whatever the unprobed pillars turn out to be."""
    return all(
        cell not in view.pillars
        and all(view.types.get(nb) == "Y" for nb in _neighbours(cell) if nb in view.pillars)
        for cell in cells
    )


def safe_route(view: View) -> list[Coord]:
    """The water cells still to fill on the cheapest S-T route that touches only pillars
    known to be true (none if there is no such route)."""
    usable, water = _layout(view)
    allowed = {
        c
        for c in usable
        if (c not in water and c not in view.pillars)
        or (view.types.get(c) == "Y" if c in view.pillars else safe_to_fill(view, [c]))
    }

    def cost(cell: Coord) -> int:
        return 1 if cell in water and cell not in view.filled else 0

    route = _route(view, view.anchors["S"], view.anchors["T"], cost, allowed)
    return [c for c in route if c in water and c not in view.filled]


def _fill_commands(cells: list[Coord], block: str, cap: int) -> list[str]:
    """Fill commands for cells, runs along a row or a column merged."""
    commands: list[str] = []
    todo = sorted(cells, key=lambda c: (c[1], c[0]))
    done: set[Coord] = set()
    for cell in todo:
        if cell in done:
            continue
        x, z = cell
        row = [cell]
        while (row[-1][0] + 1, z) in todo and (row[-1][0] + 1, z) not in done:
            row.append((row[-1][0] + 1, z))
        column = [cell]
        while (x, column[-1][1] + 1) in todo and (x, column[-1][1] + 1) not in done:
            column.append((x, column[-1][1] + 1))
        run = row if len(row) >= len(column) else column
        done.update(run)
        commands.append(f"/fill {run[0][0]} {run[0][1]} {run[-1][0]} {run[-1][1]} {block}")
    return commands[:cap]


def _answer(comm: dict, probe: list[Coord], cmds: list[str], path: list[Coord]) -> str:
    return json.dumps(
        {
            "comm": comm,
            "probe": [list(c) for c in probe],
            "cmds": cmds,
            "path": [list(c) for c in path],
        },
        separators=(",", ":"),
    )


def bridgebuild_heuristic(observation: str) -> str:
    """The sound observation-only team (see the module's docstring)."""
    view = read_view(observation)
    if view.turn == 1:
        return _answer({}, first_probes(view, view.me), [], exploration_path(view))
    if not view.anchors["S"] or not view.anchors["T"]:  # a broken walk left the map unseen
        return _answer({}, [], [], exploration_path(view))
    goal = meeting_cell(view)
    if goal is None:  # nothing to build: S and T already touch
        return _answer({}, [], [], [view.position])
    to_fill, touched = half_route(view, goal)
    own_safe = not touched and safe_to_fill(view, to_fill)
    cells = to_fill if own_safe else []
    probes = touched[: view.max_probe]
    # spare probes go to the partner's half, from the meeting cell's end (the partner probes
    # from its anchor's end)
    theirs, their_touched = half_route(view, goal, 1 - view.me)
    probes += [p for p in their_touched[::-1] if p not in probes][: view.max_probe - len(probes)]
    if view.turn >= view.turns:  # what the partner probes now reaches me too late: I build
        if not their_touched and safe_to_fill(view, theirs):  # its half where I know it safe
            cells += [c for c in theirs if c not in cells]
        if not (own_safe and cells):  # or a whole route I know safe, if there is one
            cells += [c for c in safe_route(view) if c not in cells]
    cmds = _fill_commands(cells, view.block, view.max_fills)
    facts = [
        {"x": x, "z": z, "type": t, "source": "self_probe"}
        for (x, z), t in sorted(view.own.items(), key=lambda item: (item[0][1], item[0][0]))
        if t in ("Y", "N")
    ]
    comm = {"discovered_pillars": facts, "meeting_point": list(goal)} if facts else {}
    far = view.anchors["T" if view.me == 0 else "S"]
    walk = [view.position]
    if far and view.position not in far:  # CoTI pays for the walk toward the far anchor
        nearest = min(
            far, key=lambda a: (abs(a[0] - view.position[0]) + abs(a[1] - view.position[1]), a)
        )
        walk += _walk(view.position, nearest)
    return _answer(comm, probes, cmds, walk)


def bridgebuild_naive(observation: str) -> str:
    """Straight lines blind: worker A the column below its S, worker B the row above its T."""
    view = read_view(observation)
    if view.me == 0:
        x, z = min(view.anchors["S"], key=lambda c: (c[1], c[0]))
        cmd = f"/fill {x} {z + 1} {x} {view.height - 2} {view.block}"
    else:
        _, z = min(view.anchors["T"], key=lambda c: (c[1], c[0]))
        cmd = f"/fill 0 {z - 1} {view.width - 1} {z - 1} {view.block}"
    return _answer({}, [], [cmd], [view.position])


# ----- the privileged oracle --------------------------------------------------------------------

# The best bridge of a map whose pillar types are known.
#
# The reward pays, once S and T are linked, the whole gap, one merge per group of anchors and
# true pillars joined, and every true pillar linked to an anchor; it charges every block and
# every fake pillar given a placed neighbour. So the plan fills only water with no fake pillar
# beside it, and joins every group of anchors and true pillars it can reach that way to S and
# T: a Steiner tree over those groups, grown greedily (the nearest group next, ties in row
# order) and then pruned of blocks it can do without. A fill is worth far less than a pillar
# (5 / placeable cells against 5 / true pillars), so reaching every group is always worth it.


@dataclass(frozen=True)
class BridgePlan:
    """What to fill, and the one cell whose fill links S and T last."""

    fills: tuple[Coord, ...]
    """Water cells to fill, in row order."""
    closing: Coord | None
    """A cell of `fills` without which S and T stay apart (None: no fill links them)."""
    pillars: tuple[Coord, ...]
    """The pillars the bridge touches (on it or beside a fill), nearest S first: what the
    workers probe."""


def safe_water(bmap: BridgeMap) -> frozenset[Coord]:
    """Water cells that may be filled without giving a fake pillar a placed neighbour."""
    fakes = bmap.fake_pillars
    cells = ((x, z) for x in range(bmap.width) for z in range(bmap.height))
    return frozenset(
        c
        for c in cells
        if c not in bmap.fixed and not any(nb in fakes for nb in rules.neighbours(c))
    )


def _groups(cells: Iterable[Coord], passable: frozenset[Coord]) -> list[frozenset[Coord]]:
    """The groups `cells` fall into, joined through `passable`."""
    out: list[frozenset[Coord]] = []
    placed: set[Coord] = set()
    for seed in rules.sorted_cells(cells):
        if seed not in placed:
            group = frozenset(_flood([seed], passable))
            placed |= group
            out.append(group)
    return out


def _flood(starts: Iterable[Coord], passable: frozenset[Coord]) -> set[Coord]:
    seen, todo = set(starts), list(starts)
    while todo:
        for nb in rules.neighbours(todo.pop()):
            if nb in passable and nb not in seen:
                seen.add(nb)
                todo.append(nb)
    return seen


def _cheapest_path(
    tree: set[Coord], goals: set[Coord], usable: frozenset[Coord], water: frozenset[Coord]
) -> list[Coord]:
    """The fewest water cells joining the tree to any goal cell (ties: row, then column)."""
    best = dict.fromkeys(tree, 0)
    heap = [(0, c[1], c[0], c) for c in rules.sorted_cells(tree)]
    back: dict[Coord, Coord] = {}
    while heap:
        cost, _, _, cell = heapq.heappop(heap)
        if cost > best[cell]:
            continue
        if cell in goals:
            path = [cell]
            while path[-1] in back:
                path.append(back[path[-1]])
            return path
        for nb in rules.neighbours(cell):
            if nb not in usable:
                continue
            step = cost + (nb in water)
            if step < best.get(nb, step + 1):
                best[nb] = step
                back[nb] = cell
                heapq.heappush(heap, (step, nb[1], nb[0], nb))
    return []


def plan_bridge(bmap: BridgeMap) -> BridgePlan:
    """The plan for a map (see the module's docstring). Where S and T can be linked only
    through a fake pillar, the bridge passes it (pillars of either type link S and T) and the
    true pillars are joined as before."""
    water = safe_water(bmap)
    focus = bmap.anchors | bmap.true_pillars
    usable = focus | water
    reach = _flood(bmap.anchors_s, usable)
    if not reach & set(bmap.anchors_t):  # link through fake pillars, touching none
        usable = usable | bmap.fake_pillars
    groups = _groups(focus, focus)
    tree = set(next(g for g in groups if g & set(bmap.anchors_s)))
    fills: set[Coord] = set()

    def attach(goal_groups: list[frozenset[Coord]]) -> bool:
        goals = set().union(*goal_groups) if goal_groups else set()
        path = _cheapest_path(tree, goals, frozenset(usable), water)
        if not path:
            return False
        for cell in path:
            tree.add(cell)
            if cell in water:
                fills.add(cell)
        for group in goal_groups:
            if tree & group:
                tree.update(group)
        return True

    # T first (the link pays most), then the nearest group left, until none can be reached
    attach([g for g in groups if g & set(bmap.anchors_t) and not g <= tree])
    while True:
        left = [g for g in groups if not g & tree]
        if not left or not attach(left):
            break
    fills = _pruned(bmap, fills)
    return BridgePlan(
        fills=tuple(rules.sorted_cells(fills)),
        closing=_closing_cell(bmap, fills),
        pillars=_touched(bmap, fills),
    )


def _score(bmap: BridgeMap, fills: frozenset[Coord]) -> tuple[bool, int, int]:
    return (
        rules.is_connected(bmap, fills),
        -rules.components(bmap, fills),
        rules.connected_true_pillars(bmap, fills),
    )


def _pruned(bmap: BridgeMap, fills: set[Coord]) -> set[Coord]:
    """The fills without those whose loss keeps the link, the groups and the linked pillars."""
    kept = set(fills)
    target = _score(bmap, frozenset(kept))
    for cell in rules.sorted_cells(fills)[::-1]:
        trial = frozenset(kept - {cell})
        if _score(bmap, trial) == target:
            kept.discard(cell)
    return kept


def _closing_cell(bmap: BridgeMap, fills: set[Coord]) -> Coord | None:
    """A fill whose absence leaves S and T apart and the fewest groups (two at best: the
    compact, nearly ready bridge CoTI's late bonus pays for)."""
    apart = [
        c for c in rules.sorted_cells(fills) if not rules.is_connected(bmap, frozenset(fills - {c}))
    ]
    if not apart:
        return None
    return min(apart, key=lambda c: rules.components(bmap, frozenset(fills - {c})))


def _touched(bmap: BridgeMap, fills: set[Coord]) -> tuple[Coord, ...]:
    touched = {nb for c in fills for nb in rules.neighbours(c) if nb in bmap.pillars}
    start = rules.sorted_cells(bmap.anchors_s)[0]
    return tuple(
        sorted(touched, key=lambda p: (abs(p[0] - start[0]) + abs(p[1] - start[1]), p[1], p[0]))
    )


def _window(cell: Coord, sight: int, width: int, height: int) -> set[Coord]:
    x, z = cell
    return {
        (a, b)
        for a in range(max(0, x - sight), min(width, x + sight + 1))
        for b in range(max(0, z - sight), min(height, z + sight + 1))
    }


def shows(bmap: BridgeMap, view: View) -> bool:
    """Whether a prompt could come from this map: its size, everything it lists in sight, and
    all of the map within sight of where the worker stands."""
    if (bmap.width, bmap.height) != (view.width, view.height):
        return False
    listed = {
        "S": view.anchors["S"],
        "T": view.anchors["T"],
        "land": view.land,
        "pillars": view.pillars,
    }
    actual = {
        "S": set(bmap.anchors_s),
        "T": set(bmap.anchors_t),
        "land": set(bmap.land),
        "pillars": set(bmap.pillars),
    }
    here = _window(view.position, view.sight, view.width, view.height)
    known_right = all(
        (t == "Y") == (c in bmap.true_pillars) for c, t in view.own.items() if t in ("Y", "N")
    )
    return known_right and all(
        listed[k] <= actual[k] and actual[k] & here <= listed[k] for k in listed
    )


class BridgeOracle:
    """The privileged oracle of the maps it is given: an ordinary text policy (prompt in,
    answer out) that knows each map's pillar types. It finds the map a prompt comes from among
    them (`shows`); where several fit what the prompt shows and they differ, it takes
    `current()`'s map (the env's map now) if that is one of them. With `late_bonus` (the
    CoTI path's reward) it builds all but the closing cell on the turn before the last."""

    def __init__(
        self, maps: Iterable[BridgeMap], current: Any = None, *, late_bonus: bool = False
    ) -> None:
        self.maps = list(maps)
        if not self.maps:
            raise ValueError("the BridgeBuild oracle needs at least one map")
        self.current = current
        self.late_bonus = late_bonus
        self._plans: dict[tuple[str, ...], BridgePlan] = {}

    def find_map(self, view: View) -> BridgeMap:
        fits = [m for m in self.maps if shows(m, view)]
        layouts = {m.rows for m in fits}
        if len(layouts) == 1:
            return fits[0]
        now = self.current() if self.current is not None else None
        if now is not None and any(now.rows == m.rows for m in fits):
            return now
        if not fits:
            raise ValueError(
                f"the prompt shows none of the oracle's {len(self.maps)} maps (a "
                f"{view.width} x {view.height} map): build it from the env that wrote the prompt"
            )
        ids = ", ".join(m.task_id for m in fits)
        raise ValueError(f"the prompt fits several maps ({ids}); pass the env playing it")

    def plan(self, bmap: BridgeMap) -> BridgePlan:
        if bmap.rows not in self._plans:
            self._plans[bmap.rows] = plan_bridge(bmap)
        return self._plans[bmap.rows]

    def __call__(self, observation: str) -> str:
        view = read_view(observation)
        bmap = self.find_map(view)
        plan = self.plan(bmap)
        probed = set(view.own)
        share = [p for p in plan.pillars[view.me :: 2] if p not in probed]
        probes = share[: view.max_probe] if view.turn < view.turns else []
        if view.turn >= view.turns:
            cells = list(plan.fills)
        elif self.late_bonus and view.turn == view.turns - 1:
            cells = [c for c in plan.fills if c != plan.closing]
        else:
            cells = []
        cmds = _rectangles(bmap, cells, view.block)
        # worker A sends the first half of the commands, worker B the rest
        half = (len(cmds) + 1) // 2
        mine = cmds[:half] if view.me == 0 else cmds[half:]
        if len(mine) > view.max_fills:
            raise ValueError(
                f"the bridge needs {len(cmds)} fill commands, over the team's "
                f"{2 * view.max_fills}: raise max_commands"
            )
        facts = [
            {"x": x, "z": z, "type": t, "source": "self_probe"}
            for (x, z), t in sorted(view.own.items(), key=lambda item: (item[0][1], item[0][0]))
            if t in ("Y", "N")
        ]
        comm: dict[str, Any] = {"discovered_pillars": facts} if facts else {}
        far = bmap.anchors_t if view.me == 0 else bmap.anchors_s
        nearest = min(
            far, key=lambda a: (abs(a[0] - view.position[0]) + abs(a[1] - view.position[1]), a)
        )
        walk = [view.position, *_walk(view.position, nearest)]
        return _answer(comm, probes, mine, walk)


def _rectangles(bmap: BridgeMap, cells: list[Coord], block: str) -> list[str]:
    """Fill commands for the cells: runs along a row, a run passing over land or pillars (which
    a fill skips) but no other water."""
    todo = set(cells)
    commands = []
    for z in range(bmap.height):
        start = end = None
        for x in range(bmap.width + 1):
            cell = (x, z)
            if cell in todo:
                start = x if start is None else start
                end = x
            elif start is not None and (x >= bmap.width or cell not in bmap.fixed):
                commands.append(f"/fill {start} {z} {end} {z} {block}")
                start = None
    return commands


def env_oracle(env: Any) -> BridgeOracle:
    """The oracle of every map of the env it plays (`TaskSpec.env_teams`), building the way
    the env's reward pays best."""
    return BridgeOracle(
        env.items("all"),
        lambda: getattr(env, "item", None),
        late_bonus=getattr(env, "reward", "comlrl") == "coti",
    )
