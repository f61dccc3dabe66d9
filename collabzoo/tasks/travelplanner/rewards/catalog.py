"""The reference information of one query read as the reference's catalog, and the route
scaffold both agents are shown.

A query's `reference_information` is the text of a list of `{"Description", "Content"}` records
(Content a pandas table printed as text, or "No valid information."). The catalog keeps what the
reference's evaluator reads of it, with its regular expressions, so that what matches and what
does not is the reference's own decision: restaurants (name, average cost, cuisines, city),
attractions (name, city), accommodations (name, price, room type, house rules, minimum nights,
maximum occupancy, city), flights (number, price, route, date) and self-driving and taxi routes
(cost, route). Everything the reward looks up per slot is indexed once per query here, rather
than scanned per slot as the reference does.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

PLAN_FIELDS = (
    "current_city",
    "transportation",
    "breakfast",
    "attraction",
    "lunch",
    "dinner",
    "accommodation",
)
"""The seven fields of a day, in the plan's order."""
LOGISTICS_FIELDS = frozenset({"current_city", "transportation", "accommodation"})
"""Agent 0's fields (every day); agent 1 owns the other four."""
EXPERIENCE_FIELDS = frozenset({"breakfast", "attraction", "lunch", "dinner"})
MEAL_FIELDS = frozenset({"breakfast", "lunch", "dinner"})
COST_FIELDS = frozenset({*MEAL_FIELDS, "transportation", "accommodation"})
ROOM_TYPES = r"Shared room|Private room|Entire home/apt"
Slot = tuple[int, str]
Route = tuple[str, str, str]
"""("move", from, to) or ("stay", city, city)."""

_SPACES = re.compile(r"\s+")
_RESTAURANT_ROW = re.compile(r"^(.*?)\s+(\d+(?:\.\d+)?)\s+(.+?)\s+(-?\d+(?:\.\d+)?)$")
_ATTRACTION_ROW = re.compile(r"^(.*?)\s+-?\d+\.\d+\s+-?\d+\.\d+\s+.+$")
_ACCOMMODATION_ROW = re.compile(
    rf"^(.*?)\s+(\d+(?:\.\d+)?)\s+({ROOM_TYPES})\s+(.*?)\s+"
    r"(\d+(?:\.\d+)?)\s+(\d+(?:\.\d+)?)\s+(-?\d+(?:\.\d+)?)$",
    re.I,
)
_TRANSPORT_RECORD = re.compile(
    r"^(Flight|Self-driving|Taxi)\s+from\s+(.+?)\s+to\s+(.+?)(?:\s+on\s+(\d{4}-\d{2}-\d{2}))?$",
    re.I,
)
_TRANSPORT_START = re.compile(r"^(Flight|Self-driving|Taxi)\s+from\s+", re.I)
_DATED_FLIGHT = re.compile(r"Flight\s+from\s+(.+?)\s+to\s+(.+?)\s+on\s+(\d{4}-\d{2}-\d{2})", re.I)
_FLIGHT_ROW = re.compile(r"^\s*(F\w+)\s+(\d+(?:\.\d+)?)\s+", re.I)
_GROUND_COST = re.compile(r"\bcost\s*:\s*\$?(\d+(?:\.\d+)?)", re.I)
_FLIGHT_VALUE = re.compile(
    r"\s*Flight\s+Number\s*:\s*(F\d+)\s*,\s*from\s+(.+?)\s+to\s+(.+?)\s*", re.I
)
_GROUND_VALUE = re.compile(r"\s*(Self-driving|Taxi)\s*,\s*from\s+(.+?)\s+to\s+(.+?)\s*", re.I)
_CITY_MOVE = re.compile(r"from\s+(.+?)\s+to\s+(.+?)", re.I)


def canonical(value: object) -> str:
    """The reference's comparison form: whitespace runs collapsed, trimmed, case-folded; an
    empty or None value is "-"."""
    text = "-" if value is None else str(value)
    return _SPACES.sub(" ", text).strip().casefold() or "-"


def owned_fields(agent: int) -> frozenset[str]:
    if agent not in (0, 1):
        raise ValueError(f"TravelPlanner has agents 0 and 1, got {agent!r}")
    return LOGISTICS_FIELDS if agent == 0 else EXPERIENCE_FIELDS


def owned_slots(agent: int, days: int) -> list[Slot]:
    """An agent's slots in the plan's order (day by day, fields in PLAN_FIELDS order)."""
    mine = owned_fields(agent)
    return [(d, f) for d in range(1, days + 1) for f in PLAN_FIELDS if f in mine]


def reference_capacity(days: int) -> int:
    """The reference's shared item cap per agent, ceil(7D / 2): under agent 1's 4D slots for
    every trip of two days or more (the quirk that drops agent 1's full answer)."""
    return math.ceil(len(PLAN_FIELDS) * days / 2)


@dataclass(frozen=True, slots=True)
class Entry:
    """One catalog row: a restaurant, attraction, accommodation or transport option."""

    category: str
    name: str
    city: str = ""
    cost: float | None = None
    cuisines: tuple[str, ...] = ()
    room_type: str = ""
    house_rules: str = ""
    minimum_nights: float = 1.0
    maximum_occupancy: float = 1.0
    mode: str = ""
    origin: str = ""
    destination: str = ""
    date: str = ""

    @property
    def identity(self) -> tuple[str, str, str]:
        return (self.category, canonical(self.name), canonical(self.city))

    def party_cost(self, people: int) -> float | None:
        """What the whole party pays for one use: flights per person, a taxi per 4, a car per
        5, a meal per person, a night per room of `maximum_occupancy`."""
        if self.cost is None:
            return None
        party = max(1, int(people or 1))
        if self.category == "transportation":
            if self.mode == "flight":
                return float(self.cost * party)
            return float(self.cost * math.ceil(party / (4 if self.mode == "taxi" else 5)))
        if self.category == "restaurant":
            return float(self.cost * party)
        if self.category == "accommodation":
            return float(self.cost * math.ceil(party / max(1.0, self.maximum_occupancy)))
        return float(self.cost)


def literal_records(raw: str) -> list[dict[str, Any]]:
    """The records of a reference-information text (JSON, else a Python literal); [] when it
    is neither a list."""
    for loader in (json.loads, ast.literal_eval):
        try:
            value = loader(raw)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(value, list):
            return [dict(r) for r in value if isinstance(r, dict)]
    return []


def _data_lines(content: str) -> list[str]:
    lines = [line.rstrip() for line in str(content or "").splitlines() if line.strip()]
    if not lines or canonical(lines[0]).startswith("no valid information"):
        return []
    return lines[1:]


def _rows_of(city: str, content: str) -> list[str]:
    """Table rows ending in the city's name, that name cut off."""
    suffix = re.compile(rf"^(.*?)\s+{re.escape(city)}\s*$", re.I)
    rows = []
    for line in _data_lines(content):
        found = suffix.match(line)
        if found:
            rows.append(found.group(1).strip())
    return rows


def _restaurants(city: str, content: str) -> list[Entry]:
    found = []
    for body in _rows_of(city, content):
        row = _RESTAURANT_ROW.match(body)
        if row:
            name, cost, cuisines, _ = row.groups()
            kinds = tuple(c.strip() for c in cuisines.split(",") if c.strip())
            found.append(Entry("restaurant", name.strip(), city, float(cost), kinds))
    return found


def _attractions(city: str, content: str) -> list[Entry]:
    found = []
    for body in _rows_of(city, content):
        row = _ATTRACTION_ROW.match(body)
        if row:
            found.append(Entry("attraction", row.group(1).strip(), city, 0.0))
    return found


def _accommodations(city: str, content: str) -> list[Entry]:
    found = []
    for body in _rows_of(city, content):
        row = _ACCOMMODATION_ROW.match(body)
        if row:
            name, price, room, rules, nights, occupancy, _ = row.groups()
            found.append(
                Entry(
                    "accommodation",
                    name.strip(),
                    city,
                    float(price),
                    room_type=room.strip(),
                    house_rules=rules.strip(),
                    minimum_nights=float(nights),
                    maximum_occupancy=max(1.0, float(occupancy)),
                )
            )
    return found


def _transport(description: str, content: str) -> list[Entry]:
    head = _TRANSPORT_RECORD.match(description.strip())
    if not head or canonical(content).startswith("no valid information"):
        return []
    mode, origin, destination, date = head.groups()
    mode = mode.casefold()
    date = date or ""
    if mode == "flight":
        found = []
        for line in _data_lines(content):
            row = _FLIGHT_ROW.match(line)
            if row:
                found.append(
                    Entry(
                        "transportation",
                        row.group(1),
                        cost=float(row.group(2)),
                        mode=mode,
                        origin=origin,
                        destination=destination,
                        date=date,
                    )
                )
        return found
    cost = _GROUND_COST.search(content)
    if not cost:
        return []
    return [
        Entry(
            "transportation",
            mode,
            cost=float(cost.group(1)),
            mode=mode,
            origin=origin,
            destination=destination,
            date=date,
        )
    ]


@dataclass(frozen=True)
class Catalog:
    """A query's catalog, with the lookups the reward makes indexed."""

    restaurants: tuple[Entry, ...]
    attractions: tuple[Entry, ...]
    accommodations: tuple[Entry, ...]
    transportation: tuple[Entry, ...]
    _entities: dict[str, dict[tuple[str, str], Entry]] = field(repr=False)
    _flights: dict[tuple[str, str, str], list[Entry]] = field(repr=False)
    _ground: dict[tuple[str, str, str], list[Entry]] = field(repr=False)
    allowed_cities: frozenset[str] = frozenset()
    """Canonical cities of entities and transport routes."""

    @property
    def parse_success(self) -> bool:
        return bool(
            self.restaurants and self.attractions and self.accommodations and self.transportation
        )

    def entity(self, value: str, category: str) -> Entry | None:
        """The entry a "Name, City" value names in `category` (restaurant, attraction,
        accommodation): the first catalog row of that name and city, None for a bare name."""
        text = str(value or "").strip()
        if "," not in text:
            return None
        raw_name, raw_city = text.rsplit(",", 1)
        name, city = canonical(raw_name), canonical(raw_city)
        if name == "-" or city == "-":
            return None
        return self._entities[category].get((name, city))

    def transport(self, value: str) -> Entry | None:
        """The one option a transportation value names exactly ("Flight Number: F..., from A to
        B", "Self-driving, from A to B", "Taxi, from A to B"); None when none or several do."""
        text = str(value or "")
        flight = _FLIGHT_VALUE.fullmatch(text)
        if flight:
            number, start, end = (canonical(g) for g in flight.groups())
            found = self._flights.get((number, start, end), [])
        else:
            ground = _GROUND_VALUE.fullmatch(text)
            if not ground:
                return None
            mode, start, end = (canonical(g) for g in ground.groups())
            found = self._ground.get((mode, start, end), [])
        return found[0] if len(found) == 1 else None


def build_catalog(records: Sequence[Mapping[str, Any]]) -> Catalog:
    restaurants: list[Entry] = []
    attractions: list[Entry] = []
    accommodations: list[Entry] = []
    transportation: list[Entry] = []
    for record in records:
        description = str(record.get("Description", "")).strip()
        content = str(record.get("Content", ""))
        lowered = description.casefold()
        if lowered.startswith("restaurants in "):
            restaurants += _restaurants(description[len("Restaurants in ") :], content)
        elif lowered.startswith("attractions in "):
            attractions += _attractions(description[len("Attractions in ") :], content)
        elif lowered.startswith("accommodations in "):
            accommodations += _accommodations(description[len("Accommodations in ") :], content)
        elif _TRANSPORT_START.match(description):
            transportation += _transport(description, content)
    entities: dict[str, dict[tuple[str, str], Entry]] = {}
    for category, entries in (
        ("restaurant", restaurants),
        ("attraction", attractions),
        ("accommodation", accommodations),
    ):
        index: dict[tuple[str, str], Entry] = {}
        for entry in entries:
            index.setdefault((canonical(entry.name), canonical(entry.city)), entry)
        entities[category] = index
    flights: dict[tuple[str, str, str], list[Entry]] = {}
    ground: dict[tuple[str, str, str], list[Entry]] = {}
    for entry in transportation:
        route = (canonical(entry.origin), canonical(entry.destination))
        if entry.mode == "flight":
            flights.setdefault((canonical(entry.name), *route), []).append(entry)
        else:
            ground.setdefault((entry.mode, *route), []).append(entry)
    cities = {
        canonical(e.city) for group in (restaurants, attractions, accommodations) for e in group
    }
    cities.discard("-")
    for entry in transportation:
        for city in (entry.origin, entry.destination):
            if city:
                cities.add(canonical(city))
    cities.discard("-")
    return Catalog(
        tuple(restaurants),
        tuple(attractions),
        tuple(accommodations),
        tuple(transportation),
        entities,
        flights,
        ground,
        frozenset(cities),
    )


def route_scaffold(
    days: int,
    dates: Sequence[str],
    origin: str,
    catalog: Catalog,
    records: Sequence[Mapping[str, Any]],
) -> list[Route]:
    """The move/stay structure of each day, from dated routes only: the flights of the catalog
    and every record described "Flight from A to B on DATE" (including "No valid information"
    ones). A day whose date has routes moves along the one leaving the current city (else the
    first in sorted order); any other day stays in the current city, starting from `origin`."""
    by_date: dict[str, set[tuple[str, str]]] = {}
    for entry in catalog.transportation:
        if entry.date and entry.origin and entry.destination:
            by_date.setdefault(entry.date, set()).add((entry.origin, entry.destination))
    for record in records:
        dated = _DATED_FLIGHT.fullmatch(str(record.get("Description", "")).strip())
        if dated:
            start, end, date = dated.groups()
            by_date.setdefault(date, set()).add((start, end))
    current = str(origin).strip()
    scaffold: list[Route] = []
    for day in range(1, days + 1):
        date = dates[day - 1] if day <= len(dates) else ""
        candidates = sorted(by_date.get(date, ()), key=lambda r: (r[0].casefold(), r[1].casefold()))
        here = [r for r in candidates if current and canonical(r[0]) == canonical(current)]
        if not candidates:
            scaffold.append(("stay", current, current))
            continue
        start, end = (here or candidates)[0]
        scaffold.append(("move", start, end))
        current = end
    return scaffold


def required_slots(scaffold: Sequence[Route]) -> frozenset[Slot]:
    """The slots a plan must fill, fixed by the scaffold: current_city every day, transportation
    on move days, three meals and an attraction on stay days, lodging on all but the last day."""
    days = len(scaffold)
    required: set[Slot] = set()
    for day, (kind, _, _) in enumerate(scaffold, start=1):
        required.add((day, "current_city"))
        if kind == "move":
            required.add((day, "transportation"))
        else:
            required.update((day, f) for f in (*sorted(MEAL_FIELDS), "attraction"))
        if day < days:
            required.add((day, "accommodation"))
    return frozenset(required)


def parse_current_city(value: object) -> Route | None:
    """A current_city value as a route: "from A to B" (A and B different) a move, any other
    non-empty text a stay; None for "-", empty, or "from X to X"."""
    text = str(value or "").strip()
    if not text or canonical(text) == "-":
        return None
    move = _CITY_MOVE.fullmatch(text)
    if move:
        start, end = move.group(1).strip(), move.group(2).strip()
        return None if canonical(start) == canonical(end) else ("move", start, end)
    return ("stay", text, text)


def split_attractions(value: str) -> list[str]:
    return [part.strip() for part in str(value or "").split(";") if part.strip()]


def satisfies_room_type(entry: Entry, requested: Any) -> bool:
    if not requested:
        return True
    actual, wanted = canonical(entry.room_type), canonical(requested)
    if wanted == "not shared room":
        return actual != "shared room"
    if wanted == "entire room":
        return actual == "entire home/apt"
    return actual == wanted


def satisfies_house_rule(entry: Entry, requested: Any) -> bool:
    return not requested or f"no {canonical(requested)}" not in canonical(entry.house_rules)


TRANSPORT_RULES = {"no flight": "flight", "no self-driving": "self-driving"}


def satisfies_transport_rule(entry: Entry, requested: Any) -> bool:
    """An unrecognised rule is satisfied by no option, as in the reference."""
    if not requested:
        return True
    forbidden = TRANSPORT_RULES.get(canonical(requested))
    return forbidden is not None and entry.mode != forbidden
