"""ResourceGathering-v0: the reference rules (conformance cases made by running the reference
code), the action reading, visibility, messages, the end, determinism and the scripted teams."""

from __future__ import annotations

import copy
import json
import math
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

import collabzoo
from collabzoo.tasks.resourcegathering import rewards as rules
from collabzoo.tasks.resourcegathering.envs import DATA, load_maps, map_svg
from collabzoo.tasks.resourcegathering.teams import (
    resourcegathering_naive,
    resourcegathering_oracle,
)
from tests.conftest import require

CONFORMANCE = Path(__file__).parent / "data" / "resourcegathering_conformance.json"
A, B = "wood_worker", "stone_iron_worker"
# The reference's metric names and where ours keeps each: a component (sign), or a metric.
REFERENCE_TERMS = {
    "bonus_progress": ("progress", 1),
    "bonus_terminal_complete": ("terminal", 1),
    "bonus_move_to_zone": ("work_zone", 1),
    "bonus_useful_comm": ("useful_messages", 1),
    "bonus_first_enter_zone": ("first_entries", 1),
    "penalty_move": ("move_cost", -1),
    "penalty_comm": ("message_cost", -1),
    "penalty_wasted_extraction": ("waste", -1),
}
REFERENCE_METRICS = {
    "progress_score": "progress_score",
    "completed": "success",
    "delta_wood": "delta_wood",
    "delta_stone": "delta_stone",
    "delta_iron": "delta_iron",
    "num_comm_items": "num_comm_items",
    "useful_comm_items": "useful_comm_items",
    "num_valid_extractions": "num_valid_extractions",
    "wasted_extractions": "wasted_extractions",
    "move_steps": "move_steps",
    "move_toward_zone_steps": "move_toward_zone_steps",
    "first_enter_zone_count": "first_enter_zone_count",
}


@pytest.fixture(scope="module")
def reference() -> dict:
    return json.loads(CONFORMANCE.read_text())


@pytest.fixture(scope="module")
def shared_maps(shared_data: Path) -> tuple[rules.GatherMap, ...]:
    path = require(shared_data / "resourcegathering" / "data.json", "the ResourceGathering maps")
    return load_maps(str(path))


def action(comm=None, cmds=(), path=None) -> str:
    obj: dict = {"comm": comm or {}, "probe": [], "cmds": [list(c) for c in cmds]}
    if path is not None:
        obj["path"] = [list(p) for p in path]
    return json.dumps(obj)


def started(task: int = 0, **kwargs):
    env = collabzoo.make("resourcegathering", split="all", **kwargs)
    observations, _ = env.reset(seed=0, options={"task": task})
    return env, observations


# ----- the maps ----------------------------------------------------------------------------------
def test_the_shipped_maps_are_the_reference_file(shared_data: Path, shared_maps) -> None:
    shared = require(shared_data / "resourcegathering" / "data.json", "the ResourceGathering maps")
    assert DATA.read_bytes() == shared.read_bytes()
    maps = load_maps()
    assert maps == shared_maps and len(maps) == 14
    assert [m.task_id.split("_")[2] for m in maps] == ["train"] * 7 + ["eval"] * 7
    assert {m.goal for m in maps} == {(3, 3, 1)}
    assert {(m.width, m.height) for m in maps} == {(8, 8), (9, 9), (10, 10)}
    first = maps[0]
    assert first.starts == ((1, 1), (6, 2))
    assert dict(first.resources)[(0, 2)] == (0, 3, 1) and (1, 1) not in dict(first.resources)


def test_map_parsing_reads_the_reference_token_forms() -> None:
    record = {"rows": ["A (1:0|2) .", "_ 0 B"], "goal": {"wood": 0}}
    gmap = rules.parse_map(record)
    assert gmap.starts == ((0, 0), (2, 1)) and gmap.resources == (((1, 0), (1, 0, 2)),)
    assert gmap.goal == (1, 1, 1), "a goal below 1 or missing reads as 1"
    with pytest.raises(ValueError, match="start cells"):
        rules.parse_map({"rows": [". A"]})
    with pytest.raises(ValueError, match="invalid map token"):
        rules.parse_map({"rows": ["A B (1,2)"]})


def test_splits_follow_the_comlrl_slice_and_coti_is_an_option() -> None:
    maps = [m.task_id for m in load_maps()]
    env = collabzoo.make("resourcegathering")
    assert [m.task_id for m in env.items("train")] == maps[:7]
    assert [m.task_id for m in env.items("eval")] == maps[7:]
    assert [m.task_id for m in env.items("all")] == maps
    coti = collabzoo.make("resourcegathering", split_scheme="coti")
    assert [m.task_id for m in coti.items("train")] == maps[:8]
    assert [m.task_id for m in coti.items("eval")] == maps[8:]
    _, infos = env.reset(seed=1, options={"split": "eval", "task": maps[9]})
    assert infos[A]["task_id"] == maps[9]
    with pytest.raises(ValueError, match="in split 'eval'"):
        env.reset(options={"task": maps[9]})


# ----- conformance with the reference ------------------------------------------------------------
def test_every_turn_matches_the_reference(reference: dict, shared_maps) -> None:
    """Each recorded turn of the reference, replayed: the reward to the last bit, every term,
    the counts it logs, the messages as sanitized, the paths, the extractions, the next state."""
    names = reference["metric_names"]
    turns = 0
    for episode in reference["episodes"]:
        gmap = shared_maps[episode["task_index"]]
        assert gmap.task_id == episode["task_id"]
        shaping = "reference" if episode["config"] == "reference" else "wrapper_defaults"
        state = rules.initial_state(gmap, 4)
        for number, turn in enumerate(episode["turns"]):
            where = f"{gmap.task_id} turn {number + 1}"
            out = rules.play_turn(
                gmap,
                state,
                turn["answers"],
                scales=rules.SHAPINGS[shaping],
                extraction_limit=episode["extraction_limit"],
            )
            logged = dict(zip(names, turn["metrics"], strict=True))
            assert out.breakdown.total == turn["reward"], where
            for name, (component, sign) in REFERENCE_TERMS.items():
                assert sign * out.breakdown.components[component] == logged[name], (where, name)
            for name, ours in REFERENCE_METRICS.items():
                assert out.breakdown.metrics[ours] == float(logged[name]), (where, name)
            assert [[[f.x, f.z, f.type, f.count] for f in t.facts] for t in out.agents] == turn[
                "messages"
            ], where
            assert [[list(p) for p in t.path] for t in out.agents] == turn["paths"], where
            assert [t.path_valid for t in out.agents] == turn["path_valid"], where
            assert [[list(c) for c in t.harvested] for t in out.agents] == turn["harvested"], where
            state, expected = out.state, turn["next"]
            assert (
                state.turn == expected["turn"]
                and [list(p) for p in state.positions] == (expected["positions"])
            ), where
            assert [sorted(o, key=lambda c: (c[1], c[0])) for o in state.origins] == [
                [tuple(c) for c in o] for o in expected["origins"]
            ], where
            assert {f"{x},{z}": list(v) for (x, z), v in state.resources.items()} == expected[
                "resources"
            ], where
            assert (
                dict(zip(rules.RESOURCES, state.collected, strict=True)) == expected["collected"]
            ), where
            assert list(state.entered) == expected["entered"], where
            assert (state.completed, state.terminated) == (
                expected["completed"],
                expected["terminated"],
            ), where
            turns += 1
    assert turns >= 150


def test_the_cases_cover_every_term_and_the_quirks(reference: dict) -> None:
    """The recorded turns exercise what they are meant to check (they could have missed it)."""
    names = reference["metric_names"]
    assert len(reference["episodes"]) >= 60  # 34 made outside, then the script's, per map
    kinds = {e.get("kind") for e in reference["episodes"]}
    assert {"oracle", "naive", "messy", "chaos"} <= kinds
    fired = dict.fromkeys(REFERENCE_TERMS, 0)
    after_end_paid = 0
    for episode in reference["episodes"]:
        ended = False
        for turn in episode["turns"]:
            logged = dict(zip(names, turn["metrics"], strict=True))
            for name in fired:
                fired[name] += logged[name] != 0
            after_end_paid += ended and turn["reward"] != 0
            ended = ended or turn["next"]["terminated"]
    assert all(fired[n] for n in fired if n not in ("penalty_move", "penalty_comm")), fired
    assert after_end_paid >= 5, "the reference keeps paying after the end (no guard)"
    assert {e["config"] for e in reference["episodes"]} == {"reference", "wrapper"}
    assert {e["extraction_limit"] for e in reference["episodes"]} == {0, 2}


def test_the_action_reading_matches_the_reference_parser(reference: dict, shared_maps) -> None:
    gmap = shared_maps[5]  # 10 x 10
    state = rules.initial_state(gmap)
    for case in reference["parse"]:
        obj, problem = rules.action_object(case["text"])
        assert sorted(obj) == case["keys"], case["text"]
        assert (problem is None) == bool(case["keys"]), case["text"]
        read = rules.read_agent_action(case["text"], gmap, state, 0, extraction_limit=4)
        cells = [list(c) if c is not None else None for _, c in read.targets]
        assert cells == case["cmds_limit_4_on_10x10"], case["text"]


# ----- reading answers ---------------------------------------------------------------------------
def test_fences_and_invalid_json() -> None:
    body = '{"cmds": [[1, 2]]}'
    assert rules.action_object(f"```json\n{body}\n```\n```\n{{}}\n```")[0] == {"cmds": [[1, 2]]}
    assert rules.action_object('``` {"cmds": [[0, 0]]}')[0] == {"cmds": [[0, 0]]}, (
        "one fence is not a block: the whole text is read"
    )
    obj, problem = rules.action_object('Plan {first} then {"cmds": [[1, 2]]}')
    assert obj == {} and "not valid JSON" in problem, "no second chance after the first {...}"
    assert rules.action_object("{'cmds': []}")[0] == {}
    assert rules.action_object('{"cmds": [[1, 2]]')[1].startswith("the first '{' is never")


def test_an_invalid_action_is_empty_and_reported() -> None:
    env, _ = started()
    good = action(
        comm={"resource_facts": [{"x": 0, "z": 1, "type": "stone", "count": 2}]},
        cmds=[(0, 1)],
        path=[(1, 1), (2, 1)],
    )
    _, rewards, _, _, infos = env.step({A: good.replace('"probe": []', "'probe': []"), B: ""})
    parsed = infos[A]["parsed"]
    assert not parsed["read"] and "not valid JSON" in parsed["problem"]
    assert parsed["message"] == [] and parsed["extractions"] == [] and parsed["path_valid"]
    assert env.game.positions == ((1, 1), (6, 2)), "no move"
    assert env.game.inboxes == ((), ())
    assert rewards[A] == 0.0


def test_coordinates_go_through_int() -> None:
    gmap = load_maps()[0]
    state = rules.initial_state(gmap)
    text = json.dumps({"cmds": [[6.9, 1.2], ["7", "2"], [True, False]]})
    read = rules.read_agent_action(text, gmap, state, 1, extraction_limit=3)
    assert [c for _, c in read.targets] == [(6, 1), (7, 2), (1, 0)]
    walk = json.dumps({"path": [[1.7, 1.2], [True, "2"], [2.5, "3"]]})
    assert rules.read_agent_action(walk, gmap, state, 0).path == ((1, 1), (1, 2), (2, 3))
    refused = rules.read_agent_action(json.dumps({"path": [[1, 1], ["1.5", 2]]}), gmap, state, 0)
    assert not refused.path_valid, "int('1.5') fails: the point is not a coordinate"


def test_extraction_limit_zero_reads_as_one() -> None:
    env, _ = started(extraction_limit=0)
    answer = action(cmds=[(0, 1), (0, 2)], path=[(6, 2)])
    _, _, _, _, infos = env.step({A: action(), B: answer})
    parsed = infos[B]["parsed"]
    assert parsed["ignored_targets"] == 1 and len(parsed["extractions"]) == 1
    assert parsed["extractions"][0]["reason"].startswith("farther than 2")
    env2, _ = started(extraction_limit=1)
    _, _, _, _, infos2 = env2.step({A: action(), B: answer})
    assert infos2[B]["reward_components"] == infos[B]["reward_components"]


def test_paths_truncate_and_refuse() -> None:
    gmap = load_maps()[0]
    state = rules.initial_state(gmap)
    long = json.dumps({"path": [[1, 1], [2, 1], [3, 1], [4, 1], [5, 1], [6, 1], [7, 1]]})
    read = rules.read_agent_action(long, gmap, state, 0)
    assert read.path[-1] == (5, 1) and read.path_valid and "truncated" in read.notes[0]
    for bad in ([[2, 1]], [[1, 1], [3, 1]], [[1, 1], [1, 0], [1, -1]], [[1, 1], [1]]):
        refused = rules.read_agent_action(json.dumps({"path": bad}), gmap, state, 0)
        assert refused.path == ((1, 1),) and not refused.path_valid, bad
    for stay in ({"path": []}, {"path": "north"}, {}):
        kept = rules.read_agent_action(json.dumps(stay), gmap, state, 0)
        assert kept.path == ((1, 1),) and kept.path_valid, stay


def test_wasted_targets_are_reported_with_their_reason() -> None:
    env, _ = started()
    _, _, _, _, infos = env.step(
        {A: action(cmds=[(0, 1), (1, 0)]), B: action(cmds=[(7, 2), (99, 1)])}
    )
    reasons = [e["reason"] for e in infos[A]["parsed"]["extractions"]]
    assert reasons == ["nothing there for this agent's tool", "the cell holds nothing"]
    assert infos[A]["parsed"]["ignored_targets"] == 0
    b_reasons = [e["reason"] for e in infos[B]["parsed"]["extractions"]]
    assert b_reasons == ["nothing there for this agent's tool", "outside the map"]
    assert infos[A]["metrics"]["wasted_extractions"] == 4.0
    assert infos[A]["reward_components"]["waste"] == pytest.approx(-0.4)


# ----- visibility and messages -------------------------------------------------------------------
def test_visibility_is_cumulative_and_live() -> None:
    env, observations = started()
    assert "(6,0): wood 3" not in observations[A] and "(0,2): stone 3, iron 1" in observations[A]
    walk = [(1, 1), (2, 1), (3, 1), (4, 1), (5, 1)]
    observations, *_ = env.step({A: action(cmds=[(6, 0), (6, 1)], path=walk), B: action()})
    view = observations[A]
    assert "(0,2): stone 3, iron 1" in view, "cells seen before stay in view"
    assert "(6,0): " not in view and "(6,1) wood" not in view, "extracted: gone from the view"
    assert "(5,0): wood 2" in view and "Your teammate: at (6,2)" in view
    assert env.game.collected == (4, 0, 0)
    origins = env.game.origins[0]
    assert set(walk) <= origins
    assert env.game.visible(0, 8, 8) == rules.visible_cells(origins, 8, 8, 2)


def test_messages_are_sanitized_and_reach_the_partner() -> None:
    env, _ = started()
    twin = copy.deepcopy(env)
    facts = [
        {"x": 0, "z": 2, "type": "Stone", "count": 9},  # kept, with the true count 3
        {"x": 0, "z": 2, "type": "stone", "count": 3},  # repeated
        {"x": 6, "z": 0, "type": "wood", "count": 3},  # not in A's view
        {"x": 2, "z": 1, "type": "iron", "count": 1},  # no iron there
        {"x": 1, "z": 2, "type": "gold", "count": 1},
        {"x": "0", "z": 1.0, "type": "iron", "count": 1},  # int() reads it: kept
        "stone at (0,3)",
    ]
    told, _, _, _, infos = env.step({A: action(comm={"resource_facts": facts}), B: action()})
    parsed = infos[A]["parsed"]
    assert parsed["message"] == [
        {"x": 0, "z": 2, "type": "stone", "count": 3},
        {"x": 0, "z": 1, "type": "iron", "count": 1},
    ]
    assert [d["reason"] for d in parsed["dropped_facts"]] == [
        "repeated",
        "cell [6, 0] is not in your view",
        "cell [2, 1] holds no iron",
        "unknown type 'gold'",
        "not an object",
    ]
    assert "1. stone 3 at (0,2); iron 1 at (0,1)" in told[B]
    silent, *_ = twin.step({A: action(), B: action()})
    assert told[B] != silent[B] and told[A] == silent[A], "B's view depends on what A said"
    # both facts are new to B and name what it lacks: min(1, 3/3 + 1/1) -> 0.1
    assert infos[A]["reward_components"]["useful_messages"] == pytest.approx(0.1)
    assert infos[A]["metrics"]["useful_comm_items"] == 2.0
    # told again: B already knows, no bonus
    _, _, _, _, again = env.step({A: action(comm={"resource_facts": facts[:1]}), B: action()})
    assert again[A]["reward_components"]["useful_messages"] == 0.0
    assert len(env.game.inboxes[1]) == 2 and again[A]["metrics"]["useful_comm_items_so_far"] == 2


# ----- the end, determinism, copies --------------------------------------------------------------
def test_the_episode_ends_when_the_goal_is_met() -> None:
    env, observations = started()
    turns = 0
    while env.agents:
        observations, _, terminations, truncations, infos = env.step(
            {a: resourcegathering_oracle(o) for a, o in observations.items()}
        )
        turns += 1
    assert turns < 4 and all(terminations.values()) and not any(truncations.values())
    assert infos[A]["metrics"]["success"] == 1.0 and env.game.completed
    assert infos[A]["reward_components"]["terminal"] == 7.0
    with pytest.raises(RuntimeError, match="no live agents"):
        env.step({A: "", B: ""})
    # the reference has no guard: its rules still play a turn after the end (the env never does)
    after = rules.play_turn(env.item, env.game, [action(cmds=[(0, 0)]), ""])
    assert after.state.turn == env.game.turn + 1 and after.breakdown.total == pytest.approx(-0.1)


def test_the_episode_ends_after_the_last_turn() -> None:
    env, _ = started()
    for turn in range(4):
        _, _, terminations, _, _ = env.step({a: "" for a in env.agents})
        assert all(terminations.values()) == (turn == 3)
    assert env.agents == [] and env.game.terminated and not env.game.completed
    # past the end the reference's rules still move, extract and pay, the terminal bonus too
    walk = action(cmds=[(6, 0), (6, 1)], path=[(1, 1), (2, 1), (3, 1), (4, 1), (5, 1)])
    after = rules.play_turn(env.item, env.game, [walk, ""])
    assert after.state.turn == 6 and after.state.collected == (4, 0, 0)
    assert after.breakdown.components["progress"] == pytest.approx(8 / 3)


def test_the_whole_episode_is_deterministic_under_a_seed() -> None:
    def play(seed: int) -> list:
        env = collabzoo.make("resourcegathering")
        observations, infos = env.reset(seed=seed)
        trace = [(observations, infos)]
        while env.agents:
            step = env.step({a: resourcegathering_oracle(o) for a, o in observations.items()})
            observations = step[0]
            trace.append(step)
        return trace

    assert play(3) == play(3)
    env = collabzoo.make("resourcegathering")
    assert len({env.reset(seed=s)[1][A]["task_id"] for s in range(30)}) > 3


def test_a_deep_copy_branches_independently() -> None:
    env, observations = started(task=8)
    first = {a: resourcegathering_oracle(o) for a, o in observations.items()}
    observations, *_ = env.step(first)
    branch = copy.deepcopy(env)
    assert branch.items() is env.items()
    branch.step({a: "" for a in branch.agents})
    assert branch.turn == 2 and env.turn == 1 and branch.game != env.game
    ahead = env.step({a: resourcegathering_oracle(o) for a, o in observations.items()})
    assert ahead[1][A] > 5 and branch.game.collected != env.game.collected


def test_state_render_and_picture(capsys: pytest.CaptureFixture[str]) -> None:
    env, _ = started(render_mode="ansi")
    env.step({A: action(path=[(1, 1), (2, 2)]), B: action()})
    state = env.state()
    row = next(line for line in state.splitlines() if line.startswith("z=2 "))
    assert row.split()[1:9] == ["(0,3,1)", "(0,1,1)", "A", ".", ".", ".", "B", "(2,0,0)"]
    assert "collected wood 0/3, stone 0/3, iron 0/1" in state
    assert "inbox of stone_iron_worker: empty" in state
    assert env.render().splitlines()[0].endswith("1 of 4 turns played")
    svg = ElementTree.fromstring(map_svg(env))
    texts = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text")]
    assert {"A", "B", "s3", "i1", "w3"} <= set(texts)
    human = collabzoo.make("resourcegathering", render_mode="human")
    human.reset(seed=0)
    assert "0 of 4 turns played" in capsys.readouterr().out


def test_shaping_options_and_the_reward_parts_add_up() -> None:
    outcomes = {}
    for shaping in ("reference", "wrapper_defaults"):
        env, observations = started(shaping=shaping)
        total = 0.0
        while env.agents:
            observations, rewards, _, _, infos = env.step(
                {a: resourcegathering_oracle(o) for a, o in observations.items()}
            )
            parts = infos[A]["reward_components"]
            assert math.isclose(sum(parts.values()), rewards[A], abs_tol=1e-9)
            assert all(isinstance(v, float) for v in infos[A]["metrics"].values())
            total += parts["progress"] + parts["terminal"]
        outcomes[shaping] = total
    assert outcomes == {"reference": pytest.approx(15.0), "wrapper_defaults": pytest.approx(14.0)}


# ----- the scripted teams ------------------------------------------------------------------------
@pytest.mark.parametrize("memory", ["none", "full"])
def test_the_oracle_completes_every_map_and_naive_does_not(memory: str) -> None:
    env = collabzoo.make("resourcegathering", split="all", memory=memory)
    for index, gmap in enumerate(env.items("all")):
        for policy in (resourcegathering_oracle, resourcegathering_naive):
            observations, _ = env.reset(options={"task": index})
            while env.agents:
                observations, _, _, _, infos = env.step(
                    {a: policy(o) for a, o in observations.items()}
                )
            metrics = infos[A]["metrics"]
            if policy is resourcegathering_oracle:
                assert metrics["success"] == 1.0 and env.turn <= 4, gmap.task_id
                assert metrics["wasted_extractions_so_far"] == 0.0, gmap.task_id
                assert metrics["useful_comm_items_so_far"] > 0, gmap.task_id
            else:
                assert metrics["success"] == 0.0 and metrics["wasted_extractions_so_far"] > 0
                assert metrics["useful_comm_items_so_far"] == 0.0


def test_the_reference_prompt_options() -> None:
    """As configured: the system text before every prompt, the first prompt for the chat
    template and later ones raw (the CoMLRL trainers' quirk); the options change that."""
    from collabzoo.envs.prompt_form import RawPrompt
    from collabzoo.tasks.resourcegathering.envs import PREVIOUS_ANSWER, SYSTEM_PROMPT

    def two_prompts(**kwargs):
        env = collabzoo.make("resourcegathering", **kwargs)
        first, _ = env.reset(seed=0)
        stay = {a: '{"comm": {}, "cmds": [[0, 0]], "path": []}' for a in env.agents}
        later, *_ = env.step(stay)
        return first, later

    first, later = two_prompts()
    assert type(first["wood_worker"]) is str and first["wood_worker"].startswith(SYSTEM_PROMPT)
    assert isinstance(later["wood_worker"], RawPrompt) and SYSTEM_PROMPT in later["wood_worker"]
    assert PREVIOUS_ANSWER not in later["wood_worker"]
    _, every = two_prompts(chat_template="every_turn")
    assert type(every["wood_worker"]) is str and every["wood_worker"] == later["wood_worker"]
    _, bare = two_prompts(original_prompt=False, previous_response=True)
    assert SYSTEM_PROMPT not in bare["wood_worker"]
    assert bare["wood_worker"].endswith(
        PREVIOUS_ANSWER + '\n{"comm": {}, "cmds": [[0, 0]], "path": []}'
    )
