"""Deterministic procedural houses for the HouseBuild game.

The HouseBuild benchmark ships a small data file of target houses. This module makes
houses in the same format from a seed, so that the game can run offline, with no data
file, and with more (and more varied) targets than the file holds.

A house is a dict::

    {
        "task_id": "generated_house_0000",
        "inventory": {"A": "air", "B": "stone_bricks", ...},   # always INVENTORY
        "count": {"A": 120, "B": 54, ...},                     # cells per character
        "bbox": {"from": [0, 0, 0], "to": [X - 1, Y - 1, Z - 1]},
        "target_spec": {
            "type": "y_layers",
            "size": [X, Y, Z],
            "layers": [{"y": 0, "rows": [row_z0, row_z1, ...]}, ...],
        },
        "roof": "gable_x",                                     # one of ROOF_KINDS
        "features": {"door": [[x, y, z], ...], "windows": [[x, y, z], ...], ...},
    }

Each layer holds one row per z and each row one character per x. ``roof`` and
``features`` are extra keys that the reference houses lack; they describe what was built
so that tests and docs can point at the door and the windows.

Every house has a floor, hollow walls of white concrete with obsidian corner pillars, a
door two cells high, at least one window and a roof of one of :data:`ROOF_KINDS`.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

AIR = "A"
BRICKS = "B"
CONCRETE = "C"
PLANKS = "D"
OBSIDIAN = "O"
STAIRS = "S"

INVENTORY: dict[str, str] = {
    AIR: "air",
    BRICKS: "stone_bricks",
    CONCRETE: "white_concrete",
    PLANKS: "planks",
    OBSIDIAN: "obsidian",
    STAIRS: "stone_stairs",
}

#: Roof shapes. ``flat``: a stone-brick slab with a stone-stairs rim (sometimes with a
#: parapet on top). ``stepped``: a pyramid that shrinks by one cell on every side per
#: layer. ``gable_x`` / ``gable_z``: a pitched roof whose ridge runs along x / along z,
#: stairs on the sloping edges and bricks inside.
ROOF_KINDS: tuple[str, ...] = ("flat", "stepped", "gable_x", "gable_z")

#: ``planks``: two planks; ``doorway``: an air gap; ``half_door``: planks below, air above.
DOOR_STYLES: tuple[str, ...] = ("planks", "doorway", "half_door")

#: Wall sides, named by the coordinate that is fixed along them.
SIDES: tuple[str, ...] = ("z_min", "z_max", "x_min", "x_max")

MIN_SIZE = 5
MAX_SIZE = 9
MIN_WALL_HEIGHT = 3
MAX_WALL_HEIGHT = 5

_MAX_ATTEMPTS = 1000

Grid = list[list[list[str]]]  # grid[y][z][x]


@dataclass(frozen=True)
class _Box:
    """The walls' footprint: inclusive x and z ranges inside the bounding box."""

    x0: int
    x1: int
    z0: int
    z1: int

    def side_cells(self, side: str) -> list[tuple[int, int]]:
        """The (x, z) cells of one wall between its two corner pillars, in order."""
        if side == "z_min":
            return [(x, self.z0) for x in range(self.x0 + 1, self.x1)]
        if side == "z_max":
            return [(x, self.z1) for x in range(self.x0 + 1, self.x1)]
        if side == "x_min":
            return [(self.x0, z) for z in range(self.z0 + 1, self.z1)]
        if side == "x_max":
            return [(self.x1, z) for z in range(self.z0 + 1, self.z1)]
        raise ValueError(f"unknown wall side {side!r}; expected one of {SIDES}")


def _check_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    return value


def generate_houses(count: int = 24, seed: int = 0) -> list[dict]:
    """Return ``count`` distinct houses, the same ones every time for a given ``seed``.

    House ``i`` depends only on ``seed``, ``i`` and the houses before it (a duplicate of
    an earlier house is redrawn), so ``generate_houses(5, s) == generate_houses(24, s)[:5]``.
    The global ``random`` state is neither used nor changed.
    """
    count = _check_int("count", count)
    seed = _check_int("seed", seed)
    if count < 1:
        raise ValueError(f"count must be at least 1, got {count}")
    houses: list[dict] = []
    seen: set[tuple] = set()
    for index in range(count):
        for attempt in range(_MAX_ATTEMPTS):
            rng = random.Random(f"collabzoo-house:{seed}:{index}:{attempt}")
            house = _generate_house(rng, index)
            key = _layers_key(house)
            if key not in seen:
                break
        else:  # pragma: no cover - the design space is far larger than any sane count
            raise RuntimeError(f"could not find a new house for index {index}")
        seen.add(key)
        houses.append(house)
    return houses


def _layers_key(house: dict) -> tuple:
    spec = house["target_spec"]
    return (tuple(spec["size"]), tuple(tuple(layer["rows"]) for layer in spec["layers"]))


def _generate_house(rng: random.Random, index: int) -> dict:
    # Every four consecutive houses show all four roof kinds.
    roof = ROOF_KINDS[index % len(ROOF_KINDS)]
    size_x = rng.randint(MIN_SIZE, MAX_SIZE)
    size_z = rng.randint(MIN_SIZE, MAX_SIZE)
    box = _choose_box(rng, size_x, size_z)
    roof_plan = _plan_roof(rng, roof, size_x, size_z)
    tallest_walls = min(MAX_WALL_HEIGHT, MAX_SIZE - 1 - len(roof_plan))
    wall_height = rng.randint(MIN_WALL_HEIGHT, tallest_walls)
    size_y = 1 + wall_height + len(roof_plan)

    grid: Grid = [[[AIR] * size_x for _ in range(size_z)] for _ in range(size_y)]
    _build_floor(grid, box, rng.choice((CONCRETE, BRICKS)))
    _build_walls(grid, box, wall_height)
    door = _build_door(grid, box, rng)
    windows, framed = _build_windows(grid, box, wall_height, door["cells"], rng)
    _build_roof(grid, roof_plan, wall_height + 1)

    return _house_dict(
        grid,
        task_id=f"generated_house_{index:04d}",
        roof=roof,
        features={
            "door": door["cells"],
            "door_side": door["side"],
            "door_style": door["style"],
            "windows": windows,
            "windows_framed": framed,
        },
    )


def _choose_box(rng: random.Random, size_x: int, size_z: int) -> _Box:
    """Walls fill the footprint, or stand one cell in from it so the roof overhangs."""
    inset_x = 1 if size_x >= 7 and rng.random() < 0.4 else 0
    inset_z = 1 if size_z >= 7 and rng.random() < 0.4 else 0
    return _Box(inset_x, size_x - 1 - inset_x, inset_z, size_z - 1 - inset_z)


def _build_floor(grid: Grid, box: _Box, material: str) -> None:
    for z in range(box.z0, box.z1 + 1):
        for x in range(box.x0, box.x1 + 1):
            grid[0][z][x] = material


def _build_walls(grid: Grid, box: _Box, wall_height: int) -> None:
    corners = {(box.x0, box.z0), (box.x0, box.z1), (box.x1, box.z0), (box.x1, box.z1)}
    for y in range(1, wall_height + 1):
        for z in range(box.z0, box.z1 + 1):
            for x in range(box.x0, box.x1 + 1):
                if (x, z) in corners:
                    grid[y][z][x] = OBSIDIAN
                elif x in (box.x0, box.x1) or z in (box.z0, box.z1):
                    grid[y][z][x] = CONCRETE


def _build_door(grid: Grid, box: _Box, rng: random.Random) -> dict:
    """A door one or two cells wide and two cells high, on a random wall."""
    side = rng.choice(SIDES)
    wall = box.side_cells(side)
    width = rng.choice((1, 2))
    start = rng.randrange(len(wall) - width + 1)
    style = rng.choice(DOOR_STYLES)
    lower, upper = {"planks": (PLANKS, PLANKS), "doorway": (AIR, AIR)}.get(style, (PLANKS, AIR))
    cells: list[list[int]] = []
    for y, block in ((1, lower), (2, upper)):
        for x, z in wall[start : start + width]:
            grid[y][z][x] = block
            cells.append([x, y, z])
    return {"side": side, "style": style, "cells": cells}


def _build_windows(
    grid: Grid,
    box: _Box,
    wall_height: int,
    door_cells: list[list[int]],
    rng: random.Random,
) -> tuple[list[list[int]], bool]:
    """Cut one to four air holes in the walls, kept clear of the door and of each other.

    A window starts at y=2 and is one cell high, or two where the walls are tall enough
    to keep a row of wall above it. Sometimes every window gets an obsidian frame. Returns
    the window cells and whether they are framed.
    """
    door_columns = {(x, z) for x, _, z in door_cells}
    candidates = [
        (side, i, cell)
        for side in SIDES
        for i, cell in enumerate(box.side_cells(side))
        if cell not in door_columns
    ]
    rng.shuffle(candidates)
    wanted = rng.randint(1, 4)
    height = rng.choice((1, 2)) if wall_height >= 4 else 1
    framed = rng.random() < 0.4
    # Keep at least one cell of plain wall between a window (or its jambs) and the door
    # or another window (or its jambs); distances are counted along the walls.
    door_gap, window_gap = (3, 4) if framed else (2, 2)
    taken: list[tuple[int, int]] = []
    for _, _, (x, z) in candidates:
        if len(taken) == wanted:
            break
        if all(abs(x - ox) + abs(z - oz) >= door_gap for ox, oz in door_columns) and all(
            abs(x - ox) + abs(z - oz) >= window_gap for ox, oz in taken
        ):
            taken.append((x, z))
    windows: list[list[int]] = []
    for x, z in taken:
        for y in range(2, 2 + height):
            grid[y][z][x] = AIR
            windows.append([x, y, z])
    if framed:
        for x, z in taken:
            _frame_window(grid, box, x, z, height)
    return windows, framed


def _frame_window(grid: Grid, box: _Box, x: int, z: int, height: int) -> None:
    """Turn the concrete next to a window (a sill, a lintel and two jambs) into obsidian."""
    along_x = z in (box.z0, box.z1)
    dx, dz = (1, 0) if along_x else (0, 1)
    frame = [(x, 1, z), (x, height + 2, z)]
    for y in range(2, height + 2):
        frame += [(x - dx, y, z - dz), (x + dx, y, z + dz)]
    for fx, fy, fz in frame:
        if grid[fy][fz][fx] == CONCRETE:
            grid[fy][fz][fx] = OBSIDIAN


RoofLayer = list[list[str]]  # layer[z][x]


def _plan_roof(rng: random.Random, kind: str, size_x: int, size_z: int) -> list[RoofLayer]:
    """The roof's layers, lowest first, each covering the whole footprint."""
    if kind == "flat":
        return _flat_roof(rng, size_x, size_z)
    if kind == "stepped":
        return _stepped_roof(rng, size_x, size_z)
    if kind == "gable_x":
        return _gable_roof(size_x, size_z, ridge_along_x=True)
    if kind == "gable_z":
        return _gable_roof(size_x, size_z, ridge_along_x=False)
    raise ValueError(f"unknown roof kind {kind!r}; expected one of {ROOF_KINDS}")


def _rim_layer(size_x: int, size_z: int, inset: int, inside: str) -> RoofLayer:
    """Stairs around the edge of a rectangle ``inset`` cells in, ``inside`` within it.

    A rectangle at most two cells across has no inside; it is all bricks (a ridge cap).
    """
    layer = [[AIR] * size_x for _ in range(size_z)]
    x0, x1, z0, z1 = inset, size_x - 1 - inset, inset, size_z - 1 - inset
    narrow = x1 - x0 < 2 or z1 - z0 < 2
    for z in range(z0, z1 + 1):
        for x in range(x0, x1 + 1):
            if narrow:
                layer[z][x] = BRICKS
            elif x in (x0, x1) or z in (z0, z1):
                layer[z][x] = STAIRS
            else:
                layer[z][x] = inside
    return layer


def _flat_roof(rng: random.Random, size_x: int, size_z: int) -> list[RoofLayer]:
    slab = _rim_layer(size_x, size_z, 0, BRICKS)
    if rng.random() < 0.5:
        return [slab]
    parapet = _rim_layer(size_x, size_z, 0, AIR)
    solid = [[BRICKS] * size_x for _ in range(size_z)]
    return [solid, parapet]


def _stepped_roof(rng: random.Random, size_x: int, size_z: int) -> list[RoofLayer]:
    full_height = (min(size_x, size_z) + 1) // 2
    height = rng.randint(2, full_height)  # below full height the top is flat
    return [_rim_layer(size_x, size_z, k, BRICKS) for k in range(height)]


def _gable_roof(size_x: int, size_z: int, *, ridge_along_x: bool) -> list[RoofLayer]:
    """Each layer is one cell narrower on both sloping sides than the one below."""
    span = size_z if ridge_along_x else size_x
    layers: list[RoofLayer] = []
    for k in range((span + 1) // 2):
        low, high = k, span - 1 - k
        layer = [[AIR] * size_x for _ in range(size_z)]
        for z in range(size_z):
            for x in range(size_x):
                across = z if ridge_along_x else x
                if low <= across <= high:
                    edge = across in (low, high) and high - low >= 2
                    layer[z][x] = STAIRS if edge else BRICKS
        layers.append(layer)
    return layers


def _build_roof(grid: Grid, plan: list[RoofLayer], base_y: int) -> None:
    for k, layer in enumerate(plan):
        grid[base_y + k] = [list(row) for row in layer]


def _house_dict(grid: Grid, *, task_id: str, roof: str, features: dict) -> dict:
    size_y, size_z, size_x = len(grid), len(grid[0]), len(grid[0][0])
    counts = Counter(block for layer in grid for row in layer for block in row)
    return {
        "task_id": task_id,
        "inventory": dict(INVENTORY),
        "count": {char: counts.get(char, 0) for char in INVENTORY},
        "bbox": {"from": [0, 0, 0], "to": [size_x - 1, size_y - 1, size_z - 1]},
        "target_spec": {
            "type": "y_layers",
            "size": [size_x, size_y, size_z],
            "layers": [
                {"y": y, "rows": ["".join(row) for row in layer]} for y, layer in enumerate(grid)
            ],
        },
        "roof": roof,
        "features": features,
    }


def house_picture(house: dict) -> str:
    """A text picture of ``house``: one block of rows per layer, highest layer first.

    Within a block each line is one z row (z = 0 first) and each character one x cell,
    written with the house's inventory characters.
    """
    spec = house["target_spec"]
    size_x, size_y, size_z = spec["size"]
    title = house.get("task_id", "house")
    extra = f", roof {house['roof']}" if "roof" in house else ""
    legend = ", ".join(f"{char}={name}" for char, name in house.get("inventory", {}).items())
    lines = [f"{title}: X={size_x} Y={size_y} Z={size_z}{extra} (x across, z down)"]
    if legend:
        lines.append(f"legend: {legend}")
    for layer in sorted(spec["layers"], key=lambda item: item["y"], reverse=True):
        lines.append(f"y={layer['y']}")
        lines.extend(f"  {row}" for row in layer["rows"])
    return "\n".join(lines)
