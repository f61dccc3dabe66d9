"""Text shared by the two building games' prompts and pictures."""

from __future__ import annotations

from collections.abc import Sequence

from collabzoo.rewards import Rejection, RewardBreakdown

ORDINALS = ("first", "second", "third", "fourth")
BUILDER_ROLES = ("first_builder", "second_builder")


def ordinal(index: int) -> str:
    return ORDINALS[index] if index < len(ORDINALS) else f"#{index + 1}"


def identity_line(index: int, count: int) -> str:
    """The line that tells an agent who it is (scripted policies read it too)."""
    return (
        f"You are the {ordinal(index)} of {count} builders. The builders' commands are applied "
        "in order (first builder first), so a later builder's block replaces an earlier one."
    )


def rejected_summary(rejected: Sequence[Rejection]) -> str:
    if not rejected:
        return "All your command lines were accepted."
    shown = "\n".join(f"  {r.line[:120]!r}: {r.reason}" for r in rejected[:10])
    more = f"\n  ... and {len(rejected) - 10} more" if len(rejected) > 10 else ""
    return f"{len(rejected)} of your lines were rejected:\n{shown}{more}"


def cell_list(cells: list[tuple[int, int, int]], limit: int = 400) -> str:
    text = ", ".join(f"({x},{y},{z})" for x, y, z in cells[:limit])
    return text + (f", ... ({len(cells) - limit} more)" if len(cells) > limit else "")


def score_line(breakdown: RewardBreakdown) -> str:
    metrics = "  ".join(f"{k} {v:.3f}" for k, v in breakdown.metrics.items())
    return f"score {breakdown.total:.3f}  {metrics}"
