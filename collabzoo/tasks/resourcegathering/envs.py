"""ResourceGathering-v0: a wood worker and a stone-and-iron worker gather a team goal under fog of
war (tasks-2.md section 10).

The env is a thin shell over `collabzoo.tasks.resourcegathering.rewards`: it picks the map,
writes each agent's prompt from the game state (the whole state, re-rendered every turn, as the
reference does), plays the turn and reports the reward, its parts and what each answer was read
into. The 14 reference maps ship with the package (`data/data.json`, from
OpenMLRL/LLM_Collab_Minecraft, MIT License, Copyright (c) 2025 OpenMLRL).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any, ClassVar

from collabzoo.envs.prompt_form import (
    CHAT_TEMPLATE_MODES,
    joined,
    turn_prompt,
    with_previous_answer,
)
from collabzoo.envs.records import ALL, load_records
from collabzoo.envs.text_env import TextCollabEnv, TurnResult, check_choice, check_positive_int
from collabzoo.tasks.resourcegathering import rewards as rules

DATA = Path(__file__).with_name("data") / "data.json"
SPLIT_SCHEMES = {"comlrl": 7, "coti": 8}
"""How many maps (from the front) train on: CoMLRL's config and the README `[:7]`, CoTI's meta
config `[:8]` (quirk: its first eval map is then trained on)."""
SYSTEM_PROMPT = (
    "You are one of two workers in a resource-gathering game. Answer with exactly one JSON "
    "object and stop: no text, code fences or reasoning around it."
)
"""The system text before every prompt: the reference's instruction (one JSON object, nothing
around it) in this env's words. The prompts carry every fact the reference's template fills in
(roles and tools, map size, turn, goals, inventory, what is left, view, position, resources in
view and in reach, the teammate if in view, every message received, the extraction zone, the
action's shape) written anew, not copied."""
PREVIOUS_ANSWER = "Your answer last turn:"
ROLES = ("wood_worker", "stone_iron_worker")
ROLE_TEXT = ("the wood worker", "the stone-and-iron worker")
TOOL_TEXT = ("wood", "stone and iron")


@functools.lru_cache(maxsize=8)
def _maps_from(source: str) -> tuple[rules.GatherMap, ...]:
    if source == str(DATA):
        records = json.loads(DATA.read_text(encoding="utf-8"))
    else:
        records = load_records(source)
    return tuple(rules.parse_map(r, i) for i, r in enumerate(records))


def load_maps(data: str | None = None) -> tuple[rules.GatherMap, ...]:
    """The maps of a reference-format JSON file (default: the 14 shipped reference maps)."""
    return _maps_from(str(DATA if data is None else Path(data).expanduser()))


def _cell(c: rules.Coord) -> str:
    return f"({c[0]},{c[1]})"


def _counts_text(counts: Sequence[int]) -> str:
    return ", ".join(
        f"{name} {n}" for name, n in zip(rules.RESOURCES, counts, strict=True) if n > 0
    )


def render_prompt(
    gmap: rules.GatherMap,
    state: rules.GatherState,
    agent: int,
    *,
    view: int = rules.VIEW,
    extraction_limit: int = rules.EXTRACTION_LIMIT,
    extraction_range: int = rules.EXTRACTION_RANGE,
    max_path_len: int = rules.MAX_PATH_LEN,
) -> str:
    """What `agent` is told at the start of a turn: everything it knows, nothing it does not."""
    letter, other = rules.AGENT_LETTERS[agent], rules.AGENT_LETTERS[1 - agent]
    pos = state.positions[agent]
    goal, got = gmap.goal, state.collected
    visible = state.visible(agent, gmap.width, gmap.height, view)
    seen = sorted(
        (c for c in visible if sum(state.resources.get(c, (0, 0, 0))) > 0),
        key=lambda c: (c[1], c[0]),
    )
    reach = sorted(
        (
            (x, z)
            for x in range(gmap.width)
            for z in range(gmap.height)
            if rules.manhattan(pos, (x, z)) <= extraction_range
        ),
        key=lambda c: (c[1], c[0]),
    )
    in_reach = [c for c in seen if rules.manhattan(pos, c) <= extraction_range]
    partner = state.positions[1 - agent]
    messages = state.inboxes[agent]
    limit = extraction_limit if extraction_limit > 0 else 1
    lines = [
        f"# ResourceGathering: turn {state.turn} of {state.max_turns}",
        f"You are worker {letter}, {ROLE_TEXT[agent]}: your tool extracts only "
        f"{TOOL_TEXT[agent]}. Your teammate, worker {other} ({ROLE_TEXT[1 - agent]}), extracts "
        f"only {TOOL_TEXT[1 - agent]}.",
        "Team goal: "
        + ", ".join(f"{n} {g}" for n, g in zip(rules.RESOURCES, goal, strict=True))
        + ".",
        "Collected so far: "
        + ", ".join(f"{n} {c}" for n, c in zip(rules.RESOURCES, got, strict=True))
        + ". "
        "Still needed: "
        + ", ".join(
            f"{n} {max(0, g - c)}" for n, g, c in zip(rules.RESOURCES, goal, got, strict=True)
        )
        + ".",
        "",
        f"Map: {gmap.width} x {gmap.height} cells; x runs 0..{gmap.width - 1} from left to "
        f"right, z runs 0..{gmap.height - 1} from top to bottom; (0,0) is the top-left cell.",
        f"Your view: every cell within {view} steps in x and in z of a cell you have stood on or "
        "walked through; once seen, a cell stays in view with its current contents.",
        f"Your position: {_cell(pos)}",
        "Resource cells in view:",
        *([f"  {_cell(c)}: {_counts_text(state.resources[c])}" for c in seen] or ["  none"]),
        f"In reach if you stay (Manhattan distance <= {extraction_range}): "
        + ("; ".join(f"{_cell(c)} {_counts_text(state.resources[c])}" for c in in_reach) or "none"),
        "Cells you could extract from if you stay: " + " ".join(_cell(c) for c in reach),
        f"Your teammate: {'at ' + _cell(partner) if partner in visible else 'not in view'}",
        "Messages from your teammate, all so far:",
        *(
            [
                f"  {n}. " + "; ".join(f"{f.type} {f.count} at ({f.x},{f.z})" for f in m)
                for n, m in enumerate(messages, start=1)
            ]
            or ["  none"]
        ),
        "",
        "How a turn works:",
        f'1. Move: "path" lists [x, z] points; the first is your position, each next one a '
        "neighbouring cell (8 directions, diagonals too) inside the map. At most "
        f"{max_path_len} moves count (the first {max_path_len + 1} points). A path that breaks a "
        f"rule means you stay; [] or [{list(pos)}] means stay.",
        f'2. Extract: "cmds" lists target cells [x, z]; the first {limit} count. A target works '
        f"if it lies within Manhattan distance {extraction_range} of where your path ends and "
        "holds something your tool extracts: you then take all of that resource from the "
        "cell. Every other target is wasted and costs the team.",
        '3. Report: "comm" is {"resource_facts": [{"x": .., "z": .., "type": "wood", "stone" or '
        '"iron", "count": ..}]}. Only facts about cells in your view at the start of the turn '
        "are passed on, with their true counts; your teammate reads them next turn. Tell your "
        "teammate where the resources it extracts are. {} sends nothing.",
        '4. "probe" is not used: leave it [].',
        f"The episode ends as soon as the team has its whole goal, or after turn "
        f"{state.max_turns}.",
        "",
        "Answer with one JSON object and nothing else, e.g. to do nothing: "
        f'{{"comm": {{}}, "probe": [], "cmds": [], "path": [{list(pos)}]}}',
        'Its shape: {"comm": {"resource_facts": [{"x": 1, "z": 2, "type": "stone", "count": '
        '3}]}, "probe": [], "cmds": [[x, z], ...], "path": [[x, z], ...]}',
        "",
        "Feedback: none",
    ]
    return "\n".join(lines)


class ResourceGatheringEnv(TextCollabEnv[rules.GatherMap]):
    """A wood worker (A) and a stone-and-iron worker (B) gather wood 3, stone 3 and iron 1 on a
    grid map (H = 4). Each starts among the resources the other needs and sees only a radius-2
    window around the cells it has visited, so they must tell each other where things are.
    Each turn an agent answers one JSON object: a message of resource facts for its partner, a
    path (up to 4 moves) and up to 2 extraction targets. The episode ends when the goal is met
    or after the last turn. (The reference's turn has no guard, so a trainer that steps it past
    the end keeps moving, extracting and paying; here the episode is over then, no agent is
    live, and `step` refuses, as PettingZoo envs do.)

    Args:
        data: a JSON file of maps in the reference format; default: the 14 reference maps
            shipped with the package.
        split: default split for `reset`: "train", "eval" or "all" (every map, in order).
        split_scheme: "comlrl" (default: the first 7 maps train, the last 7 eval, as in the
            CoMLRL config and the README) or "coti" (8 / 6, the CoTI meta config).
        memory: how much of its own history an agent sees: "none" (default: every prompt is
            the whole re-rendered state, as in the reference), "last" or "full".
        horizon: turns per episode (reference: 4).
        shaping: the reward weights: "reference" (the reference config: progress 8, terminal 7,
            ...), "wrapper_defaults" (the reference wrapper's fallbacks: progress 10, terminal
            4) or a `RewardScales`.
        view: the view radius (reference: 2).
        extraction_limit: targets that count per agent and turn (reference: 2; 0 reads as 1).
        extraction_range: Manhattan reach of an extraction (reference: 2).
        max_path_len: moves per turn that count (reference: 4).
        original_prompt: True (default, as configured) puts the system text before every
            prompt; False leaves it off the later turns' prompts, as the reference does.
        previous_response: append the agent's last answer to its next prompt (reference
            option, off in its config).
        chat_template: "first_turn" (default: the reference trainer's quirk: the first prompt
            goes through the model's chat template, later ones are raw system + user text,
            returned as `RawPrompt`) or "every_turn".
        render_mode: "ansi" makes `render()` return a text picture of the map; "human" prints
            it at every reset and step; None (default) leaves rendering off.
    """

    metadata: ClassVar[dict[str, Any]] = {
        "name": "resourcegathering_v0",
        "render_modes": ["ansi", "human"],
        "is_parallelizable": True,
    }
    roles = ROLES
    default_horizon = rules.MAX_TURNS
    max_reward = rules.max_turn_reward(rules.SHAPINGS["reference"])

    def __init__(
        self,
        *,
        data: str | None = None,
        split: str = "train",
        split_scheme: str = "comlrl",
        memory: str = "none",
        horizon: int | None = None,
        shaping: str | rules.RewardScales = "reference",
        view: int = rules.VIEW,
        extraction_limit: int = rules.EXTRACTION_LIMIT,
        extraction_range: int = rules.EXTRACTION_RANGE,
        max_path_len: int = rules.MAX_PATH_LEN,
        original_prompt: bool = True,
        previous_response: bool = False,
        chat_template: str = "first_turn",
        render_mode: str | None = None,
    ) -> None:
        super().__init__(split=split, memory=memory, horizon=horizon, render_mode=render_mode)
        self.chat_template = check_choice("chat_template", chat_template, CHAT_TEMPLATE_MODES)
        self.original_prompt = bool(original_prompt)
        self.previous_response = bool(previous_response)
        self.split_scheme = check_choice("split_scheme", split_scheme, tuple(SPLIT_SCHEMES))
        if isinstance(shaping, str):
            self.scales = rules.SHAPINGS[check_choice("shaping", shaping, tuple(rules.SHAPINGS))]
        elif isinstance(shaping, rules.RewardScales):
            self.scales = shaping
        else:
            raise TypeError(f"shaping must be a name or a RewardScales, got {shaping!r}")
        self.view = check_positive_int("view", view)
        if isinstance(extraction_limit, bool) or not isinstance(extraction_limit, int):
            raise ValueError(f"extraction_limit must be an int >= 0, got {extraction_limit!r}")
        if extraction_limit < 0:
            raise ValueError(f"extraction_limit must be an int >= 0, got {extraction_limit!r}")
        self.extraction_limit = extraction_limit
        self.extraction_range = check_positive_int("extraction_range", extraction_range)
        self.max_path_len = check_positive_int("max_path_len", max_path_len)
        self.max_reward = rules.max_turn_reward(self.scales, self.max_path_len)
        self._data = data
        self._game: rules.GatherState | None = None
        self._last: rules.TurnOutcome | None = None

    @property
    def game(self) -> rules.GatherState:
        """The game state: positions, views, inboxes, what is left on the map, the inventory."""
        self._require_started()
        return self._game  # type: ignore[return-value]

    @property
    def outcome(self) -> rules.TurnOutcome | None:
        """The last played turn (its breakdown and each answer's reading); None before one."""
        return self._last

    # ----- task items -----------------------------------------------------------------------
    def _load_items(self, split: str) -> Sequence[rules.GatherMap]:
        maps = load_maps(self._data)
        cut = SPLIT_SCHEMES[self.split_scheme]
        if split == ALL or len(maps) <= cut:
            return maps
        return maps[:cut] if split == "train" else maps[cut:]

    def _item_id(self, item: rules.GatherMap) -> str:
        return item.task_id

    def _begin_episode(self, item: rules.GatherMap, options: Mapping[str, Any]) -> dict[str, Any]:
        self._game = rules.initial_state(item, self.horizon)
        self._last = None
        return {"map_family": item.family}

    # ----- prompts --------------------------------------------------------------------------
    def _prompt(self, agent: str) -> str:
        return render_prompt(
            self.item,  # type: ignore[arg-type]
            self.game,
            self.possible_agents.index(agent),
            view=self.view,
            extraction_limit=self.extraction_limit,
            extraction_range=self.extraction_range,
            max_path_len=self.max_path_len,
        )

    def _role_prompt(self, agent: str) -> str:
        """The first turn's prompt: the system text and the prompt (the reference's formatter
        puts both through the chat template)."""
        return joined(SYSTEM_PROMPT, self._prompt(agent))

    def _next_prompt(self, agent: str, answer: str) -> str:
        """A later turn's prompt, as the reference's external transition (empty_feedback)
        writes it."""
        prompt = self._prompt(agent)
        if self.original_prompt:
            prompt = joined(SYSTEM_PROMPT, prompt)
        if self.previous_response:
            prompt = with_previous_answer(prompt, answer, PREVIOUS_ANSWER)
        return prompt

    def _compose(self, agent: str) -> str:
        return turn_prompt(super()._compose(agent), self.chat_template, self.turn)

    # ----- a turn ---------------------------------------------------------------------------
    def _play_turn(self, answers: Mapping[str, str]) -> TurnResult:
        outcome = rules.play_turn(
            self.item,  # type: ignore[arg-type]
            self.game,
            [answers[a] for a in self.possible_agents],
            scales=self.scales,
            view=self.view,
            extraction_limit=self.extraction_limit,
            extraction_range=self.extraction_range,
            max_path_len=self.max_path_len,
        )
        self._game, self._last = outcome.state, outcome
        return TurnResult(
            breakdown=outcome.breakdown,
            parsed={
                a: t.report() for a, t in zip(self.possible_agents, outcome.agents, strict=True)
            },
            feedback={a: self._next_prompt(a, answers[a]) for a in self.possible_agents},
        )

    def step(self, actions: Mapping[str, str]) -> tuple[dict, dict, dict, dict, dict]:
        """A turn; the episode also ends (for both agents) as soon as the goal is met."""
        observations, rewards, terminations, truncations, infos = super().step(actions)
        if self.agents and self.game.terminated:
            terminations = dict.fromkeys(terminations, True)
            self.agents = []
        return observations, rewards, terminations, truncations, infos

    def state(self) -> str:
        """The whole game for centralized critics: the full map, both positions and views, the
        inventory and both inboxes."""
        self._require_started()
        game = self.game
        inboxes = [
            f"inbox of {role}: "
            + (
                " | ".join(
                    "; ".join(f"{f.type} {f.count} at ({f.x},{f.z})" for f in m)
                    for m in game.inboxes[a]
                )
                or "empty"
            )
            for a, role in enumerate(self.possible_agents)
        ]
        return "\n".join([self._render_ansi(), *inboxes])

    def _render_ansi(self) -> str:
        gmap, game = self.item, self.game
        assert gmap is not None
        views = [game.visible(a, gmap.width, gmap.height, self.view) for a in range(2)]
        tokens: dict[rules.Coord, str] = {}
        for x in range(gmap.width):
            for z in range(gmap.height):
                counts = game.resources.get((x, z))
                token = f"({counts[0]},{counts[1]},{counts[2]})" if counts else "."
                here = "".join(
                    letter
                    for letter, p in zip(rules.AGENT_LETTERS, game.positions, strict=True)
                    if p == (x, z)
                )
                tokens[(x, z)] = here + ("" if here and token == "." else token) if here else token
        width = max(len(t) for t in tokens.values())
        seen = {(True, False): "a", (False, True): "b", (True, True): "x", (False, False): "."}
        rows = []
        for z in range(gmap.height):
            cells = " ".join(tokens[(x, z)].rjust(width) for x in range(gmap.width))
            fog = "".join(seen[((x, z) in views[0], (x, z) in views[1])] for x in range(gmap.width))
            rows.append(f"z={z:<2} {cells}   {fog}")
        got = ", ".join(
            f"{n} {c}/{g}"
            for n, c, g in zip(rules.RESOURCES, game.collected, gmap.goal, strict=True)
        )
        played = game.turn - 1
        header = (
            f"ResourceGathering {gmap.task_id!r}: {played} of {game.max_turns} turns played"
            + (", goal met" if game.completed else "")
        )
        legend = (
            "A, B: the workers (A wood, B stone and iron); (w,s,i): wood, stone, iron left; "
            "right: seen by a = A, b = B, x = both"
        )
        return "\n".join(
            [
                header,
                f"collected {got}; progress {rules.progress(game.collected, gmap.goal):.3f}",
                *rows,
                legend,
            ]
        )


# ----- the picture -------------------------------------------------------------------------------
CELL = 54
_FOG = {
    (False, False): "#cfd2d6",
    (True, False): "#fbe3bf",
    (False, True): "#cfe3f4",
    (True, True): "#e2dcef",
}
_RESOURCE_COLOURS = ("#6b4f1d", "#5f6670", "#a3362b")
_AGENT_COLOURS = ("#d9822b", "#2b6cb0")


def map_svg(env: ResourceGatheringEnv) -> str:
    """The env's current map as an SVG document: each cell's wood/stone/iron left, who has seen
    it (grey: nobody; orange: A; blue: B; violet: both), and where the two workers stand."""
    gmap, game = env.item, env.game
    assert gmap is not None
    top, left = 40, 8
    width = max(left * 2 + gmap.width * CELL, 460)
    height = top + gmap.height * CELL + 44
    views = [game.visible(a, gmap.width, gmap.height, env.view) for a in range(2)]
    got = ", ".join(
        f"{n} {c}/{g}" for n, c, g in zip(rules.RESOURCES, game.collected, gmap.goal, strict=True)
    )
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="{left}" y="16" font-size="12">{escape(gmap.task_id)}</text>',
        f'<text x="{left}" y="32">turns played {game.turn - 1}/{game.max_turns}; '
        f"collected {escape(got)}</text>",
    ]
    for z in range(gmap.height):
        for x in range(gmap.width):
            px, py = left + x * CELL, top + z * CELL
            fill = _FOG[((x, z) in views[0], (x, z) in views[1])]
            parts.append(
                f'<rect x="{px}" y="{py}" width="{CELL}" height="{CELL}" fill="{fill}" '
                'stroke="#ffffff" stroke-width="1"/>'
            )
            counts = game.resources.get((x, z), (0, 0, 0))
            line = 0
            for k, n in enumerate(counts):
                if n > 0:
                    parts.append(
                        f'<text x="{px + 4}" y="{py + 14 + 13 * line}" '
                        f'fill="{_RESOURCE_COLOURS[k]}">{rules.RESOURCES[k][0]}{n}</text>'
                    )
                    line += 1
    for a, (x, z) in enumerate(game.positions):
        cx = left + x * CELL + CELL - 14 - 14 * a * (game.positions[0] == game.positions[1])
        cy = top + z * CELL + CELL - 14
        parts.append(
            f'<circle cx="{cx}" cy="{cy}" r="10" fill="{_AGENT_COLOURS[a]}"/>'
            f'<text x="{cx}" y="{cy + 4}" text-anchor="middle" fill="#ffffff" '
            f'font-size="12">{rules.AGENT_LETTERS[a]}</text>'
        )
    legend = (
        "w wood, s stone, i iron; A the wood worker, B the stone-and-iron worker",
        "cells: grey unseen, orange seen by A, blue by B, violet by both",
    )
    for line, text in enumerate(legend):
        parts.append(f'<text x="{left}" y="{height - 24 + 14 * line}">{text}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


__all__ = ["ROLES", "ResourceGatheringEnv", "load_maps", "map_svg", "render_prompt"]
