"""StrBuild: two builders draw a word in blocks; the rules and score of the reference game.

The world is the plane z = 0 of width W and height 5; the target is given top-down as rows of
`#` (block) and `.` (air), row 0 being y = 4. Agent 1's accepted `/setblock` commands are
applied first, then agent 2's, which overwrite. Every turn is scored as a fresh build.

    score = 2 * coverage - 1.5 * extra - 1.0 * adjacency - 0.25 * missing_palettes    (max 2.0)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from collabzoo.rewards.breakdown import RewardBreakdown
from collabzoo.rewards.commands import SMALL_INTS, ParsedAnswer, Rejection, command_lines

AIR = "air"
# Agent 1 then agent 2; air is always allowed besides (it clears a cell).
REFERENCE_PALETTES: tuple[tuple[str, ...], ...] = (
    ("oak_planks", "stone"),
    ("white_concrete", "obsidian"),
)
MAX_COMMANDS_PER_AGENT = 150
MAX_SCORE = 2.0
COVERAGE_WEIGHT = 2.0
EXTRA_WEIGHT = 1.5
ADJACENCY_WEIGHT = 1.0
MISSING_PALETTE_WEIGHT = 0.25


def texture(block: str) -> str:
    """The texture class of a block: what the adjacency rule compares."""
    if block.endswith("_planks"):
        return "wood"
    if block.endswith("_concrete"):
        return "concrete"
    return block


@dataclass(frozen=True)
class StrBuildTarget:
    """A target picture: `rows` top-down of `#`/`.`; cell index = y * width + x."""

    rows: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.rows or not self.rows[0]:
            raise ValueError("a StrBuild target needs at least one non-empty row")
        width = len(self.rows[0])
        bad = [r for r in self.rows if len(r) != width or set(r) - {"#", "."}]
        if bad:
            raise ValueError(
                f"StrBuild target rows must all have length {width} and hold only '#' and '.'; "
                f"got {bad[:3]!r}"
            )
        if "#" not in "".join(self.rows):
            raise ValueError("a StrBuild target needs at least one '#' cell")

    @property
    def width(self) -> int:
        return len(self.rows[0])

    @property
    def height(self) -> int:
        return len(self.rows)

    @cached_property
    def cells(self) -> frozenset[int]:
        """Indices y * width + x of the target (`#`) cells."""
        w, h = self.width, self.height
        return frozenset(
            (h - 1 - r) * w + x
            for r, row in enumerate(self.rows)
            for x, ch in enumerate(row)
            if ch == "#"
        )

    def positions(self) -> list[tuple[int, int, int]]:
        """Target coordinates (x, y, 0), bottom row first."""
        w = self.width
        return [(i % w, i // w, 0) for i in sorted(self.cells)]


def parse_strbuild_answer(
    text: str,
    *,
    width: int,
    height: int,
    palette: Sequence[str],
    max_commands: int = MAX_COMMANDS_PER_AGENT,
) -> ParsedAnswer:
    """Read one agent's answer into accepted ("setblock", x, y, 0, block) commands.

    The rules of `commands_under_cap` and `split_command`, inlined: answers are read once per
    agent and turn, so this loop is most of a step's cost on long or messy answers.
    """
    allowed = {*palette, AIR}
    allowed_text = ""  # the palette as shown in a rejection, written on the first one
    parsed = ParsedAnswer()
    accepted, rejected = parsed.accepted, parsed.rejected
    small = SMALL_INTS.get
    for line in command_lines(text):
        if len(accepted) >= max_commands:
            rejected.append(Rejection(line, f"over the cap of {max_commands} commands per agent"))
            continue
        tokens = line[1:].split() if line[0] == "/" else line.split()
        if not tokens:
            rejected.append(Rejection(line, "empty command"))
            continue
        name = tokens[0].lower()
        if name != "setblock":
            rejected.append(
                Rejection(line, f"unknown command {name!r}: StrBuild accepts only /setblock")
            )
            continue
        if len(tokens) < 5:
            rejected.append(Rejection(line, "expected /setblock x y z block"))
            continue
        x, y, z = small(tokens[1]), small(tokens[2]), small(tokens[3])
        if x is None or y is None or z is None:
            try:
                x, y, z = int(tokens[1]), int(tokens[2]), int(tokens[3])  # refuses ~ and ^
            except ValueError:
                rejected.append(
                    Rejection(line, "coordinates must be absolute integers (no ~ or ^)")
                )
                continue
        block = tokens[4]
        if block.startswith("minecraft:"):
            block = block[10:]
        if block not in allowed:
            allowed_text = allowed_text or str(sorted(allowed))
            rejected.append(
                Rejection(line, f"block {block!r} is not in this agent's palette {allowed_text}")
            )
            continue
        if not (0 <= x < width and 0 <= y < height and z == 0):
            rejected.append(
                Rejection(
                    line,
                    f"({x}, {y}, {z}) is outside the build area "
                    f"[0,0,0]..[{width - 1},{height - 1},0]",
                )
            )
            continue
        accepted.append(("setblock", x, y, z, block))
    return parsed


@dataclass(frozen=True)
class StrBuildWorld:
    """The built plane: `blocks[i]` and the agent `owners[i]` that placed it (-1 = none)."""

    width: int
    height: int
    blocks: tuple[str, ...]
    owners: tuple[int, ...]


def build_world(width: int, height: int, answers: Sequence[ParsedAnswer]) -> StrBuildWorld:
    """Apply the agents' accepted commands in play order; later agents overwrite."""
    blocks = [AIR] * (width * height)
    owners = [-1] * (width * height)
    for agent, parsed in enumerate(answers):
        for _, x, y, _, block in parsed.accepted:
            i = y * width + x
            blocks[i] = block
            owners[i] = agent if block != AIR else -1
    return StrBuildWorld(width, height, tuple(blocks), tuple(owners))


def score_world(
    target: StrBuildTarget,
    world: StrBuildWorld,
    palettes: Sequence[Sequence[str]] = REFERENCE_PALETTES,
) -> RewardBreakdown:
    """The reference StrBuild score of a built plane, with its parts and metrics.

    Only the filled cells are visited (a messy or sparse build fills few of the plane's).
    """
    cells = target.cells
    blocks, w, h = world.blocks, world.width, world.height
    filled = [i for i, b in enumerate(blocks) if b != AIR]
    covered = len(cells.intersection(filled))
    extra = len(filled) - covered
    background = w * h - len(cells)
    coverage = covered / len(cells)
    extra_ratio = extra / background if background else 0.0

    present = {blocks[i] for i in filled}
    texture_of = {b: texture(b) for b in present}
    textures = {i: texture_of[blocks[i]] for i in filled}
    pairs = same = 0
    last_column = w - 1
    for i, tex in textures.items():
        if i % w != last_column:
            right = textures.get(i + 1)
            if right is not None:
                pairs += 1
                same += right == tex
        above = textures.get(i + w)  # None past the top row too: those cells are not in the dict
        if above is not None:
            pairs += 1
            same += above == tex
    # The reference takes 0 when no two filled cells touch (an empty wall too): the reward keeps
    # that; `touching_pairs` lets a report tell "no same-texture neighbours" from "no neighbours".
    adjacency = same / pairs if pairs else 0.0

    missing = sum(1 for p in palettes if not {b for b in p if b != AIR} <= present)

    components = {
        "coverage": COVERAGE_WEIGHT * coverage,
        "extra_penalty": -EXTRA_WEIGHT * extra_ratio,
        "adjacency_penalty": -ADJACENCY_WEIGHT * adjacency,
        "palette_penalty": -MISSING_PALETTE_WEIGHT * missing,
    }
    union = len(cells) + extra
    metrics = {
        "coverage": coverage,
        "extra": extra_ratio,
        "adjacency": adjacency,
        "touching_pairs": float(pairs),
        "iou": covered / union if union else 0.0,
        "missing_palettes": float(missing),
    }
    return RewardBreakdown(sum(components.values()), components, metrics)


@dataclass(frozen=True)
class StrBuildOutcome:
    """One scored turn: the score, each agent's parsed answer, and the world they built."""

    breakdown: RewardBreakdown
    parsed: tuple[ParsedAnswer, ...]
    world: StrBuildWorld


def score_strbuild(
    target: StrBuildTarget,
    answers: Sequence[str],
    *,
    palettes: Sequence[Sequence[str]] = REFERENCE_PALETTES,
    max_commands: int = MAX_COMMANDS_PER_AGENT,
) -> StrBuildOutcome:
    """Score one turn of StrBuild from the agents' answers, in play order."""
    if len(answers) != len(palettes):
        raise ValueError(f"expected {len(palettes)} answers (one per palette), got {len(answers)}")
    parsed = tuple(
        parse_strbuild_answer(
            a, width=target.width, height=target.height, palette=p, max_commands=max_commands
        )
        for a, p in zip(answers, palettes, strict=True)
    )
    world = build_world(target.width, target.height, parsed)
    return StrBuildOutcome(score_world(target, world, palettes), parsed, world)
