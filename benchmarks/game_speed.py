"""Episodes per second of BridgeBuild and ResourceGathering against the reference's scorer.

The answers are the conformance sets' (tests/data/{bridgebuild,resourcegathering}_conformance.json):
recorded episodes of random, messy, scripted and LLM-garbled answers, the same for every side.
An episode is replayed turn by turn until the game ends (S and T linked or the goal met, or the
horizon). Measured per game, each the best whole pass over the set in `--seconds`, on one core:

- env: `reset(seed=..., options={"task": ...})` and `step` for every turn, prompts included;
- rules: the env's transition and reward alone (`play_turn` from the initial state);
- reference: the reference's own transition and reward on the same answers, loaded from
  `--reference`, a folder holding the reference's files at the pinned commits (they are not in
  the reference repository's git history; they were read from a public code index):
  BridgeBuild, `make_initial_state` and `apply_turn` of `bridge_build/utils/bridge_builder.py`;
  ResourceGathering, `transition_payload` of `resource_gathering/utils/resource_gathering.py`
  on the payload its trainer carries from turn to turn, with `resource_gathering/envs/nn_env.py`
  beside it (the wrapper imports it from there rather than from a sibling NNGames checkout).

    python benchmarks/game_speed.py --reference DIR [--seconds 3] [--json [PATH]]

`--json` alone writes benchmarks/results/game_speed.json, from which `game_speed_table` builds the
Performance page's table.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from minecraft_reference import (
    BRIDGE_FILE,
    GATHER_FILE,
    bridge_turn,
    gather_payload,
    load_reference,
)
from results_table import markdown_table, results_path, significant, thousands, times, write_results
from side_by_side import pin_to_one_core

import collabzoo
from collabzoo.tasks.bridgebuild import rewards as bridge_rules
from collabzoo.tasks.bridgebuild.envs import load_maps as bridge_maps
from collabzoo.tasks.resourcegathering import rewards as gather_rules
from collabzoo.tasks.resourcegathering.envs import load_maps as gather_maps

ROOT = Path(__file__).resolve().parents[1]
TARGET_VS_REFERENCE = 2.0
GAME_NAMES = {"bridgebuild": "BridgeBuild", "resourcegathering": "ResourceGathering"}


def conformance(game: str) -> dict[str, Any]:
    return json.loads((ROOT / "tests" / "data" / f"{game}_conformance.json").read_text())


# ----- BridgeBuild ----------------------------------------------------------------------------
def bridge_cases(maps_folder: Path) -> list[tuple[bridge_rules.BridgeMap, int, list[list[str]]]]:
    """(map, max probes, answers of each turn) of every CoMLRL-path conformance episode, cut
    where the game ends."""
    maps = {
        name: bridge_maps(maps_folder / name) for name in ("data.json", "data2.json", "diag.json")
    }
    cases = []
    for episode in conformance("bridgebuild")["episodes"]:
        if episode["reward"] != "comlrl":
            continue
        bmap = maps[episode["file"]][episode["index"]]
        state = bridge_rules.initial_state(bmap, 4)
        turns = []
        for turn in episode["turns"]:
            if state.terminated:
                break
            turns.append(turn["answers"])
            state = bridge_rules.play_turn(
                bmap, state, turn["answers"], bridge_rules.BridgeRules()
            ).state
        cases.append((bmap, episode["max_probe"], turns))
    return cases


def bridge_env_episode(maps_folder: Path) -> Callable[[Any], None]:
    envs = {
        source: collabzoo.make("bridgebuild", data=str(maps_folder / source), split="all")
        for source in ("data.json", "data2.json", "diag.json")
    }

    def play(case: Any) -> None:
        bmap, _, turns = case
        env = envs[bmap.source]
        env.reset(seed=0, options={"task": bmap.task_id})
        for answers in turns:
            env.step(dict(zip(env.possible_agents, answers, strict=True)))

    return play


def bridge_rules_episode(case: Any) -> None:
    bmap, _, turns = case
    state = bridge_rules.initial_state(bmap, 4)
    for answers in turns:
        state = bridge_rules.play_turn(bmap, state, answers, bridge_rules.BridgeRules()).state


def bridge_reference_episode(checkout: Path, maps_folder: Path) -> Callable[[Any], None]:
    ref = load_reference(checkout, BRIDGE_FILE, "reference_bridge_builder")
    tasks = {
        name: {t.task_id: t for t in ref.load_tasks_from_json(str(maps_folder / name))}
        for name in ("data.json", "data2.json", "diag.json")
    }

    def play(case: Any) -> None:
        bmap, max_probe, turns = case
        task = tasks[bmap.source][bmap.task_id]
        state = ref.make_initial_state(task, num_agents=2, max_turns=4)
        for answers in turns:
            state = bridge_turn(ref, task, state, answers, max_probe).state

    return play


# ----- ResourceGathering ----------------------------------------------------------------------
def gather_cases() -> list[tuple[gather_rules.GatherMap, list[list[str]]]]:
    """(map, answers of each turn) of every reference-config conformance episode, cut where the
    game ends (the reference has no guard; the env ends there)."""
    maps = gather_maps()
    cases = []
    for episode in conformance("resourcegathering")["episodes"]:
        if episode["config"] != "reference" or episode["extraction_limit"] != 2:
            continue
        gmap = maps[episode["task_index"]]
        state = gather_rules.initial_state(gmap, 4)
        turns = []
        for turn in episode["turns"]:
            if state.terminated:
                break
            turns.append(turn["answers"])
            state = gather_rules.play_turn(
                gmap, state, turn["answers"], extraction_limit=episode["extraction_limit"]
            ).state
        cases.append((gmap, turns))
    return cases


def gather_env_episode() -> Callable[[Any], None]:
    env = collabzoo.make("resourcegathering", split="all")

    def play(case: Any) -> None:
        gmap, turns = case
        env.reset(seed=0, options={"task": gmap.task_id})
        for answers in turns:
            env.step(dict(zip(env.possible_agents, answers, strict=True)))

    return play


def gather_rules_episode(case: Any) -> None:
    gmap, turns = case
    state = gather_rules.initial_state(gmap, 4)
    for answers in turns:
        state = gather_rules.play_turn(gmap, state, answers).state


def gather_reference_episode(checkout: Path) -> Callable[[Any], None]:
    """The reference's turn: its wrapper's `transition_payload` on the payload its trainer
    carries from turn to turn (the state serialized in it, as in training)."""
    ref = load_reference(checkout, GATHER_FILE, "reference_resource_gathering")
    tasks = {}
    for spec in ref.load_tasks_from_json(str(gather_maps_file())):
        item = ref.task_to_item(spec)
        item["max_turns"] = 4
        tasks[spec.task_id] = ref.task_from_item(item)

    def play(case: Any) -> None:
        gmap, turns = case
        task = tasks[gmap.task_id]
        payload = gather_payload(ref, task)
        for answers in turns:
            payload, _, _ = ref.transition_payload(
                payload=payload, agent_completions=answers, num_agents=2
            )

    return play


def gather_maps_file() -> Path:
    """The reference's maps (the copy shipped with the package is the same file)."""
    from collabzoo.tasks.resourcegathering.envs import DATA

    return DATA


# ----- the run --------------------------------------------------------------------------------
def measure(cases: list[Any], play: Callable[[Any], None], seconds: float) -> float:
    """Episodes per second over whole passes of the set (a round of a part of it would favour
    whichever side happened to get its cheap episodes), the best pass in `seconds`."""
    best, end = float("inf"), time.perf_counter() + seconds
    while True:
        start = time.perf_counter()
        for case in cases:
            play(case)
        best = min(best, time.perf_counter() - start)
        if time.perf_counter() >= end:
            return len(cases) / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="time per measurement")
    parser.add_argument("--reference", type=Path, help="a folder holding the reference's files")
    parser.add_argument("--maps", type=Path, help="the reference's BridgeBuild map files")
    parser.add_argument(
        "--json",
        nargs="?",
        const=str(results_path("game_speed")),
        help="also write the results to this file (alone: benchmarks/results/game_speed.json)",
    )
    args = parser.parse_args()
    pinned = pin_to_one_core()
    maps_folder = args.maps or ROOT.parent / "shared" / "data" / "bridgebuild"
    rows = []
    bridge = bridge_cases(maps_folder)
    row: dict[str, Any] = {
        "game": "bridgebuild",
        "episodes": len(bridge),
        "turns": sum(len(t) for _, _, t in bridge),
        "env_episodes_per_s": round(measure(bridge, bridge_env_episode(maps_folder), args.seconds)),
        "rules_episodes_per_s": round(measure(bridge, bridge_rules_episode, args.seconds)),
        "reference_episodes_per_s": None,
    }
    if args.reference is not None and (args.reference / BRIDGE_FILE).is_file():
        play = bridge_reference_episode(args.reference, maps_folder)
        row["reference_episodes_per_s"] = round(measure(bridge, play, args.seconds))
    rows.append(row)
    gather = gather_cases()
    row = {
        "game": "resourcegathering",
        "episodes": len(gather),
        "turns": sum(len(t) for _, t in gather),
        "env_episodes_per_s": round(measure(gather, gather_env_episode(), args.seconds)),
        "rules_episodes_per_s": round(measure(gather, gather_rules_episode, args.seconds)),
        "reference_episodes_per_s": None,
    }
    if args.reference is not None and (args.reference / GATHER_FILE).is_file():
        play = gather_reference_episode(args.reference)
        row["reference_episodes_per_s"] = round(measure(gather, play, args.seconds))
    rows.append(row)
    for r in rows:
        reference = r["reference_episodes_per_s"]
        r["env_vs_reference"] = round(r["env_episodes_per_s"] / reference, 2) if reference else None
    print(f"one core ({pinned}), Python {platform.python_version()}")
    for r in rows:
        ratio = f"{r['env_vs_reference']:.2f}x" if r["env_vs_reference"] else "not measured"
        print(
            f"{GAME_NAMES[r['game']]:<18} {r['episodes']:>3} episodes {r['turns']:>4} turns  "
            f"env {r['env_episodes_per_s']:>7}/s  rules {r['rules_episodes_per_s']:>7}/s  "
            f"reference {r['reference_episodes_per_s'] or '-':>7}/s  env vs reference {ratio}"
        )
    if args.json:
        measured = [r for r in rows if r["env_vs_reference"]]
        headline = {
            "benchmark": "BridgeBuild and ResourceGathering episodes",
            "figure": ", ".join(
                f"{GAME_NAMES[r['game']]} {thousands(r['env_episodes_per_s'])} episodes/s, the "
                f"reference's turn {thousands(r['reference_episodes_per_s'])}"
                for r in measured
            ),
            "ratio": min((r["env_vs_reference"] for r in measured), default=None),
            "section": "BridgeBuild and ResourceGathering episodes",
        }
        write_results(
            args.json,
            {
                "headline": headline,
                "meta": {
                    "python": platform.python_version(),
                    "cpu": "one core of two",
                    "seconds": args.seconds,
                    "target_env_vs_reference": TARGET_VS_REFERENCE,
                },
                "results": rows,
            },
        )


def game_speed_table(results: dict) -> str:
    """The page's table: figures to three significant digits (passes move more than that)."""
    header = [
        "game",
        "episodes (turns)",
        "env episodes/s",
        "rules alone",
        "reference's turn, side by side",
        "env vs reference",
    ]
    cells = []
    for r in results["results"]:
        reference = r["reference_episodes_per_s"]
        cells.append(
            [
                GAME_NAMES[r["game"]],
                f"{r['episodes']} ({r['turns']})",
                significant(r["env_episodes_per_s"]),
                significant(r["rules_episodes_per_s"]),
                significant(reference) if reference else "not measured",
                times(r["env_vs_reference"], 1) if r["env_vs_reference"] else "n/a",
            ]
        )
    return markdown_table(header, cells, "llrrrr")


if __name__ == "__main__":
    main()
