"""One TravelPlanner query: the fields the reward reads, and what is derived from them once.

The fields are the hub rows' (`osunlp/TravelPlanner`): query, org, dest, days,
visiting_city_number, date (the trip's dates), people_number, budget, local_constraint (house
rule, cuisine, room type, transportation) and level, with the reference information as the text
the reference parses. The annotated plan, where the data has one, is kept for the scripted
oracle only: neither a prompt nor the reward reads it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from collabzoo.tasks.travelplanner.rewards.benchmark import Sandbox, build_sandbox
from collabzoo.tasks.travelplanner.rewards.catalog import (
    Catalog,
    Route,
    Slot,
    build_catalog,
    literal_records,
    required_slots,
    route_scaffold,
)

CONSTRAINT_KEYS = ("house rule", "cuisine", "room type", "transportation")
_WORDS = re.compile(r"[a-z0-9]+(?:[.$:+/-][a-z0-9]+)*")
COPY_NGRAM = 8
"""Word n-grams of the reference-copy penalty."""


def words(text: str) -> list[str]:
    """The reference's tokens for the copy penalty: lower-case alphanumeric runs, joined
    through . $ : + / -."""
    return _WORDS.findall((text or "").casefold())


@dataclass(frozen=True, eq=False)
class TravelTask:
    """A query with its reference information (`reference_information`, the records' text).
    Compared and hashed by identity: what is derived from it is cached on it."""

    task_id: str
    query: str
    org: str
    dest: str
    days: int
    dates: tuple[str, ...]
    people_number: int
    budget: float
    visiting_city_number: int
    local_constraint: Mapping[str, Any]
    level: str
    reference_information: str
    annotated_plan: tuple[Mapping[str, Any], ...] | None = None
    source: str = "hub"
    """"hub" (the hub's rows), or "offline" (structured fields read from the query text)."""

    @functools.cached_property
    def records(self) -> list[dict[str, Any]]:
        return literal_records(self.reference_information)

    @functools.cached_property
    def catalog(self) -> Catalog:
        return build_catalog(self.records)

    @functools.cached_property
    def scaffold(self) -> tuple[Route, ...]:
        return tuple(route_scaffold(self.days, self.dates, self.org, self.catalog, self.records))

    @functools.cached_property
    def required(self) -> frozenset[Slot]:
        return required_slots(self.scaffold)

    @functools.cached_property
    def sandbox(self) -> Sandbox:
        """The reference information as the benchmark's database tables."""
        return build_sandbox(self.reference_information)

    @functools.cached_property
    def reference_ngrams(self) -> frozenset[tuple[str, ...]]:
        tokens = words(self.reference_information)
        return frozenset(
            tuple(tokens[i : i + COPY_NGRAM]) for i in range(len(tokens) - COPY_NGRAM + 1)
        )

    def constraint(self, key: str) -> Any:
        return (self.local_constraint or {}).get(key)

    def reference_item(self) -> dict[str, Any]:
        """The row as the reference's loader hands it to its reward (its `batch_item`), for
        running the reference on this query."""
        return {
            "id": self.task_id,
            "query": self.query,
            "prompt": self.query,
            "org": self.org,
            "dest": self.dest,
            "days": self.days,
            "date": list(self.dates),
            "dates": list(self.dates),
            "people_number": self.people_number,
            "budget": self.budget,
            "visiting_city_number": self.visiting_city_number,
            "local_constraint": dict(self.local_constraint or {}),
            "level": self.level,
            "reference_information": self.reference_information,
            "reference_records": self.records,
        }
