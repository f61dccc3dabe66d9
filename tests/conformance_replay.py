"""Replaying the real-output conformance set (tests/data/real_output_conformance.json) through
collabzoo's envs: shared by its test and `benchmarks/real_output_conformance.py --compare`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import collabzoo

CODE_FOLDERS = {"coophumaneval": "coophumaneval", "humaneval": "humaneval", "mbpp": "mbpp"}
TOLERANCE = 1e-9


def _env(episode: dict[str, Any], data_root: Path, sandbox: Any, answer_reading: str):
    name = episode["env"]
    if name in CODE_FOLDERS:
        data = data_root / CODE_FOLDERS[name] / episode["data"]
        return collabzoo.make(
            name, data=str(data), split="all", sandbox=sandbox, answer_reading=answer_reading
        )
    return collabzoo.make(name, data=episode["data"], split="all")


def replay(
    document: dict[str, Any],
    data_root: Path,
    *,
    answer_reading: str = "reference",
    sandbox: Any = None,
) -> tuple[list[str], int]:
    """Play every episode's turns; return (a line per turn whose reward differs from the
    reference's, the number of turns compared)."""
    envs: dict[tuple[str, str], Any] = {}
    mismatches: list[str] = []
    total = 0
    for index, episode in enumerate(document["episodes"]):
        key = (episode["env"], episode["data"])
        if key not in envs:
            envs[key] = _env(episode, data_root, sandbox, answer_reading)
        env = envs[key]
        options = {"task": episode["task"], "split": episode["split"]}
        env.reset(seed=episode["seed"], options=options)
        for number, turn in enumerate(episode["turns"], start=1):
            _, rewards, *_ = env.step(turn["actions"])
            ours = rewards[env.possible_agents[0]]
            expected = turn["reference_reward"]
            total += 1
            if abs(ours - expected) > TOLERANCE:
                mismatches.append(
                    f"episode {index} ({episode['env']} {episode['task']}, {episode['source']}) "
                    f"turn {number}: collabzoo {ours!r}, reference {expected!r}"
                )
    return mismatches, total
