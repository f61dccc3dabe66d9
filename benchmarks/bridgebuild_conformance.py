"""Extend the BridgeBuild conformance set with scripted, messy and chaotic episodes scored by the
reference.

tests/test_bridgebuild.py replays `tests/data/bridgebuild_conformance.json` through collabzoo's
rules and asserts every reward term, count, reading, state field and observation of every turn
(within 1e-9), and the facts each reference feedback mode reports;
tests/test_games_env_conformance.py plays every episode through the env itself. The file's first
episodes (kinds "random" and "bridge", CoMLRL and CoTI paths, no `made_by`) were made by running
the reference's files unchanged outside this repository; this script adds, one per map of each
reference file, played through the reference's own `apply_turn`:

- oracle: collabzoo's heuristic team (the observation-only team, named the oracle when these
  cases were recorded), its answers written from collabzoo's prompts;
- naive: the naive team (straight lines blind, fake pillars or not);
- messy: the heuristic team's answers as LLMs garble them (seeded): fences, prose around the object,
  Python literals, cut-off JSON, lost keys, extra and malformed fill commands, string and dict
  coordinates, broken paths;
- chaos: seeded random joint actions written from the reference's own observation, with no
  team and no env: messages (none, empty, probe facts, CJK text, not a dict), probes (visible
  candidates, any cell, out of the map, as lists, dicts or strings, more than allowed), fills
  (lines near the worker, over the map, wrong or `minecraft:` blocks, relative or missing
  corners, 22 at once: over the cap), moves (walks, jumps, off the map, from the wrong cell,
  empty), each written out plain, fenced, in prose, as a Python literal, cut off, after another
  object, or not at all.

oracle, naive and messy run on the CoMLRL path (2 probes) and on the CoTI path (3 probes: the
base turn, then the CoTI adapter's `_adjust_reward_metrics` with its config's `reward_shaping`
and the movement norm at reset); chaos on both paths too. Each episode runs until the reference
says the game is over, then one more turn (the reference's frozen turn: base reward 0, nothing
changes; CoTI's shaping is still paid). Each group draws from its own seeded generator, so a
new group leaves the earlier ones as they were. The reference is loaded from `--reference`, a
folder holding `bridge_build/utils/bridge_builder.py` of OpenMLRL/LLM_Collab_Minecraft at the
pinned commit and, for the CoTI groups, `bridge_build/coti/adapter.py` at 57649ab (neither is in
that repository's git history; they were read from a public code index).

    python benchmarks/bridgebuild_conformance.py --reference DIR --maps SHARED/bridgebuild \\
        [--output tests/data/bridgebuild_conformance.json]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from minecraft_reference import (
    BRIDGE_FILE,
    COTI_COMMIT,
    COTI_FILE,
    CotiShaper,
    bridge_turn,
    dressed,
    load_reference,
    team_answers,
    write_conformance,
)

import collabzoo
from collabzoo.tasks.bridgebuild import teams

FILES = ("data.json", "data2.json", "diag.json")
KINDS = ("oracle", "naive", "messy", "chaos")
GROUPS = (
    (("oracle", "naive", "messy"), "comlrl", 20261207),
    (("oracle", "naive", "messy"), "coti", 20261208),
    (("chaos",), "comlrl", 20261209),
    (("chaos",), "coti", 20261210),
)
"""Each group of added episodes: its kinds, its reward path and the seed of its generator."""
MAX_PROBE = {"comlrl": 2, "coti": 3}
PINNED = "25a7971dba40749d364b0ae96ca6c2a79dfa7e68"
MAX_TURNS = 4


def garble(answer: str, rng: random.Random) -> str:
    """One of the ways an LLM spoils a good answer (or none)."""
    obj = json.loads(answer)
    kind = rng.randrange(12)
    if kind == 0:
        return f"```json\n{answer}\n```"
    if kind == 1:
        return f"Plan: link S and T.\n{answer}\nThat is my move."
    if kind == 2:
        return repr(obj)  # a Python literal: single quotes
    if kind == 3:
        return answer[: max(1, len(answer) - rng.randint(1, 12))]  # cut off
    if kind == 4:
        obj.pop(rng.choice(sorted(obj)), None)
        return json.dumps(obj)
    if kind == 5:
        extra = [
            "/fill 0 0 40 40 oak_planks",
            "/fill 1 2 3 stone",
            "fill 2 2 2 3 minecraft:oak_planks",
        ]
        obj["cmds"] = list(obj.get("cmds", [])) + rng.sample(extra, 2)
        return json.dumps(obj)
    if kind == 6:
        obj["probe"] = [f"{x},{z}" for x, z in obj.get("probe", [])] + [{"x": 0, "z": 0}]
        return json.dumps(obj)
    if kind == 7:
        path = obj.get("path") or [[0, 0]]
        obj["path"] = [*path[:1], [path[0][0] + 3, path[0][1]]]  # a jump: no move
        return json.dumps(obj)
    if kind == 8:
        return f'{{"comm": {{}}}}\n{answer}'  # two objects: the one with more keys wins
    if kind == 9:
        obj["comm"] = "on my way"  # not a dict: no message
        return json.dumps(obj)
    if kind == 10:
        obj["cmds"] = [c.replace("/fill", "/fill ~") for c in obj.get("cmds", [])]
        return json.dumps(obj)
    return answer


def chaos_action(ref: ModuleType, task: Any, state: Any, agent: int, rng: random.Random) -> str:
    """A seeded random answer for `agent`, from what the reference shows it (no team, no env)."""
    seen = ref.get_agent_observation(task, state, agent_idx=agent, view=3)
    x, z = seen["current_pos"]
    width, height = task.width, task.height
    candidates = seen["visible_p_candidates"]
    obj: dict[str, Any] = {}
    comm = rng.randrange(6)
    if comm == 1:
        obj["comm"] = {}
    elif comm == 2:
        facts = [
            {"x": r["coord"][0], "z": r["coord"][1], "type": r["type"], "source": "probe"}
            for r in seen["known_probe_results"]
        ]
        obj["comm"] = {"discovered_pillars": facts, "candidate_coords": candidates[:3]}
    elif comm == 3:
        obj["comm"] = {"note": "桥在东边, go east 2 步"}
    elif comm == 4:
        obj["comm"] = "meet me in the middle"
    elif comm == 5:
        obj["comm"] = {"plan": [x, z], "fill_row": z, "ok": True}
    if rng.random() < 0.8:
        forms = [
            lambda c: list(c),
            lambda c: {"x": c[0], "z": c[1]},
            lambda c: f"{c[0]},{c[1]}",
        ]
        cells = [*candidates, [rng.randrange(width), rng.randrange(height)], [width, 0], [-1, 2]]
        probes: list[Any] = [rng.choice(forms)(rng.choice(cells)) for _ in range(rng.randint(0, 4))]
        if rng.random() < 0.15:
            probes.append(rng.choice(["a,b", [1], None, [1.5, 2]]))
        obj["probe"] = probes
    count = rng.choice([0, 1, 2, 3, 4, 22])
    cmds: list[Any] = []
    for _ in range(count):
        x1 = min(width - 1, max(0, x + rng.randint(-3, 3)))
        z1 = min(height - 1, max(0, z + rng.randint(-3, 3)))
        length = rng.randint(0, 3) if count < 22 else 0
        x2, z2 = (min(width - 1, x1 + length), z1) if rng.random() < 0.5 else (x1, z1 + length)
        z2 = min(height - 1, z2)
        block = rng.choice(["oak_planks"] * 5 + ["minecraft:oak_planks", "stone", "OAK_PLANKS"])
        line = rng.choice(["/fill", "fill", "/FILL"]) + f" {x1} {z1} {x2} {z2} {block}"
        spoil = rng.randrange(12) if count < 22 else -1  # 22 good lines: over the cap of 20
        if spoil == -1:
            line = f"/fill {x1} {z1} {x2} {z2} oak_planks"
        elif spoil == 0:
            line = f"/fill {x1} {z1} {width + 2} {z2} oak_planks"
        elif spoil == 1:
            line = f"/fill ~{x1} {z1} {x2} {z2} oak_planks"
        elif spoil == 2:
            line = f"/fill {x1} {z1} oak_planks"
        elif spoil == 3:
            line = f"/setblock {x1} 64 {z1} oak_planks"
        cmds.append(line)
    if cmds or rng.random() < 0.5:
        obj["cmds"] = cmds
    moves = rng.randrange(8)
    if moves in (0, 1, 2):
        path = [[x, z]]
        for _ in range(rng.randint(1, 5)):
            px, pz = path[-1]
            nx = min(width - 1, max(0, px + rng.randint(-1, 1)))
            nz = min(height - 1, max(0, pz + rng.randint(-1, 1)))
            path.append([nx, nz])
        obj["path"] = path
    elif moves == 3:
        obj["path"] = [[x, z], [x + 2, z]]
    elif moves == 4:
        obj["path"] = [[x, z], [x, -1]]
    elif moves == 5:
        obj["path"] = [[min(width - 1, x + 1), z]]
    elif moves == 6:
        obj["path"] = []
    return dressed(obj, rng)


def record_turn(ref: ModuleType, task: Any, result: Any, answers: list[str]) -> dict[str, Any]:
    """A turn as the conformance file holds it."""
    state = result.state
    return {
        "answers": answers,
        "metrics": None,  # filled by the caller in metric_keys order
        "parsed": [
            {
                "comm_tokens": a.comm_tokens,
                "comm_sent": bool(a.comm_text),
                "probes": [list(c) for c in a.probes],
                "fills": [list(f) for f in a.fills],
                "path": [list(c) for c in a.path] if a.path_valid else None,
                "rejected": [[r["line"][:40], r["reason"]] for r in a.rejected_cmds],
            }
            for a in result.actions
        ],
        "state": {
            "turn_index": state.turn_index,
            "filled": [list(c) for c in ref._sorted_coords(ref._filled_cells(state.filled))],
            "positions": [list(p) for p in state.agent_positions],
            "origins": [[list(c) for c in ref._sorted_coords(o)] for o in state.vision_origins],
            "known": [
                {f"{x},{z}": v for (x, z), v in sorted(k.items())} for k in state.known_pillars
            ],
            "connected": state.connected,
            "terminated": state.terminated,
        },
        "observations": [
            ref.get_agent_observation(task, state, agent_idx=k, view=3)
            for k in range(len(state.agent_positions))
        ],
    }


def play(
    ref: ModuleType,
    task: Any,
    env: Any,
    kind: str,
    rng: random.Random,
    keys: tuple[list[str], list[str]],
    coti: CotiShaper | None,
) -> list[dict[str, Any]]:
    """One episode: the team answers collabzoo's prompts (chaos: the reference's observation),
    the reference plays the answers (and, on the CoTI path, shapes the reward); until the
    reference's game is over, then its frozen turn."""
    metric_keys, coti_keys = keys
    policy = teams.bridgebuild_naive if kind == "naive" else teams.bridgebuild_heuristic
    observations, _ = env.reset(seed=0, options={"task": task.task_id})
    state = ref.make_initial_state(task, num_agents=2, max_turns=MAX_TURNS)
    norm = coti.norm(task, state) if coti is not None else 0.0
    spoil = (lambda a: garble(a, rng)) if kind == "messy" else None
    turns: list[dict[str, Any]] = []
    while True:
        if kind == "chaos":
            answers = [chaos_action(ref, task, state, k, rng) for k in range(2)]
        else:
            answers = team_answers(env, observations, policy, spoil, turns)
        frozen = state.terminated
        result = bridge_turn(ref, task, state, answers, max_probe=MAX_PROBE[env.reward])
        turn = record_turn(ref, task, result, answers)
        turn["metrics"] = [result.metrics.get(k) for k in metric_keys]
        if coti is not None:
            shaped = coti.shape(task, state, result, norm)
            turn["coti_metrics"] = [shaped.get(k) for k in coti_keys]
        turns.append(turn)
        if frozen:
            return turns
        if env.agents and kind != "chaos":
            observations, *_ = env.step(dict(zip(env.possible_agents, answers, strict=True)))
        state = result.state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reference", type=Path, required=True)
    parser.add_argument("--maps", type=Path, required=True, help="the reference's map files")
    parser.add_argument(
        "--output",
        type=Path,
        default=Path(__file__).resolve().parents[1] / "tests/data/bridgebuild_conformance.json",
    )
    args = parser.parse_args()
    ref = load_reference(args.reference, BRIDGE_FILE, "reference_bridge_builder")
    document = json.loads(args.output.read_text(encoding="utf-8"))
    keys = (document["metric_keys"], document["coti_keys"])
    kept = [e for e in document["episodes"] if e["kind"] not in KINDS]
    tasks = {name: ref.load_tasks_from_json(str(args.maps / name)) for name in FILES}
    coti = CotiShaper(args.reference, ref, [t for name in FILES for t in tasks[name]])
    added = []
    for kinds, reward, seed in GROUPS:
        rng = random.Random(seed)
        for name in FILES:
            env = collabzoo.make(
                "bridgebuild", data=str(args.maps / name), split="all", reward=reward
            )
            for index, task in enumerate(tasks[name]):
                for kind in kinds:
                    turns = play(
                        ref, task, env, kind, rng, keys, coti if reward == "coti" else None
                    )
                    added.append(
                        {
                            "kind": kind,
                            "file": name,
                            "task_id": task.task_id,
                            "index": index,
                            "reward": reward,
                            "max_probe": MAX_PROBE[reward],
                            "made_by": f"benchmarks/bridgebuild_conformance.py seed {seed}",
                            "turns": turns,
                        }
                    )
    groups = [(f"kinds {', '.join(kinds)} on the {reward} path", s) for kinds, reward, s in GROUPS]
    how = (
        f"apply_turn of {BRIDGE_FILE}@{PINNED} (view 3, 40 commands, oak_planks for both, "
        "4 turns; 2 probes on the CoMLRL path, 3 on the CoTI path, where BridgeBuildAdapter."
        f"_adjust_reward_metrics of {COTI_FILE}@{COTI_COMMIT} with the config's reward_shaping "
        "and move_distance_norm = max(1, D at reset) gives coti_metrics), observations by its "
        "get_agent_observation"
    )
    write_conformance(args.output, document, kept, added, "bridgebuild_conformance.py", groups, how)


if __name__ == "__main__":
    main()
