"""Extend the ResourceGathering conformance set with scripted and messy episodes, reference-scored.

tests/test_resourcegathering.py replays `tests/data/resourcegathering_conformance.json` through
collabzoo's rules and asserts every turn's reward (to the last bit), each term and logged count,
the messages as sanitized, the paths, the extractions and the next state. The file's first
episodes were made by running the reference's files unchanged outside this repository; this
script adds episodes of three more kinds with the reference config (CoMLRL's MAAC config:
progress 8, terminal 7, zone 0.05, useful messages 0.1, first entry 0.15; 2 extraction targets,
view 2, range 2, paths of 4 moves, 4 turns), one per reference map, played through the
reference's own `transition_payload`:

- oracle: collabzoo's oracle team, its answers written from collabzoo's prompts;
- naive: the naive team;
- messy: the oracle's answers as LLMs garble them (seeded): fences, prose, Python literals
  (no repair here: the whole action is empty), cut-off JSON, lost keys, float and string
  coordinates, too many targets, long or broken paths, messages about unseen cells.

Each episode runs until the reference says the game is over, then one more turn (the reference
has no guard: that turn still moves, extracts and pays). The reference is loaded from
`--reference`, a folder holding `resource_gathering/utils/resource_gathering.py` (pinned 27ee8a8)
and `resource_gathering/envs/nn_env.py` (25a7971) of OpenMLRL/LLM_Collab_Minecraft, the wrapper
importing the environment module beside it rather than a sibling NNGames checkout (the files are
not in that repository's git history; they were read from a public code index).

    python benchmarks/resourcegathering_conformance.py --reference DIR \\
        --maps SHARED/resourcegathering [--output tests/data/resourcegathering_conformance.json]
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
    GATHER_FILE,
    gather_payload,
    load_reference,
    team_answers,
    write_conformance,
)

import collabzoo
from collabzoo.tasks.resourcegathering import teams

KINDS = ("oracle", "naive", "messy")
SEED = 20261207


def garble(answer: str, rng: random.Random) -> str:
    """One of the ways an LLM spoils a good answer (or none)."""
    obj = json.loads(answer)
    kind = rng.randrange(12)
    if kind == 0:
        return f"```json\n{answer}\n```"
    if kind == 1:
        return f"I will gather now. {answer} Done."
    if kind == 2:
        return repr(obj)  # a Python literal: not JSON, the whole action is empty
    if kind == 3:
        return answer[: max(1, len(answer) - rng.randint(1, 10))]
    if kind == 4:
        obj.pop(rng.choice(sorted(obj)), None)
        return json.dumps(obj)
    if kind == 5:
        obj["cmds"] = [[x + 0.7, str(z)] for x, z in obj.get("cmds", [])] + [[0, 0]]
        return json.dumps(obj)
    if kind == 6:
        obj["cmds"] = [*obj.get("cmds", []), [99, 99], [0, 0], [1, 1]]
        return json.dumps(obj)
    if kind == 7:
        path = obj.get("path") or []
        if path:
            x, z = path[-1]
            obj["path"] = [*path, *[[x, z]] * 4]  # longer than 5 points: cut
        return json.dumps(obj)
    if kind == 8:
        path = obj.get("path") or [[0, 0]]
        obj["path"] = [path[0], [path[0][0] + 2, path[0][1]]]  # a jump: no move
        return json.dumps(obj)
    if kind == 9:
        facts = [{"x": 0, "z": 0, "type": "iron", "count": 9}, {"x": 1, "z": 1, "type": "gold"}]
        obj["comm"] = {"resource_facts": facts}
        return json.dumps(obj)
    if kind == 10:
        return "no action this turn"
    return answer


def record_turn(ref: ModuleType, payload: dict, metrics: dict, decoded: list, names: list) -> dict:
    nxt = ref.payload_to_state(payload)
    return {
        "reward": metrics["reward"],
        "metrics": [metrics[k] for k in names],
        "messages": [
            [
                [f["x"], f["z"], f["type"], f["count"]]
                for f in (a.message_obj.get("resource_facts") or [])
            ]
            for a in decoded
        ],
        "paths": [[list(p) for p in a.path] for a in decoded],
        "path_valid": [bool(a.path_valid) for a in decoded],
        "harvested": [[list(c) for c in a.auto_harvest] for a in decoded],
        "next": {
            "turn": nxt.turn_index,
            "positions": [list(p) for p in nxt.agent_positions],
            "origins": [
                [list(c) for c in sorted(o, key=lambda c: (c[1], c[0]))] for o in nxt.vision_origins
            ],
            "resources": {f"{x},{z}": list(v) for (x, z), v in nxt.resources.items()},
            "collected": dict(nxt.collected),
            "entered": list(nxt.entered_work_zones),
            "completed": nxt.completed,
            "terminated": nxt.terminated,
        },
    }


def play(ref: ModuleType, task: Any, env: Any, kind: str, rng: random.Random, names: list) -> list:
    policy = teams.resourcegathering_naive if kind == "naive" else teams.resourcegathering_oracle
    observations, _ = env.reset(seed=0, options={"task": task.task_id})
    payload = gather_payload(ref, task)
    spoil = (lambda a: garble(a, rng)) if kind == "messy" else None
    turns: list[dict] = []
    while True:
        over = ref.payload_to_state(payload).terminated
        answers = team_answers(env, observations, policy, spoil, turns)
        payload, metrics, decoded = ref.transition_payload(
            payload=payload, agent_completions=answers, num_agents=2
        )
        turn = {"answers": answers, **record_turn(ref, payload, metrics, decoded, names)}
        turns.append(turn)
        if over:
            return turns
        if env.agents:
            observations, *_ = env.step(dict(zip(env.possible_agents, answers, strict=True)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reference", type=Path, required=True)
    parser.add_argument(
        "--maps", type=Path, required=True, help="the reference's map file's folder"
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=Path(__file__).resolve().parents[1]
        / "tests/data/resourcegathering_conformance.json",
    )
    args = parser.parse_args()
    ref = load_reference(args.reference, GATHER_FILE, "reference_resource_gathering")
    document = json.loads(args.output.read_text(encoding="utf-8"))
    kept = [e for e in document["episodes"] if e.get("kind") not in KINDS]
    rng = random.Random(SEED)
    env = collabzoo.make("resourcegathering", split="all")
    added = []
    for index, spec in enumerate(ref.load_tasks_from_json(str(args.maps / "data.json"))):
        item = ref.task_to_item(spec)
        item["max_turns"] = 4
        task = ref.task_from_item(item)
        for kind in KINDS:
            added.append(
                {
                    "task_index": index,
                    "task_id": task.task_id,
                    "config": "reference",
                    "extraction_limit": 2,
                    "kind": kind,
                    "turns": play(ref, task, env, kind, rng, document["metric_names"]),
                }
            )
    how = (
        f"transition_payload of {GATHER_FILE}@27ee8a8 with the reference config, until the "
        "reference's game is over, then one more turn"
    )
    write_conformance(
        args.output, document, kept, added, "resourcegathering_conformance.py", KINDS, SEED, how
    )


if __name__ == "__main__":
    main()
