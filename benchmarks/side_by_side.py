"""Timing ways of doing the same work side by side in one run, and their speed against the
reference's.

A speed benchmark against the reference times every way on the same work in one process, round
after round, so that a change in the machine's load falls on every way alike (the machine is
shared); each way's figure is the median of its rounds, and its speed is the reference's median
over its own. The scripts run as `python benchmarks/x.py` and import this module as a sibling.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

ORDERS = ("fixed", "rotate", "reverse")
"""Which way goes first in a round: always the first (`fixed`); round r starts at way r, the ways
taken in turn (`rotate`); every other round backwards (`reverse`)."""


def round_order(ways: Sequence[str], round_: int, order: str) -> tuple[str, ...]:
    """The ways in the order they run in round `round_` (see `ORDERS`)."""
    ways = tuple(ways)
    if order == "fixed":
        return ways
    if order == "rotate":
        first = round_ % len(ways)
        return ways[first:] + ways[:first]
    if order == "reverse":
        return ways if round_ % 2 == 0 else ways[::-1]
    raise ValueError(f"round order {order!r}: expected one of {', '.join(ORDERS)}")


def timed(run: Callable[[], object]) -> float:
    """Seconds one call of `run` takes."""
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def time_rounds(
    ways: Sequence[str],
    rounds: int,
    run: Callable[[str], float],
    order: str = "fixed",
    after_round: Callable[[int], None] | None = None,
) -> dict[str, list[float]]:
    """Each way's seconds over `rounds` rounds, in the order of `ways`: `run(way)` does one pass
    of that way and returns its seconds; `after_round(round_)`, if given, runs after each round
    (a check of what the round computed, say)."""
    seconds: dict[str, list[float]] = {way: [] for way in ways}
    for round_ in range(rounds):
        for way in round_order(ways, round_, order):
            seconds[way].append(run(way))
        if after_round is not None:
            after_round(round_)
    return seconds


def medians(seconds: Mapping[str, Sequence[float]]) -> dict[str, float]:
    """Each way's median seconds, in the order of `seconds`."""
    return {way: statistics.median(runs) for way, runs in seconds.items()}


def speed_rows(
    seconds: Mapping[str, Sequence[float]],
    ways: Sequence[str],
    figures: Callable[[float], list[str]],
    reference: str = "reference",
) -> list[list[str]]:
    """A table row for each way: its name, `figures(its median seconds)`, and its speed against
    the reference's ("1.28×": the reference's median over its own)."""
    median = medians(seconds)
    return [[way, *figures(median[way]), f"{median[reference] / median[way]:.2f}×"] for way in ways]


def headline_against_reference(
    results: Mapping[str, Any],
    benchmark: str,
    ours: str,
    figure: Callable[[float, float], str],
    reference: str = "reference",
) -> dict[str, Any]:
    """A results file's `headline` for a side-by-side run: `figure(reference, ours)` gets the two
    ways' median seconds; the ratio is the reference's time over ours; the Performance page's
    section is named as the benchmark."""
    reference_median = statistics.median(results["seconds"][reference])
    ours_median = statistics.median(results["seconds"][ours])
    return {
        "benchmark": benchmark,
        "figure": figure(reference_median, ours_median),
        "ratio": round(reference_median / ours_median, 2),
        "section": benchmark,
    }


def pin_to_one_core() -> str:
    """Run on one core, as the Performance page's figures are: the process's first allowed CPU."""
    if not hasattr(os, "sched_setaffinity"):
        return "not pinned (no sched_setaffinity here)"
    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return f"pinned to CPU {cpu}"
