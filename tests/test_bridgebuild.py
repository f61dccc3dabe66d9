"""BridgeBuild: the reference's reward and reading (conformance cases made by running the
reference simulator, tests/data/bridgebuild_conformance.json), fog of war, messages, the end of
an episode, determinism, copies, the scripted teams on every shipped map, and the CoTI option."""

from __future__ import annotations

import copy
import json
import math
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import collabzoo
from collabzoo.envs.prompt_form import RawPrompt
from collabzoo.envs.scripted_teams import scripted_team
from collabzoo.tasks.bridgebuild import rewards as rules
from collabzoo.tasks.bridgebuild import teams
from collabzoo.tasks.bridgebuild.envs import (
    DATA_FILE,
    FEEDBACK_FIELDS,
    HEADER,
    PREVIOUS_ANSWER,
    SYSTEM_PROMPT,
    BridgeBuildEnv,
    feedback_values,
    load_maps,
    picture,
)
from tests.conftest import require

CASES = json.loads((Path(__file__).parent / "data" / "bridgebuild_conformance.json").read_text())
FILES = ("data.json", "data2.json", "diag.json")
REASONS = {
    "exceeds max_commands": "over the cap of",
    "cmd must be": "not a fill command",
    "block not allowed": "block ",
    "fill coord out of map": "a corner lies outside",
    "fill coords must be absolute": "corners must be absolute",
}
"""The reference's rejection reasons and the start of ours for the same rule."""
BRIDGE_FEEDBACK = {
    "perfect": (
        "turn", "worker", "reward", "connected", "gap_st", "cc_component_count",
        "connected_y_count", "n_adjacent_count", "y_uncovered_count", "bonus_gap_st",
        "bonus_cc_merge", "bonus_y_connected", "penalty_n_adjacent", "penalty_block_cost",
        "bonus_terminal_connect", "bonus_terminal_clean", "bonus_late_quality",
        "num_valid_probes", "comm_tokens",
    ),
    "score": (
        "turn", "reward", "bonus_gap_st", "gap_st", "bonus_cc_merge", "cc_component_count",
        "new_cc_merge_count", "bonus_y_connected", "penalty_n_adjacent", "penalty_block_cost",
        "bonus_terminal_connect", "bonus_terminal_clean", "new_connected_y_count",
        "new_adjacent_n_count", "newly_placed_block_count", "connected",
    ),
}  # fmt: skip
"""The lines of the reference's perfect_feedback@25a7971 and score_feedback@4dae647, in order."""


@pytest.fixture(scope="module")
def bridge_data(shared_data: Path) -> Path:
    return require(shared_data / "bridgebuild", "the reference BridgeBuild maps")


@pytest.fixture(scope="module")
def maps(bridge_data: Path) -> dict[str, list[rules.BridgeMap]]:
    return {name: load_maps(bridge_data / name) for name in FILES}


def idle(env: BridgeBuildEnv) -> dict[str, str]:
    """Both workers stay, probe nothing, place nothing and say nothing."""
    return {
        a: json.dumps({"path": [list(env.game.positions[k])]}) for k, a in enumerate(env.agents)
    }


def answer(comm=None, probe=(), cmds=(), path=None) -> str:
    return json.dumps({"comm": comm or {}, "probe": list(probe), "cmds": list(cmds), "path": path})


# ----- conformance with the reference ---------------------------------------------------------
def test_the_cases_cover_what_they_should() -> None:
    episodes = CASES["episodes"]
    metrics = [
        dict(zip(CASES["metric_keys"], t["metrics"], strict=True))
        for e in episodes
        for t in e["turns"]
    ]
    assert {e["file"] for e in episodes} == set(FILES)
    assert len(episodes) >= 60  # 40 made outside; per map and path: oracle, naive, messy, chaos
    kinds = {e["kind"] for e in episodes}
    assert {"random", "bridge", "oracle", "naive", "messy", "chaos"} <= kinds
    assert (
        sum(m["connected"] for m in metrics) >= 10
        and sum(m["new_adjacent_n_count"] > 0 for m in metrics) >= 10
    )
    assert sum(m["new_cc_merge_count"] > 0 for m in metrics) >= 10
    assert any(m["reward"] == 0 and m["terminated"] and m["turn_index"] is None for m in metrics)
    reasons = {
        r[1].split("=")[0].split(":")[0]
        for e in episodes
        for t in e["turns"]
        for p in t["parsed"]
        for r in p["rejected"]
    }
    assert {k for k in REASONS if any(r.startswith(k) for r in reasons)} == set(REASONS)


def reference_feedback(mode: str, ref: dict, seen: dict, agent: int, turn: int) -> dict:
    """What the reference's feedback module prints after a turn, from the metrics and the
    observation its simulator gave (external/{perfect,score,position}_feedback.py): `turn` is
    its prompt history's length + 1, absent terms print as 0."""
    get = lambda key: ref.get(key, 0.0)  # noqa: E731
    if mode == "position":
        return {
            "turn": turn,
            "worker": "AB"[agent],
            "current_pos": seen["current_pos"],
            "visible_land_count": len(seen["visible_land_coords"]),
            "visible_candidate_count": len(seen["visible_p_candidates"]),
            "known_probe_count": len(seen["known_probe_results"]),
            "connected": bool(ref["connected"]),
        }
    keys = BRIDGE_FEEDBACK[mode]
    values = {k: get(k) for k in keys if k not in ("turn", "worker")}
    values["turn"] = turn
    if mode == "perfect":
        values["worker"] = "AB"[agent]
    values["connected"] = bool(ref["connected"])
    values["max_gap_st"] = ref["max_gap_st"]
    values["initial_cc_component_count"] = ref["initial_cc_component_count"]
    return values


@pytest.mark.parametrize("mode", ["perfect", "score", "position"])
def test_feedback_modes_report_what_the_reference_reports(
    mode: str, maps: dict[str, list[rules.BridgeMap]]
) -> None:
    """Every turn of every conformance episode: the facts each reference feedback mode shows
    (its reward and terms are the base simulator's on the CoTI path too), from the reference's
    recorded metrics and observations, equal ours."""
    compared = 0
    for episode in CASES["episodes"]:
        bmap = maps[episode["file"]][episode["index"]]
        play = rules.BridgeRules(max_probe=episode["max_probe"], reward=episode["reward"])
        state = rules.initial_state(bmap, 4)
        for t, turn in enumerate(episode["turns"]):
            outcome = rules.play_turn(bmap, state, turn["answers"], play)
            ref = dict(zip(CASES["metric_keys"], turn["metrics"], strict=True))
            seen_by = turn.get("observations") or [None, None]
            for k, seen in enumerate(seen_by):
                if seen is None and mode == "position":
                    continue
                ours = feedback_values(mode, bmap, outcome, k, t + 2, 3)
                theirs = reference_feedback(mode, ref, seen, k, t + 2)
                assert set(ours) == set(theirs), (episode["task_id"], t, k)
                for key, value in theirs.items():
                    if isinstance(value, float):
                        assert ours[key] == pytest.approx(value, abs=1e-9), (t, k, key)
                    else:
                        assert ours[key] == value, (episode["task_id"], t, k, key)
                compared += 1
            state = outcome.state
    assert compared >= (90 if mode == "position" else 250)


@pytest.mark.parametrize("case", range(len(CASES["episodes"])))
def test_turns_match_the_reference(case: int, maps: dict[str, list[rules.BridgeMap]]) -> None:
    """Every reward term, count, reading and state field of every turn, as the reference's."""
    episode = CASES["episodes"][case]
    bmap = maps[episode["file"]][episode["index"]]
    assert bmap.task_id == episode["task_id"]
    coti = episode["reward"] == "coti"
    play = rules.BridgeRules(max_probe=episode["max_probe"], reward=episode["reward"])
    state = rules.initial_state(bmap, 4)
    for t, turn in enumerate(episode["turns"]):
        where = f"{episode['file']} {bmap.task_id} turn {t}"
        outcome = rules.play_turn(bmap, state, turn["answers"], play)
        parts, metrics = outcome.breakdown.components, outcome.breakdown.metrics
        assert math.isclose(sum(parts.values()), outcome.breakdown.total, abs_tol=1e-12)
        ref = dict(zip(CASES["metric_keys"], turn["metrics"], strict=True))
        if coti:
            ref_coti = dict(zip(CASES["coti_keys"], turn["coti_metrics"], strict=True))
            assert outcome.breakdown.total == pytest.approx(ref_coti["reward"], abs=1e-9), where
            for key in CASES["coti_keys"][1:9]:
                sign = -1 if key.startswith("penalty") else 1
                assert sign * parts[key] == pytest.approx(ref_coti[key], abs=1e-9), (where, key)
            for key in CASES["coti_keys"][9:]:
                assert metrics[key] == ref_coti[key], (where, key)
            base = [k for k in rules.BASE_TERMS if k not in ref_coti]
        else:
            assert outcome.breakdown.total == pytest.approx(ref["reward"], abs=1e-9), where
            assert set(parts) == set(rules.BASE_TERMS)
            base = list(rules.BASE_TERMS)
        for key in base:
            sign = -1 if key.startswith("penalty") else 1
            assert sign * parts[key] == pytest.approx(ref[key], abs=1e-9), (where, key)
        for key in CASES["metric_keys"][7:]:
            expected = ref[key]
            if key == "turn_index" and expected is None:  # a frozen turn: the state's own
                expected = state.turn_index
            if key == "gap_st" and expected is None:
                expected = -1
            assert metrics[key] == float(expected), (where, key)
        for k, (mine, theirs) in enumerate(zip(outcome.parsed, turn["parsed"], strict=True)):
            assert mine.comm_tokens == theirs["comm_tokens"], (where, k)
            assert bool(mine.comm_text) == theirs["comm_sent"], (where, k)
            assert [list(c) for c in mine.probes] == theirs["probes"], (where, k)
            assert [list(f) for f in mine.fills] == theirs["fills"], (where, k)
            assert ([list(c) for c in mine.path] if mine.path_valid else None) == theirs["path"]
            assert len(mine.rejected_fills) == len(theirs["rejected"]), (where, k)
            for ours, (line, reason) in zip(mine.rejected_fills, theirs["rejected"], strict=True):
                rule = next(r for r in REASONS if reason.startswith(r))
                assert ours["line"][:40] == line and ours["reason"].startswith(REASONS[rule])
        got, want = outcome.state, turn["state"]
        assert got.turn_index == want["turn_index"], where
        assert [list(c) for c in rules.sorted_cells(got.filled_cells())] == want["filled"], where
        assert [list(p) for p in got.positions] == want["positions"], where
        assert [[list(c) for c in rules.sorted_cells(o)] for o in got.origins] == want["origins"]
        known = [{f"{x},{z}": v for (x, z), v in sorted(k.items())} for k in got.known]
        assert known == want["known"], where
        assert (got.connected, got.terminated) == (want["connected"], want["terminated"]), where
        for k, seen in enumerate(turn.get("observations", [])):
            assert rules.agent_view(bmap, got, k, 3) == seen, (where, k)
        state = got


def test_action_reading_matches_the_reference() -> None:
    for case in CASES["extraction"]:
        assert repr(rules.read_action(case["text"]).obj) == case["repr"], case["text"]


def quadratic_scan(raw: str) -> dict[int, int]:
    """The reference's balanced-brace scan as the spec describes it: from every `{`, count
    braces outside quoted strings (backslash escapes inside them) until the count is 0."""
    ends = {}
    for start, ch in enumerate(raw):
        if ch != "{":
            continue
        depth, quote, escape = 0, "", False
        for end in range(start, len(raw)):
            cur = raw[end]
            if quote:
                if escape:
                    escape = False
                elif cur == "\\":
                    escape = True
                elif cur == quote:
                    quote = ""
                continue
            if cur in "\"'":
                quote = cur
            elif cur == "{":
                depth += 1
            elif cur == "}":
                depth -= 1
                if depth == 0:
                    ends[start] = end
                    break
    return ends


PIECES = ["{", "}", "[", "]", '"', "'", "\\", 'a"', '\\"', ":", "x", "{}", '"}']
TEXTS = st.lists(st.sampled_from(PIECES), max_size=30).map("".join)


@settings(max_examples=300, deadline=None)
@given(TEXTS)
def test_the_one_pass_scan_is_the_quadratic_scan(raw: str) -> None:
    assert rules.balanced_ends(raw) == quadratic_scan(raw)  # one scan per brace here
    assert rules.balanced_ends_one_pass(raw) == quadratic_scan(raw)


def test_the_scan_and_the_repair_on_many_seeded_texts() -> None:
    rng = random.Random(0)
    for _ in range(3000):
        raw = "".join(rng.choice(PIECES) for _ in range(rng.randrange(30)))
        assert rules.balanced_ends(raw) == quadratic_scan(raw), raw
        assert rules.balanced_ends_one_pass(raw) == quadratic_scan(raw), raw
        assert rules.repair_brackets(raw) == char_by_char_repair(raw), raw
        if rules.well_nested(raw):  # the candidates skip the repair of such a text
            assert rules.repair_brackets(raw) == raw, raw
        assert rules.read_action(raw).obj == rules.read_action(raw, shortcut=False).obj, raw


def char_by_char_repair(text: str) -> str:
    """The reference's bracket repair as the spec describes it, one character at a time: outside
    quoted strings a closer that matches nothing is dropped; what is left open is closed."""
    out, closers, quote, escape = [], [], "", False
    for ch in text:
        if quote:
            out.append(ch)
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == quote:
                quote = ""
            continue
        if ch in "\"'":
            quote = ch
        elif ch in "{[":
            closers.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not closers or closers[-1] != ch:
                continue
            closers.pop()
        out.append(ch)
    return "".join(out + closers[::-1])


@settings(max_examples=300, deadline=None)
@given(TEXTS)
def test_the_repair_is_the_character_by_character_repair(text: str) -> None:
    assert rules.repair_brackets(text) == char_by_char_repair(text)


# ----- reading quirks -------------------------------------------------------------------------
@pytest.fixture
def first_map() -> rules.BridgeMap:
    return load_maps(DATA_FILE)[0]


def parse(text: str, bmap: rules.BridgeMap, max_probe: int = 2) -> rules.ParsedAction:
    return rules.parse_action(
        text,
        bmap=bmap,
        position=(1, 0),
        palette=["oak_planks"],
        max_commands=20,
        max_probe=max_probe,
    )


def test_the_object_with_most_keys_wins_and_a_tie_goes_to_the_later(first_map) -> None:
    assert parse('{"probe": [[1,1]]} then {"probe": [[2,2]]}', first_map).probes == [(2, 2)]
    both = '{"probe": [[1,1]], "cmds": []} then {"probe": [[2,2]]}'
    assert parse(both, first_map).probes == [(1, 1)]
    assert rules.read_action('{"a": 1} {"b": 2}').obj == {"b": 2}  # no action keys: the last
    assert rules.read_action('{"a": 1} {"b": 2}').found == "other object"


def test_unclosed_brackets_are_repaired_and_python_literals_read(first_map) -> None:
    cut = '{"comm": {"k": 1}, "probe": [[3, 3]], "cmds": ["/fill 0 1 2 1 oak_planks"], ' + (
        '"path": [[1, 0], [2, 1]'
    )
    parsed = parse(cut, first_map)
    assert parsed.probes == [(3, 3)] and parsed.fills == [(0, 1, 2, 1, "oak_planks")]
    assert parsed.path_valid and parsed.comm == {"k": 1}
    literal = "{'probe': [(3, 3)], 'cmds': ['fill 2 1 0 1 minecraft:oak_planks'], 'path': []}"
    parsed = parse("```python\n" + literal + "\n```\nthanks", first_map)
    assert parsed.probes == [(3, 3)] and parsed.fills == [(0, 1, 2, 1, "oak_planks")]
    assert rules.repair_brackets('{"a": [1, "]}"}]') == '{"a": [1, "]}"]}'


def test_bad_parts_are_reported_with_reasons_and_never_raise(first_map) -> None:
    text = json.dumps(
        {
            "comm": "hello",
            "probe": ["3,3", [99, 1], "x", {"x": 2, "z": 1}, [2, 2]],
            "cmds": [
                "/fill 0 1 1 1 stone",
                "/fill ~1 1 1 1 oak_planks",
                "/setblock 1 1 1 x",
                "/fill 0 1 20 1 oak_planks",
                "/fill 0 1 0 1 oak_planks",
            ],
            "path": [[1, 0], [3, 0]],
        }
    )
    parsed = parse(text, first_map)
    report = parsed.report()
    assert parsed.comm is None and "not sent" in report["message_problem"]
    assert parsed.probes == [(3, 3), (2, 1)]
    assert [r["reason"] for r in report["rejected_probes"]] == [
        "outside the map",
        "not a cell",
        "over the cap of 2 probes",
    ]
    assert report["accepted"] == ["/fill 0 1 0 1 oak_planks"]
    assert [r["reason"].split(" ")[0] for r in report["rejected"]] == [
        "block",
        "corners",
        "not",
        "a",
    ]
    assert not parsed.path_valid and "jumps" in report["path_problem"] and parsed.path == [(1, 0)]
    off_the_map = parse(json.dumps({"path": [[1, 0], [0, 0], [-1, 0]]}), first_map)
    assert not off_the_map.path_valid and "not a cell of the map" in off_the_map.path_problem
    nothing = parse("I would build a bridge.", first_map).report()
    assert nothing["found"] == "nothing" and nothing["accepted"] == [] and nothing["path"] == []


@pytest.mark.parametrize(
    "junk", ["", "{" * 65536, "x" * 1_000_000, "\x00\ud800{'a':" * 500, '"\\' * 3000, "```" * 999]
)
def test_any_text_is_a_scored_action(junk: str) -> None:
    env = collabzoo.make("bridgebuild", horizon=1)
    env.reset(seed=0)
    _, rewards, terminations, _, infos = env.step({a: junk for a in env.possible_agents})
    assert math.isfinite(rewards["worker_a"]) and rewards["worker_a"] <= env.max_reward
    assert all(terminations.values()) and infos["worker_a"]["parsed"]["accepted"] == []


# ----- the env --------------------------------------------------------------------------------
def test_fog_of_war_is_cumulative_and_live() -> None:
    env = collabzoo.make("bridgebuild", split="all")
    obs, _ = env.reset(seed=0, options={"task": "bridge_build_diag_0001"})
    view = teams.read_view(obs["worker_a"])
    assert view.pillars == {(1, 2), (2, 2), (3, 3)} and (6, 1) not in view.pillars
    assert view.anchors == {"S": {(1, 0)}, "T": set()}
    walk = [[1, 0], [2, 1], [3, 1], [4, 1], [3, 1], [2, 1], [1, 1]]  # out and back
    b_fill = "/fill 6 2 6 2 oak_planks"  # worker B fills a cell only worker A has seen
    obs, *_ = env.step(
        {"worker_a": answer(path=walk), "worker_b": answer(cmds=[b_fill], path=[[11, 10]])}
    )
    view = teams.read_view(obs["worker_a"])
    assert (6, 1) in view.pillars and (9, 1) not in view.pillars and view.position == (1, 1)
    assert view.filled == {(6, 2)}
    assert teams.read_view(obs["worker_b"]).filled == set()  # B has not seen its own block
    obs, *_ = env.step(idle(env))
    assert (6, 1) in teams.read_view(obs["worker_a"]).pillars  # still in sight after leaving


def test_a_message_reaches_only_the_partner_from_the_next_turn() -> None:
    env = collabzoo.make("bridgebuild")
    env.reset(seed=3)
    twin = copy.deepcopy(env)
    note = {"discovered_pillars": [{"x": 2, "z": 2, "type": "Y", "source": "self_probe"}]}
    said = {**idle(env), "worker_a": answer(comm=note, path=[list(env.game.positions[0])])}
    obs, _, _, _, infos = env.step(said)
    quiet, *_ = twin.step(idle(twin))
    assert json.dumps(note, separators=(",", ":")) in obs["worker_b"]
    assert obs["worker_b"] != quiet["worker_b"] and obs["worker_a"] == quiet["worker_a"]
    assert infos["worker_a"]["metrics"]["message_tokens"] == rules.count_tokens(
        json.dumps(note, separators=(",", ":"))
    )
    obs, *_ = env.step(idle(env))
    assert obs["worker_b"].count('"source":"self_probe"') == 1  # kept, shown every turn


def test_the_episode_ends_when_s_and_t_link() -> None:
    env = collabzoo.make("bridgebuild")
    naive = scripted_team("bridgebuild", "naive")
    obs, _ = env.reset(seed=0)
    _, _, terminations, _, infos = env.step(naive(obs))
    assert env.agents == [] and all(terminations.values()) and env.turn == 1
    parts = infos["worker_a"]["reward_components"]
    assert parts["bonus_terminal_connect"] == 2.0 and parts["bonus_gap_st"] == 5.0
    assert infos["worker_a"]["metrics"]["connected"] == 1.0


@pytest.mark.parametrize("reward", ["comlrl", "coti"])
def test_turns_after_the_end_change_nothing_and_pay_zero(reward: str) -> None:
    env = collabzoo.make("bridgebuild", early_end=False, reward=reward)
    naive = scripted_team("bridgebuild", "naive")
    env.reset(seed=0)
    obs, *_ = env.step(idle(env))
    obs, *_ = env.step(naive(obs))  # linked on turn 2
    filled = env.game.filled_cells()
    paid = []
    while env.agents:
        more = {a: answer(cmds=["/fill 0 1 12 9 oak_planks"], probe=[[2, 2]]) for a in env.agents}
        *_, infos = env.step(more)
        paid.append(infos["worker_a"]["reward_components"])
    assert env.turn == 4 and env.game.filled_cells() == filled and len(paid) == 2
    assert all(p[k] == 0.0 for p in paid for k in rules.BASE_TERMS)
    late = [sum(v for k, v in p.items() if k.startswith("bonus_late")) for p in paid]
    if reward == "comlrl":
        assert all(set(p) == set(rules.BASE_TERMS) for p in paid)
    else:  # CoTI's shaping is still paid on the frozen turns, at the frozen turn index 3
        assert late[0] == late[1] > 0 and all(p["bonus_move_progress"] == 0.0 for p in paid)
        # linked, so ready is 1: weight 0.5 (turn 3's) on both turns, not turn 4's 1.0
        assert [p["bonus_late_quality_ready"] for p in paid] == pytest.approx([0.5 * 0.2] * 2)


def play(env: BridgeBuildEnv, seed: int, options=None) -> list:
    rng = random.Random(seed)
    trace = [env.reset(seed=seed, options=options)]
    while env.agents:
        acts = {
            a: answer(
                comm={"n": rng.random()},
                probe=[[rng.randrange(13), rng.randrange(11)]],
                cmds=[f"/fill {rng.randrange(13)} {rng.randrange(11)} 4 5 oak_planks"],
                path=[list(env.game.positions[k]), [rng.randrange(13), rng.randrange(11)]],
            )
            for k, a in enumerate(env.agents)
        }
        trace.append(env.step(acts))
    return trace


def test_episodes_are_deterministic_and_copies_branch_apart() -> None:
    assert play(collabzoo.make("bridgebuild"), 7) == play(collabzoo.make("bridgebuild"), 7)
    env = collabzoo.make("bridgebuild", early_end=False)
    tasks = {env.reset(seed=s)[1]["worker_a"]["task_id"] for s in range(12)}
    assert len(tasks) > 1
    env.reset(seed=0, options={"task": 2})
    env.step(idle(env))
    branch = copy.deepcopy(env)
    env.step({a: answer(cmds=["/fill 0 1 12 9 oak_planks"]) for a in env.agents})
    assert branch.game.filled_cells() == frozenset() and len(env.game.filled_cells()) > 50
    assert branch.item is env.item  # task data is shared, the game is not
    branch.step(idle(branch))
    assert branch.turn == 2 and env.turn == 2


def test_splits_data_files_and_the_shipped_copy(bridge_data: Path) -> None:
    env = collabzoo.make("bridgebuild")
    ids = [m.task_id for m in env.items("all")]
    assert [m.task_id for m in env.items("train")] == ids[:6]
    assert [m.task_id for m in env.items("eval")] == ids[6:] and len(ids) == 9
    magrpo = collabzoo.make("bridgebuild", splits="magrpo")
    assert [m.task_id for m in magrpo.items("eval")] == ["bridge_build_data_0009"]
    assert DATA_FILE.read_bytes() == (bridge_data / "data.json").read_bytes()
    assert (DATA_FILE.parent / "LICENSE").read_text() == (bridge_data / "LICENSE").read_text()
    folder = collabzoo.make("bridgebuild", data=str(bridge_data), split="all")
    folder_ids = [m.task_id for m in folder.items("all")]
    assert len(folder_ids) == len(set(folder_ids)) == 14
    assert (
        "diag/bridge_build_diag_0002" in folder_ids and "data/bridge_build_diag_0002" in folder_ids
    )
    by_id = {m.task_id: m for m in folder.items("all")}
    assert by_id["diag/bridge_build_diag_0002"].rows != by_id["data/bridge_build_diag_0002"].rows
    with pytest.raises(ValueError, match="no task items in split 'eval'"):
        collabzoo.make("bridgebuild", data=str(bridge_data / "data2.json")).reset(
            options={"split": "eval"}
        )


def test_state_render_and_picture_show_the_whole_map() -> None:
    env = collabzoo.make("bridgebuild", render_mode="ansi")
    heuristic = scripted_team("bridgebuild", "heuristic")
    obs, _ = env.reset(seed=0, options={"split": "eval", "task": 0})
    start = picture(env)
    assert start.startswith("<svg") and start.count(">?</text>") == len(env.item.pillars)
    obs, *_ = env.step(heuristic(obs))
    state, shown = env.state(), env.render()
    rows = state.splitlines()[1 : 1 + env.item.height]
    assert "".join(rows).count("B") == 1 and {"Y", "y", "n"} <= set("".join(rows))
    assert "##### worker_a #####" in state and shown.splitlines()[1 : 1 + env.item.height] == rows
    drawn = picture(env)
    probed = len({c for known in env.game.known for c, t in known.items() if t in "YN"})
    assert drawn.count(">Y</text>") + drawn.count(">N</text>") == probed > 0
    assert 'fill-opacity="0.35"' not in drawn  # the walks brought every cell into sight


# ----- the scripted teams ---------------------------------------------------------------------
def run_team(env: BridgeBuildEnv, kind: str, task: int) -> tuple[dict, dict[str, float]]:
    policy = getattr(teams, f"bridgebuild_{kind}")
    obs, _ = env.reset(seed=0, options={"task": task})
    paid: dict[str, float] = {}
    while env.agents:
        obs, _, _, _, infos = env.step({a: policy(o) for a, o in obs.items()})
        for key, value in infos["worker_a"]["reward_components"].items():
            paid[key] = paid.get(key, 0.0) + value
    return infos["worker_a"]["metrics"], paid


UNLINKED = {("comlrl", "data.json", "bridge_build_data_0005")}
"""Where the sound heuristic team does not link S and T in 4 turns: data_0005 with 2 probes a
turn (the CoMLRL path) needs about ten true pillars probed on one route, and the probes that
find fakes on the way leave one pillar beside the route unprobed by turn 3."""


@pytest.mark.parametrize("name", FILES)
@pytest.mark.parametrize("reward", ["comlrl", "coti"])
def test_the_heuristic_team_links_every_map_without_touching_a_fake_pillar(
    bridge_data: Path, name: str, reward: str
) -> None:
    env = collabzoo.make("bridgebuild", data=str(bridge_data / name), split="all", reward=reward)
    for task in range(len(env.items("all"))):
        metrics, paid = run_team(env, "heuristic", task)
        where = (reward, name, env.item.task_id)
        assert metrics["fake_pillar_hits"] == 0.0 and paid["penalty_n_adjacent"] == 0.0, where
        assert env.turn <= env.horizon, where
        if where in UNLINKED:
            assert metrics["connected"] == 0.0, f"{where} links now: take it off UNLINKED"
            continue
        assert metrics["connected"] == 1.0, where
        assert paid["bonus_gap_st"] == pytest.approx(5.0) and paid["bonus_terminal_connect"] == 2.0
        if reward == "coti":  # both walk to the far anchor: all of the walking bonus
            assert paid["bonus_move_progress"] == pytest.approx(2.5), where


@pytest.mark.parametrize("reward", ["comlrl", "coti"])
def test_the_heuristic_team_is_sound_whatever_the_hidden_types(tmp_path: Path, reward: str) -> None:
    """The shipped layouts with every pillar's type drawn at random (half of them fake): the
    heuristic team never places a block beside a fake pillar, so its success on the shipped
    maps owes nothing to which pillars happen to be true. (An earlier version, which built
    beside unprobed pillars on its last turn, touched a fake on 30 of these 36 maps.)"""
    rng = random.Random(0)
    records = []
    for bmap in load_maps(DATA_FILE):
        for k in range(4):
            rows = ["".join(rng.choice("YN") if c in "YN" else c for c in r) for r in bmap.rows]
            records.append({"task_id": f"{bmap.task_id}_relabelled_{k}", "map": rows})
    path = tmp_path / "relabelled.json"
    path.write_text(json.dumps(records))
    env = collabzoo.make("bridgebuild", data=str(path), split="all", reward=reward)
    linked = 0
    for task in range(len(records)):
        metrics, paid = run_team(env, "heuristic", task)
        assert metrics["fake_pillar_hits"] == 0.0 and paid["penalty_n_adjacent"] == 0.0, task
        linked += int(metrics["connected"])
    assert linked >= 1  # and it still links where the drawn types allow it in time


def best_return(env: BridgeBuildEnv) -> float:
    """The most an episode on the env's map can pay before the blocks' cost (which every bridge
    pays), from the reward's own rules: its per-turn maximum less what no team can reach (true
    pillars and groups that only a fill beside a fake pillar would join, and true pillars beside
    an anchor from the start, which no turn newly links); on the CoTI path the late bonus of the
    last turn in full, and of the turn before at its best short of a link (the gap one block,
    two groups)."""
    bmap, s, coti = env.item, env.rules.shaping, env.reward == "coti"
    fakes = bmap.fake_pillars
    safe = frozenset(
        (x, z)
        for x in range(bmap.width)
        for z in range(bmap.height)
        if (x, z) not in bmap.fixed and not any(nb in fakes for nb in rules.neighbours((x, z)))
    )
    unreached = len(bmap.true_pillars) - rules.connected_true_pillars(bmap, safe)
    unreached += rules.connected_true_pillars(bmap, frozenset())
    unmerged = rules.components(bmap, safe) - 1
    best = env.max_reward
    best -= (
        rules.PILLAR_WEIGHT
        * (s.y_connected_bonus_scale if coti else 1.0)
        * unreached
        / max(1, len(bmap.true_pillars))
    )
    best -= (
        rules.MERGE_WEIGHT
        * (s.cc_merge_bonus_scale if coti else 1.0)
        * unmerged
        / max(1, bmap.initial_components - 1)
    )
    if coti:  # the late bonus: full on the last turn, short of the link on the one before
        late = (
            s.late_quality_clean_scale,
            s.late_quality_compact_scale,
            s.late_quality_ready_scale,
        )
        most = max(s.late_quality_turn3_weight, s.late_quality_turn4_weight) * sum(late)
        best += s.late_weight(env.horizon) * sum(late) - most
        if env.horizon >= 2:
            ready = 1.0 - 1.0 / bmap.gap_max
            best += s.late_weight(env.horizon - 1) * (late[0] + late[1] + late[2] * ready)
    return best


@pytest.mark.parametrize("name", FILES)
@pytest.mark.parametrize("reward", ["comlrl", "coti"])
def test_the_oracle_builds_the_best_bridge_of_every_map(
    bridge_data: Path, name: str, reward: str
) -> None:
    """The privileged oracle (built from the env, it knows the pillar types) links every
    shipped map at the default settings, touches no fake pillar, and is paid the reward's
    maximum less its blocks; its answers go through the env's reading like anyone's: messages,
    probes of the pillars its bridge touches, fill commands and walks, nothing rejected."""
    env = collabzoo.make("bridgebuild", data=str(bridge_data / name), split="all", reward=reward)
    oracle = scripted_team("bridgebuild", "oracle", env=env)
    for task in range(len(env.items("all"))):
        obs, _ = env.reset(seed=0, options={"task": task})
        where = (reward, name, env.item.task_id)
        paid: dict[str, float] = {}
        total, fills = 0.0, 0
        while env.agents:
            obs, rewards, _, _, infos = env.step(oracle(obs))
            total += rewards["worker_a"]
            for key, value in infos["worker_a"]["reward_components"].items():
                paid[key] = paid.get(key, 0.0) + value
            last = (
                rewards["worker_a"] - infos["worker_a"]["reward_components"]["penalty_block_cost"]
            )
            for agent in env.possible_agents:
                report = infos[agent]["parsed"]
                assert not report["rejected"] and not report["rejected_probes"], where
                assert report["path"] and not report["path_problem"], where
                fills += len(report["accepted"])
        metrics = infos["worker_a"]["metrics"]
        assert metrics["connected"] == 1.0 and env.turn == env.horizon, where
        assert metrics["fake_pillar_hits"] == 0.0 and paid["penalty_n_adjacent"] == 0.0, where
        known = {c: t for k in env.game.known for c, t in k.items()}
        assert known and set(known.values()) <= {"Y", "N"}, where  # it probed pillars only
        assert metrics["message_tokens"] > 0 and fills > 0, where
        assert total - paid["penalty_block_cost"] == pytest.approx(best_return(env)), where
        if reward == "comlrl":  # all on the last turn: the most one turn pays, less its blocks
            assert last == pytest.approx(best_return(env)), where


@pytest.mark.parametrize("horizon", [1, 2])
def test_the_oracle_links_within_a_shorter_horizon(horizon: int) -> None:
    """With one turn it fills the whole bridge at once; with two, on the CoTI path, all but one
    cell first."""
    env = collabzoo.make("bridgebuild", split="all", horizon=horizon, reward="coti")
    oracle = scripted_team("bridgebuild", "oracle", env=env)
    for task in range(len(env.items("all"))):
        obs, _ = env.reset(seed=0, options={"task": task})
        total, blocks, linked_at = 0.0, 0.0, []
        while env.agents:
            obs, rewards, _, _, infos = env.step(oracle(obs))
            total += rewards["worker_a"]
            blocks += infos["worker_a"]["reward_components"]["penalty_block_cost"]
            linked_at.append(infos["worker_a"]["metrics"]["connected"])
        assert linked_at == [0.0] * (horizon - 1) + [1.0], env.item.task_id
        assert total - blocks == pytest.approx(best_return(env)), env.item.task_id


def test_the_oracle_needs_the_env_and_finds_its_map_by_the_prompt(bridge_data: Path) -> None:
    with pytest.raises(ValueError, match="pass the env it plays"):
        scripted_team("bridgebuild", "oracle")
    # built from another env with the same maps, it finds the map from the prompt alone where
    # the prompt tells the maps apart, and says so where it does not; never a wrong map
    oracle = teams.env_oracle(collabzoo.make("bridgebuild", split="all"))
    env = collabzoo.make("bridgebuild", split="all")
    found = 0
    for task in range(len(env.items("all"))):
        obs, _ = env.reset(seed=0, options={"task": task})
        for text in obs.values():
            view = teams.read_view(text)
            try:
                found += oracle.find_map(view).rows == env.item.rows
            except ValueError as error:
                assert "fits several maps" in str(error) and env.item.task_id in str(error)
    assert found >= len(env.items("all"))  # diag_0002 and diag_0007 look alike from S at first
    data2 = collabzoo.make("bridgebuild", data=str(bridge_data / "data2.json"), split="all")
    obs, _ = data2.reset(seed=0, options={"task": 0})
    with pytest.raises(ValueError, match="shows none of the oracle's 9 maps"):
        oracle(obs["worker_a"])


def test_the_naive_team_links_but_touches_fake_pillars() -> None:
    env = collabzoo.make("bridgebuild", split="all")
    hits = [run_team(env, "naive", task)[0] for task in range(9)]
    assert all(m["connected"] == 1.0 for m in hits)
    assert all(m["fake_pillar_hits"] > 0 for m in hits)


# ----- the CoTI option ------------------------------------------------------------------------
def test_coti_rescales_its_terms_and_adds_shaping() -> None:
    text = {
        "worker_a": answer(cmds=["/fill 1 1 1 9 oak_planks"], path=[[1, 0], [2, 1]]),
        "worker_b": answer(cmds=["/fill 1 9 11 9 oak_planks"], path=[[11, 10], [10, 9]]),
    }
    out = {}
    for reward in ("comlrl", "coti"):
        env = collabzoo.make("bridgebuild", reward=reward, split="all")
        env.reset(seed=0, options={"task": "bridge_build_data_0005"})
        _, _, _, _, infos = env.step(text)
        out[reward] = infos["worker_a"]["reward_components"]
    base, coti = out["comlrl"], out["coti"]
    assert base["bonus_cc_merge"] > 0 and base["penalty_n_adjacent"] < 0
    assert coti["bonus_cc_merge"] == pytest.approx(0.5 * base["bonus_cc_merge"])
    assert coti["penalty_n_adjacent"] == pytest.approx(1.5 * base["penalty_n_adjacent"])
    for same in (
        "bonus_gap_st",
        "bonus_y_connected",
        "penalty_block_cost",
        "bonus_terminal_connect",
    ):
        assert coti[same] == base[same]
    assert coti["bonus_move_progress"] == pytest.approx(2.5 * 4 / 40)  # 4 steps of D = 20 + 20
    assert coti["bonus_late_quality_ready"] == 0.0  # turn 1: no late bonus yet
    assert collabzoo.make("bridgebuild", reward="coti").rules.max_probe == 3
    assert collabzoo.make("bridgebuild", max_probe=5).rules.max_probe == 2  # clamped


def test_the_prompts_scoring_text_is_the_references_unless_asked() -> None:
    def scoring(**kwargs) -> str:
        obs, _ = collabzoo.make("bridgebuild", **kwargs).reset(seed=0)
        return obs["worker_a"].split("Scoring, each turn:")[1]

    reference = scoring()
    assert "1.5 x merges" in reference and "walking" in reference  # CoTI's, on the base path
    paid = scoring(reward_text="paid")
    assert "3 x merges" in paid and "-8 x fake" in paid and "walking" not in paid
    assert "-12 x fake" in scoring(reward_text="paid", reward="coti")


# ----- the reference's prompt options ---------------------------------------------------------
def first_turn(**kwargs) -> tuple[BridgeBuildEnv, dict, dict]:
    env = collabzoo.make("bridgebuild", **kwargs)
    first, _ = env.reset(seed=0, options={"task": "bridge_build_data_0005"})
    text = {
        "worker_a": answer(cmds=["/fill 1 1 1 9 oak_planks"], probe=[[1, 2]], path=[[1, 0]]),
        "worker_b": answer(comm={"note": "hi"}, path=[[11, 10], [10, 9]]),
    }
    later, *_ = env.step(text)
    return env, first, later


def test_the_default_prompts_are_the_reference_configs() -> None:
    """empty_feedback, the whole prompt after the system text every turn, no previous answer;
    the first prompt for the chat template, later ones raw (the CoMLRL trainers' quirk)."""
    env, first, later = first_turn()
    for agent in env.possible_agents:
        assert first[agent].startswith(SYSTEM_PROMPT) and type(first[agent]) is str
        assert isinstance(later[agent], RawPrompt) and later[agent].chat_template is False
        assert SYSTEM_PROMPT in later[agent] and later[agent].endswith("Feedback: (none)")
        assert PREVIOUS_ANSWER not in later[agent]
    _, _, every = first_turn(chat_template="every_turn")
    assert type(every["worker_a"]) is str and every["worker_a"] == later["worker_a"]
    with pytest.raises(ValueError, match="feedback"):
        collabzoo.make("bridgebuild", feedback="perfect_feedback")


@pytest.mark.parametrize("mode", ["perfect", "score", "position"])
def test_each_feedback_mode_fills_the_feedback_section(mode: str) -> None:
    env, _, later = first_turn(feedback=mode)
    values = feedback_values(mode, env.item, env.outcome, 0, 2, env.rules.view)
    report = later["worker_a"].split("Feedback: ", 1)[1]
    assert list(values)[: len(FEEDBACK_FIELDS[mode])] == list(FEEDBACK_FIELDS[mode])
    assert report.count("\n- ") >= len(FEEDBACK_FIELDS[mode]) - 1
    if mode != "position":  # A's fill touched fake pillars: the penalty shows, as a positive
        penalty = values["penalty_n_adjacent"]
        assert penalty > 0 and f"fake-pillar penalty: {penalty:.4f}" in report
        assert values["reward"] == pytest.approx(env.outcome.breakdown.total)
        assert "turn now: 2" in report
    else:
        assert f"your position: {json.dumps(list(env.game.positions[0]))}".replace(" ", "") in (
            report.replace(" ", "")
        )
    b_report = later["worker_b"].split("Feedback: ", 1)[1]
    assert ("you are worker: B" in b_report) == (mode != "score")  # score's is the same for both


def test_without_the_original_prompt_later_turns_get_only_the_feedback() -> None:
    _, _, later = first_turn(feedback="score", original_prompt=False)
    assert later["worker_a"].split("\n", 1)[1].startswith("Score of the last turn:")
    assert "Scoring, each turn" not in later["worker_a"] and SYSTEM_PROMPT not in later["worker_a"]
    _, _, empty = first_turn(original_prompt=False)  # empty mode: the prompt, no system text
    assert SYSTEM_PROMPT not in empty["worker_a"] and HEADER in empty["worker_a"]


def test_previous_response_appends_the_last_answer() -> None:
    env, _, later = first_turn(previous_response=True)
    tail = later["worker_a"].split(PREVIOUS_ANSWER + "\n", 1)[1]
    assert json.loads(tail)["cmds"] == ["/fill 1 1 1 9 oak_planks"]
    copy_ = copy.deepcopy(env)  # a raw prompt survives copies
    assert isinstance(copy_.observe("worker_b"), RawPrompt)
