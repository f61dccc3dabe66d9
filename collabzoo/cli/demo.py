"""`collabzoo demo`: the scripted teams on every task of both reference splits, offline."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from collabzoo.cli.options import positive_int
from collabzoo.cli.tables import fmt, table
from collabzoo.cli.usage import UsageError, checked
from collabzoo.envs import declared, make, resolve, task_specs
from collabzoo.envs.records import REFERENCE_SPLITS
from collabzoo.envs.scripted_teams import scripted_team, teams


def demo_metrics(game: str) -> tuple[str, ...]:
    """The metrics the demo table shows for a game (`TaskSpec.demo_metrics`; the JSON rows keep
    every metric); () where the task names none."""
    spec = declared(game)
    return spec.demo_metrics if spec is not None else ()


def default_demo_envs() -> str:
    """The tasks that name demo metrics and play offline, in registration order."""
    specs = task_specs()
    return ",".join(s.short_name for s in specs if s.demo_metrics and s.offline is not None)


def _team_game(name: str) -> tuple[Any, str]:
    """(registry entry, game) for an env name that has the scripted teams."""
    entry = checked(resolve, name)
    table = teams()
    if not any(entry.short_name in games for games in table.values()):
        known = ", ".join(sorted({g for games in table.values() for g in games}))
        raise UsageError(f"{entry.id} has no scripted teams; the envs that have them: {known}")
    return entry, entry.short_name


def _play_episode(
    env: Any, team: Callable[[Mapping[str, str]], dict[str, str]], **reset: Any
) -> tuple[str, float, dict[str, float]]:
    """One whole episode: (task id, final-turn reward, final-turn metrics)."""
    observations, infos = env.reset(**reset)
    task_id = str(infos[env.possible_agents[0]]["task_id"])
    reward, metrics = 0.0, {}
    while env.agents:
        observations, rewards, _, _, infos = env.step(team(observations))
        first = next(iter(infos))
        reward = float(rewards[first])
        metrics = {k: float(v) for k, v in infos[first].get("metrics", {}).items()}
    return task_id, reward, metrics


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else float("nan")


def cmd_demo(args: argparse.Namespace) -> int:
    names = [n.strip() for n in args.envs.split(",") if n.strip()]
    if not names:
        raise UsageError(f"--envs needs at least one env name, e.g. {default_demo_envs()}")
    games = [_team_game(n) for n in names]

    rows: list[dict[str, Any]] = []
    episodes: list[dict[str, Any]] = []
    for entry, game in games:
        spec = declared(game)  # offline: the tasks that ship (the writing tasks' sample)
        env = make(entry.id, **dict((spec.offline if spec is not None else None) or {}))
        table = teams()
        kinds = [k for k in table if game in table[k]]
        if spec is not None and spec.reference_solutions:  # teams built from the env it plays
            kinds += [k for k in spec.env_teams if k not in kinds]
        for kind in kinds:
            team = scripted_team(game, kind, env)
            played = 0
            for split in REFERENCE_SPLITS:
                items = env.items(split)
                split_records = []
                for k in range(args.episodes_per_task):
                    for index in range(len(items)):
                        # seed = task index on the first pass; later passes get fresh seeds
                        seed = k * len(items) + index
                        options = {"task": index, "split": split}
                        task_id, reward, metrics = _play_episode(
                            env, team, seed=seed, options=options
                        )
                        split_records.append(
                            {
                                "env": game,
                                "team": kind,
                                "split": split,
                                "task_id": task_id,
                                "seed": seed,
                                "reward": reward,
                                "metrics": metrics,
                            }
                        )
                episodes += split_records
                played += len(split_records)
                metric_names = list(dict.fromkeys(m for r in split_records for m in r["metrics"]))
                rows.append(
                    {
                        "env": game,
                        "id": entry.id,
                        "team": kind,
                        "split": split,
                        "episodes": len(split_records),
                        "mean_reward": _mean([r["reward"] for r in split_records]),
                        "max_reward": env.max_reward,
                        "metrics": {
                            m: _mean([r["metrics"][m] for r in split_records if m in r["metrics"]])
                            for m in metric_names
                        },
                    }
                )
            print(f"{game} {kind}: {played} episodes", file=sys.stderr, flush=True)
    _print_table(rows)
    if args.json is not None:
        try:
            with open(args.json, "w", encoding="utf-8") as handle:
                json.dump({"rows": rows, "episodes": episodes}, handle, indent=2)
                handle.write("\n")
        except OSError as error:
            raise UsageError(f"cannot write {args.json}: {error}") from None
        print(f"results written to {args.json}", file=sys.stderr)
    return 0


def _print_table(rows: Sequence[Mapping[str, Any]]) -> None:
    """One line per env, team and split: each game's demo metrics in a shared set of columns."""
    shown = list(
        dict.fromkeys(
            m
            for row in rows
            for m in (demo_metrics(row["env"]) or tuple(row["metrics"]))
            if m in row["metrics"]
        )
    )
    headers = ["env", "team", "split", "episodes", "mean reward", "max", *shown]
    table_rows = []
    for row in rows:
        wanted = demo_metrics(row["env"]) or tuple(row["metrics"])
        table_rows.append(
            [
                row["env"],
                row["team"],
                row["split"],
                str(row["episodes"]),
                fmt(row["mean_reward"]),
                "?" if row["max_reward"] is None else fmt(row["max_reward"]),
                *(fmt(row["metrics"][m]) if m in wanted else "-" for m in shown),
            ]
        )
    numeric = [False, False, False] + [True] * (len(headers) - 3)
    print(table(headers, table_rows, numeric))
    print("mean reward: the team reward of the final turn, averaged over the episodes")


def add_commands(commands: Any) -> None:
    """Add `demo` to the `collabzoo` subcommands."""
    demo = commands.add_parser(
        "demo",
        help="score the scripted oracle and naive teams on every task",
        description="The scripted oracle and naive teams play every task of both splits, one "
        "whole episode each (seed = task index); prints mean final-turn reward and metrics.",
    )
    demo.add_argument(
        "--episodes-per-task",
        type=positive_int,
        default=1,
        metavar="N",
        help="episodes per task (%(default)s)",
    )
    demo.add_argument("--json", default=None, metavar="PATH", help="also write results as JSON")
    demo.add_argument(
        "--envs",
        default=default_demo_envs(),
        help="comma-separated env names (default: %(default)s)",
    )
    demo.set_defaults(handler=cmd_demo)
