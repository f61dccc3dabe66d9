"""Episode datasets: a team's play as a Hugging Face `datasets` dataset, for warm starts.

    collabzoo export strbuild --team scripted:naive --episodes 64 -o data/strbuild-naive
    collabzoo export results/strbuild__parallel__hf-my-model__train.json -o data/mine

One row per agent and turn: the prompt the agent saw (its observation, exactly as the env
wrote it), its completion, and what the turn paid. The rows come from `collabzoo bench`
results files: a team given by `--team` first plays into `DIR/results` (kept, as the rows'
provenance), then every episode is replayed in a fresh env from the recorded id, constructor
arguments, seed and actions, which writes the prompts back and checks each turn's reward
against the record. The dataset is `prompt`/`completion` text, the format TRL's `SFTTrainer`
takes as it is (it trains on the completion only); one agent's rows are
`dataset.filter(lambda row: row["agent"] == "first_builder")`.

Columns: prompt, completion, agent, turn, reward (the agent's, that turn), components and
metrics (the turn's, as the agent's info reports them), env (registry id), env_kwargs (JSON),
split, task (JSON: the reset option), task_id, seed, episode, team, final_reward.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from collabzoo.bench.rescore import same_value
from collabzoo.bench.results import read_results
from collabzoo.bench.runner import agent_info, turn_scores
from collabzoo.envs import make

COLUMNS = (
    "prompt",
    "completion",
    "agent",
    "turn",
    "reward",
    "components",
    "metrics",
    "env",
    "env_kwargs",
    "split",
    "task",
    "task_id",
    "seed",
    "episode",
    "team",
    "final_reward",
)


class ExportError(ValueError):
    """A results file that cannot become a dataset: another protocol, or a replay that does not
    give the recorded rewards (the env changed since the run)."""


def episode_rows(document: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The rows of one results document (see the module docstring), replayed and checked."""
    protocol = document.get("protocol", {}).get("name", "parallel")
    if protocol != "parallel":
        raise ExportError(
            f"the run used the {protocol!r} protocol, whose prompts the protocol writes, not "
            "the env: export runs of the parallel protocol (the one the learners train on)"
        )
    env_record = document["env"]
    kwargs = dict(env_record["kwargs"])
    env = make(env_record["id"], **kwargs)  # code envs test in the default sandbox
    team = document["team"]["spec"]
    rows: list[dict[str, Any]] = []
    try:
        for episode in document["episodes"]:
            rows += _episode(env, episode, env_record, kwargs, team)
    finally:
        env.close()
    return rows


def _episode(
    env: Any,
    episode: Mapping[str, Any],
    env_record: Mapping[str, Any],
    kwargs: Mapping[str, Any],
    team: str,
) -> list[dict[str, Any]]:
    observations, _ = env.reset(
        seed=episode["seed"], options={"task": episode["task"], "split": episode["split"]}
    )
    first = env_record["agents"][0]
    shared = {
        "env": env_record["id"],
        "env_kwargs": json.dumps(kwargs, sort_keys=True),
        "split": episode["split"],
        "task": json.dumps(episode["task"]),
        "task_id": str(episode["task_id"]),
        "seed": int(episode["seed"]),
        "episode": int(episode["index"]),
        "team": team,
        "final_reward": float(episode["final_reward"]),
    }
    rows = []
    for number, turn in enumerate(episode["turns"]):
        if not env.agents:
            raise ExportError(
                f"episode {episode['index']}: the replay ended after {number} turns, the record "
                f"has {len(episode['turns'])}: the env changed since the run"
            )
        prompts = {a: observations[a] for a in env.agents}
        observations, rewards, _, _, infos = env.step(turn["actions"])
        replayed = turn_scores(rewards, agent_info(infos, first))
        for what in ("reward", "components", "metrics"):
            if not same_value(turn.get(what), replayed.get(what)):
                raise ExportError(
                    f"episode {episode['index']}, turn {number}: {what} recorded "
                    f"{turn.get(what)!r}, replayed {replayed.get(what)!r}: the env changed "
                    "since the run (collabzoo rescore shows every difference)"
                )
        for agent, prompt in prompts.items():
            info = infos.get(agent, {})
            rows.append(
                {
                    "prompt": prompt,
                    "completion": turn["actions"][agent],
                    "agent": agent,
                    "turn": number,
                    "reward": float(rewards[agent]),
                    "components": _floats(info.get("reward_components", {})),
                    "metrics": _floats(info.get("metrics", {})),
                    **shared,
                }
            )
    return rows


def _floats(values: Mapping[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in values.items() if isinstance(v, (int, float))}


def _uniform(rows: list[dict[str, Any]], column: str) -> None:
    """Every row's dict in `column` gets the same keys (NaN where missing): one Arrow struct."""
    keys = sorted({k for row in rows for k in row[column]})
    for row in rows:
        row[column] = {k: row[column].get(k, math.nan) for k in keys}


def results_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The results files named, folders expanded to the .json files in them."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found += sorted(path.glob("*.json"))
        elif path.is_file():
            found.append(path)
        else:
            raise ExportError(f"no results file or folder at {str(path)!r}")
    if not found:
        raise ExportError("no results files (*.json) in the folders named")
    return found


def episodes_dataset(paths: Sequence[str | os.PathLike[str]]) -> Any:
    """A `datasets.Dataset` of the episodes of these results files (or folders of them)."""
    import datasets

    rows: list[dict[str, Any]] = []
    for path in results_files(paths):
        try:
            rows += episode_rows(read_results(path))
        except ExportError as error:
            raise ExportError(f"{path}: {error}") from None
    if not rows:
        raise ExportError("the results files hold no episodes")
    _uniform(rows, "components")
    _uniform(rows, "metrics")
    return datasets.Dataset.from_list(rows)


def replayed_rewards(dataset: Any) -> list[float]:
    """Each row's reward as a fresh env pays it today: the dataset's episodes replayed from
    their env, seed, task and completions (how to check a dataset against the current envs)."""
    by_episode: dict[tuple[Any, ...], list[int]] = {}
    for index, row in enumerate(dataset):
        key = tuple(row[c] for c in ("env", "env_kwargs", "team", "split", "task", "episode"))
        by_episode.setdefault((*key, row["seed"]), []).append(index)
    rewards = [math.nan] * len(dataset)
    envs: dict[tuple[str, str], Any] = {}
    try:
        for (env_id, env_kwargs, *_), indices in by_episode.items():
            if (env_id, env_kwargs) not in envs:
                envs[env_id, env_kwargs] = make(env_id, **json.loads(env_kwargs))
            env = envs[env_id, env_kwargs]
            rows = [dataset[i] for i in indices]
            env.reset(
                seed=rows[0]["seed"],
                options={"task": json.loads(rows[0]["task"]), "split": rows[0]["split"]},
            )
            for turn in sorted({r["turn"] for r in rows}):
                in_turn = [(i, r) for i, r in zip(indices, rows, strict=True) if r["turn"] == turn]
                _, paid, _, _, _ = env.step({r["agent"]: r["completion"] for _, r in in_turn})
                for i, r in in_turn:
                    rewards[i] = float(paid[r["agent"]])
    finally:
        for env in envs.values():
            env.close()
    return rewards


__all__ = ["COLUMNS", "ExportError", "episode_rows", "episodes_dataset", "replayed_rewards"]
