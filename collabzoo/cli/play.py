"""`collabzoo list` and `collabzoo play`: the registered envs, and one played by hand."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Mapping
from typing import Any

from collabzoo.cli.options import add_env_arg, key_values, nonnegative_int
from collabzoo.cli.tables import fmt, table
from collabzoo.cli.turns import newest, print_step, read_answer
from collabzoo.cli.usage import UsageError, checked
from collabzoo.envs import entries, make, resolve
from collabzoo.envs.records import SPLITS
from collabzoo.envs.scripted_teams import env_team_games, scripted_team, teams

TEAM_KINDS = tuple(teams())


def cmd_list(args: argparse.Namespace) -> int:
    rows = [{"name": e.short_name, "id": e.id, "description": e.description} for e in entries()]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    shown = [[r["name"], r["id"], r["description"]] for r in rows]
    print(table(["name", "id", "description"], shown, [False, False, False]))
    return 0


def _task_option(env: Any, split: str, task: str | None) -> str | int | None:
    """--task as given: a task id of the split if it is one, else an index if it is an int."""
    if task is None:
        return None
    ids = {str(getattr(item, "task_id", "")) for item in checked(env.items, split)}
    if task in ids:
        return task
    try:
        return int(task)
    except ValueError:
        return task  # the env says which ids exist


def cmd_play(args: argparse.Namespace) -> int:
    entry = checked(resolve, args.env)
    kwargs = key_values(args.env_arg)
    if "render_mode" in kwargs:
        raise UsageError("render_mode is set by 'collabzoo play' (ansi); drop that --env-arg")
    partner: Callable[[Mapping[str, str]], dict[str, str]] | None = None
    # a policy built from the env (a code task's oracle, from its solutions): made with it
    built_from_env = args.partner is not None and entry.short_name in env_team_games(args.partner)
    if args.partner is not None and not built_from_env:
        partner = checked(scripted_team, entry.short_name, args.partner)
    elif args.partner is None and args.seat is not None:
        raise UsageError("--seat picks your agent when a --partner plays the others; add --partner")
    env = checked(make, entry.id, render_mode="ansi", **kwargs)
    if built_from_env:
        partner = checked(scripted_team, entry.short_name, args.partner, env)
    if partner is not None and getattr(env, "memory", "full") != "full":
        raise UsageError(
            f"the scripted {args.partner} partner reads its role prompt from the history: "
            f"it needs memory='full', got {env.memory!r}"
        )
    split = args.split or env.split
    options = {"task": _task_option(env, split, args.task), "split": split}
    observations, infos = checked(env.reset, seed=args.seed, options=options)

    humans = list(env.possible_agents)
    if partner is not None:
        seat = args.seat or env.possible_agents[0]
        if seat not in env.possible_agents:
            raise UsageError(
                f"unknown --seat {seat!r}; this env's agents are {', '.join(env.possible_agents)}"
            )
        humans = [seat]
    first = env.possible_agents[0]
    print(f"{entry.id}: task {infos[first]['task_id']!r} ({split} split), {env.horizon} turn(s)")
    print(f"you play: {', '.join(humans)}")
    if partner is not None:
        others = [a for a in env.possible_agents if a not in humans]
        print(f"the scripted {args.partner} team plays: {', '.join(others)}")
    # Code answers contain blank lines: there, only END finishes an answer.
    blank_line_ends = not env.metadata.get("multiline_answers", False)
    finish = "an empty line or a line END" if blank_line_ends else "a line END"
    print(f"Answer each prompt; finish an answer with {finish}.")

    stdin_open = True
    reward = 0.0
    while env.agents:
        answers: dict[str, str] = {}
        for agent in env.agents:
            if agent not in humans:
                continue
            print(f"\n===== {agent}, turn {env.turn + 1} of {env.horizon} =====")
            print(observations[agent] if env.turn == 0 else newest(observations[agent]))
            print(f"----- your answer as {agent} (finish with {finish}) -----", flush=True)
            answer = read_answer(sys.stdin, blank_line_ends) if stdin_open else None
            if answer is None:
                if stdin_open:
                    print("(end of input: the remaining answers are empty)")
                stdin_open = False
                answer = ""
            answers[agent] = answer
        if partner is not None:
            bots = {a: observations[a] for a in env.agents if a not in humans}
            try:
                answers.update(partner(bots))
            except ValueError as error:
                raise UsageError(
                    f"the scripted {args.partner} partner cannot read its observation ({error}); "
                    "it needs memory='full'"
                ) from None
        played = env.turn
        observations, rewards, _, _, infos = env.step(answers)
        reward = rewards[next(iter(rewards))]
        print_step(env, rewards, infos, played)

    best = getattr(env, "max_reward", math.inf)
    suffix = f" (max {fmt(best)})" if math.isfinite(best) else ""
    print(f"\n=== Episode over: final reward {fmt(reward)}{suffix} ===")
    return 0


def add_commands(commands: Any) -> None:
    """Add `list` and `play` to the `collabzoo` subcommands."""
    listing = commands.add_parser("list", help="list the registered environments")
    listing.add_argument("--json", action="store_true", help="print a JSON list instead")
    listing.set_defaults(handler=cmd_list)

    play = commands.add_parser(
        "play",
        help="play an environment by hand in the terminal",
        description="Play an environment in the terminal: for each agent you control, read its "
        "prompt and type its answer (finish with an empty line or a line END).",
    )
    play.add_argument("env", metavar="ENV", help="env name or id (collabzoo list names them)")
    play.add_argument(
        "--seed", type=nonnegative_int, default=None, help="reset seed (default: random)"
    )
    play.add_argument(
        "--task", default=None, help="task id or index in the split (default: drawn by the seed)"
    )
    play.add_argument(
        "--split", choices=SPLITS, default=None, help="task split (default: train; all: every task)"
    )
    play.add_argument(
        "--partner",
        choices=TEAM_KINDS,
        default=None,
        help="a scripted team plays every agent but --seat (default: you play every agent)",
    )
    play.add_argument(
        "--seat", default=None, help="the agent you play with --partner (default: the first)"
    )
    add_env_arg(play)
    play.set_defaults(handler=cmd_play)
