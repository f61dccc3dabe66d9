"""The best bridge of a map whose pillar types are known: what BridgeBuild's privileged oracle
builds.

The reward pays, once S and T are linked, the whole gap, one merge per group of anchors and
true pillars joined, and every true pillar linked to an anchor; it charges every block and
every fake pillar given a placed neighbour. So the plan fills only water with no fake pillar
beside it, and joins every group of anchors and true pillars it can reach that way to S and
T: a Steiner tree over those groups, grown greedily (the nearest group next, ties in row
order) and then pruned of blocks it can do without. A fill is worth far less than a pillar
(5 / placeable cells against 5 / true pillars), so reaching every group is always worth it.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass

from collabzoo.tasks.bridgebuild import rewards as rules
from collabzoo.tasks.bridgebuild.rewards import BridgeMap, Coord


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
