"""Scripted reference teams, as the task families declare them (`TaskSpec.teams`): an oracle
and a naive team for the building games, a heuristic and a naive team for the writing tasks,
an oracle for TinyCoop, an oracle for the code tasks whose dataset has reference solutions,
and a noisy oracle (`NoisyOracle`) for the tasks that declare one: a deliberately imperfect
demonstrator for warm starts.

Each policy is an ordinary text policy: it reads only its observation (the role prompt the env
wrote, which must be in view: memory "full", the default) and returns an answer. Nothing in the
envs knows about them. The policies themselves live in their family (`collabzoo.tasks.*.teams`);
the names they had here still resolve (`from collabzoo.envs.scripted_teams import
strbuild_oracle`).
"""

from __future__ import annotations

import importlib
import random
import zlib
from collections.abc import Callable, Mapping
from typing import Any

from collabzoo.envs.family import Policy, TaskSpec, load
from collabzoo.envs.registry import task_specs

NOISY_DROP = 0.3
"""The noisy oracle's default chance of dropping each line of its answer."""


def teams() -> dict[str, dict[str, Policy]]:
    """kind -> {task short name -> text policy}, for every declared text policy, kinds in the
    order the families first declare them."""
    table: dict[str, dict[str, Policy]] = {}
    for spec in task_specs():
        for kind, path in spec.teams.items():
            table.setdefault(kind, {})[spec.short_name] = load(path)
    return table


def env_team_games(kind: str) -> tuple[str, ...]:
    """The tasks whose `kind` team is built from the env it plays (the code tasks' oracle)."""
    return tuple(s.short_name for s in task_specs() if kind in s.env_teams)


def listed_games(kind: str) -> list[str]:
    """The tasks a `kind` team plays on their default data, sorted: its text policies, and its
    env-built policies where the default data has what they need."""
    text = [s.short_name for s in task_specs() if kind in s.teams]
    built = [s.short_name for s in task_specs() if kind in s.env_teams and s.reference_solutions]
    return sorted([*text, *built])


def noisy_games() -> tuple[str, ...]:
    """The tasks `NoisyOracle` plays: those declaring `noisy_oracle`."""
    return tuple(s.short_name for s in task_specs() if s.noisy_oracle)


def _spec(game: str) -> TaskSpec | None:
    return next((s for s in task_specs() if s.short_name == game), None)


class NoisyOracle:
    """The oracle of a task with each line of its answer dropped with probability `drop` (a
    `/kill` line too): a demonstrator that is right about what it builds but leaves holes, so a
    policy warm-started on its episodes has room to improve on the task's own metrics (IoU,
    HP) by reinforcement.

    Seeded: `policy(observation, seed)` draws its drops from `seed`, so the episodes of a
    benchmark run (which hands every call a seed) differ and replay exactly; without a seed the
    draws come from the observation's checksum, the same answer each time."""

    seeded = True

    def __init__(self, game: str, drop: float = NOISY_DROP) -> None:
        games = noisy_games()
        if game not in games:
            raise ValueError(f"no noisy oracle for {game!r}; it plays the building games {games}")
        if isinstance(drop, bool) or not isinstance(drop, (int, float)) or not 0 <= drop < 1:
            raise ValueError(f"drop must be a probability in [0, 1), got {drop!r}")
        self.game = game
        self.drop = float(drop)
        self.oracle = load(_spec(game).teams["oracle"])  # type: ignore[union-attr]

    def __call__(self, observation: str, seed: int | None = None) -> str:
        draws = random.Random(zlib.crc32(observation.encode()) if seed is None else seed)
        lines = self.oracle(observation).split("\n")
        return "\n".join(line for line in lines if draws.random() >= self.drop)


def env_policy(game: str, kind: str, env: Any) -> Policy:
    """The `kind` policy a task builds from the env it plays (`TaskSpec.env_teams`)."""
    return load(_spec(game).env_teams[kind])(env)  # type: ignore[union-attr]


def scripted_team(
    game: str, kind: str, env: Any = None
) -> Callable[[Mapping[str, str]], dict[str, str]]:
    """A team: observations by agent in, answers by agent out. A policy built from the env (the
    code tasks' oracle answers from the env's reference solutions) needs `env` (the env it
    plays, or any with the same problems); the bench plays the same policy."""
    if game in env_team_games(kind):
        if env is None:
            raise ValueError(
                f"the {game} {kind} answers from the dataset's reference solutions: pass the "
                f"env it plays, scripted_team({game!r}, {kind!r}, env=collabzoo.make({game!r}, "
                "data=PATH))"
            )
        policy = env_policy(game, kind, env)
    else:
        table = teams()
        try:
            policy = table[kind][game]
        except KeyError:
            plays = {k: listed_games(k) for k in table}
            offered = "; ".join(f"{k}: {', '.join(g)}" for k, g in sorted(plays.items()))
            raise ValueError(
                f"no scripted {kind!r} team for {game!r}; the teams and their games: {offered}"
            ) from None

    def act(observations: Mapping[str, str]) -> dict[str, str]:
        return {agent: policy(obs) for agent, obs in observations.items()}

    return act


_FORMER = {
    "TEAMS": teams,
    "CODE_GAMES": lambda: env_team_games("oracle"),
    "NOISY_GAMES": noisy_games,
    "CODE_ORACLE_GAMES": lambda: tuple(
        s.short_name for s in task_specs() if s.env_teams and s.reference_solutions
    ),
}


def __getattr__(name: str) -> Any:
    """The tables and policies this module held before the families had their own teams: the
    tables are computed from the declarations, a policy is found in its family's module."""
    if name in _FORMER:
        return _FORMER[name]()
    modules = {
        path.partition(":")[0]
        for spec in task_specs()
        for path in (*spec.teams.values(), *spec.env_teams.values())
    }
    for module in sorted(modules):
        found = getattr(importlib.import_module(module), name, None)
        if found is not None and not name.startswith("__"):
            return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
