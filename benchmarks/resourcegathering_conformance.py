"""Extend the ResourceGathering conformance set with scripted, messy and chaotic episodes,
reference-scored.

tests/test_resourcegathering.py replays `tests/data/resourcegathering_conformance.json` through
collabzoo's rules and asserts every turn's reward (to the last bit), each term and logged count,
the messages as sanitized, the paths, the extractions and the next state;
tests/test_games_env_conformance.py plays every episode through the env itself. The file's first
episodes (no `kind`, no `made_by`) were made by running the reference's files unchanged outside
this repository; this script adds, one per reference map, played through the reference's own
`transition_payload`:

- oracle: collabzoo's oracle team, its answers written from collabzoo's prompts;
- naive: the naive team;
- messy: the oracle's answers as LLMs garble them (seeded): fences, prose, Python literals
  (no repair here: the whole action is empty), cut-off JSON, lost keys, float and string
  coordinates, too many targets, long or broken paths, messages about unseen cells;
- chaos: seeded random joint actions written from the reference's own observation, with no
  team and no env: messages (none, empty, true facts about visible cells with wrong counts,
  facts about unseen cells, unknown types, string coordinates, not a list, not a dict), probes
  (ignored by the reference), extraction targets (visible resources of either tool, cells out of
  range or off the map, floats, strings, too many), moves (walks of up to 6 steps, cut to 4;
  jumps, off the map, from the wrong cell, empty), each written out plain, fenced, in prose, as a
  Python literal, cut off, after another object, or not at all.

oracle, naive, messy and chaos use the reference config (CoMLRL's MAAC config: progress 8,
terminal 7, zone 0.05, useful messages 0.1, first entry 0.15; 2 extraction targets, view 2,
range 2, paths of 4 moves, 4 turns); oracle and chaos also run with no reward config (the
wrapper's defaults: progress 10, terminal 4), and chaos with an extraction limit of 0 (which
the reference reads as 1). Each episode runs until the reference says the game is over, then
one more turn (the reference has no guard: that turn still moves, extracts and pays). Each group
draws from its own seeded generator, so a new group leaves the earlier ones as they were. The
reference is loaded from `--reference`, a folder holding
`resource_gathering/utils/resource_gathering.py` (pinned 27ee8a8) and
`resource_gathering/envs/nn_env.py` (25a7971) of OpenMLRL/LLM_Collab_Minecraft, the wrapper
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
    dressed,
    gather_payload,
    load_reference,
    team_answers,
    write_conformance,
)

import collabzoo
from collabzoo.tasks.resourcegathering import teams

KINDS = ("oracle", "naive", "messy", "chaos")
GROUPS = (
    (("oracle", "naive", "messy"), "reference", 2, 20261207),
    (("chaos",), "reference", 2, 20261211),
    (("chaos",), "wrapper", 2, 20261212),
    (("chaos",), "reference", 0, 20261213),
    (("oracle",), "wrapper", 2, 20261214),
)
"""Each group of added episodes: its kinds, its reward config, its extraction limit and the seed
of its generator."""


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


def chaos_action(ref: ModuleType, task: Any, state: Any, agent: int, rng: random.Random) -> str:
    """A seeded random answer for `agent`, from what the reference shows it (no team, no env)."""
    seen = ref.get_agent_observation(task, state, agent_idx=agent, view=2, extraction_range=2)
    x, z = seen["current_pos"]
    width, height = task.width, task.height
    cells = [r["coord"] for r in seen["visible_resources"]]
    reachable = [r["coord"] for r in seen["reachable_visible_resources"]] or cells
    obj: dict[str, Any] = {}
    comm = rng.randrange(7)
    facts = [
        {"x": r["coord"][0], "z": r["coord"][1], "type": kind, "count": r[kind]}
        for r in seen["visible_resources"]
        for kind in ("wood", "stone", "iron")
        if r[kind] > 0
    ]
    if comm == 1:
        obj["comm"] = {}
    elif comm in (2, 3):
        chosen = rng.sample(facts, min(len(facts), rng.randint(1, 4)))
        obj["comm"] = {"resource_facts": [{**f, "count": rng.randint(1, 9)} for f in chosen]}
        if comm == 3:
            obj["comm"]["resource_facts"] += [
                {
                    "x": rng.randrange(width),
                    "z": rng.randrange(height),
                    "type": "stone",
                    "count": 2,
                },
                {"x": x, "z": z, "type": "gold", "count": 1},
                {"x": str(x), "z": z, "type": "wood", "count": 1},
                "iron at 1,1",
                *chosen[:1],
            ]
    elif comm == 4:
        obj["comm"] = {"resource_facts": "wood at 2,3"}
    elif comm == 5:
        obj["comm"] = "stone north of you"
    if rng.random() < 0.3:
        obj["probe"] = [[rng.randrange(width), rng.randrange(height)]]
    targets: list[Any] = []
    for _ in range(rng.choice([0, 1, 2, 2, 3, 4])):
        pick = rng.randrange(8)
        if pick < 4 and reachable:
            targets.append(list(rng.choice(reachable)))
        elif pick == 4:
            targets.append([x + rng.randint(-3, 3), z + rng.randint(-3, 3)])
        elif pick == 5:
            targets.append([width + 1, 0])
        elif pick == 6 and cells:
            cx, cz = rng.choice(cells)
            targets.append(rng.choice([[cx + 0.6, cz], [str(cx), str(cz)], {"x": cx, "z": cz}]))
        else:
            targets.append(rng.choice([[1], "3,4", None, [x, z]]))
    if targets or rng.random() < 0.5:
        obj["cmds"] = targets
    moves = rng.randrange(9) if targets else rng.randrange(4)  # extracting: mostly stay
    if moves < 2 and targets:
        obj["path"] = [[x, z]]
    elif moves < 4:
        path = [[x, z]]
        for _ in range(rng.randint(1, 6)):
            px, pz = path[-1]
            nx = min(width - 1, max(0, px + rng.randint(-1, 1)))
            nz = min(height - 1, max(0, pz + rng.randint(-1, 1)))
            path.append([nx, nz])
        obj["path"] = path
    elif moves == 4:
        obj["path"] = [[x, z], [x + 2, z]]
    elif moves == 5:
        obj["path"] = [[x, z], [x, -1]]
    elif moves == 6:
        obj["path"] = [[min(width - 1, x + 1), z]]
    elif moves == 7:
        obj["path"] = []
    return dressed(obj, rng)


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


def play(
    ref: ModuleType, task: Any, env: Any, kind: str, rng: random.Random, names: list, payload: dict
) -> list:
    """One episode: the team answers collabzoo's prompts (chaos: the reference's observation),
    the reference plays the answers; until its game is over, then one more turn."""
    policy = teams.resourcegathering_naive if kind == "naive" else teams.resourcegathering_oracle
    observations, _ = env.reset(seed=0, options={"task": task.task_id})
    spoil = (lambda a: garble(a, rng)) if kind == "messy" else None
    turns: list[dict] = []
    while True:
        state = ref.payload_to_state(payload)
        if kind == "chaos":
            answers = [chaos_action(ref, task, state, k, rng) for k in range(2)]
        else:
            answers = team_answers(env, observations, policy, spoil, turns)
        payload, metrics, decoded = ref.transition_payload(
            payload=payload, agent_completions=answers, num_agents=2
        )
        turn = {"answers": answers, **record_turn(ref, payload, metrics, decoded, names)}
        turns.append(turn)
        if state.terminated:
            return turns
        if env.agents and kind != "chaos":
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
    tasks = []
    for spec in ref.load_tasks_from_json(str(args.maps / "data.json")):
        item = ref.task_to_item(spec)
        item["max_turns"] = 4
        tasks.append(ref.task_from_item(item))
    added = []
    for kinds, config, limit, seed in GROUPS:
        rng = random.Random(seed)
        shaping = "reference" if config == "reference" else "wrapper_defaults"
        env = collabzoo.make(
            "resourcegathering", split="all", shaping=shaping, extraction_limit=limit
        )
        for index, task in enumerate(tasks):
            for kind in kinds:
                payload = gather_payload(ref, task, config=config, extraction_limit=limit)
                added.append(
                    {
                        "task_index": index,
                        "task_id": task.task_id,
                        "config": config,
                        "extraction_limit": limit,
                        "kind": kind,
                        "made_by": f"benchmarks/resourcegathering_conformance.py seed {seed}",
                        "turns": play(ref, task, env, kind, rng, document["metric_names"], payload),
                    }
                )
    groups = [
        (f"kinds {', '.join(kinds)} with the {config} config and extraction_limit {limit}", seed)
        for kinds, config, limit, seed in GROUPS
    ]
    how = (
        f"transition_payload of {GATHER_FILE}@27ee8a8 with the reference config (or none: "
        "`wrapper`), until the reference's game is over, then one more turn"
    )
    write_conformance(
        args.output, document, kept, added, "resourcegathering_conformance.py", groups, how
    )


if __name__ == "__main__":
    main()
