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

from collabzoo.envs.prompt_form import (
    CHAT_TEMPLATE_MODES,
    joined,
    turn_prompt,
    with_previous_answer,
)
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
SYSTEM_PROMPT = (
    "You are one of two workers in a bridge-building game. Answer with exactly one JSON "
    "object and stop: no text, code fences, headings or reasoning before or after it."
)
"""The system text before every prompt (the reference's says the same: one JSON object and
nothing else)."""
FEEDBACK_MODES = ("empty", "perfect", "position", "score")
"""The reference's external modes: empty_feedback (its configs' choice: the Feedback section
reads "(none)"), perfect_feedback (every reward term and count of the last turn), position_feedback
(where the worker is and how much it sees) and score_feedback (the reward terms and counts)."""
PREVIOUS_ANSWER = "Your answer last turn:"
FEEDBACK_FIELDS = {
    "perfect": (
        "turn",
        "worker",
        "reward",
        "connected",
        "gap_st",
        "cc_component_count",
        "connected_y_count",
        "n_adjacent_count",
        "y_uncovered_count",
        "bonus_gap_st",
        "bonus_cc_merge",
        "bonus_y_connected",
        "penalty_n_adjacent",
        "penalty_block_cost",
        "bonus_terminal_connect",
        "bonus_terminal_clean",
        "bonus_late_quality",
        "num_valid_probes",
        "comm_tokens",
    ),
    "score": (
        "turn",
        "reward",
        "bonus_gap_st",
        "gap_st",
        "bonus_cc_merge",
        "cc_component_count",
        "new_cc_merge_count",
        "bonus_y_connected",
        "penalty_n_adjacent",
        "penalty_block_cost",
        "bonus_terminal_connect",
        "bonus_terminal_clean",
        "new_connected_y_count",
        "new_adjacent_n_count",
        "newly_placed_block_count",
        "connected",
    ),
    "position": (
        "turn",
        "worker",
        "current_pos",
        "visible_land_count",
        "visible_candidate_count",
        "known_probe_count",
        "connected",
    ),
}
"""What each mode reports, in the reference's order (its names for the facts)."""
FEEDBACK_LABELS = {
    "turn": "turn now",
    "worker": "you are worker",
    "reward": "team reward of the last turn",
    "connected": "S and T linked",
    "gap_st": "gap (blocks still needed to link S and T)",
    "cc_component_count": "groups of anchors and true pillars",
    "connected_y_count": "true pillars linked to an anchor",
    "n_adjacent_count": "fake pillars beside a block",
    "y_uncovered_count": "true pillars not linked yet",
    "bonus_gap_st": "gap term",
    "bonus_cc_merge": "merge term",
    "bonus_y_connected": "true-pillar term",
    "penalty_n_adjacent": "fake-pillar penalty",
    "penalty_block_cost": "block penalty",
    "bonus_terminal_connect": "link bonus",
    "bonus_terminal_clean": "clean-bridge bonus",
    "bonus_late_quality": "late-quality bonus",
    "num_valid_probes": "valid probes",
    "comm_tokens": "message tokens",
    "new_cc_merge_count": "groups merged",
    "new_connected_y_count": "true pillars newly linked",
    "new_adjacent_n_count": "fake pillars newly beside a block",
    "newly_placed_block_count": "blocks placed",
    "current_pos": "your position",
    "visible_land_count": "land cells in sight",
    "visible_candidate_count": "candidate pillars in sight",
    "known_probe_count": "probe results you hold",
}
FEEDBACK_TITLES = {
    "perfect": "Full report on the last turn:",
    "score": "Score of the last turn:",
    "position": "Where you stand:",
}


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


def _cells_json(cells: Sequence[Sequence[int]]) -> str:
    """`_json` of a list of [x, z] cells, written directly (the prompts hold many)."""
    return "[" + ",".join(f"[{x},{z}]" for x, z in cells) + "]"


def _tagged_json(items: Sequence[Mapping[str, Any]], tag: str) -> str:
    """`_json` of a list of {"coord": [x, z], tag: a letter or word}, written directly."""
    return (
        "["
        + ",".join(
            f'{{"coord":[{i["coord"][0]},{i["coord"][1]}],"{tag}":{json.dumps(i[tag])}}}'
            for i in items
        )
        + "]"
    )


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
    view = rules.agent_view(bmap, state, agent, rules_.view, copy_messages=False)
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
        f"- Anchors in sight: {_tagged_json(view['visible_anchors'], 'kind')}",
        f"- Land in sight: {_cells_json(view['visible_land_coords'])}",
        f"- Placed blocks in sight: {_cells_json(view['visible_filled_coords'])}",
        f"- Candidate pillars in sight (type hidden): {_cells_json(view['visible_p_candidates'])}",
        f"- Your probe results: {_tagged_json(view['known_probe_results'], 'type')}",
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


def feedback_values(
    mode: str,
    bmap: BridgeMap,
    outcome: rules.TurnOutcome,
    agent: int,
    turn: int,
    view: int,
) -> dict[str, Any]:
    """The facts a reference feedback mode reports after a turn, with its values: the base
    (CoMLRL) reward and terms whichever reward is paid, penalties as positive amounts, an
    unreachable gap as None, the clean-bridge and late-quality bonuses 0 (the simulator the
    modes read never computes them), `turn` the turn about to be played. position_feedback
    counts what the worker sees with a sight of 3 when the sight is 0 (the reference reads a
    0 as unset there)."""
    if mode not in FEEDBACK_FIELDS:
        return {}
    m, base = outcome.breakdown.metrics, outcome.base
    seen = rules.agent_view(bmap, outcome.state, agent, view or rules.VIEW)
    facts: dict[str, Any] = {
        "turn": turn,
        "worker": LETTERS[agent],
        "reward": sum(base.values()),
        "connected": bool(m["connected"]),
        "gap_st": None if m["gap_st"] < 0 else int(m["gap_st"]),
        "max_gap_st": int(m["max_gap_st"]),
        "cc_component_count": int(m["cc_component_count"]),
        "initial_cc_component_count": int(m["initial_cc_component_count"]),
        "connected_y_count": int(m["connected_y_count"]),
        "n_adjacent_count": int(m["n_adjacent_count"]),
        "y_uncovered_count": int(m["y_uncovered_count"]),
        **{k: abs(v) if k.startswith("penalty") else v for k, v in base.items()},
        "bonus_terminal_clean": 0.0,
        "bonus_late_quality": 0.0,
        "num_valid_probes": int(m["num_valid_probes"]),
        "comm_tokens": int(m["comm_tokens"]),
        "new_cc_merge_count": int(m["new_cc_merge_count"]),
        "new_connected_y_count": int(m["new_connected_y_count"]),
        "new_adjacent_n_count": int(m["new_adjacent_n_count"]),
        "newly_placed_block_count": int(m["newly_placed_block_count"]),
        "current_pos": seen["current_pos"],
        "visible_land_count": len(seen["visible_land_coords"]),
        "visible_candidate_count": len(seen["visible_p_candidates"]),
        "known_probe_count": len(seen["known_probe_results"]),
    }
    values = {k: facts[k] for k in FEEDBACK_FIELDS[mode]}
    if "gap_st" in values:
        values["max_gap_st"] = facts["max_gap_st"]
    if "cc_component_count" in values:
        values["initial_cc_component_count"] = facts["initial_cc_component_count"]
    return values


def feedback_text(mode: str, values: Mapping[str, Any]) -> str:
    """A feedback mode's report in words (empty for "empty")."""
    if not values:
        return ""
    lines = [FEEDBACK_TITLES[mode]]
    for key in FEEDBACK_FIELDS[mode]:
        value = values[key]
        if key == "gap_st":
            shown = "none (S and T cannot be linked)" if value is None else str(value)
            shown += f" of {values['max_gap_st']} on the empty map"
        elif key == "cc_component_count":
            shown = f"{value} of {values['initial_cc_component_count']} on the empty map"
        elif isinstance(value, bool):
            shown = "yes" if value else "no"
        elif isinstance(value, float):
            shown = f"{value:.4f}"
        else:
            shown = _json(value) if isinstance(value, list) else str(value)
        lines.append(f"- {FEEDBACK_LABELS[key]}: {shown}")
    if mode == "perfect":
        lines.append(
            "- Aim: learn pillar types, keep fakes untouched, link more true pillars, then S and T."
        )
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
        feedback: what the Feedback section of each later prompt says, the reference's
            external modes: "empty" (default, the reference configs' choice: "(none)"),
            "perfect", "position" or "score" (see `FEEDBACK_MODES`).
        original_prompt: True (default, as configured) re-renders the whole prompt, after the
            system text, every turn; False gives later turns only the feedback (in "empty" mode
            the prompt without the system text), as the reference does.
        previous_response: append the worker's last answer to its next prompt (reference
            option, off in its configs).
        chat_template: "first_turn" (default: the reference trainer's quirk: the first prompt
            goes through the model's chat template, later ones are raw system + user text,
            returned as `RawPrompt`) or "every_turn".
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
        feedback: str = "empty",
        original_prompt: bool = True,
        previous_response: bool = False,
        chat_template: str = "first_turn",
        render_mode: str | None = None,
    ) -> None:
        super().__init__(split=split, memory=memory, horizon=horizon, render_mode=render_mode)
        self.feedback = check_choice("feedback", feedback, FEEDBACK_MODES)
        self.chat_template = check_choice("chat_template", chat_template, CHAT_TEMPLATE_MODES)
        self.original_prompt = bool(original_prompt)
        self.previous_response = bool(previous_response)
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
    def _user_prompt(self, agent: int, feedback: str = "") -> str:
        return prompt_text(
            self.item,
            self.game,
            agent,
            self.rules,
            reward_text=self.reward_text,
            feedback=feedback,
        )

    def _role_prompt(self, agent: str) -> str:
        """The first turn's prompt: the system text and the prompt (the reference's formatter
        puts both through the chat template)."""
        return joined(SYSTEM_PROMPT, self._user_prompt(self.possible_agents.index(agent)))

    def _next_prompt(self, agent: int, outcome: rules.TurnOutcome, answer: str) -> str:
        """A later turn's prompt, as the reference's external transition writes it."""
        values = feedback_values(
            self.feedback, self.item, outcome, agent, self.turn + 2, self.rules.view
        )
        report = feedback_text(self.feedback, values)
        if self.original_prompt:
            prompt = joined(SYSTEM_PROMPT, self._user_prompt(agent, report))
        elif self.feedback == "empty":
            prompt = self._user_prompt(agent)
        else:
            prompt = report
        if self.previous_response:
            prompt = with_previous_answer(prompt, answer, PREVIOUS_ANSWER)
        return prompt

    def _compose(self, agent: str) -> str:
        return turn_prompt(super()._compose(agent), self.chat_template, self.turn)

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
            feedback={
                a: self._next_prompt(k, outcome, answers[a])
                for k, a in enumerate(self.possible_agents)
            },
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
