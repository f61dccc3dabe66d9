"""HouseBuild score conformance: hand-worked command lists against tasks.md section 5."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import numpy as np
import pytest

import collabzoo
from collabzoo.envs.scripted_teams import scripted_team
from collabzoo.tasks.building.envs.housebuild import merged_boxes
from collabzoo.tasks.building.rewards.housebuild import (
    House,
    parse_housebuild_answer,
    score_housebuild,
)


@pytest.fixture(scope="module")
def reference_specs(reference_houses_path: Path) -> list[dict]:
    return json.loads(reference_houses_path.read_text())


@pytest.fixture(scope="module")
def house(reference_specs: list[dict]) -> House:
    """house_build_0002: 6 x 7 x 7; counts A 122, B 54, C 68, D 2, O 12, S 36."""
    return House.from_spec(reference_specs[0])


def test_counts_and_resource_limits(house: House, reference_specs: list[dict]) -> None:
    inventory = reference_specs[0]["inventory"]
    assert house.size == (6, 7, 7)
    assert house.counts == {inventory[ch]: n for ch, n in reference_specs[0]["count"].items()}
    # ceil(c/2) + floor(c/4)
    assert house.resource_limits == {
        "stone_bricks": 27 + 13,
        "white_concrete": 34 + 17,
        "planks": 1 + 0,
        "obsidian": 6 + 3,
        "stone_stairs": 18 + 9,
    }


def test_empty_build_and_the_spider_penalty(house: House) -> None:
    b = score_housebuild(house, ["", ""], spider_attacks=[1, 2, 3]).breakdown
    assert b.components["match"] == pytest.approx(122 / 294), "only the air cells are right"
    assert b.components["spider_penalty"] == pytest.approx(-0.1), "damage 6 >= 5 HP: full 0.1"
    assert b.total == pytest.approx(122 / 294 - 0.1)
    assert b.metrics["hp"] == 0.0 and b.metrics["iou"] == 0.0
    b = score_housebuild(house, ["", ""], spider_attacks=[1, 1, 1]).breakdown
    assert b.components["spider_penalty"] == pytest.approx(-0.1 * 3 / 5)
    assert b.metrics["hp"] == pytest.approx(2 / 5)
    for answers in (["/kill", ""], ["", "/kill them all please"]):
        b = score_housebuild(house, answers, spider_attacks=[3, 3, 3]).breakdown
        assert b.total == pytest.approx(122 / 294) and b.metrics["hp"] == 1.0
    b = score_housebuild(house, ["", ""], spider_attacks=None).breakdown
    assert b.total == pytest.approx(122 / 294) and b.metrics["hp"] == 1.0


def test_overwrite_order_match_and_iou(house: House) -> None:
    # Agent 1 lays the whole concrete floor (y=0, z=1..5: 30 cells, all C in the target);
    # agent 2 then covers row z=1 with stone_bricks (6 cells now wrong).
    out = score_housebuild(
        house,
        ["/fill 0 0 1 5 0 5 white_concrete", "/fill 5 0 1 0 0 1 stone_bricks\n/kill"],
        spider_attacks=[1, 1, 1],
    )
    b = out.breakdown
    assert b.total == pytest.approx((122 + 30 - 6) / 294)
    assert b.metrics["iou"] == pytest.approx(30 / 172)
    assert out.world[0, 0, 1] == house.blocks.index("stone_bricks")
    assert out.owner[0, 0, 1] == 1 and out.owner[0, 0, 2] == 0


def test_resource_caps_are_per_agent_and_charge_whole_volumes(house: House) -> None:
    floor = "/fill 0 0 1 5 0 5 white_concrete"  # 30 of the 51 allowed
    second = "/fill 0 1 1 5 1 5 white_concrete"  # 30 more: 60 > 51, rejected whole
    parsed = parse_housebuild_answer(
        f"{floor}\n{second}\n/fill 0 0 0 5 6 6 air", house, resource_limits=house.resource_limits
    )
    assert [c[-1] for c in parsed.accepted] == ["white_concrete", "air"], "air is free"
    assert "needs 30, 21 of your 51 left" in parsed.rejected[0].reason
    out = score_housebuild(house, [floor, second], spider_attacks=None)
    assert all(not p.rejected for p in out.parsed), "each agent has its own allowance"
    unlimited = parse_housebuild_answer(f"{floor}\n{second}", house, resource_limits=None)
    assert len(unlimited.accepted) == 2
    planks = parse_housebuild_answer(
        "/fill 2 1 1 3 1 1 planks", house, resource_limits=house.resource_limits
    )
    assert planks.accepted == [] and "not enough planks" in planks.rejected[0].reason


def test_a_fill_up_to_the_allowance_exactly_is_accepted_and_one_more_block_is_not(
    house: House,
) -> None:
    """white_concrete: c = 68, allowance ceil(68/2) + floor(68/4) = 51. Fills of 30, 18 and 3
    blocks reach 51 exactly and are all accepted; a single block after that is rejected."""
    fills = [
        "/fill 0 0 1 5 0 5 white_concrete",  # 6 x 5 = 30
        "/fill 0 1 1 5 1 3 white_concrete",  # 6 x 3 = 18
        "/fill 0 2 1 2 2 1 white_concrete",  # 3
    ]
    parsed = parse_housebuild_answer(
        "\n".join([*fills, "/fill 5 6 6 5 6 6 white_concrete"]),
        house,
        resource_limits=house.resource_limits,
    )
    assert len(parsed.accepted) == 3 and len(parsed.rejected) == 1
    assert "needs 1, 0 of your 51 left" in parsed.rejected[0].reason
    exact = parse_housebuild_answer("\n".join(fills), house, resource_limits=house.resource_limits)
    assert len(exact.accepted) == 3 and not exact.rejected


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("/fill 0 0 0 1 1 1 stone_bricks replace", "exactly /fill"),
        ("/fill 0 0 0 1 1 stone_bricks", "exactly /fill"),
        ("/fill 0 0 0 6 0 0 stone_bricks", "outside the build area"),
        ("/fill 0 -1 0 0 0 0 stone_bricks", "outside the build area"),
        ("/fill 0 0 0 0 0 0 diamond_block", "not in the palette"),
        ("/fill ~ 0 0 0 0 0 stone_bricks", "absolute integers"),
        ("/setblock 0 0 0 stone_bricks", "accepts /fill and /kill"),
    ],
)
def test_rejected_lines_carry_a_reason(house: House, line: str, reason: str) -> None:
    parsed = parse_housebuild_answer(line, house, resource_limits=house.resource_limits)
    assert parsed.accepted == [] and reason in parsed.rejected[0].reason


def test_corners_in_either_order_and_namespaced_blocks(house: House) -> None:
    parsed = parse_housebuild_answer(
        "1. /FILL 5 0 6 0 0 0 minecraft:white_concrete", house, resource_limits=None
    )
    assert parsed.accepted == [("fill", 0, 0, 0, 5, 0, 6, "white_concrete")]


def test_kill_counts_toward_the_cap(house: House) -> None:
    text = "\n".join(["/kill"] * 300 + ["/fill 0 0 1 0 0 1 white_concrete"])
    parsed = parse_housebuild_answer(text, house, resource_limits=house.resource_limits)
    assert len(parsed.accepted) == 300
    assert "over the cap of 300" in parsed.rejected[0].reason


def test_merged_boxes_cover_the_house_exactly(reference_specs: list[dict]) -> None:
    for spec in reference_specs:
        house = House.from_spec(spec)
        rebuilt = np.zeros_like(house.grid)
        for x1, y, z1, x2, _, z2, block in merged_boxes(house):
            assert (rebuilt[x1 : x2 + 1, y, z1 : z2 + 1] == 0).all(), "boxes do not overlap"
            rebuilt[x1 : x2 + 1, y, z1 : z2 + 1] = house.blocks.index(block)
        assert (rebuilt == house.grid).all()
        assert len(merged_boxes(house)) < np.count_nonzero(house.grid)


def test_reference_houses_oracle_maximum_naive_less(reference_houses_path: Path) -> None:
    env = collabzoo.make("housebuild", data=str(reference_houses_path), horizon=1)
    assert len(env.items("train")) == 8 and len(env.items("eval")) == 2
    for split in ("train", "eval"):
        for index in range(len(env.items(split))):
            finals = {}
            for kind in ("oracle", "naive"):
                obs, _ = env.reset(seed=index, options={"split": split, "task": index})
                _, rewards, *_ = env.step(scripted_team("housebuild", kind)(obs))
                finals[kind] = rewards["first_builder"]
            assert finals["oracle"] == 1.0
            assert finals["naive"] < 0.7


def test_data_formats_load_the_same_houses(reference_houses_path: Path, tmp_path: Path) -> None:
    specs = json.loads(reference_houses_path.read_text())
    (tmp_path / "houses.jsonl").write_text("\n".join(json.dumps(s) for s in specs))
    with gzip.open(tmp_path / "houses.jsonl.gz", "wt") as f:
        f.write("\n".join(json.dumps(s) for s in specs))
    (tmp_path / "split").mkdir()
    (tmp_path / "split" / "a.json").write_text(json.dumps(specs[:5]))
    (tmp_path / "split" / "b.json").write_text(json.dumps({"houses": specs[5:]}))
    expected = [
        h.task_id
        for h in collabzoo.make("housebuild", data=str(reference_houses_path)).items("eval")
    ]
    for source in ("houses.jsonl", "houses.jsonl.gz", "split"):
        env = collabzoo.make("housebuild", data=str(tmp_path / source))
        assert [h.task_id for h in env.items("eval")] == expected


# ----- corners the mutation run found untested ----------------------------------------------------
@pytest.mark.parametrize(
    "line",
    [
        "/fill 6 0 0 6 0 0 stone_bricks",  # x1 = X
        "/fill 0 0 0 8 0 0 stone_bricks",  # x2 past X
        "/fill 0 0 0 -1 0 0 stone_bricks",  # x2 negative
        "/fill 0 0 7 0 0 7 stone_bricks",  # z1 = Z
        "/fill 0 7 0 0 7 0 stone_bricks",  # y = Y
        "/fill 6 0 0 0 0 0 stone_bricks",  # x1 = X alone
        "/fill 7 0 0 0 0 0 stone_bricks",  # x1 past X alone
        "/fill 0 9 0 0 0 0 stone_bricks",  # y1 past Y alone
        "/fill 0 0 0 0 8 0 stone_bricks",  # y2 past Y alone
    ],
)
def test_a_corner_outside_the_area_rejects_the_line_and_names_the_area(house, line) -> None:
    parsed = parse_housebuild_answer(
        text=f"{line}\n/fill 0 0 0 0 0 0 stone_bricks", house=house, resource_limits=None
    )
    assert [r.line for r in parsed.rejected] == [line]
    assert parsed.rejected[0].reason == "a corner is outside the build area [0,0,0]..[5,6,6]"
    assert len(parsed.accepted) == 1  # reading goes on after a rejected line


def test_fills_span_both_ways_on_every_axis_and_record_who_placed_what(house) -> None:
    up = "/fill 0 0 1 1 2 1 stone_bricks"  # 2 x 3 x 1, y rising
    down = "/fill 5 2 6 4 0 5 obsidian"  # 2 x 3 x 2, every axis falling
    cleared = "/fill 0 1 1 0 1 1 air"  # agent 2 clears one of agent 1's cells
    out = score_housebuild(house, [f"{up}\n{down}", cleared], spider_attacks=None, resources=False)
    stone = house.blocks.index("stone_bricks")
    assert int(np.count_nonzero(out.world == stone)) == 6 - 1
    assert int(np.count_nonzero(out.world == house.blocks.index("obsidian"))) == 12
    assert out.owner.shape == house.grid.shape
    assert out.owner[0, 0, 1] == 0 and out.owner[5, 2, 6] == 0 and out.owner[4, 0, 5] == 0
    assert out.owner[0, 1, 1] == -1, "cleared to air: nobody's block"
    assert int(np.count_nonzero(out.owner == -1)) == house.grid.size - (6 - 1) - 12


def test_a_line_with_a_block_off_the_palette_does_not_end_the_reading(house) -> None:
    parsed = parse_housebuild_answer(
        "/fill 0 0 0 0 0 0 diamond_block\n/fill 0 0 0 0 0 0 stone_bricks",
        house,
        resource_limits=None,
    )
    assert len(parsed.rejected) == 1 and parsed.accepted == [
        ("fill", 0, 0, 0, 0, 0, 0, "stone_bricks")
    ]


def test_the_first_fill_over_the_allowance_says_what_is_left(house) -> None:
    parsed = parse_housebuild_answer(
        "/fill 2 1 1 3 1 1 planks", house, resource_limits=house.resource_limits
    )
    assert parsed.rejected[0].reason == "not enough planks: this fill needs 2, 1 of your 1 left"
    tall = parse_housebuild_answer(  # 2 x 3 x 2: charged its whole volume, 12 of 9
        "/fill 0 1 0 1 3 1 obsidian", house, resource_limits=house.resource_limits
    )
    assert tall.rejected[0].reason == "not enough obsidian: this fill needs 12, 9 of your 9 left"


def test_blocks_of_any_name_get_an_allowance_and_air_never_does() -> None:
    """A block that sorts before "air" is charged like any other; "air" read from a JSON file
    (not the interned literal) never gets an allowance."""
    spec = json.loads(
        '{"task_id": "t", "inventory": {"A": "air", "K": "acacia_planks"},'
        ' "target_spec": {"type": "y_layers", "size": [2, 1, 1],'
        ' "layers": [{"y": 0, "rows": ["KK"]}]}}'
    )
    house = House.from_spec(spec)
    assert house.resource_limits == {"acacia_planks": 1 + 0}  # c = 2: ceil(1) + floor(0.5)
    assert "air" in house.palette and "acacia_planks" in house.palette
    parsed = parse_housebuild_answer(
        "/fill 0 0 0 1 0 0 acacia_planks\n/fill 0 0 0 1 0 0 air",
        house,
        resource_limits=house.resource_limits,
    )
    assert [c[-1] for c in parsed.accepted] == ["air"]
    out = score_housebuild(house, ["/fill 0 0 0 0 0 0 acacia_planks", ""], spider_attacks=None)
    assert out.owner[0, 0, 0] == 0 and out.owner[1, 0, 0] == -1
    with pytest.raises(dataclasses.FrozenInstanceError):
        house.grid = None


def test_an_empty_build_of_an_all_air_house_is_a_perfect_match() -> None:
    """No block wanted and none built: IoU's union is empty, and the build is exactly right."""
    spec = {
        "inventory": {"A": "air"},
        "target_spec": {"type": "y_layers", "size": [1, 1, 1], "layers": [{"y": 0, "rows": ["A"]}]},
    }
    b = score_housebuild(House.from_spec(spec), ["", ""], spider_attacks=None).breakdown
    assert (b.metrics["iou"], b.metrics["match"], b.total) == (1.0, 1.0, 1.0)


def test_the_area_named_in_rejections_on_an_even_sized_house() -> None:
    spec = {
        "inventory": {"A": "air", "K": "planks"},
        "target_spec": {
            "type": "y_layers",
            "size": [2, 2, 2],
            "layers": [{"y": 0, "rows": ["KK", "KK"]}, {"y": 1, "rows": ["AA", "AA"]}],
        },
    }
    parsed = parse_housebuild_answer(
        "/fill 0 2 0 0 0 0 planks", House.from_spec(spec), resource_limits=None
    )
    assert parsed.rejected[0].reason == "a corner is outside the build area [0,0,0]..[1,1,1]"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"type": "x_layers"}, "unsupported target_spec type"),
        ({"layers": [{"y": -1, "rows": ["KK"]}]}, "layer y=-1"),
        ({"layers": [{"y": 0, "rows": ["KK", "KK"]}]}, "must have 1 rows of 2"),
        ({"layers": [{"y": 0, "rows": ["K"]}]}, "must have 1 rows of 2"),
    ],
)
def test_malformed_house_layers_are_refused(change: dict, message: str) -> None:
    target = {"type": "y_layers", "size": [2, 1, 1], "layers": [{"y": 0, "rows": ["KK"]}]}
    spec = {"inventory": {"A": "air", "K": "planks"}, "target_spec": {**target, **change}}
    with pytest.raises(ValueError, match=message):
        House.from_spec(spec)


def test_spiders_attack_for_one_to_three_and_the_score_tops_out_at_one() -> None:
    env = collabzoo.make("housebuild")
    attacks = set()
    for seed in range(40):
        env.reset(seed=seed)
        attacks.update(env.spider_attacks)
    assert attacks == {1, 2, 3}  # tasks.md: uniformly from 1..3, each spider
    assert len(env.spider_attacks) == 3
    assert env.max_reward == 1.0
