"""HouseBuild: two builders raise a 3-D house with /fill, under resource caps and spider attacks.

The rules and score of the reference game. Both agents share the house's palette; agent 1's
accepted commands are applied first, then agent 2's. Each agent may place at most
ceil(c/2) + floor(c/4) blocks of a kind whose target count is c (a fill is charged its whole
volume; air is free), so neither can build the house alone. Spiders deal their total attack
unless some agent's answer holds an accepted `/kill`.

    score = (cells equal to the target, air included) / all cells
            - 0.1 * min(1, damage / HP)   if no agent killed the spiders        (max 1.0)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from collabzoo.rewards.breakdown import RewardBreakdown
from collabzoo.rewards.commands import SMALL_INTS, ParsedAnswer, Rejection, command_lines

AIR = "air"
MAX_COMMANDS_PER_AGENT = 300
PLAYER_HP = 5
SPIDER_COUNT = 3
SPIDER_ATTACK_RANGE = (1, 3)
SPIDER_PENALTY = 0.1
MAX_SCORE = 1.0
REFERENCE_INVENTORY = {
    "A": "air",
    "B": "stone_bricks",
    "C": "white_concrete",
    "D": "planks",
    "O": "obsidian",
    "S": "stone_stairs",
}


@dataclass(frozen=True, eq=False)
class House:
    """A target house: `grid[x, y, z]` indexes `blocks` (index 0 is always air); `symbols`
    are the plan's one-character names of the blocks (`A` air, `C` white_concrete, ...)."""

    task_id: str
    blocks: tuple[str, ...]
    grid: np.ndarray
    symbols: tuple[str, ...]

    @property
    def size(self) -> tuple[int, int, int]:
        x, y, z = self.grid.shape
        return int(x), int(y), int(z)

    @property
    def palette(self) -> tuple[str, ...]:
        """Every block id either agent may use (air included)."""
        return self.blocks

    @cached_property
    def counts(self) -> dict[str, int]:
        """How many target cells hold each block."""
        n = np.bincount(self.grid.ravel(), minlength=len(self.blocks))
        return {b: int(c) for b, c in zip(self.blocks, n, strict=True)}

    @cached_property
    def resource_limits(self) -> dict[str, int]:
        """Per-agent placement limit per non-air block: ceil(c/2) + floor(c/4)."""
        return {b: math.ceil(c / 2) + c // 4 for b, c in self.counts.items() if b != AIR}

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any]) -> House:
        """Build from the reference format: `{task_id, inventory, target_spec: {type:
        "y_layers", size: [X, Y, Z], layers: [{y, rows}]}}`, rows indexed by z, chars by x."""
        try:
            inventory = dict(spec.get("inventory") or REFERENCE_INVENTORY)
            target = spec["target_spec"]
            if target.get("type", "y_layers") != "y_layers":
                raise ValueError(f"unsupported target_spec type {target.get('type')!r}")
            sx, sy, sz = (int(v) for v in target["size"])
            layers = target["layers"]
        except (KeyError, TypeError) as error:
            raise ValueError(
                "a house must look like {task_id, inventory, target_spec: {type: 'y_layers', "
                f"size: [X, Y, Z], layers: [{{y, rows}}]}}; could not read it: {error!r}"
            ) from error
        task_id = str(spec.get("task_id", "house"))
        if min(sx, sy, sz) < 1:
            raise ValueError(f"house {task_id}: size must be positive, got {[sx, sy, sz]}")
        blocks = [AIR, *sorted({b for b in inventory.values() if b != AIR})]
        index = {ch: blocks.index(b) for ch, b in inventory.items()}
        grid = np.zeros((sx, sy, sz), dtype=np.int8)
        for layer in layers:
            y, rows = int(layer["y"]), layer["rows"]
            if not 0 <= y < sy or len(rows) != sz or any(len(r) != sx for r in rows):
                raise ValueError(
                    f"house {task_id}: layer y={y} must have {sz} rows of {sx} characters "
                    f"and 0 <= y < {sy}"
                )
            for z, row in enumerate(rows):
                for x, ch in enumerate(row):
                    if ch not in index:
                        raise ValueError(
                            f"house {task_id}: character {ch!r} at layer y={y} is not in the "
                            f"inventory {sorted(inventory)}"
                        )
                    grid[x, y, z] = index[ch]
        grid.setflags(write=False)
        symbol_of: dict[str, str] = {}
        for ch, block in inventory.items():
            symbol_of.setdefault(block, ch)
        symbols = tuple(symbol_of.get(block, ".") for block in blocks)
        return cls(task_id, tuple(blocks), grid, symbols)


def parse_housebuild_answer(
    text: str,
    house: House,
    *,
    resource_limits: Mapping[str, int] | None,
    max_commands: int = MAX_COMMANDS_PER_AGENT,
) -> ParsedAnswer:
    """Read one agent's answer into accepted ("fill", x1, y1, z1, x2, y2, z2, block) and
    ("kill",) commands, charging fills against `resource_limits` (None: no limits).

    The rules of `commands_under_cap` and `split_command`, inlined: answers are read once per
    agent and turn, so this loop is most of a step's cost on long or messy answers.
    """
    sx, sy, sz = house.size
    allowed = set(house.blocks)
    allowed_text = ""  # the palette as shown in a rejection, written on the first one
    used: dict[str, int] = {}
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
        if name == "kill":
            accepted.append(("kill",))
            continue
        if name != "fill":
            rejected.append(
                Rejection(line, f"unknown command {name!r}: HouseBuild accepts /fill and /kill")
            )
            continue
        if len(tokens) != 8:
            rejected.append(
                Rejection(line, "expected exactly /fill x1 y1 z1 x2 y2 z2 block (no fill mode)")
            )
            continue
        x1, y1, z1, x2, y2, z2 = numbers = list(map(small, tokens[1:7]))
        if None in numbers:
            try:
                x1, y1, z1, x2, y2, z2 = map(int, tokens[1:7])  # int() refuses ~ and ^ as well
            except ValueError:
                rejected.append(
                    Rejection(line, "coordinates must be absolute integers (no ~ or ^)")
                )
                continue
        block = tokens[7]
        if block.startswith("minecraft:"):
            block = block[10:]
        if block not in allowed:
            allowed_text = allowed_text or str(sorted(allowed))
            rejected.append(
                Rejection(line, f"block {block!r} is not in the palette {allowed_text}")
            )
            continue
        if not (
            0 <= x1 < sx
            and 0 <= x2 < sx
            and 0 <= y1 < sy
            and 0 <= y2 < sy
            and 0 <= z1 < sz
            and 0 <= z2 < sz
        ):
            rejected.append(
                Rejection(
                    line,
                    f"a corner is outside the build area [0,0,0]..[{sx - 1},{sy - 1},{sz - 1}]",
                )
            )
            continue
        lo_x, hi_x = (x1, x2) if x1 <= x2 else (x2, x1)
        lo_y, hi_y = (y1, y2) if y1 <= y2 else (y2, y1)
        lo_z, hi_z = (z1, z2) if z1 <= z2 else (z2, z1)
        if resource_limits is not None and block != AIR:
            volume = (hi_x - lo_x + 1) * (hi_y - lo_y + 1) * (hi_z - lo_z + 1)
            spent = used.get(block, 0) + volume
            limit = resource_limits.get(block, 0)
            if spent > limit:
                rejected.append(
                    Rejection(
                        line,
                        f"not enough {block}: this fill needs {volume}, "
                        f"{limit - used.get(block, 0)} of your {limit} left",
                    )
                )
                continue
            used[block] = spent
        accepted.append(("fill", lo_x, lo_y, lo_z, hi_x, hi_y, hi_z, block))
    return parsed


def _fills(answers: Sequence[ParsedAnswer]):
    """(agent, x-slice, y-slice, z-slice, block) of every accepted fill, in play order."""
    for agent, parsed in enumerate(answers):
        for command in parsed.accepted:
            if command[0] == "fill":
                _, x1, y1, z1, x2, y2, z2, block = command
                yield agent, slice(x1, x2 + 1), slice(y1, y2 + 1), slice(z1, z2 + 1), block


def build_world(house: House, answers: Sequence[ParsedAnswer]) -> np.ndarray:
    """The built grid of block indices (into `house.blocks`)."""
    index = {b: i for i, b in enumerate(house.blocks)}
    world = np.zeros(house.grid.shape, dtype=np.int8)
    for _, xs, ys, zs, block in _fills(answers):
        world[xs, ys, zs] = index[block]
    return world


def build_owners(house: House, answers: Sequence[ParsedAnswer]) -> np.ndarray:
    """Which agent placed each cell's final block (-1: air)."""
    owner = np.full(house.grid.shape, -1, dtype=np.int8)
    for agent, xs, ys, zs, block in _fills(answers):
        owner[xs, ys, zs] = agent if block != AIR else -1
    return owner


def score_world(
    house: House,
    world: np.ndarray,
    *,
    killed: bool,
    spider_attacks: Sequence[int] | None,
) -> RewardBreakdown:
    """The reference HouseBuild score of a built grid (`spider_attacks=None`: no spiders)."""
    target = house.grid
    match = float(np.count_nonzero(world == target)) / target.size
    damage = sum(spider_attacks) if spider_attacks is not None else 0
    penalty = 0.0 if killed or not damage else SPIDER_PENALTY * min(1.0, damage / PLAYER_HP)
    built, wanted = world != 0, target != 0
    union = np.count_nonzero(built | wanted)
    hp = 1.0 if killed else max(0, PLAYER_HP - damage) / PLAYER_HP
    metrics = {
        "match": match,
        "iou": float(np.count_nonzero(built & wanted)) / union if union else 1.0,
        "hp": hp,
        "killed": float(killed),
    }
    components = {"match": match, "spider_penalty": -penalty}
    return RewardBreakdown(match - penalty, components, metrics)


@dataclass(frozen=True, eq=False)
class HouseBuildOutcome:
    """One scored turn: the score, each agent's parsed answer and the grid built."""

    house: House
    breakdown: RewardBreakdown
    parsed: tuple[ParsedAnswer, ...]
    world: np.ndarray

    @cached_property
    def owner(self) -> np.ndarray:
        """Which agent placed each cell (computed on demand: only pictures need it)."""
        return build_owners(self.house, self.parsed)


def score_housebuild(
    house: House,
    answers: Sequence[str],
    *,
    spider_attacks: Sequence[int] | None,
    resources: bool = True,
    max_commands: int = MAX_COMMANDS_PER_AGENT,
) -> HouseBuildOutcome:
    """Score one turn of HouseBuild from the agents' answers, in play order."""
    limits = house.resource_limits if resources else None
    parsed = tuple(
        parse_housebuild_answer(a, house, resource_limits=limits, max_commands=max_commands)
        for a in answers
    )
    killed = any(c[0] == "kill" for p in parsed for c in p.accepted)
    world = build_world(house, parsed)
    breakdown = score_world(house, world, killed=killed, spider_attacks=spider_attacks)
    return HouseBuildOutcome(house, breakdown, parsed, world)
