"""HouseBuild-v0: two builders raise a 3-D house under resource caps and spiders (tasks.md §5).

The env is a thin shell over `collabzoo.tasks.building.rewards.housebuild`. Its default task
list is a set of procedurally generated houses shipped with the package, so it works offline;
the reference houses load with `make("housebuild", data="houses.json")`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from collabzoo.envs.records import load_records, train_eval_split
from collabzoo.envs.text_env import (
    TextCollabEnv,
    TurnResult,
    check_choice,
    check_positive_int,
)
from collabzoo.tasks.building.envs.house_generator import generate_houses
from collabzoo.tasks.building.envs.prompts import (
    BUILDER_ROLES,
    identity_line,
    rejected_summary,
    score_line,
)
from collabzoo.tasks.building.rewards import housebuild as rules

FEEDBACK_MODES = ("score", "position", "resource")
EMBEDDED_HOUSES = 24
Box = tuple[int, int, int, int, int, int, str]


@functools.lru_cache(maxsize=512)
def merged_boxes(house: rules.House) -> tuple[Box, ...]:
    """The house's non-air cells as few axis-aligned boxes per layer, (x1, y, z1, x2, y, z2, b).

    Greedy: from each unclaimed cell (z-major), grow along x, then along z while the whole
    strip matches. Deterministic, so prompts are stable.
    """
    grid = house.grid
    sx, sy, sz = grid.shape
    boxes: list[Box] = []
    for y in range(sy):
        layer = grid[:, y, :]
        claimed = np.zeros((sx, sz), dtype=bool)
        for z in range(sz):
            for x in range(sx):
                kind = layer[x, z]
                if kind == 0 or claimed[x, z]:
                    continue
                x2 = x
                while x2 + 1 < sx and layer[x2 + 1, z] == kind and not claimed[x2 + 1, z]:
                    x2 += 1
                z2 = z
                while (
                    z2 + 1 < sz
                    and (layer[x : x2 + 1, z2 + 1] == kind).all()
                    and not claimed[x : x2 + 1, z2 + 1].any()
                ):
                    z2 += 1
                claimed[x : x2 + 1, z : z2 + 1] = True
                boxes.append((x, y, z, x2, y, z2, house.blocks[kind]))
    return tuple(boxes)


@functools.lru_cache(maxsize=512)
def plan_text(house: rules.House) -> str:
    """The prompt's layer plan of a house: its `merged_boxes` by layer. Kept, as they are:
    every reset writes it again."""
    by_layer: dict[int, list[str]] = {}
    for x1, y, z1, x2, _, z2, block in merged_boxes(house):
        by_layer.setdefault(y, []).append(f"({x1}, {y}, {z1}, {x2}, {y}, {z2} {block})")
    return "\n".join(
        f"y={y}: " + (", ".join(by_layer[y]) if y in by_layer else "all air")
        for y in range(house.size[1])
    )


class HouseBuildEnv(TextCollabEnv[rules.House]):
    """Two builders build a house from its layer plan (H = 4 by default).

    Args:
        data: houses in the reference y_layers format (a json / jsonl file or directory, or a
            hub dataset id); default: 24 generated houses (last 5 held out for eval). A list of
            houses is split like the reference file: first 80% train, last 20% eval.
        split: default split for `reset`: "train", "eval" or "all" (every house, in order).
        memory: how much of its own history an agent sees: "full", "last" or "none".
        feedback: "score" (reference default), "position" (cells to fix) or "resource"
            (what each builder spent of its allowance).
        horizon: turns per episode (reference: 4).
        resources: per-agent block allowances, ceil(c/2) + floor(c/4) (reference: on).
        spiders: three spiders attack unless someone answers /kill (reference: on).
        max_commands: accepted commands per agent per turn (reference: 300).
        render_mode: "ansi" makes `render()` return a text picture of the episode so far;
            "human" prints it at every reset and step; None (default) leaves rendering off.
    """

    metadata: ClassVar[dict[str, Any]] = {
        "name": "housebuild_v0",
        "render_modes": ["ansi", "human"],
        "is_parallelizable": True,
    }
    roles = BUILDER_ROLES
    default_horizon = 4
    max_reward = rules.MAX_SCORE

    def __init__(
        self,
        *,
        data: str | None = None,
        split: str = "train",
        memory: str = "full",
        feedback: str = "score",
        horizon: int | None = None,
        resources: bool = True,
        spiders: bool = True,
        max_commands: int = rules.MAX_COMMANDS_PER_AGENT,
        render_mode: str | None = None,
    ) -> None:
        super().__init__(split=split, memory=memory, horizon=horizon, render_mode=render_mode)
        self.feedback = check_choice("feedback", feedback, FEEDBACK_MODES)
        self.resources = bool(resources)
        self.spiders = bool(spiders)
        self.max_commands = check_positive_int("max_commands", max_commands)
        self._data = data
        self.spider_attacks: tuple[int, ...] | None = None
        self._boxes: tuple[Box, ...] = ()
        self._last: rules.HouseBuildOutcome | None = None

    @property
    def outcome(self) -> rules.HouseBuildOutcome | None:
        """The last scored turn (the built world and its breakdown); None before the first."""
        return self._last

    # ----- task items -----------------------------------------------------------------------
    def _load_items(self, split: str) -> Sequence[rules.House]:
        specs = generate_houses(EMBEDDED_HOUSES) if self._data is None else load_records(self._data)
        return [rules.House.from_spec(s) for s in train_eval_split(specs, split)]

    def _item_id(self, item: rules.House) -> str:
        return item.task_id

    def _begin_episode(self, item: rules.House, options: Mapping[str, Any]) -> dict[str, Any]:
        self._last = None
        self._boxes = merged_boxes(item)
        attacks = options.get("spider_attacks")
        if not self.spiders:
            self.spider_attacks = None
        elif attacks is None:
            low, high = rules.SPIDER_ATTACK_RANGE
            draw = self.np_random.integers(low, high + 1, size=rules.SPIDER_COUNT)
            self.spider_attacks = tuple(int(a) for a in draw)
        else:
            if (
                isinstance(attacks, (str, bytes))
                or not isinstance(attacks, Sequence)
                or not all(isinstance(a, int) and not isinstance(a, bool) for a in attacks)
                or any(a < 0 for a in attacks)
            ):
                raise ValueError(
                    "options['spider_attacks'] must be a list of non-negative ints, "
                    f"e.g. [1, 2, 3]; got {attacks!r}"
                )
            self.spider_attacks = tuple(attacks)
        return {"spider_attacks": list(self.spider_attacks or ())}

    # ----- prompts --------------------------------------------------------------------------
    def _role_prompt(self, agent: str) -> str:
        house = self.item
        sx, sy, sz = house.size
        index = self.possible_agents.index(agent)
        plan = plan_text(house)
        blocks = [b for b in house.blocks if b != rules.AIR]
        parts = [
            f"Together with your partner, build the house {house.task_id!r}.",
            identity_line(index, len(self.roles)),
            "",
            f"Build area: x from 0 to {sx - 1}, y from 0 to {sy - 1} (y is up), "
            f"z from 0 to {sz - 1}.",
            f"Blocks: {', '.join(blocks)} (and air). Both builders may use all of them.",
            "The house, layer by layer, as filled boxes (x1, y, z1, x2, y, z2 block); "
            "every other cell is air:",
            plan,
        ]
        if self.resources:
            limits = ", ".join(f"{b} {n}" for b, n in house.resource_limits.items())
            parts += [
                "",
                f"Resources: you may place at most {limits} blocks (a /fill costs its whole "
                "volume, air is free). Your partner has the same allowance, so neither of you "
                "can build the house alone.",
            ]
        if self.spider_attacks is not None:
            attack = ", ".join(str(a) for a in self.spider_attacks)
            parts += [
                "",
                f"Danger: {len(self.spider_attacks)} spiders will attack you for {attack} "
                f"damage ({sum(self.spider_attacks)} in all); you have {rules.PLAYER_HP} HP. "
                "A single /kill line from either builder kills them all.",
            ]
        parts += [
            "",
            f"Answer with commands only, one per line, at most {self.max_commands}:",
            "/fill x1 y1 z1 x2 y2 z2 block",
            "/kill",
        ]
        return "\n".join(parts)

    def _feedback(self, agent: str, outcome: rules.HouseBuildOutcome) -> str:
        index = self.possible_agents.index(agent)
        b = outcome.breakdown
        spiders = (
            "no spiders"
            if self.spider_attacks is None
            else "the spiders were killed"
            if b.metrics["killed"]
            else f"the spiders were not killed (HP kept {b.metrics['hp']:.0%})"
        )
        lines = [
            f"Your team's last build scored {b.total:.3f} (max 1.0): {b.metrics['match']:.0%} "
            f"of the cells are right; {spiders}.",
            rejected_summary(outcome.parsed[index].rejected),
        ]
        if self.feedback == "position":
            wrong = np.argwhere(outcome.world != self.item.grid)
            fixes = [
                (int(x), int(y), int(z), self.item.blocks[self.item.grid[x, y, z]])
                for x, y, z in wrong
            ]
            shown = ", ".join(f"({x},{y},{z}) -> {blk}" for x, y, z, blk in fixes[:300])
            lines.append(f"Cells to fix ({len(fixes)}): {shown or 'none'}.")
        elif self.feedback == "resource":
            for i, parsed in enumerate(outcome.parsed):
                spent: dict[str, int] = {}
                for c in parsed.accepted:
                    if c[0] == "fill" and c[7] != rules.AIR:
                        volume = (c[4] - c[1] + 1) * (c[5] - c[2] + 1) * (c[6] - c[3] + 1)
                        spent[c[7]] = spent.get(c[7], 0) + volume
                who = "you" if i == index else "your partner"
                used = ", ".join(
                    f"{blk} {spent.get(blk, 0)}/{n}" for blk, n in self.item.resource_limits.items()
                )
                lines.append(f"Blocks placed by {who} (of the allowance): {used}.")
            counts = ", ".join(f"{blk} {n}" for blk, n in self.item.counts.items() if blk != "air")
            lines.append(f"The house needs: {counts}. Split each kind between you.")
        lines.append(
            "Each turn is built from scratch: answer with your complete list of commands again, "
            "one per line."
        )
        return "\n".join(lines)

    # ----- a turn ---------------------------------------------------------------------------
    def _play_turn(self, answers: Mapping[str, str]) -> TurnResult:
        outcome = rules.score_housebuild(
            self.item,
            [answers[a] for a in self.possible_agents],
            spider_attacks=self.spider_attacks,
            resources=self.resources,
            max_commands=self.max_commands,
        )
        self._last = outcome
        return TurnResult(
            breakdown=outcome.breakdown,
            parsed={
                a: p.report() for a, p in zip(self.possible_agents, outcome.parsed, strict=True)
            },
            feedback={a: self._feedback(a, outcome) for a in self.possible_agents},
        )

    def _render_ansi(self) -> str:
        house = self.item
        sx, sy, sz = house.size
        header = f"HouseBuild {house.task_id!r}, after turn {self.turn} of {self.horizon}"
        glyph = dict(zip(house.blocks, (".", *house.symbols[1:]), strict=True))
        world = self._last.world if self._last is not None else np.zeros_like(house.grid)
        owner = self._last.owner if self._last is not None else np.full(house.grid.shape, -1)
        lines = [header, "layer: built | target | builder (rows are z, columns x)"]
        for y in range(sy - 1, -1, -1):
            lines.append(f"y={y}")
            for z in range(sz):
                built = "".join(glyph[house.blocks[world[x, y, z]]] for x in range(sx))
                want = "".join(glyph[house.blocks[house.grid[x, y, z]]] for x in range(sx))
                who = "".join(
                    str(owner[x, y, z] + 1) if owner[x, y, z] >= 0 else "." for x in range(sx)
                )
                lines.append(f"  {built} | {want} | {who}")
        legend = ", ".join(f"{glyph[b]} {b}" for b in house.blocks if b != rules.AIR)
        lines.append(f"blocks: {legend}")
        if self._last is not None:
            lines.append(score_line(self._last.breakdown))
        return "\n".join(lines)
