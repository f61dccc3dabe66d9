"""StrBuild score conformance: hand-worked command lists against tasks.md section 4."""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

import pytest

import collabzoo
from collabzoo.envs.scripted_teams import scripted_team
from collabzoo.rewards.commands import command_lines
from collabzoo.tasks.building.envs.letter_font import render_text
from collabzoo.tasks.building.envs.strbuild import REFERENCE_TARGETS
from collabzoo.tasks.building.rewards.strbuild import (
    StrBuildTarget,
    parse_strbuild_answer,
    score_strbuild,
)

I = StrBuildTarget(render_text("I"))  # 13 target cells, 12 empty; row 0 is y = 4  # noqa: E741


def score(first: str, second: str, **kwargs):
    return score_strbuild(I, [first, second], **kwargs)


def test_hand_worked_mixed_build() -> None:
    # (0,4) wood, (1,4) stone then overwritten by obsidian, (2,4) concrete: 3 of 13 covered;
    # (0,3) stone is an extra block (1 of 12 empty cells). Touching pairs: (0,4)-(1,4),
    # (1,4)-(2,4), (0,3)-(0,4), all of different textures. Both palettes fully present.
    out = score(
        "/setblock 0 4 0 oak_planks\n/setblock 1 4 0 stone\n/setblock 0 3 0 stone",
        "/setblock 2 4 0 white_concrete\n/setblock 1 4 0 obsidian",
    )
    b = out.breakdown
    assert b.total == pytest.approx(2 * 3 / 13 - 1.5 * 1 / 12)
    assert b.metrics["coverage"] == pytest.approx(3 / 13)
    assert b.metrics["extra"] == pytest.approx(1 / 12)
    assert b.metrics["adjacency"] == 0.0
    assert b.metrics["iou"] == pytest.approx(3 / 14)
    assert b.metrics["missing_palettes"] == 0.0
    assert out.world.blocks[4 * 5 + 1] == "obsidian", "agent 2 overwrites agent 1"
    assert out.world.owners[4 * 5 + 1] == 1


def test_cells_at_the_ends_of_rows_are_not_neighbours() -> None:
    """(4, 4) ends the top row and (0, 3) starts the next: consecutive in the world's row-major
    order, but not side by side, so two stones there are no pair (a wrap-around bug counts
    one same-texture pair: adjacency 1.0). Likewise the bottom row has no row below it."""
    for answer in ("/setblock 4 4 0 stone\n/setblock 0 3 0 stone", "/setblock 4 0 0 stone"):
        b = score(answer, "").breakdown
        assert b.metrics["adjacency"] == 0.0 and b.components["adjacency_penalty"] == 0.0
    # the same two cells with a real neighbour each: (3,4)-(4,4) and (0,3)-(0,4)
    b = score("/setblock 4 4 0 stone\n/setblock 0 3 0 stone\n/setblock 3 4 0 stone", "")
    assert b.breakdown.metrics["adjacency"] == 1.0
    b = score("/setblock 0 4 0 stone\n/setblock 0 3 0 oak_planks\n/setblock 4 4 0 stone", "")
    assert b.breakdown.metrics["adjacency"] == 0.0  # one pair, (0,3)-(0,4), of two textures


def test_same_texture_neighbours_and_missing_palettes() -> None:
    # Two stone blocks side by side on the top bar: 1 pair, same texture -> adjacency 1.
    # Agent 1 lacks oak_planks, agent 2 placed nothing: both palettes incomplete.
    b = score("/setblock 0 4 0 stone\n/setblock 1 4 0 stone", "").breakdown
    assert b.metrics["adjacency"] == 1.0
    assert b.metrics["missing_palettes"] == 2.0
    assert b.total == pytest.approx(2 * 2 / 13 - 1.0 - 0.5)
    assert b.components == pytest.approx(
        {
            "coverage": 4 / 13,
            "extra_penalty": 0.0,
            "adjacency_penalty": -1.0,
            "palette_penalty": -0.5,
        }
    )
    # Vertical neighbours count too; different textures do not.
    b = score("/setblock 2 0 0 oak_planks\n/setblock 2 1 0 stone", "").breakdown
    assert b.metrics["adjacency"] == 0.0
    b = score("/setblock 2 0 0 stone\n/setblock 2 1 0 stone", "").breakdown
    assert b.metrics["adjacency"] == 1.0


def test_textures_group_planks_and_concretes() -> None:
    palettes = (("oak_planks", "spruce_planks"), ("white_concrete", "black_concrete"))
    b = score(
        "/setblock 0 4 0 oak_planks\n/setblock 1 4 0 spruce_planks",
        "/setblock 3 4 0 white_concrete\n/setblock 4 4 0 black_concrete",
        palettes=palettes,
    ).breakdown
    assert b.metrics["adjacency"] == 1.0, "wood-wood and concrete-concrete pairs"


def test_air_clears_a_cell_and_the_missing_palette_rule() -> None:
    b = score(
        "/setblock 0 4 0 oak_planks\n/setblock 1 4 0 stone",
        "/setblock 2 4 0 obsidian\n/setblock 3 4 0 white_concrete\n/setblock 1 4 0 air",
    ).breakdown
    assert b.metrics["coverage"] == pytest.approx(3 / 13)
    assert b.metrics["missing_palettes"] == 1.0, "agent 1's stone was cleared by agent 2"


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("/setblock 5 0 0 stone", "outside the build area"),
        ("/setblock 0 5 0 stone", "outside the build area"),
        ("/setblock 0 0 1 stone", "outside the build area"),
        ("/setblock -1 0 0 stone", "outside the build area"),
        ("/setblock 0 0 0 obsidian", "not in this agent's palette"),
        ("/setblock 0 0 0 Stone", "not in this agent's palette"),
        ("/setblock ~1 0 0 stone", "absolute integers"),
        ("/setblock ^ 0 0 stone", "absolute integers"),
        ("/setblock 0.5 0 0 stone", "absolute integers"),
        ("/setblock 0 0 0", "expected /setblock x y z block"),
        ("/fill 0 0 0 1 1 0 stone", "only /setblock"),
        ("/", "empty command"),
        ("Here are my commands:", "unknown command"),
    ],
)
def test_rejected_lines_carry_a_reason(line: str, reason: str) -> None:
    parsed = parse_strbuild_answer(line, width=5, height=5, palette=("oak_planks", "stone"))
    assert parsed.accepted == []
    assert len(parsed.rejected) == 1 and reason in parsed.rejected[0].reason
    assert parsed.rejected[0].line == line


@pytest.mark.parametrize(
    "line",
    [
        "/setblock 1 2 0 stone",
        "setblock 1 2 0 stone",
        "/ setblock 1 2 0 stone",
        "/SetBlock 1 2 0 minecraft:stone",
        "- /setblock 1 2 0 stone",
        "* /setblock 1 2 0 stone",
        "3. /setblock 1 2 0 stone",
        "3) /setblock 1 2 0 stone",
        "/setblock +1 2 0 stone extra tokens ignored",
        "   /setblock 1 2 0 stone   ",
    ],
)
def test_tolerated_spellings(line: str) -> None:
    parsed = parse_strbuild_answer(line, width=5, height=5, palette=("oak_planks", "stone"))
    assert parsed.accepted == [("setblock", 1, 2, 0, "stone")] and parsed.rejected == []


def test_only_the_first_fenced_block_is_read() -> None:
    text = (
        "Plan: I will build the top.\n```minecraft\n/setblock 0 4 0 stone\n```\n"
        "and also\n```\n/setblock 1 4 0 stone\n```"
    )
    assert command_lines(text) == ["/setblock 0 4 0 stone"]
    assert command_lines("```\nkill\n/setblock 0 0 0 stone\n```") == ["/setblock 0 0 0 stone"]
    # One fence marker is not a complete block: the whole text is read.
    assert command_lines("```\n/setblock 0 0 0 stone") == ["```", "/setblock 0 0 0 stone"]


def test_the_cap_counts_accepted_commands_only() -> None:
    valid = [f"/setblock {i % 5} {i // 5 % 5} 0 stone" for i in range(160)]
    noisy = "\n".join(["nonsense"] * 20 + valid[:150] + ["more prose"] + valid[150:])
    parsed = parse_strbuild_answer(noisy, width=5, height=5, palette=("stone",))
    assert len(parsed.accepted) == 150
    assert len(parsed.rejected) == 20 + 1 + 10
    assert all("over the cap of 150" in r.reason for r in parsed.rejected[20:])
    small = parse_strbuild_answer(
        "\n".join(valid[:5]), width=5, height=5, palette=("stone",), max_commands=3
    )
    assert len(small.accepted) == 3 and len(small.rejected) == 2


def test_reference_targets_match_the_shared_file(reference_targets_path: Path) -> None:
    with reference_targets_path.open() as f:
        words = [row["string"] for row in csv.DictReader(f)]
    assert tuple(words) == REFERENCE_TARGETS
    env = collabzoo.make("strbuild", data=str(reference_targets_path))
    assert [t.text for t in env.items("train")] == words[:8]
    assert [t.text for t in env.items("eval")] == words[8:]
    for word in words:
        target = StrBuildTarget(render_text(word))
        assert target.width == 5 * len(word) + 2 * (len(word) - 1) and target.height == 5


@pytest.mark.parametrize("word", REFERENCE_TARGETS)
def test_oracle_scores_the_maximum_and_naive_less(word: str) -> None:
    env = collabzoo.make("strbuild", targets=[word], horizon=1)
    results = {}
    for kind in ("oracle", "naive"):
        obs, _ = env.reset(seed=0)
        _, rewards, _, _, infos = env.step(scripted_team("strbuild", kind)(obs))
        results[kind] = (rewards["first_builder"], infos["first_builder"]["metrics"])
    assert results["oracle"][0] == 2.0
    assert results["oracle"][1]["iou"] == 1.0 and results["oracle"][1]["adjacency"] == 0.0
    # Naive: everything covered in white_concrete: adjacency 1, both palettes incomplete.
    assert results["naive"][0] == pytest.approx(0.5)


# ----- corners the mutation run found untested ----------------------------------------------------
def test_the_world_records_who_placed_each_block_and_nobody_elsewhere() -> None:
    out = score(
        "/setblock 0 4 0 oak_planks\n/setblock 1 4 0 stone",
        "/setblock 1 4 0 air\n/setblock 2 4 0 obsidian",  # clears agent 1's (1,4)
    )
    world = out.world
    assert len(world.blocks) == len(world.owners) == 5 * 5
    assert (world.owners[20], world.owners[21], world.owners[22]) == (0, -1, 1)  # y = 4 row
    assert world.owners.count(-1) == 25 - 2 and world.blocks[21] == "air"
    with pytest.raises(dataclasses.FrozenInstanceError):
        world.blocks = ()  # outcomes are values: env copies may share them


def test_an_out_of_area_line_names_the_area() -> None:
    parsed = parse_strbuild_answer(
        "/setblock 26 0 0 stone", width=26, height=5, palette=("oak_planks", "stone")
    )
    assert parsed.rejected[0].reason == "(26, 0, 0) is outside the build area [0,0,0]..[25,4,0]"


@pytest.mark.parametrize("rows", [(), ("",), ("#.", "#"), ("#.", "#x")])
def test_malformed_targets_are_refused(rows) -> None:
    with pytest.raises(ValueError, match="StrBuild target"):
        StrBuildTarget(rows)


def test_one_row_and_all_target_pictures() -> None:
    row = StrBuildTarget(("#.#",))
    assert (row.width, row.height, row.positions()) == (3, 1, [(0, 0, 0), (2, 0, 0)])
    full = StrBuildTarget(("##", "##"))  # no empty cell: nothing can be extra
    b = score_strbuild(full, ["/setblock 0 0 0 stone", ""]).breakdown
    assert b.metrics["extra"] == 0.0 and b.metrics["coverage"] == 0.25


def test_palettes_of_any_names_count_as_missing_until_used() -> None:
    """A block that sorts before "air" still has to be used; "air" in a palette (here built at
    run time, as read from a config file) never does."""
    air = "".join(["a", "ir"])
    palettes = [("acacia_planks", "stone", air), ("white_concrete", "obsidian")]
    second = "/setblock 2 4 0 white_concrete\n/setblock 3 4 0 obsidian"
    only_stone = score_strbuild(I, ["/setblock 0 4 0 stone", second], palettes=palettes)
    assert only_stone.breakdown.metrics["missing_palettes"] == 1.0
    both = "/setblock 0 4 0 stone\n/setblock 1 4 0 acacia_planks"
    complete = score_strbuild(I, [both, second], palettes=palettes)
    assert complete.breakdown.metrics["missing_palettes"] == 0.0
    assert complete.world.owners[21] == 0  # (1, 4): acacia_planks is agent 1's block


def test_one_answer_per_palette() -> None:
    with pytest.raises(ValueError, match="expected 2 answers"):
        score_strbuild(I, ["/setblock 0 4 0 stone"])


@pytest.mark.parametrize(
    "bad",
    [
        "/summon 0 0 0 stone",  # a command sorting after setblock, shaped like one
        "/setblock 0 0 0",  # too few tokens
        "/setblock 0 ~ 0 stone",  # a relative coordinate
        "/setblock 0 0 -1 stone",  # off the wall z = 0
        "/setblock 0 0 1 stone",
    ],
)
def test_a_rejected_line_of_any_kind_does_not_end_the_reading(bad: str) -> None:
    parsed = parse_strbuild_answer(
        text=f"{bad}\n/setblock 1 1 0 stone", width=5, height=5, palette=("stone",)
    )
    assert [r.line for r in parsed.rejected] == [bad]
    assert parsed.accepted == [("setblock", 1, 1, 0, "stone")]


def test_extra_blocks_are_a_share_of_the_empty_cells() -> None:
    """One target cell of six: one extra block is 1/5 of the empty cells."""
    target = StrBuildTarget(("#..", "..."))
    b = score_strbuild(target, ["/setblock 2 0 0 stone", ""]).breakdown
    assert b.metrics["extra"] == pytest.approx(1 / 5)


def test_wide_targets_and_one_palette() -> None:
    """A 300-column picture (a long word) is valid; with a single agent, using its whole
    palette leaves nothing missing."""
    wide = StrBuildTarget(("#" * 300,))
    assert wide.width == 300 and len(wide.cells) == 300
    one = score_strbuild(
        I, ["/setblock 0 4 0 oak_planks\n/setblock 1 4 0 stone"], palettes=[("oak_planks", "stone")]
    )
    assert one.breakdown.metrics["missing_palettes"] == 0.0


def test_bad_target_rows_are_quoted_three_at_most() -> None:
    with pytest.raises(ValueError, match=r"got \['#x', '#y', '#z'\]$"):
        StrBuildTarget(("##", "#x", "#y", "#z", "#w"))


def test_more_answers_than_palettes_are_refused() -> None:
    with pytest.raises(ValueError, match="expected 2 answers"):
        score_strbuild(I, ["", "", ""])
