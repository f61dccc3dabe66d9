"""Preference pairs from a file: the user's own, or episodes `collabzoo export` wrote.

The pairs schema: a Hugging Face `datasets` dataset (a `save_to_disk` folder, or a .jsonl,
.json or .parquet file), one row per joint pair:

    prompt           {agent: the prompt (observation) that agent saw}
    chosen           {agent: that agent's answer in the preferred joint answer}
    rejected         {agent: its answer in the other one}
    chosen_reward    optional number
    rejected_reward  optional number

Every row names every agent of the team in all three columns, with strings. An exported
episodes dataset (columns prompt, completion, agent, turn, reward, episode, ...) is turned into
pairs first (`pairs_from_episodes`): the first turns of episodes whose agents saw the same
prompts are candidates, the team reward (the agents' mean) orders them, ties are dropped and the
largest gaps kept, as for sampled candidates.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from collabzoo.algos.learners.preference_pairs import PreferencePair, select_pair_indices
from collabzoo.algos.learners.preference_rollouts import encode_answer
from collabzoo.algos.policies.policy import Policy

PAIR_COLUMNS = ("prompt", "chosen", "rejected")
EPISODE_COLUMNS = ("prompt", "completion", "agent", "turn", "reward", "episode")


class PreferenceDataError(ValueError):
    """A preference file that does not hold pairs of this team (what was wrong, what was
    expected)."""


def read_dataset(path: str | Path) -> Any:
    """A `datasets` dataset from a save_to_disk folder or a .jsonl/.json/.parquet file."""
    import datasets

    path = Path(path)
    if path.is_dir():
        found = datasets.load_from_disk(str(path))
        if isinstance(found, datasets.DatasetDict):
            if "train" not in found:
                raise PreferenceDataError(
                    f"{path} holds splits {sorted(found)}: a pairs dataset needs a 'train' split "
                    "or a single dataset"
                )
            found = found["train"]
        return found
    kinds = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}
    if path.suffix not in kinds:
        raise PreferenceDataError(
            f"{path}: expected a datasets folder (save_to_disk) or a .jsonl, .json or .parquet "
            "file of preference pairs"
        )
    if not path.is_file():
        raise PreferenceDataError(f"{path}: no such file")
    return datasets.load_dataset(kinds[path.suffix], data_files=str(path), split="train")


def _texts(
    row: Mapping[str, Any], column: str, agents: Sequence[str], index: int
) -> dict[str, str]:
    value = row.get(column)
    if not isinstance(value, Mapping):
        raise PreferenceDataError(
            f"row {index}: {column!r} must map each agent to a string, got {type(value).__name__}"
        )
    missing = [a for a in agents if not isinstance(value.get(a), str)]
    if missing:
        raise PreferenceDataError(
            f"row {index}: {column!r} has no string for agents {missing}; expected one for each "
            f"of {list(agents)}"
        )
    return {a: value[a] for a in agents}


def pair_rows(dataset: Any, agents: Sequence[str]) -> list[PreferencePair]:
    """Validated pairs (text only) of a dataset in the pairs schema."""
    columns = set(dataset.column_names)
    missing = [c for c in PAIR_COLUMNS if c not in columns]
    if missing:
        raise PreferenceDataError(
            f"the pairs dataset lacks columns {missing}: expected {list(PAIR_COLUMNS)} (each "
            "{agent: text}) and optionally chosen_reward, rejected_reward"
        )
    pairs = []
    for index, row in enumerate(dataset):
        rewards = []
        for column in ("chosen_reward", "rejected_reward"):
            value = row.get(column, 0.0)
            value = 0.0 if value is None else value
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise PreferenceDataError(f"row {index}: {column} must be a number, got {value!r}")
            rewards.append(float(value))
        pairs.append(
            PreferencePair(
                prompts=_texts(row, "prompt", agents, index),
                chosen=_texts(row, "chosen", agents, index),
                rejected=_texts(row, "rejected", agents, index),
                chosen_reward=rewards[0],
                rejected_reward=rewards[1],
                source="data",
            )
        )
    if not pairs:
        raise PreferenceDataError("the pairs dataset has no rows")
    return pairs


def pairs_from_episodes(
    dataset: Any, agents: Sequence[str], limit: int | None = 16, seed: int = 0
) -> list[PreferencePair]:
    """Pairs from an exported episodes dataset (see the module docstring)."""
    missing = [c for c in EPISODE_COLUMNS if c not in set(dataset.column_names)]
    if missing:
        raise PreferenceDataError(f"the episodes dataset lacks columns {missing}")
    episodes: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in dataset:
        if row["turn"] != 0:
            continue
        key = (row.get("team"), row.get("env"), row["episode"], row.get("seed"))
        episode = episodes.setdefault(key, {"prompts": {}, "answers": {}, "rewards": []})
        episode["prompts"][row["agent"]] = row["prompt"]
        episode["answers"][row["agent"]] = row["completion"]
        episode["rewards"].append(float(row["reward"]))
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for episode in episodes.values():
        if sorted(episode["prompts"]) != sorted(agents):
            raise PreferenceDataError(
                f"an exported episode has agents {sorted(episode['prompts'])}, the team "
                f"{sorted(agents)}"
            )
        prompt_key = tuple(episode["prompts"][a] for a in agents)
        groups.setdefault(prompt_key, []).append(episode)
    pairs = []
    rng = random.Random(seed)
    for group in groups.values():
        rewards = [sum(e["rewards"]) / len(e["rewards"]) for e in group]
        mean = sum(rewards) / len(rewards)
        for w, l_ in select_pair_indices(rewards, "reward_gap", limit, rng):
            pairs.append(
                PreferencePair(
                    prompts=dict(group[w]["prompts"]),
                    chosen=dict(group[w]["answers"]),
                    rejected=dict(group[l_]["answers"]),
                    chosen_reward=rewards[w],
                    rejected_reward=rewards[l_],
                    candidate_reward_mean=mean,
                    source="data",
                )
            )
    if not pairs:
        raise PreferenceDataError(
            "no pair in the exported episodes: no two episodes with the same prompts earned "
            "different rewards (export more episodes per task, sampled, not greedy)"
        )
    return pairs


def tokenized(pairs: list[PreferencePair], policies: Mapping[str, Policy]) -> list[PreferencePair]:
    """The pairs with each agent's prompt encoded as its policy encodes observations and the
    answers re-tokenized (no special tokens)."""
    for pair in pairs:
        for agent, policy in policies.items():
            pair.prompt_ids[agent] = list(policy.encode_prompt(pair.prompts[agent]))
            pair.chosen_ids[agent] = encode_answer(policy, pair.chosen[agent])
            pair.rejected_ids[agent] = encode_answer(policy, pair.rejected[agent])
    return pairs


def load_pairs(
    path: str | Path, policies: Mapping[str, Policy], limit: int | None = 16
) -> list[PreferencePair]:
    """The pairs of a file in the pairs schema or of an exported episodes dataset, tokenized
    for the team."""
    dataset = read_dataset(path)
    agents = list(policies)
    columns = set(dataset.column_names)
    if columns & {"chosen", "rejected"}:
        pairs = pair_rows(dataset, agents)
    elif set(EPISODE_COLUMNS) <= columns:
        pairs = pairs_from_episodes(dataset, agents, limit)
    else:
        raise PreferenceDataError(
            f"{path}: columns {sorted(columns)} are neither preference pairs ({list(PAIR_COLUMNS)})"
            f" nor exported episodes ({list(EPISODE_COLUMNS)})"
        )
    return tokenized(pairs, policies)


__all__ = [
    "PreferenceDataError",
    "load_pairs",
    "pair_rows",
    "pairs_from_episodes",
    "read_dataset",
    "tokenized",
]
