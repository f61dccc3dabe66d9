"""Extend the BridgeBuild conformance set with scripted and messy episodes scored by the reference.

tests/test_bridgebuild.py replays `tests/data/bridgebuild_conformance.json` through collabzoo's
rules and asserts every reward term, count, reading, state field and observation of every turn
(within 1e-9), and the facts each reference feedback mode reports. The file's first episodes
(kinds "random" and "bridge", CoMLRL and CoTI paths) were made by running the reference's files
unchanged outside this repository; this script adds episodes of three more kinds on the CoMLRL
path (2 probes a turn), one per map of each reference file, played through the reference's own
`apply_turn`:

- oracle: collabzoo's heuristic team (the observation-only team, named the oracle when these
  cases were recorded), its answers written from collabzoo's prompts;
- naive: the naive team (straight lines blind, fake pillars or not);
- messy: the heuristic team's answers as LLMs garble them (seeded): fences, prose around the object,
  Python literals, cut-off JSON, lost keys, extra and malformed fill commands, string and dict
  coordinates, broken paths.

Each episode runs until the reference says the game is over, then one more turn (the reference's
frozen turn: reward 0, nothing changes). The reference is loaded from `--reference`, a folder
holding `bridge_build/utils/bridge_builder.py` of OpenMLRL/LLM_Collab_Minecraft at the pinned
commit (the file is not in that repository's git history; it was read from a public code index).

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
    bridge_turn,
    load_reference,
    team_answers,
    write_conformance,
)

import collabzoo
from collabzoo.tasks.bridgebuild import teams

FILES = ("data.json", "data2.json", "diag.json")
KINDS = ("oracle", "naive", "messy")
SEED = 20261207
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
    ref: ModuleType, task: Any, env: Any, kind: str, rng: random.Random, metric_keys: list[str]
) -> list[dict[str, Any]]:
    """One episode: collabzoo's env writes the prompts the teams answer, the reference plays
    the answers; until the reference's game is over, then its frozen turn."""
    policy = teams.bridgebuild_naive if kind == "naive" else teams.bridgebuild_heuristic
    observations, _ = env.reset(seed=0, options={"task": task.task_id})
    state = ref.make_initial_state(task, num_agents=2, max_turns=MAX_TURNS)
    spoil = (lambda a: garble(a, rng)) if kind == "messy" else None
    turns: list[dict[str, Any]] = []
    while True:
        answers = team_answers(env, observations, policy, spoil, turns)
        frozen = state.terminated
        result = bridge_turn(ref, task, state, answers, max_probe=2)
        turn = record_turn(ref, task, result, answers)
        turn["metrics"] = [result.metrics.get(k) for k in metric_keys]
        turns.append(turn)
        if frozen:
            return turns
        if env.agents:
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
    kept = [e for e in document["episodes"] if e["kind"] not in KINDS]
    rng = random.Random(SEED)
    added = []
    for name in FILES:
        tasks = ref.load_tasks_from_json(str(args.maps / name))
        env = collabzoo.make("bridgebuild", data=str(args.maps / name), split="all")
        for index, task in enumerate(tasks):
            for kind in KINDS:
                added.append(
                    {
                        "kind": kind,
                        "file": name,
                        "task_id": task.task_id,
                        "index": index,
                        "reward": "comlrl",
                        "max_probe": 2,
                        "turns": play(ref, task, env, kind, rng, document["metric_keys"]),
                    }
                )
    how = (
        f"apply_turn of {BRIDGE_FILE}@{PINNED} on the CoMLRL path (view 3, 2 probes, 40 commands, "
        "oak_planks for both, 4 turns), observations by its get_agent_observation"
    )
    write_conformance(
        args.output, document, kept, added, "bridgebuild_conformance.py", KINDS, SEED, how
    )


if __name__ == "__main__":
    main()
