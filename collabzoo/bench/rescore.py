"""Re-score a run from its results file alone: every episode's recorded actions are replayed in
a fresh env, made from the recorded id and constructor arguments and reset with the recorded
seed and task, and each turn's rewards, reward components and metrics must come back as
recorded. It is how an audit checks a leaderboard row without the models that played it.

    from collabzoo.bench.rescore import rescore
    report = rescore("results/strbuild__parallel__scripted-oracle__eval.json")
    report.ok, report.mismatches
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from collabzoo.bench.results import read_results
from collabzoo.bench.runner import agent_info, task_sandbox, turn_scores
from collabzoo.envs import make, resolve


@dataclass(frozen=True)
class Mismatch:
    episode: int
    turn: int
    what: str
    """"reward", "rewards", "components", "metrics", "turns" or "error"."""
    recorded: Any
    replayed: Any

    def __str__(self) -> str:
        return (
            f"episode {self.episode}, turn {self.turn}: {self.what} recorded {self.recorded!r},"
            f" replayed {self.replayed!r}"
        )


@dataclass
class Rescored:
    path: str
    episodes: int = 0
    turns: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.episodes > 0 and not self.mismatches


def same_value(a: Any, b: Any) -> bool:
    """Equal, with NaN equal to NaN (JSON keeps a NaN reward as NaN)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    return a == b


def rescore(
    path: str | os.PathLike[str], *, sandbox_factory: Callable[..., Any] | None = None
) -> Rescored:
    """Replay every episode of a results file; see the module docstring. `sandbox_factory`
    makes the sandbox for runs that ran code (default: the process-wide sandbox; see
    `task_sandbox`)."""
    document = read_results(path)
    env_record = document["env"]
    kwargs = dict(env_record["kwargs"])
    if document.get("sandbox") is not None:
        kwargs["sandbox"] = task_sandbox(resolve(env_record["id"]).short_name, sandbox_factory)
    env = make(env_record["id"], **kwargs)
    first = env_record["agents"][0]
    report = Rescored(str(path))
    try:
        for episode in document["episodes"]:
            _replay(env, episode, first, report)
    finally:
        env.close()
    return report


def _replay(env: Any, episode: Mapping[str, Any], first: str, report: Rescored) -> None:
    index, turns = episode["index"], episode["turns"]
    env.reset(seed=episode["seed"], options={"task": episode["task"], "split": episode["split"]})
    report.episodes += 1
    for number, turn in enumerate(turns):
        report.turns += 1
        if not env.agents:  # the replay ended before the record did
            report.mismatches.append(Mismatch(index, number, "turns", len(turns), number))
            return
        try:
            _, rewards, _, _, infos = env.step(turn["actions"])
        except Exception as error:  # a recorded action the env now refuses
            report.mismatches.append(Mismatch(index, number, "error", None, repr(error)))
            return
        replayed = turn_scores(rewards, agent_info(infos, first))
        report.mismatches.extend(_compare(index, number, turn, replayed))
    if env.agents:  # the record ended before the replay did
        report.mismatches.append(
            Mismatch(index, len(turns), "turns", len(turns), f"more than {len(turns)}")
        )


def _compare(
    episode: int, number: int, turn: Mapping[str, Any], replayed: Mapping[str, Any]
) -> list[Mismatch]:
    return [
        Mismatch(episode, number, what, turn.get(what), replayed.get(what))
        for what in ("reward", "rewards", "components", "metrics")
        if not same_value(turn.get(what), replayed.get(what))
    ]
