"""BridgeBuild-v0: two workers link a start anchor to a target anchor under fog of war.

The env is a shell over `collabzoo.tasks.bridgebuild.rewards`: it loads the maps, keeps the
game's state, writes each worker's prompt from it every turn (the reference re-renders the
prompt from the state and shows no earlier answers) and reports the reward, its terms and the
metrics. What one worker writes in `comm` is in the other's prompt from the next turn on.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any, ClassVar

from collabzoo.envs.records import ALL, read_file
from collabzoo.envs.text_env import TextCollabEnv, TurnResult, check_choice, check_positive_int
from collabzoo.tasks.bridgebuild import rewards as rules
from collabzoo.tasks.bridgebuild.rewards import BridgeMap, BridgeRules, BridgeState, Coord

DATA_FILE = Path(__file__).parent / "data" / "data.json"
"""The reference's nine 13 x 11 maps (`bridge_build/dataset/data.json`, MIT), shipped."""
SPLIT_RULES = {"coti": 6, "magrpo": 8}
"""Maps in the train split: the README's and CoTI's [:6] / [6:], or CoMLRL MAGRPO's [:8] / [8:]."""
REWARD_TEXTS = ("reference", "paid")
ROLES = ("worker_a", "worker_b")
LETTERS = ("A", "B")
HEADER = "BridgeBuild - worker "
"""How every prompt starts (a scripted policy finds the newest prompt by it)."""


def load_maps(source: str | Path) -> list[BridgeMap]:
    """The maps of a reference file (a JSON list of {"task_id", "map"}), or of every such file
    of a folder in name order, each id then prefixed by its file's stem (the reference files
    reuse ids for different maps)."""
    path = Path(source).expanduser()
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix == ".json" and p.is_file())
        if not files:
            raise ValueError(f"{path}: the folder holds no .json map files")
        maps = []
        for file in files:
            for m in _file_maps(file):
                maps.append(BridgeMap(f"{file.stem}/{m.task_id}", m.rows, m.source))
        return maps
    if not path.is_file():
        raise FileNotFoundError(f"{str(source)!r} is not a BridgeBuild map file or folder")
    return _file_maps(path)


def _file_maps(path: Path) -> list[BridgeMap]:
    records = read_file(path)
    maps = []
    for number, record in enumerate(records, start=1):
        try:
            maps.append(rules.map_from_record(record, number, path.name))
        except (KeyError, ValueError) as error:
            raise ValueError(f"{path}: record {number}: {error}") from None
    return maps


def _json(value: Any) -> str:
    """Compact JSON as the reference shows lists (anything JSON cannot hold, as its repr)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=repr)


def _reward_lines(rules_: BridgeRules, text: str) -> list[str]:
    """The scoring paragraph: the reference's text (CoTI's constants, whichever reward is
    paid: a quirk kept by default) or the constants this env pays."""
    gap = (
        f"- gap closed: {rules.GAP_WEIGHT:g} x (gap before - gap after) / gap of the empty map; "
        "the gap is the fewest blocks still needed to link S and T (pillars count as free);"
    )
    coti = text == "reference" or rules_.reward == "coti"
    s = rules_.shaping
    merge = rules.MERGE_WEIGHT * (s.cc_merge_bonus_scale if coti else 1.0)
    lines = [
        gap,
        f"- groups merged: {merge:g} x merges / (groups on the empty map - 1), a group being "
        "anchors and true pillars joined through placed blocks;",
    ]
    if text == "reference":
        lines += [
            "- newly linked true pillars pay all game long (a Y is linked when placed blocks or "
            "other Y join it to S or T);",
            "- placing a block next to a fake pillar costs a lot, and shaping may raise the cost: "
            "never give a fake pillar a new placed neighbour;",
        ]
    else:
        fake = rules.FAKE_WEIGHT * (s.n_adjacent_penalty_scale if coti else 1.0)
        pillar = rules.PILLAR_WEIGHT * (s.y_connected_bonus_scale if coti else 1.0)
        lines += [
            f"- true pillars linked: {pillar:g} x newly linked Y / all Y (a Y is linked when "
            "placed blocks or other Y join it to S or T);",
            f"- fake pillars touched: -{fake:g} x fake pillars that got a placed neighbour / "
            "all N;",
        ]
    lines.append(
        f"- blocks: -{rules.BLOCK_WEIGHT:g} x new blocks / cells that could hold one;",
    )
    if coti:
        lines.append(
            f"- walking: {s.move_progress_bonus_total:g} x (distance before - distance after) / "
            "distance at the start, worker A walking toward T and worker B toward S;"
        )
    lines.append(
        f"- +{rules.CONNECT_BONUS:g} on the turn S and T become linked through placed blocks "
        "and pillars (Y or N; land does not link);"
    )
    if coti:
        lines.append(
            "- in the late turns, a small bonus for a clean, compact bridge close to done."
        )
    return lines


def prompt_text(
    bmap: BridgeMap,
    state: BridgeState,
    agent: int,
    rules_: BridgeRules,
    *,
    reward_text: str = "reference",
    feedback: str = "",
) -> str:
    """One worker's prompt for the state's turn: the task, what it sees, the action format,
    the scoring and the end rule (the reference's information, in this env's words)."""
    view = rules.agent_view(bmap, state, agent, rules_.view)
    me, other = LETTERS[agent], LETTERS[1 - agent]
    limits = rules.command_limits(rules_.max_commands_total, len(state.positions))
    w, h = bmap.width, bmap.height
    pos = _json(view["current_pos"])
    blocks = [rules.normalize_block(b) for b in rules_.palettes[agent]]
    v = rules_.view
    lines = [
        f"{HEADER}{me} of 2, turn {view['turn_index']} of {view['max_turns']}.",
        "",
        f"You and worker {other} build a bridge across water on a flat map.",
        f"- The map is {w} x {h} cells: x runs 0..{w - 1} left to right, z runs 0..{h - 1} "
        "top to bottom; a cell is written [x, z] and (0,0) is the top-left corner.",
        "- Symbols: # static land, S start anchor, T target anchor, . water, Y true pillar, "
        "N fake pillar, * a block placed with /fill.",
        "- Goal: link an S to a T by a chain of edge-sharing cells made of anchors, pillars "
        "(Y or N) and placed blocks, using few blocks. Static land # joins nothing.",
        "- A candidate pillar is Y or N, hidden until probed. A fill never changes land, "
        "anchors or pillars: it places blocks on water only.",
        "",
        "What you see:",
        f"- Position: {pos}",
        f"- Sight: {v} cells. You see every cell within {v} steps in x and in z of each cell "
        "you have stood on or walked through; a cell once seen stays in sight, always shown "
        "as it is now.",
        f"- Anchors in sight: {_json(view['visible_anchors'])}",
        f"- Land in sight: {_json(view['visible_land_coords'])}",
        f"- Placed blocks in sight: {_json(view['visible_filled_coords'])}",
        f"- Candidate pillars in sight (type hidden): {_json(view['visible_p_candidates'])}",
        f"- Your probe results: {_json(view['known_probe_results'])}",
        f"- Messages from worker {other}, oldest first: {_json(view['received_messages'])}",
        "",
        f"Blocks you may place: {_json(blocks)}",
        "",
        "Answer with one JSON object with these four keys and nothing else:",
        '{"comm": {"discovered_pillars": [{"x": 2, "z": 2, "type": "Y", "source": '
        '"self_probe"}], "candidate_coords": [[4, 5]]},',
        ' "probe": [[x, z], ...], "cmds": ["/fill x1 z1 x2 z2 block", ...], "path": [[x, z], ...]}',
        f"- comm: a JSON object worker {other} reads from the next turn on; {{}} sends nothing. "
        "Facts (cells, pillar types) help more than prose.",
        f"- probe: at most {rules_.max_probe} cells; you learn their pillar type after this turn.",
        f"- cmds: at most {limits[agent]} fill commands, the two corners in absolute x and z "
        "(no y); each fills the rectangle between its corners.",
        "- path: your walk this turn: it starts at your position and each next cell is one of "
        "the 8 around the one before; a broken path leaves you where you are. From [2,3], "
        "[[2,3],[2,4],[3,5]] is a walk; [[2,3],[1,1]] is not.",
        f'- To do nothing: {{"comm":{{}},"probe":[],"cmds":[],"path":[{pos}]}}',
        "A turn runs worker A's fills, then worker B's, then the probes, the messages and the "
        "walks.",
        "",
        "Scoring, each turn:",
        *_reward_lines(rules_, reward_text),
        "",
        f"The game ends when S and T are linked, or after turn {view['max_turns']}.",
        "",
        f"Feedback: {feedback.strip() or '(none)'}",
    ]
    return "\n".join(lines)


class BridgeBuildEnv(TextCollabEnv[BridgeMap]):
    """Workers A and B start on the first S and the first T of a map, see 3 cells around
    every cell they have walked through, probe hidden pillars, message each other and fill
    water to link S and T (H = 4); the episode ends early once they are linked.

    Args:
        data: a map file (a JSON list of {"task_id", "map"}, the reference format) or a folder
            of them (ids then prefixed by the file's stem); default: the reference's nine maps
            (data.json), shipped with the package.
        split: default split for `reset`: "train", "eval" or "all" (every map, in order).
        splits: "coti" (default: the README's and CoTI's first 6 maps train, the last 3 eval)
            or "magrpo" (the CoMLRL MAGRPO config's 8 / 1).
        reward: "comlrl" (default: the base reward the CoMLRL trainers pay) or "coti" (CoTI /
            BCMAAC shaping on top: merges x0.5, fake pillars x1.5, walking and late-quality
            bonuses; 3 probes a turn).
        memory: how much of its own history a worker sees: "none" (default: the reference
            writes each turn's prompt afresh from the state), "last" or "full".
        horizon: turns per episode (reference: 4).
        view: sight radius in cells (reference: 3).
        max_probe: probes per worker per turn (default 2 on "comlrl", 3 on "coti"; larger
            values are clamped to those, as the reference does).
        max_commands: fill commands per turn for the team, split evenly, worker A taking any
            odd one (reference: 40).
        palettes: each worker's blocks, in play order (reference: oak_planks for both).
        early_end: end the episode on the turn S and T become linked (default True); with
            False it runs to the horizon and the turns after the link pay 0 and change nothing.
        reward_text: "reference" (default: the prompt's scoring text quotes CoTI's constants
            whichever reward is paid, as the reference's does) or "paid" (the constants this
            env pays).
        render_mode: "ansi" makes `render()` return a text picture of the map; "human" prints
            it at every reset and step; None (default) leaves rendering off.
    """

    metadata: ClassVar[dict[str, Any]] = {
        "name": "bridgebuild_v0",
        "render_modes": ["ansi", "human"],
        "is_parallelizable": True,
    }
    roles = ROLES
    default_horizon = 4
    max_reward = BridgeRules().max_turn_reward

    def __init__(
        self,
        *,
        data: str | Path | None = None,
        split: str = "train",
        splits: str = "coti",
        reward: str = "comlrl",
        memory: str = "none",
        horizon: int | None = None,
        view: int = rules.VIEW,
        max_probe: int | None = None,
        max_commands: int = rules.MAX_COMMANDS_TOTAL,
        palettes: Sequence[Sequence[str]] = (rules.REFERENCE_BLOCKS, rules.REFERENCE_BLOCKS),
        early_end: bool = True,
        reward_text: str = "reference",
        render_mode: str | None = None,
    ) -> None:
        super().__init__(split=split, memory=memory, horizon=horizon, render_mode=render_mode)
        self.splits = check_choice("splits", splits, tuple(SPLIT_RULES))
        self.reward = check_choice("reward", reward, rules.REWARD_MODES)
        self.reward_text = check_choice("reward_text", reward_text, REWARD_TEXTS)
        if isinstance(view, bool) or not isinstance(view, int) or view < 0:
            raise ValueError(f"view must be a non-negative int, got {view!r}")
        cap = rules.MAX_PROBE[reward]
        if max_probe is None:
            max_probe = cap
        if isinstance(max_probe, bool) or not isinstance(max_probe, int) or max_probe < 0:
            raise ValueError(f"max_probe must be a non-negative int, got {max_probe!r}")
        if len(palettes) != len(self.roles) or any(not p for p in palettes):
            raise ValueError(f"palettes needs {len(self.roles)} non-empty block lists")
        self.rules = BridgeRules(
            palettes=tuple(tuple(str(b) for b in p) for p in palettes),
            max_commands_total=check_positive_int("max_commands", max_commands),
            max_probe=min(cap, max_probe),
            view=view,
            reward=reward,
        )
        self.max_reward = self.rules.max_turn_reward
        self.early_end = bool(early_end)
        self._data = DATA_FILE if data is None else data
        self._game: BridgeState | None = None
        self._last: rules.TurnOutcome | None = None

    # ----- task items -----------------------------------------------------------------------
    def _load_items(self, split: str) -> Sequence[BridgeMap]:
        maps = load_maps(self._data)
        cut = SPLIT_RULES[self.splits]
        if split == ALL:
            return maps
        return maps[:cut] if split == "train" else maps[cut:]

    def _item_id(self, item: BridgeMap) -> str:
        return item.task_id

    def _begin_episode(self, item: BridgeMap, options: Mapping[str, Any]) -> dict[str, Any]:
        self._game = rules.initial_state(item, self.horizon, len(self.roles))
        self._last = None
        return {"map_file": item.source, "gap_max": item.gap_max}

    @property
    def game(self) -> BridgeState:
        """The game's state now (positions, fills, probes, inboxes): what `state()` shows."""
        self._require_started()
        assert self._game is not None
        return self._game

    @property
    def outcome(self) -> rules.TurnOutcome | None:
        """The last turn played (its state, reward breakdown and readings); None before one."""
        return self._last

    # ----- prompts --------------------------------------------------------------------------
    def _role_prompt(self, agent: str) -> str:
        return prompt_text(
            self.item,
            self.game,
            self.possible_agents.index(agent),
            self.rules,
            reward_text=self.reward_text,
        )

    # ----- a turn ---------------------------------------------------------------------------
    def _play_turn(self, answers: Mapping[str, str]) -> TurnResult:
        outcome = rules.play_turn(
            self.item, self.game, [answers[a] for a in self.possible_agents], self.rules
        )
        self._last = outcome
        self._game = outcome.state
        return TurnResult(
            breakdown=outcome.breakdown,
            parsed={
                a: p.report() for a, p in zip(self.possible_agents, outcome.parsed, strict=True)
            },
            feedback={a: self._role_prompt(a) for a in self.possible_agents},
        )

    def step(
        self, actions: Mapping[str, str]
    ) -> tuple[
        dict[str, str],
        dict[str, float],
        dict[str, bool],
        dict[str, bool],
        dict[str, dict[str, Any]],
    ]:
        observations, rewards, terminations, truncations, infos = super().step(actions)
        if self.agents and self.early_end and self.game.connected:
            terminations = dict.fromkeys(terminations, True)
            self.agents = []
        return observations, rewards, terminations, truncations, infos

    # ----- the joint view and pictures ------------------------------------------------------
    def state(self) -> str:
        """For a centralized critic: the whole map with every pillar's type, the blocks, both
        workers, what each has probed and been told, then both observations."""
        game = self.game
        lines = [
            f"BridgeBuild state: map {self.item.task_id}, turn {game.turn_index} of "
            f"{game.max_turns}, linked {game.connected}, gap "
            f"{rules.gap(self.item, game.filled_cells())} of {self.item.gap_max}",
            *self._grid(),
        ]
        for k, agent in enumerate(self.possible_agents):
            known = {f"{x},{z}": t for (x, z), t in sorted(game.known[k].items())}
            lines.append(
                f"{agent} at {list(game.positions[k])}: probed {_json(known)}; "
                f"{len(game.inbox[k])} message(s) received"
            )
        return "\n".join(lines) + "\n\n" + super().state()

    def _grid(self) -> list[str]:
        """Rows top-down: the map with `*` for blocks, A / B for the workers; pillars as Y / N
        where either worker has probed them, else y / n."""
        game, bmap = self.game, self.item
        probed = {c for known in game.known for c in known}
        filled = game.filled_cells()
        at = {pos: LETTERS[k] for k, pos in reversed(list(enumerate(game.positions)))}
        rows = []
        for z in range(bmap.height):
            row = []
            for x in range(bmap.width):
                cell: Coord = (x, z)
                symbol = bmap.symbol(cell)
                if cell in at:
                    row.append(at[cell])
                elif cell in filled:
                    row.append("*")
                elif symbol in "YN" and cell not in probed:
                    row.append(symbol.lower())
                else:
                    row.append(symbol)
            rows.append("".join(row))
        return rows

    def _render_ansi(self) -> str:
        game = self.game
        header = (
            f"BridgeBuild {self.item.task_id!r}, "
            f"{f'after turn {self.turn} of {self.horizon}' if self.turn else 'before turn 1'}"
            f"{', S and T linked' if game.connected else ''}"
        )
        legend = (
            "# land, S/T anchors, . water, * placed block, A/B workers; Y/N probed pillars, "
            "y/n not probed yet"
        )
        lines = [header, *self._grid(), legend]
        if self._last is not None:
            b = self._last.breakdown
            parts = ", ".join(f"{k} {v:+.3f}" for k, v in b.components.items() if v)
            lines.append(f"last turn: reward {b.total:+.3f} ({parts or 'nothing'})")
        return "\n".join(lines)


# ----- the picture ----------------------------------------------------------------------------
CELL = 28
COLOURS = {
    "#": "#b08d57",
    ".": "#7fb7e6",
    "S": "#3d8b3d",
    "T": "#3d8b3d",
    "*": "#a0522d",
    "Y": "#2e9e5b",
    "N": "#d64545",
    "?": "#9a9a9a",
}


def picture(env: BridgeBuildEnv) -> str:
    """The map now as an SVG document: land, water, the anchors, placed blocks, pillars (green
    Y and red N once probed, grey ? until then), both workers, and a veil over the cells
    neither worker has seen."""
    game, bmap = env.game, env.item
    probed = {c for known in game.known for c in known}
    filled = game.filled_cells()
    seen = set().union(
        *(rules.visible_cells(o, env.rules.view, bmap.width, bmap.height) for o in game.origins)
    )
    w, h = bmap.width * CELL, bmap.height * CELL + 22
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
        f'viewBox="0 0 {w} {h}" font-family="monospace" font-size="13">',
        f"<title>BridgeBuild {escape(bmap.task_id)}</title>",
    ]
    for z in range(bmap.height):
        for x in range(bmap.width):
            cell = (x, z)
            symbol = bmap.symbol(cell)
            shown = symbol
            if symbol in "YN" and cell not in probed:
                shown = "?"
            base = COLOURS["*"] if cell in filled else COLOURS["." if shown in "YN?" else shown]
            px, pz = x * CELL, z * CELL
            parts.append(
                f'<rect x="{px}" y="{pz}" width="{CELL}" height="{CELL}" fill="{base}" '
                'stroke="#ffffff" stroke-width="1"/>'
            )
            if shown in "YN?":
                parts.append(
                    f'<circle cx="{px + CELL / 2}" cy="{pz + CELL / 2}" r="{CELL / 2 - 5}" '
                    f'fill="{COLOURS[shown]}"/>'
                )
            if shown in "STYN?":
                parts.append(
                    f'<text x="{px + CELL / 2}" y="{pz + CELL / 2 + 4}" text-anchor="middle" '
                    f'fill="#ffffff">{shown}</text>'
                )
            if cell not in seen:
                parts.append(
                    f'<rect x="{px}" y="{pz}" width="{CELL}" height="{CELL}" fill="#000000" '
                    'fill-opacity="0.35"/>'
                )
    for k, (x, z) in enumerate(game.positions):
        shift = 5 if game.positions.count((x, z)) > 1 and k == 1 else 0
        cx, cz = x * CELL + CELL / 2 + shift, z * CELL + CELL / 2 + shift
        parts.append(
            f'<circle cx="{cx}" cy="{cz}" r="8" fill="#ffd23f" stroke="#333333" '
            'stroke-width="1.5"/>'
        )
        parts.append(
            f'<text x="{cx}" y="{cz + 4}" text-anchor="middle" fill="#333333">{LETTERS[k]}</text>'
        )
    status = f"after turn {env.turn} of {env.horizon}" if env.turn else "before the first turn"
    status += ", S and T linked" if game.connected else ""
    parts.append(f'<text x="4" y="{h - 6}" fill="#333333">{escape(status)}</text>')
    parts.append("</svg>")
    return "\n".join(parts)
