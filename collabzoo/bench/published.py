"""The published leaderboard rows, shown beside local results, as each task declares them
(`TaskSpec.published`).

They come from the poster of "Learning Decentralized LLM Collaboration with Multi-Agent Actor
Critic": Time in seconds and Cost in tokens per episode, scores in percent, no intervals. They
were measured on the benchmark data (hub datasets, reference splits), so a local row is
comparable only when it ran on that data too.
"""

from __future__ import annotations

from typing import Any

from collabzoo.envs import task_specs
from collabzoo.envs.family import POSTER, POSTER_METHODS, PublishedRow

SOURCE = POSTER
METHOD_PROTOCOLS = POSTER_METHODS
"""What each published method is, in this suite's protocol names where it is one of them."""


def published() -> dict[str, list[PublishedRow]]:
    """By env short name: the published rows of that task, in the source's order."""
    return {s.short_name: list(s.published.rows) for s in task_specs() if s.published}


def models() -> dict[str, str]:
    """The models behind the published rows, per task."""
    return {s.short_name: s.published.models for s in task_specs() if s.published}


def __getattr__(name: str) -> Any:
    """`PUBLISHED` and `MODELS`, the tables this module held before the tasks declared them."""
    if name == "PUBLISHED":
        return published()
    if name == "MODELS":
        return models()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["METHOD_PROTOCOLS", "SOURCE", "PublishedRow", "models", "published"]
