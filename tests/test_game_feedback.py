"""The games' feedback between turns, checked against tasks.md (sections 4 and 5) rather than
through an oracle's final reward: StrBuild's position and perfect feedback, HouseBuild's
position and resource feedback. Every expected cell list and count is derived from the turn-0
prompt the agents read (the target picture, the house's boxes), never from the env's own
target objects."""

from __future__ import annotations

import math
import re

import collabzoo

STRBUILD = ("first_builder", "second_builder")
CELL = re.compile(r"\((\d+),(\d+),(\d+)\)")


def latest(observation: str) -> str:
    """The newest feedback in an observation (earlier turns are repeated above it)."""
    start = observation.rfind("Your team's last build scored")
    assert start >= 0, observation[-500:]
    return observation[start:]


def line_after(text: str, label: str) -> str:
    (line,) = [line for line in text.splitlines() if line.startswith(label)]
    return line[len(label) :]


def cells(text: str) -> list[tuple[int, int, int]]:
    return [tuple(map(int, m)) for m in CELL.findall(text)]


# ----- StrBuild -------------------------------------------------------------------------------
def strbuild_target(prompt: str) -> set[tuple[int, int, int]]:
    """The '#' cells of the prompt's picture ("y=K: ##..#")."""
    found = set()
    for y, row in re.findall(r"^y=(\d+): ([#.]+)$", prompt, flags=re.MULTILINE):
        found |= {(x, int(y), 0) for x, ch in enumerate(row) if ch == "#"}
    return found


def strbuild_turn(feedback: str, answers: dict[str, str]) -> tuple[set, dict[str, str]]:
    env = collabzoo.make("strbuild", feedback=feedback)
    observations, _ = env.reset(seed=0, options={"task": 0, "split": "eval"})
    target = strbuild_target(observations["first_builder"])
    assert len(target) > 20  # the eval word ("ICML"): a real picture, not an empty parse
    observations, *_ = env.step(answers)
    return target, {a: latest(observations[a]) for a in STRBUILD}


def test_strbuild_position_feedback_lists_every_target_cell_and_asks_to_split_them() -> None:
    """tasks.md: `position_feedback` (the reference default) lists the target coordinates and
    asks each agent to take about half of them with no two side-by-side."""
    answers = {"first_builder": "/setblock 0 0 0 stone\nhello", "second_builder": ""}
    target, feedback = strbuild_turn("position", answers)
    # one covered cell; neither builder used its whole palette: 2 * 1/|T| - 0.25 * 2
    score = 2 * 1 / len(target) - 0.25 * 2
    for agent in STRBUILD:
        text = feedback[agent]
        assert text.startswith(f"Your team's last build scored {score:.3f} (max 2.0)")
        assert f"coverage {1 / len(target):.0%}" in text and "2 builder(s) missing" in text
        listed = cells(line_after(text, "Target cells (x,y,z): "))
        assert sorted(listed) == sorted(target) and len(listed) == len(set(listed))
        assert "about half" in text and "no two of your blocks are side by side" in text
        assert "still empty" not in text and "to clear" not in text
    assert "'hello': unknown command" in feedback["first_builder"]
    assert "rejected" not in feedback["second_builder"]


def test_strbuild_perfect_feedback_names_the_cells_to_fill_and_the_blocks_to_clear() -> None:
    """tasks.md: `perfect_feedback` gives the wrong positions to fix and the extra blocks to
    clear. Cells at both ends of a row catch an index that wraps across rows."""
    answers = {
        # (0,0,0) is a target cell; (5,0,0) is not (y=0 reads "#####...")
        "first_builder": "/setblock 0 0 0 stone\n/setblock 5 0 0 oak_planks",
        # (25,0,0) ends the bottom row's last stroke; (25,1,0) above it is empty in the target
        "second_builder": "/setblock 25 0 0 obsidian\n/setblock 25 1 0 white_concrete",
    }
    target, feedback = strbuild_turn("perfect", answers)
    assert {(0, 0, 0), (25, 0, 0)} <= target and not {(5, 0, 0), (25, 1, 0)} & target
    placed = {(0, 0, 0), (5, 0, 0), (25, 0, 0), (25, 1, 0)}
    for agent in STRBUILD:
        text = feedback[agent]
        assert set(cells(line_after(text, "Target cells still empty: "))) == target - placed
        assert set(cells(line_after(text, "Blocks to clear (not in the target): "))) == {
            (5, 0, 0),
            (25, 1, 0),
        }
        assert "Target cells (x,y,z)" not in text


def test_strbuild_perfect_feedback_of_a_perfect_build_has_nothing_left() -> None:
    env = collabzoo.make("strbuild", feedback="perfect")
    observations, _ = env.reset(seed=0, options={"task": 0, "split": "eval"})
    target = sorted(strbuild_target(observations["first_builder"]))
    blocks = ("stone", "oak_planks")
    first = "\n".join(f"/setblock {x} {y} 0 {blocks[(x + y) % 2]}" for x, y, _ in target)
    observations, *_ = env.step({"first_builder": first, "second_builder": ""})
    text = latest(observations["second_builder"])
    assert "coverage 100%, extra blocks 0%" in text
    assert line_after(text, "Target cells still empty: ") == "none."
    assert line_after(text, "Blocks to clear (not in the target): ") == "none."


def test_strbuild_score_feedback_gives_the_score_alone() -> None:
    _, feedback = strbuild_turn("score", {"first_builder": "", "second_builder": ""})
    for text in feedback.values():
        assert text.startswith("Your team's last build scored -0.500 (max 2.0): coverage 0%")
        assert not cells(text) and "built from scratch" in text


# ----- HouseBuild -----------------------------------------------------------------------------
BOX = re.compile(r"\((\d+), (\d+), (\d+), (\d+), (\d+), (\d+) (\w+)\)")


def house_target(prompt: str) -> dict[tuple[int, int, int], str]:
    """Every non-air cell of the prompt's boxes, with its block."""
    found = {}
    for match in BOX.finditer(prompt.split("The house, layer by layer")[1].split("\n\n")[0]):
        x1, y1, z1, x2, y2, z2 = map(int, match.groups()[:6])
        for x in range(x1, x2 + 1):
            for y in range(y1, y2 + 1):
                for z in range(z1, z2 + 1):
                    found[(x, y, z)] = match.group(7)
    return found


def housebuild_turn(feedback: str, answers: dict[str, str]) -> tuple[dict, dict[str, str]]:
    env = collabzoo.make("housebuild", feedback=feedback)
    observations, _ = env.reset(seed=0, options={"task": 0, "split": "eval"})
    target = house_target(observations["first_builder"])
    assert len(target) > 100
    observations, *_ = env.step(answers)
    return target, {a: latest(observations[a]) for a in STRBUILD}


def fixes(text: str) -> tuple[int, dict[tuple[int, int, int], str]]:
    """(how many cells are wrong, the cells shown with the block each needs)."""
    count, listed = line_after(text, "Cells to fix (").split("): ", 1)
    pairs = re.findall(r"\((\d+),(\d+),(\d+)\) -> (\w+)", listed)
    return int(count), {tuple(map(int, p[:3])): p[3] for p in pairs}


def test_housebuild_position_feedback_lists_each_wrong_cell_with_its_target_block() -> None:
    """tasks.md: positions to fix. With nothing built every block of the house is missing (the
    list stops at 300 cells, in x, y, z order, after the full count); a correct floor leaves
    the list; a block where air belongs must be cleared ("-> air")."""
    target, feedback = housebuild_turn("position", {a: "" for a in STRBUILD})
    count, shown = fixes(feedback["first_builder"])
    assert count == len(target) > 300  # every block missing; the first 300 are shown
    assert len(shown) == 300 and shown == {c: target[c] for c in sorted(target)[:300]}
    floor = {cell: block for cell, block in target.items() if cell[1] == 0}
    (block,) = set(floor.values())  # the generated house's floor is one box of one block
    xs, zs = [c[0] for c in floor], [c[2] for c in floor]
    answers = {
        "first_builder": f"/fill {min(xs)} 0 {min(zs)} {max(xs)} 0 {max(zs)} {block}",
        "second_builder": "/fill 0 8 7 0 8 7 obsidian",  # air in the target
    }
    assert (0, 8, 7) not in target
    target, feedback = housebuild_turn("position", answers)
    expected = {c: b for c, b in target.items() if c not in floor} | {(0, 8, 7): "air"}
    assert len(expected) < 300
    for agent in STRBUILD:
        assert fixes(feedback[agent]) == (len(expected), expected)


def test_housebuild_resource_feedback_tracks_each_builders_allowance() -> None:
    """tasks.md: resource schedule. The allowance of a block whose house count is c is
    ceil(c/2) + floor(c/4); a fill is charged its whole volume; air is free."""
    env = collabzoo.make("housebuild", feedback="resource")
    observations, _ = env.reset(seed=0, options={"task": 0, "split": "eval"})
    target = house_target(observations["first_builder"])
    counts: dict[str, int] = {}
    for block in target.values():
        counts[block] = counts.get(block, 0) + 1
    allowance = {b: math.ceil(c / 2) + c // 4 for b, c in counts.items()}
    stated = line_after(observations["first_builder"], "Resources: you may place at most ")
    for block, limit in allowance.items():
        assert f"{block} {limit}" in stated

    floor = [c for c, b in target.items() if c[1] == 0 and b == "white_concrete"]
    xs, zs = [c[0] for c in floor], [c[2] for c in floor]
    volume = (max(xs) - min(xs) + 1) * (max(zs) - min(zs) + 1)
    answers = {
        "first_builder": f"/fill {min(xs)} 0 {min(zs)} {max(xs)} 0 {max(zs)} white_concrete\n"
        "/fill 0 8 0 8 8 7 air",
        "second_builder": "/fill 0 1 0 0 1 0 obsidian",
    }
    observations, *_ = env.step(answers)
    spent = {"first_builder": {"white_concrete": volume}, "second_builder": {"obsidian": 1}}
    for agent, partner in (STRBUILD, STRBUILD[::-1]):
        text = latest(observations[agent])
        for who, builder in (("you", agent), ("your partner", partner)):
            line = line_after(text, f"Blocks placed by {who} (of the allowance): ")
            for block, limit in allowance.items():
                assert f"{block} {spent[builder].get(block, 0)}/{limit}" in line, (who, line)
        needs = line_after(text, "The house needs: ")
        needed = {b: int(n) for b, n in re.findall(r"(\w+) (\d+)", needs)}
        assert {b: n for b, n in needed.items() if n} == counts  # a zero count may be listed
