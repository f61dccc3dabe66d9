"""The building games' scripted teams: the oracle reaches the maximum on every target; the naive
team (both builders fill every target cell with their first block) shows what a policy that
ignores the collaboration rules earns. Each reads only its observation (the role prompt must
be in view: memory "full", the default).
"""

from __future__ import annotations

import math
import re

_ROLE = re.compile(r"You are the (\w+) of (\d+) builders")
_ORDINALS = ("first", "second", "third", "fourth")
_TARGET_ROW = re.compile(r"^y=(\d+): ([#.]+)$", re.MULTILINE)
_OWN_BLOCKS = re.compile(r"^Your blocks: (.+?) \(and air", re.MULTILINE)
_BOX = re.compile(r"\((\d+), (\d+), (\d+), (\d+), (\d+), (\d+) ([\w:]+)\)")
_PLAN_LINE = re.compile(r"^y=\d+: \(.*$", re.MULTILINE)


def _role(observation: str) -> tuple[int, int]:
    """(my index in play order, number of builders), read from the role prompt."""
    match = _ROLE.search(observation)
    if match is None or match.group(1) not in _ORDINALS:
        raise ValueError("no role line ('You are the first of 2 builders') in the observation")
    return _ORDINALS.index(match.group(1)), int(match.group(2))


def _strbuild_target(observation: str) -> list[tuple[int, int]]:
    """Target cells (x, y) from the first target picture in the observation."""
    cells, seen_rows = [], set()
    for match in _TARGET_ROW.finditer(observation):
        y = int(match.group(1))
        if y in seen_rows:  # a later copy of the picture (history): keep the first
            break
        seen_rows.add(y)
        cells += [(x, y) for x, ch in enumerate(match.group(2)) if ch == "#"]
    if not cells:
        raise ValueError("no StrBuild target picture ('y=4: #...') in the observation")
    return cells


def _own_blocks(observation: str) -> list[str]:
    match = _OWN_BLOCKS.search(observation)
    if match is None:
        raise ValueError("no 'Your blocks: ...' line in the observation")
    return [b.strip() for b in match.group(1).split(",")]


def strbuild_oracle(observation: str) -> str:
    """Checkerboard split: cell (x, y) belongs to builder (x + y) mod n, so touching cells are
    always different builders' (different textures); each builder cycles through its blocks so
    that every one of them is used."""
    me, n = _role(observation)
    blocks = _own_blocks(observation)
    mine = [(x, y) for x, y in _strbuild_target(observation) if (x + y) % n == me]
    return "\n".join(
        f"/setblock {x} {y} 0 {blocks[k % len(blocks)]}" for k, (x, y) in enumerate(mine)
    )


def strbuild_naive(observation: str) -> str:
    """Every target cell with this builder's first block."""
    block = _own_blocks(observation)[0]
    return "\n".join(f"/setblock {x} {y} 0 {block}" for x, y in _strbuild_target(observation))


def _house_plan(observation: str) -> list[tuple[int, int, int, str]]:
    """Target cells (x, y, z, block) from the first house plan in the observation."""
    cells: list[tuple[int, int, int, str]] = []
    seen_layers: set[str] = set()
    for line in _PLAN_LINE.findall(observation):
        layer = line.split(":", 1)[0]
        if layer in seen_layers:
            break
        seen_layers.add(layer)
        for m in _BOX.finditer(line):
            x1, y1, z1, x2, y2, z2 = (int(v) for v in m.groups()[:6])
            cells += [
                (x, y, z, m.group(7))
                for y in range(y1, y2 + 1)
                for z in range(z1, z2 + 1)
                for x in range(x1, x2 + 1)
            ]
    if not cells:
        raise ValueError("no house plan ('y=0: (x1, y, z1, x2, y, z2 block)') in the observation")
    return cells


def _row_fills(cells: list[tuple[int, int, int, str]]) -> list[str]:
    """Fill commands for cells, merging runs along x of the same block in one (y, z) row."""
    commands: list[str] = []
    run: list[tuple[int, int, int, str]] = []
    for cell in sorted(cells, key=lambda c: (c[1], c[2], c[0])):
        if run and (cell[1:] != run[-1][1:] or cell[0] != run[-1][0] + 1):
            x1, y, z, block = run[0]
            commands.append(f"/fill {x1} {y} {z} {run[-1][0]} {y} {z} {block}")
            run = []
        run.append(cell)
    if run:
        x1, y, z, block = run[0]
        commands.append(f"/fill {x1} {y} {z} {run[-1][0]} {y} {z} {block}")
    return commands


def housebuild_oracle(observation: str) -> str:
    """Share each block kind evenly in plan order (each share is within the ~75% allowance),
    build it with merged row fills, and kill the spiders."""
    me, n = _role(observation)
    by_block: dict[str, list[tuple[int, int, int, str]]] = {}
    for cell in _house_plan(observation):
        by_block.setdefault(cell[3], []).append(cell)
    mine = []
    for cells in by_block.values():
        share = math.ceil(len(cells) / n)
        mine += cells[me * share : (me + 1) * share]
    return "\n".join([*_row_fills(mine), "/kill"])


def housebuild_naive(observation: str) -> str:
    """Every non-air cell of the house with the first block named in the plan; no /kill."""
    cells = _house_plan(observation)
    first = cells[0][3]
    return "\n".join(_row_fills([(x, y, z, first) for x, y, z, _ in cells]))
