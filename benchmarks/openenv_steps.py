"""The cost of the HTTP hop: env steps per second through `collabzoo serve` against in-process.

For each game, one run times three loops on the same precomputed answers:
- episodes: reset + every step of an episode (one client, one session, sequential calls);
- branches: what a rollout tree does per child, `copy.deepcopy(env)` of an env mid-episode and
  one step of the copy (remotely a server-side copy in a kept session);
and prints in-process and remote figures side by side with their ratio. The server runs in its
own process (`python -m collabzoo.cli serve GAME --port P` on 127.0.0.1), as a user runs it.

    python benchmarks/openenv_steps.py [--seconds 3] [--games tinycoop,strbuild] [--json [F]]

`--json` alone writes benchmarks/results/openenv_steps.json, from which `openenv_steps_table`
builds the Performance page's table.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import os
import platform
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import collabzoo
from collabzoo.envs.scripted_teams import scripted_team
from collabzoo.integrations.openenv import RemoteEnvError, remote_env

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_table import markdown_table, results_path, thousands, write_results


def answers_for(game: str) -> list[tuple[dict[str, Any], list[dict[str, str]]]]:
    """(reset options, the joint actions of a whole episode) for every task of the game."""
    env = collabzoo.make(game)
    episodes = []
    for split in ("train", "eval"):
        for task in range(len(env.items(split))):
            options = {"split": split, "task": task}
            observations, _ = env.reset(seed=task, options=options)
            actions = []
            while env.agents:
                if game == "tinycoop":
                    joint = {a: str(task + i + len(actions)) for i, a in enumerate(env.agents)}
                else:
                    joint = scripted_team(game, "oracle")(observations)
                actions.append(joint)
                observations = env.step(joint)[0]
            episodes.append((options, actions))
    return episodes


def rate(work: Callable[[], int], seconds: float) -> float:
    """Units of `work` per second (work returns how many units one call did)."""
    done, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        done += work()
    return done / elapsed


def measure(env: Any, episodes: list, seconds: float) -> dict[str, float]:
    cycle = itertools.cycle(episodes)

    def episode() -> int:
        options, actions = next(cycle)
        env.reset(seed=options["task"], options=options)
        for joint in actions:
            env.step(joint)
        return len(actions)

    def branch() -> int:
        options, actions = next(cycle)
        env.reset(seed=options["task"], options=options)
        for _ in range(4):  # four children of one node, as a rollout tree with K = 4
            child = copy.deepcopy(env)
            child.step(actions[0])
            child.close()
        return 4

    steps = rate(episode, seconds)
    return {
        "steps_per_s": steps,
        "episodes_per_s": steps / (sum(len(a) for _, a in episodes) / len(episodes)),
        "branches_per_s": rate(branch, seconds),
    }


def start_server(game: str) -> tuple[subprocess.Popen, str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "collabzoo.cli", "serve", game, "--port", str(port)],
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            remote_env(url, connect_timeout_s=2).close()
            return server, url
        except RemoteEnvError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"collabzoo serve {game} did not start") from None
            time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per loop (3)")
    parser.add_argument("--games", default="tinycoop,strbuild")
    parser.add_argument(
        "--json",
        nargs="?",
        const=str(results_path("openenv_steps")),
        metavar="PATH",
        help="write the results here (alone: benchmarks/results/openenv_steps.json)",
    )
    args = parser.parse_args()
    rows = []
    for game in args.games.split(","):
        episodes = answers_for(game)
        local = measure(collabzoo.make(game), episodes, args.seconds)
        server, url = start_server(game)
        try:
            env = remote_env(url)
            remote = measure(env, episodes, args.seconds)
            env.close()
        finally:
            server.terminate()
            server.wait(30)
        rows.append({"game": game, "in_process": local, "served": remote})
    print(
        f"{'game':<10} {'measure':<16} {'in-process':>12} {'served':>10} {'served/in-process':>18}"
    )
    for row in rows:
        for key in ("steps_per_s", "episodes_per_s", "branches_per_s"):
            here, there = row["in_process"][key], row["served"][key]
            print(
                f"{row['game']:<10} {key:<16} {here:>12,.0f} {there:>10,.0f} {there / here:>17.3f}×"
            )
    if args.json:
        results = {"rows": rows, "python": platform.python_version(), "cpus": os.cpu_count()}
        write_results(args.json, {"headline": headline(results), **results})


# ----- the Performance page's table --------------------------------------------------------------
GAME_LABELS = {
    "tinycoop": ("TinyCoop (1 turn)", "TinyCoop"),
    "strbuild": ("StrBuild (oracle, 4 turns)", "StrBuild"),
}
"""A game's name on its first row (with its horizon and answers) and on its second."""
MEASURES = (
    ("steps_per_s", "env steps/s, resets included"),
    ("branches_per_s", "branches/s (copy + step)"),
)


def openenv_steps_table(results: dict) -> str:
    cells = []
    for row in results["rows"]:
        names = GAME_LABELS.get(row["game"], (row["game"], row["game"]))
        for (key, measure), name in zip(MEASURES, names, strict=True):
            here, there = row["in_process"][key], row["served"][key]
            cells.append([name, measure, thousands(here), thousands(there), f"{there / here:.2g}×"])
    return markdown_table(["game", "measure", "in-process", "served", "served / in-process"], cells)


def headline(results: dict) -> dict | list:
    """The hop's cost on the game a language-model team plays, per env step."""
    rows = [r for r in results["rows"] if r["game"] == "strbuild"]
    if not rows:
        return []  # a run without StrBuild has no summary row
    (row,) = rows
    here, there = row["in_process"]["steps_per_s"], row["served"]["steps_per_s"]
    return {
        "benchmark": "Serving an env over OpenEnv",
        "figure": f"StrBuild env steps/s served {thousands(there)}, in-process {thousands(here)}",
        "ratio": float(f"{there / here:.2g}"),
        "section": "Serving an env over OpenEnv",
    }


if __name__ == "__main__":
    main()
