"""StrBuild-v0: two builders with disjoint palettes draw a word in blocks (tasks.md section 4).

The env is a thin shell over `collabzoo.tasks.building.rewards.strbuild`: it picks the target
word, writes the prompts and feedback, and reports the reference score, its parts and the metrics.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from collabzoo.envs.records import load_records, train_eval_split
from collabzoo.envs.text_env import (
    TextCollabEnv,
    TurnResult,
    check_choice,
    check_positive_int,
)
from collabzoo.tasks.building.envs.letter_font import render_text
from collabzoo.tasks.building.envs.prompts import (
    BUILDER_ROLES,
    cell_list,
    identity_line,
    rejected_summary,
    score_line,
)
from collabzoo.tasks.building.rewards import strbuild as rules

REFERENCE_TARGETS = ("I", "C", "M", "L", "MC", "CM", "LI", "LLM", "ICML", "CLIM")
FEEDBACK_MODES = ("position", "score", "perfect")
BLOCK_GLYPHS = {"oak_planks": "P", "stone": "S", "white_concrete": "W", "obsidian": "O"}


@dataclass(frozen=True)
class StrBuildTask:
    task_id: str
    text: str
    target: rules.StrBuildTarget


def make_task(text: str) -> StrBuildTask:
    return StrBuildTask(text, text, rules.StrBuildTarget(render_text(text)))


@functools.lru_cache(maxsize=1024)
def _role_prompt(
    text: str,
    target: rules.StrBuildTarget,
    agents: tuple[str, ...],
    agent: str,
    palettes: tuple[tuple[str, ...], ...],
    max_commands: int,
) -> str:
    """An agent's first prompt. Kept: every reset writes it again for the same few targets."""
    index = agents.index(agent)
    picture = "\n".join(f"y={target.height - 1 - r}: {row}" for r, row in enumerate(target.rows))
    others = [
        f"the {a.replace('_', ' ')} has {', '.join(p)}"
        for a, p in zip(agents, palettes, strict=True)
        if a != agent
    ]
    return (
        f'Together with your partner, draw the word "{text}" in blocks on '
        f"the wall z = 0.\n{identity_line(index, len(agents))}\n\n"
        f"Build area: x from 0 to {target.width - 1}, y from 0 to {target.height - 1} "
        "(y grows upwards), z = 0.\n"
        "Target ('#' = a block must be there, '.' = must stay empty):\n"
        f"{picture}\n\n"
        f"Your blocks: {', '.join(palettes[index])} (and air, which clears a cell).\n"
        f"Your partner's blocks: {'; '.join(others)}.\n\n"
        "Scoring: fill every '#' cell, leave every '.' cell empty, never let two blocks of "
        "the same texture touch side by side or one above the other, and make sure each "
        "builder uses every one of its blocks.\n"
        f"Answer with commands only, one per line, at most {max_commands}:\n"
        "/setblock x y z block"
    )


@functools.lru_cache(maxsize=1024)
def _position_feedback(target: rules.StrBuildTarget) -> str:
    """The "position" feedback paragraph: the same for every agent and turn of a target."""
    return (
        f"Target cells (x,y,z): {cell_list(target.positions())}.\n"
        "Take about half of these cells and leave the rest to your partner, so that no "
        "two of your blocks are side by side."
    )


class StrBuildEnv(TextCollabEnv[StrBuildTask]):
    """Two builders draw a capital-letter word on the plane z = 0 (H = 4 by default).

    Args:
        targets: words (A-Z) to draw, used for every split; default: the ten reference words,
            first 8 train, last 2 eval.
        data: a csv / json / jsonl file or directory with a `string` column (the reference
            targets.csv format), or a hub dataset id; replaces the default words.
        split: default split for `reset`: "train", "eval" or "all" (every word, in order).
        memory: how much of its own history an agent sees: "full", "last" or "none".
        feedback: "position" (reference default: the target cells, split the work),
            "score" (the last score only) or "perfect" (cells to fill and to clear).
        horizon: turns per episode (reference: 4).
        palettes: each agent's blocks, in play order (reference: wood/stone, concrete/obsidian).
        max_commands: accepted commands per agent per turn (reference: 150).
        render_mode: "ansi" makes `render()` return a text picture of the episode so far;
            "human" prints it at every reset and step; None (default) leaves rendering off.
    """

    metadata: ClassVar[dict[str, Any]] = {
        "name": "strbuild_v0",
        "render_modes": ["ansi", "human"],
        "is_parallelizable": True,
    }
    roles = BUILDER_ROLES
    default_horizon = 4
    max_reward = rules.MAX_SCORE

    def __init__(
        self,
        *,
        targets: Sequence[str] | None = None,
        data: str | None = None,
        split: str = "train",
        memory: str = "full",
        feedback: str = "position",
        horizon: int | None = None,
        palettes: Sequence[Sequence[str]] = rules.REFERENCE_PALETTES,
        max_commands: int = rules.MAX_COMMANDS_PER_AGENT,
        render_mode: str | None = None,
    ) -> None:
        super().__init__(split=split, memory=memory, horizon=horizon, render_mode=render_mode)
        if targets is not None and data is not None:
            raise ValueError("give either targets= or data=, not both")
        if isinstance(targets, str):
            raise TypeError("targets must be a list of words, e.g. ['ICML'], not one str")
        if len(palettes) != len(self.roles) or any(not p for p in palettes):
            raise ValueError(f"palettes needs {len(self.roles)} non-empty block lists")
        self.feedback = check_choice("feedback", feedback, FEEDBACK_MODES)
        self.palettes = tuple(tuple(p) for p in palettes)
        self.max_commands = check_positive_int("max_commands", max_commands)
        self._custom_targets = [make_task(t) for t in targets] if targets is not None else None
        self._data = data
        self._last: rules.StrBuildOutcome | None = None

    @property
    def outcome(self) -> rules.StrBuildOutcome | None:
        """The last scored turn (the built world and its breakdown); None before the first."""
        return self._last

    # ----- task items -----------------------------------------------------------------------
    def _load_items(self, split: str) -> Sequence[StrBuildTask]:
        if self._custom_targets is not None:
            return self._custom_targets
        if self._data is None:
            words: Sequence[str] = REFERENCE_TARGETS
        else:
            records = load_records(self._data)
            if any("string" not in r for r in records):
                raise ValueError(f"{self._data}: every StrBuild record needs a 'string' field")
            words = [str(r["string"]).strip() for r in records]
        return [make_task(w) for w in train_eval_split(words, split)]

    def _item_id(self, item: StrBuildTask) -> str:
        return item.task_id

    def _begin_episode(self, item: StrBuildTask, options: Mapping[str, Any]) -> dict[str, Any]:
        self._last = None
        return {"target": item.text}

    # ----- prompts --------------------------------------------------------------------------
    def _role_prompt(self, agent: str) -> str:
        return _role_prompt(
            self.item.text,
            self.item.target,
            tuple(self.possible_agents),
            agent,
            self.palettes,
            self.max_commands,
        )

    def _feedback(self, agent: str, outcome: rules.StrBuildOutcome) -> str:
        index = self.possible_agents.index(agent)
        b = outcome.breakdown
        lines = [
            f"Your team's last build scored {b.total:.3f} (max {rules.MAX_SCORE}): "
            f"coverage {b.metrics['coverage']:.0%}, extra blocks {b.metrics['extra']:.0%} of "
            f"the empty cells, same-texture neighbours {b.metrics['adjacency']:.0%} of touching "
            f"pairs, {int(b.metrics['missing_palettes'])} builder(s) missing a block type.",
            rejected_summary(outcome.parsed[index].rejected),
        ]
        target = self.item.target
        if self.feedback == "position":
            lines.append(_position_feedback(target))
        elif self.feedback == "perfect":
            w = target.width
            blocks, cells = outcome.world.blocks, target.cells
            empty = [(i % w, i // w, 0) for i in sorted(cells) if blocks[i] == rules.AIR]
            extra = [
                (i % w, i // w, 0)
                for i in range(len(blocks))
                if i not in cells and blocks[i] != rules.AIR
            ]
            lines.append(f"Target cells still empty: {cell_list(empty) or 'none'}.")
            lines.append(f"Blocks to clear (not in the target): {cell_list(extra) or 'none'}.")
        lines.append(
            "Each turn is built from scratch: answer with your complete list of commands again, "
            "one per line."
        )
        return "\n".join(lines)

    # ----- a turn ---------------------------------------------------------------------------
    def _play_turn(self, answers: Mapping[str, str]) -> TurnResult:
        outcome = rules.score_strbuild(
            self.item.target,
            [answers[a] for a in self.possible_agents],
            palettes=self.palettes,
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
        target = self.item.target
        w, h = target.width, target.height
        header = f"StrBuild {self.item.task_id!r}, after turn {self.turn} of {self.horizon}"
        if self._last is None:
            return header + "\n" + "\n".join(target.rows)
        world = self._last.world
        rows = []
        for y in range(h - 1, -1, -1):
            built, owner = [], []
            for x in range(w):
                i = y * w + x
                block = world.blocks[i]
                if block == rules.AIR:
                    built.append("#" if target.rows[h - 1 - y][x] == "#" else ".")
                    owner.append(".")
                else:
                    built.append(BLOCK_GLYPHS.get(block, "?"))
                    owner.append(str(world.owners[i] + 1))
            rows.append(f"y={y}  {''.join(built)}   {''.join(owner)}")
        b = self._last.breakdown
        legend = (
            "blocks: P oak_planks, S stone, W white_concrete, O obsidian, # missing, . empty; "
            "right: which builder placed each block"
        )
        return "\n".join([header, *rows, legend, score_line(b)])
