"""Tests for the procedural HouseBuild houses (and the shape of the reference houses)."""

from __future__ import annotations

import itertools
import json
import random
from collections import Counter
from pathlib import Path

import pytest

from collabzoo.tasks.building.envs.house_generator import (
    INVENTORY,
    ROOF_KINDS,
    generate_houses,
    house_picture,
)

REFERENCE_INVENTORY = {
    "A": "air",
    "B": "stone_bricks",
    "C": "white_concrete",
    "D": "planks",
    "O": "obsidian",
    "S": "stone_stairs",
}

HOUSES = generate_houses()


def load_reference_houses(path: Path) -> list[dict]:
    return json.loads(path.read_text())


def layer_key(house: dict) -> tuple:
    spec = house["target_spec"]
    return (tuple(spec["size"]), tuple(tuple(layer["rows"]) for layer in spec["layers"]))


def cell(house: dict, x: int, y: int, z: int) -> str:
    return house["target_spec"]["layers"][y]["rows"][z][x]


def assert_well_formed(house: dict, *, bbox_required: bool = True) -> None:
    """The format shared by the reference houses and the generated ones."""
    assert isinstance(house["task_id"], str) and house["task_id"]
    assert house["inventory"] == REFERENCE_INVENTORY
    spec = house["target_spec"]
    assert spec["type"] == "y_layers"
    size_x, size_y, size_z = spec["size"]
    assert min(size_x, size_y, size_z) >= 1
    layers = spec["layers"]
    assert [layer["y"] for layer in layers] == list(range(size_y))
    for layer in layers:
        assert len(layer["rows"]) == size_z
        for row in layer["rows"]:
            assert len(row) == size_x
            assert set(row) <= set(house["inventory"])
    bbox = house["bbox"]
    if bbox_required or bbox is not None:
        assert bbox == {"from": [0, 0, 0], "to": [size_x - 1, size_y - 1, size_z - 1]}
    cells = Counter(char for layer in layers for row in layer["rows"] for char in row)
    assert set(house["count"]) == set(house["inventory"])
    for char, number in house["count"].items():
        assert number == cells.get(char, 0), char
    assert sum(house["count"].values()) == size_x * size_y * size_z


def wall_box(house: dict) -> tuple[int, int, int, int]:
    """(x0, x1, z0, z1) of the floor, which is also the walls' footprint."""
    floor = house["target_spec"]["layers"][0]["rows"]
    xs = [x for row in floor for x, char in enumerate(row) if char != "A"]
    zs = [z for z, row in enumerate(floor) if row.strip("A")]
    return min(xs), max(xs), min(zs), max(zs)


def wall_top(house: dict) -> int:
    layers = house["target_spec"]["layers"]
    return max(
        y for y, layer in enumerate(layers) if any(set(r) & {"C", "O"} for r in layer["rows"])
    )


def on_wall(house: dict, x: int, z: int) -> bool:
    x0, x1, z0, z1 = wall_box(house)
    corner = x in (x0, x1) and z in (z0, z1)
    inside = x0 <= x <= x1 and z0 <= z <= z1
    return inside and not corner and (x in (x0, x1) or z in (z0, z1))


# --- generation as a whole -------------------------------------------------------------


def test_default_count_and_ids() -> None:
    assert len(HOUSES) == 24
    assert [h["task_id"] for h in HOUSES] == [f"generated_house_{i:04d}" for i in range(24)]


@pytest.mark.parametrize("seed", [0, 1, 7, -3, 2**40])
def test_houses_are_distinct(seed: int) -> None:
    houses = HOUSES if seed == 0 else generate_houses(24, seed)
    assert len({layer_key(h) for h in houses}) == len(houses)


def test_deterministic() -> None:
    assert generate_houses(24, 0) == HOUSES
    assert generate_houses(10, 5) == generate_houses(10, 5)


def test_seed_matters() -> None:
    other = generate_houses(24, 1)
    assert [layer_key(h) for h in other] != [layer_key(h) for h in HOUSES]


@pytest.mark.parametrize("seed", [0, 3, 99])
def test_prefix_stable(seed: int) -> None:
    full = generate_houses(24, seed)
    for n in (1, 5, 13):
        assert generate_houses(n, seed) == full[:n]
    assert generate_houses(40, seed)[:24] == full


def test_global_random_state_is_neither_used_nor_changed() -> None:
    random.seed(1234)
    before = random.getstate()
    first = generate_houses(6, 2)
    assert random.getstate() == before
    random.seed(999)
    assert generate_houses(6, 2) == first


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"count": 0}, "at least 1"),
        ({"count": -4}, "at least 1"),
        ({"count": 2.0}, "count must be an int"),
        ({"count": "3"}, "count must be an int"),
        ({"count": True}, "count must be an int"),
        ({"seed": "0"}, "seed must be an int"),
        ({"seed": 1.5}, "seed must be an int"),
        ({"seed": None}, "seed must be an int"),
    ],
)
def test_bad_arguments(kwargs: dict, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        generate_houses(**kwargs)


# --- each house ------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_generated_houses_are_well_formed(seed: int) -> None:
    for house in HOUSES if seed == 0 else generate_houses(24, seed):
        assert_well_formed(house)
        assert house["inventory"] == INVENTORY


def test_sizes_vary_within_range() -> None:
    sizes = [h["target_spec"]["size"] for h in HOUSES]
    for axis in range(3):
        values = {size[axis] for size in sizes}
        assert values <= set(range(5, 10)), (axis, values)
        assert len(values) >= 3, (axis, values)


def test_roof_kinds() -> None:
    assert len(ROOF_KINDS) >= 3
    kinds = [h["roof"] for h in HOUSES]
    assert set(kinds) <= set(ROOF_KINDS)
    assert len(set(kinds)) >= 3


@pytest.mark.parametrize("index", range(24))
def test_floor_walls_and_hollow_inside(index: int) -> None:
    house = HOUSES[index]
    x0, x1, z0, z1 = wall_box(house)
    assert x1 - x0 >= 4 and z1 - z0 >= 4
    floor = house["target_spec"]["layers"][0]["rows"]
    for z in range(z0, z1 + 1):
        assert set(floor[z][x0 : x1 + 1]) <= {"B", "C"}
    top = wall_top(house)
    assert top >= 3
    for y in range(1, top + 1):
        for x in (x0, x1):
            for z in (z0, z1):
                assert cell(house, x, y, z) == "O", "corner pillars are obsidian"
        for x in range(x0 + 1, x1):
            for z in range(z0 + 1, z1):
                assert cell(house, x, y, z) == "A", "the inside is hollow"
    # The top row of the walls is unbroken above doors and windows.
    for x in range(x0, x1 + 1):
        for z in range(z0, z1 + 1):
            if on_wall(house, x, z):
                assert cell(house, x, top, z) in {"C", "O"}
    assert house["count"]["C"] > 0


@pytest.mark.parametrize("index", range(24))
def test_door_and_windows_are_in_the_walls(index: int) -> None:
    house = HOUSES[index]
    features = house["features"]
    door = features["door"]
    windows = features["windows"]
    assert len(door) in (2, 4)
    assert {y for _, y, _ in door} == {1, 2}
    assert windows, "every house has at least one window"
    assert not {tuple(c) for c in door} & {tuple(c) for c in windows}
    for x, y, z in door:
        assert on_wall(house, x, z)
        assert cell(house, x, y, z) in {"D", "A"}
    styles = {"planks": ("D", "D"), "doorway": ("A", "A"), "half_door": ("D", "A")}
    for x, y, z in door:
        assert cell(house, x, y, z) == styles[features["door_style"]][y - 1]
    for x, y, z in windows:
        assert on_wall(house, x, z)
        assert y >= 2
        assert cell(house, x, y, z) == "A"
        assert cell(house, x, 1, z) != "A", "a window has wall below it"
        assert cell(house, x, y + 1, z) in {"A", "C", "O"}


def test_doors_and_windows_vary() -> None:
    sides = {h["features"]["door_side"] for h in HOUSES}
    styles = {h["features"]["door_style"] for h in HOUSES}
    door_spots = {tuple(h["features"]["door"][0]) for h in HOUSES}
    window_counts = {len(h["features"]["windows"]) for h in HOUSES}
    framed = {h["features"]["windows_framed"] for h in HOUSES}
    assert len(sides) >= 3
    assert {"planks", "doorway"} <= styles
    assert len(door_spots) >= 10
    assert len(window_counts) >= 3
    assert framed == {True, False}


def roof_layers(house: dict) -> list[list[str]]:
    layers = house["target_spec"]["layers"]
    return [layer["rows"] for layer in layers[wall_top(house) + 1 :]]


@pytest.mark.parametrize("index", range(24))
def test_roof_shape(index: int) -> None:
    house = HOUSES[index]
    roof = roof_layers(house)
    assert roof, "every house has a roof"
    x0, x1, z0, z1 = wall_box(house)
    for z in range(z0, z1 + 1):
        assert "A" not in roof[0][z][x0 : x1 + 1], "the roof covers the walls"
    for rows in roof:
        assert set("".join(rows)) <= {"A", "B", "S"}
        assert set("".join(rows)) != {"A"}
    kind = house["roof"]
    if kind == "flat":
        assert len(roof) <= 2
    elif kind == "gable_x":
        assert all(len(set(row)) == 1 for rows in roof for row in rows)
        assert len(roof) >= 2
    elif kind == "gable_z":
        assert all(len({row[x] for row in rows}) == 1 for rows in roof for x in range(len(rows[0])))
        assert len(roof) >= 2
    elif kind == "stepped":
        filled = [sum(char != "A" for row in rows for char in row) for rows in roof]
        assert len(roof) >= 2
        assert all(a > b for a, b in itertools.pairwise(filled)), filled
    else:  # pragma: no cover
        pytest.fail(f"unknown roof kind {kind}")


def test_house_picture() -> None:
    house = HOUSES[3]
    picture = house_picture(house)
    lines = picture.splitlines()
    _, size_y, size_z = house["target_spec"]["size"]
    labels = [line for line in lines if line.startswith("y=")]
    assert labels == [f"y={y}" for y in reversed(range(size_y))]
    top = lines.index(f"y={size_y - 1}")
    assert [line.strip() for line in lines[top + 1 : top + 1 + size_z]] == (
        house["target_spec"]["layers"][-1]["rows"]
    )
    assert house["task_id"] in picture


# --- the reference houses --------------------------------------------------------------


def test_reference_houses_are_well_formed(reference_houses_path: Path) -> None:
    houses = load_reference_houses(reference_houses_path)
    assert len(houses) == 10
    for house in houses:
        assert_well_formed(house, bbox_required=False)
        assert house_picture(house).count("\ny=") == house["target_spec"]["size"][1]


def test_generated_houses_differ_from_the_reference(reference_houses_path: Path) -> None:
    reference = {layer_key(h) for h in load_reference_houses(reference_houses_path)}
    assert not reference & {layer_key(h) for h in HOUSES}


@pytest.mark.parametrize(
    "corrupt",
    [
        lambda h: h["count"].update(A=h["count"]["A"] + 1),
        lambda h: h["count"].pop("D"),
        lambda h: h["bbox"]["to"].__setitem__(0, 99),
        lambda h: h["target_spec"]["layers"][1]["rows"].pop(),
        lambda h: h["target_spec"]["layers"].pop(),
        lambda h: h["target_spec"]["layers"][0]["rows"].__setitem__(0, "Z" * 99),
        lambda h: h["inventory"].update(W="wool"),
    ],
)
def test_checker_rejects_broken_houses(corrupt) -> None:
    house = json.loads(json.dumps(HOUSES[0]))
    corrupt(house)
    with pytest.raises(AssertionError):
        assert_well_formed(house)
