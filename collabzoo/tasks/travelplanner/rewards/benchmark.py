"""TravelPlanner's own metrics (OSU-NLP-Group/TravelPlanner@da7c1d4, `evaluation/`), computed
against the data the episode carries: its reference information, read as the database tables it
was printed from.

The benchmark checks a plan against its full search database (a separate archive, not shipped
with the benchmark's repository). Each check here runs the benchmark's own logic, quirks
included, on the episode's tables instead: the restaurants, attractions and accommodations of
every city the reference information lists, the flights of its dated routes, and the
distance-matrix rows of its self-driving and taxi routes. For a city the reference information
lists, its tables are the database's rows of that city (the benchmark's lookups all filter by
city), so those lookups are the database's. What needs the full database and is left out:

* the city-to-state map (`citySet_with_states.txt`) of the reasonable-route check: a city is
  valid here when the reference information names it (an entity table or a route end), and on
  a trip of more than 3 days an intermediate city must be one of the cities with entity tables
  (the query's destination-state cities that the reference information lists; TravelPlanner's
  reference information lists only cities of that state, and the origin);
* any entity, flight or route that is in the database but not in the reference information:
  the benchmark would find it, this reading does not (so a plan can only lose against the
  benchmark by leaving the reference information, never gain);
* flight lookups ignore the flight date, as the benchmark's do, over the listed flights only.

Where a benchmark check would raise (a "from" current city that does not parse, a transport
value without "Flight Number: "), the check fails here and the reason says why; the benchmark's
script would stop. Delivery: the merged plan is delivered when any slot is not "-" (the
benchmark's file would hold an empty plan otherwise); an undelivered plan passes nothing.

Per episode: `delivery`; `commonsense_passed` of 8 and `commonsense_micro` = passed / 8;
`commonsense_macro` (all 8 pass); `hard_passed` of `hard_applicable` (the budget, and each
local constraint the benchmark counts for the query's level) and `hard_micro` = passed /
applicable; `hard_macro`; `final_pass`. The benchmark pools micro rates over a split (passes
over applicable checks); `pooled_rates` does that from the per-episode counts, where a mean of
the per-episode `hard_micro` weighs every query alike.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from collabzoo.tasks.travelplanner.rewards.catalog import PLAN_FIELDS, literal_records

COMMONSENSE_CHECKS = (
    "is_reasonable_visiting_city",
    "is_valid_restaurants",
    "is_valid_attractions",
    "is_valid_accommodation",
    "is_valid_transportation",
    "is_valid_information_in_current_city",
    "is_valid_information_in_sandbox",
    "is_not_absent",
)
HARD_CHECKS = (
    "valid_cuisine",
    "valid_room_rule",
    "valid_transportation",
    "valid_room_type",
    "valid_cost",
)
LEVEL_CONSTRAINTS = {
    "easy": (),
    "medium": ("house rule", "cuisine", "room type"),
    "hard": ("house rule", "cuisine", "room type", "transportation"),
}
"""The local constraints the benchmark's hard micro rate counts, by level (`eval.py`)."""
TABLE_COLUMNS = {
    "restaurants": ("Name", "Average Cost", "Cuisines", "Aggregate Rating", "City"),
    "attractions": ("Name", "Latitude", "Longitude", "Address", "Phone", "Website", "City"),
    "accommodations": (
        "NAME", "price", "room type", "house_rules", "minimum nights", "maximum occupancy",
        "review rate number", "city",
    ),
    "flights": (
        "Flight Number", "Price", "DepTime", "ArrTime", "ActualElapsedTime", "FlightDate",
        "OriginCityName", "DestCityName", "Distance",
    ),
}  # fmt: skip
_FROM_TO = re.compile(r"from\s+(.+?)\s+to\s+([^,]+)(?=[,\s]|$)")
_PARENTHESIS = re.compile(r"^(.*?)\([^)]*\)")
_NAME_CITY = re.compile(r"(.*?),\s*([^,]+)(\(\w[\w\s]*\))?$")
_ROUTE = re.compile(r"^(Self-driving|Taxi)\s+from\s+(.+?)\s+to\s+(.+?)$", re.I)
_DISTANCE = re.compile(r"duration:\s*(.*?),\s*distance:\s*(.*?),\s*cost:", re.I)
_LAST_DAY = "You don't need to fill in the information for this or later days."


class CheckCrash(Exception):
    """Where the benchmark's own code would raise."""


# ----- the reference information as tables --------------------------------------------------
def read_table(content: str, columns: Sequence[str]) -> list[dict[str, str]]:
    """Rows of a pandas table printed as text (values right-aligned under their column's name,
    an unnamed index column first where the table has one), as {column: text}; none for a
    content that is not such a table."""
    lines = [line for line in str(content or "").splitlines() if line.strip()]
    if not lines or lines[0].strip().casefold().startswith("no valid information"):
        return []
    header, data = lines[0], lines[1:]
    ends, cursor = [], 0
    for name in columns:
        at = header.find(name, cursor)
        if at < 0:  # a message ("There is no flight from ..."), not a table
            return []
        cursor = at + len(name)
        ends.append(cursor)
    start = 0
    if data and header[:1] == " " and all(line[:1].isdigit() for line in data):
        start = max(len(re.match(r"\d+", line).group()) for line in data) + 1  # type: ignore[union-attr]
    rows = []
    for line in data:
        cells, left = {}, start
        for name, end in zip(columns, ends, strict=True):
            cells[name] = line[left:end].strip().replace("\\n", "\n")  # pandas prints "\n"
            left = end
        rows.append(cells)
    return rows


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


@dataclass(frozen=True)
class Sandbox:
    """The episode's slice of the database: the rows the benchmark's lookups can find."""

    restaurants: tuple[dict[str, Any], ...]
    attractions: tuple[dict[str, Any], ...]
    accommodations: tuple[dict[str, Any], ...]
    flights: tuple[dict[str, Any], ...]
    distances: Mapping[tuple[str, str], tuple[str, str] | None]
    """(origin, destination) -> (duration, distance) text, None where it has no information."""
    cities: frozenset[str]
    """Every city the reference information names."""
    destination_cities: frozenset[str]
    """The cities with entity tables (the destination state's, for the route check)."""

    def restaurant(self, name: str, city: str) -> dict[str, Any] | None:
        return next((r for r in self.restaurants if name in r["Name"] and r["City"] == city), None)

    def accommodation_rows(self, name: str, city: str) -> list[dict[str, Any]]:
        return [r for r in self.accommodations if name in r["NAME"] and r["city"] == city]

    def has_attraction(self, name: str, city: str) -> bool:
        return any(name in r["Name"] and r["City"] == city for r in self.attractions)

    def distance_cost(self, origin: str, destination: str, mode: str) -> int | None:
        """The distance matrix's cost (`run_for_evaluation`): 5 cents a km self-driving, a
        dollar a km by taxi, none for a trip of a day or more or without information."""
        found = self.distances.get((before_parenthesis(origin), before_parenthesis(destination)))
        if found is None:
            return None
        duration, distance = found
        if "day" in duration:
            return None
        km = float(distance.replace("km", "").replace(",", "").strip())
        return int(km * 0.05) if "driving" in mode else int(km)


def build_sandbox(reference_information: str) -> Sandbox:
    restaurants: list[dict[str, Any]] = []
    attractions: list[dict[str, Any]] = []
    accommodations: list[dict[str, Any]] = []
    flights: list[dict[str, Any]] = []
    distances: dict[tuple[str, str], tuple[str, str] | None] = {}
    cities: set[str] = set()
    entity_cities: set[str] = set()
    for record in literal_records(reference_information):
        description = str(record.get("Description", "")).strip()
        content = str(record.get("Content", ""))
        lowered = description.casefold()
        for prefix, kind, target in (
            ("restaurants in ", "restaurants", restaurants),
            ("attractions in ", "attractions", attractions),
            ("accommodations in ", "accommodations", accommodations),
        ):
            if lowered.startswith(prefix):
                entity_cities.add(description[len(prefix) :].strip())
                target += read_table(content, TABLE_COLUMNS[kind])
        if lowered.startswith("flight from "):
            flights += read_table(content, TABLE_COLUMNS["flights"])
            route = _FROM_TO.search(description.split(" on ")[0])
            if route:
                cities.update(g.strip() for g in route.groups())
        ground = _ROUTE.match(description)
        if ground:
            key = (ground.group(2).strip(), ground.group(3).strip())
            cities.update(key)
            found = _DISTANCE.search(content)
            if found:
                distances[key] = (found.group(1).strip(), found.group(2).strip())
            else:
                distances.setdefault(key, None)
    for row in restaurants:
        row["Average Cost"] = _number(row["Average Cost"])
    for row in accommodations:
        for name in ("price", "minimum nights", "maximum occupancy"):
            row[name] = _number(row[name])
    for row in flights:
        row["Price"] = _number(row["Price"])
    return Sandbox(
        tuple(restaurants),
        tuple(attractions),
        tuple(accommodations),
        tuple(flights),
        distances,
        frozenset(cities | entity_cities),
        frozenset(entity_cities),
    )


# ----- the benchmark's helpers (`utils/func.py`, the evaluation scripts) --------------------
def before_parenthesis(text: str | None) -> str:
    if text is None:
        raise CheckCrash("a city that does not parse (the benchmark raises here)")
    found = _PARENTHESIS.search(text)
    return found.group(1) if found else text


def from_to(text: str) -> tuple[str | None, str | None]:
    found = _FROM_TO.search(text)
    return (found.group(1), found.group(2)) if found else (None, None)


def name_city(text: str) -> tuple[str, str]:
    found = _NAME_CITY.search(text)
    if not found:
        return "-", "-"
    return found.group(1).strip(), before_parenthesis(found.group(2).strip()).strip()


def _filled(value: Any) -> bool:
    return bool(value) and value != "-"


def _transport_kind(text: str) -> str | None:
    lowered = text.lower()
    for word, kind in (("taxi", "Taxi"), ("self-driving", "Self-driving"), ("flight", "Flight")):
        if word in lowered:
            return kind
    return None


def _city_sequence_ok(cities: Sequence[str]) -> bool:
    if len(cities) < 3:
        return False
    visited: set[str] = set()
    i = 0
    while i < len(cities):
        city = cities[i]
        if city in visited and i != 0 and i != len(cities) - 1:
            return False
        count = 0
        while i < len(cities) and cities[i] == city:
            count += 1
            i += 1
        if count == 1 and 0 < i - 1 < len(cities) - 1:
            return False
        visited.add(city)
    return True


def _runs(values: Sequence[Any]) -> list[tuple[Any, int]]:
    runs: list[tuple[Any, int]] = []
    for value in values:
        if runs and runs[-1][0] == value:
            runs[-1] = (value, runs[-1][1] + 1)
        else:
            runs.append((value, 1))
    return runs


# ----- the checks ---------------------------------------------------------------------------
Check = tuple[bool | None, str | None]


@dataclass(frozen=True)
class Query:
    """What the benchmark's checks read of a query."""

    org: str
    dest: str
    days: int
    visiting_city_number: int
    people_number: int
    budget: float
    local_constraint: Mapping[str, Any]
    level: str


def reasonable_visiting_city(q: Query, plan: Sequence[Mapping[str, Any]], box: Sandbox) -> Check:
    cities: list[str] = []
    for i in range(min(q.days, len(plan))):
        value = plan[i]["current_city"]
        if "from" in value:
            one, two = from_to(value)
            one, two = before_parenthesis(one), before_parenthesis(two)
            if i == 0 and one != q.org:
                return False, f"The first day's city should be {q.org}."
            cities += [one, two]
        else:
            cities.append(before_parenthesis(value))
    if cities[0] != cities[-1]:
        return False, "The trip should be a closed circle."
    if not _city_sequence_ok(cities):
        return False, "The city sequence is invalid."
    known = box.cities | {q.org}
    for index, city in enumerate(cities):
        if city not in known:
            return False, f"{city} is not a valid city."
        inner = index not in (0, len(cities) - 1)
        if inner and q.days > 3 and city not in box.destination_cities:
            return False, f"{city} is not in {q.dest}."
    return True, None


def valid_restaurants(q: Query, plan: Sequence[Mapping[str, Any]], box: Sandbox) -> Check:
    seen: list[str] = []
    for i in range(min(q.days, len(plan))):
        for meal in ("breakfast", "lunch", "dinner"):
            value = plan[i].get(meal)
            if _filled(value):
                if value in seen:
                    return False, f"The restaurant in day {i + 1} {meal} is repeated."
                seen.append(value)
    return True, None


def valid_attractions(q: Query, plan: Sequence[Mapping[str, Any]], box: Sandbox) -> Check:
    seen: list[str] = []
    for i in range(min(q.days, len(plan))):
        value = plan[i].get("attraction")
        if _filled(value):
            for attraction in value.split(";")[:-1]:  # the benchmark's: a last one without ";"
                if attraction in seen:  # is not read
                    return False, f"The attraction '{attraction}' in day {i + 1} is repeated."
                seen.append(attraction)
    return True, None


def valid_accommodation(q: Query, plan: Sequence[Mapping[str, Any]], box: Sandbox) -> Check:
    stays = []
    for i in range(min(q.days, len(plan))):
        if "accommodation" not in plan[i]:
            return False, "No Accommodation Info."
        stays.append(plan[i]["accommodation"])
    for value, nights in _runs(stays):
        if value and value not in ("-", ""):
            rows = box.accommodation_rows(*name_city(value))
            if len(rows) == 1 and nights < rows[0]["minimum nights"]:
                return False, f"The accommodation {value} do not obey the minumum nights rule."
    return True, None


def valid_transportation(q: Query, plan: Sequence[Mapping[str, Any]], box: Sandbox) -> Check:
    first = plan[0]["transportation"]
    if not _filled(first):
        return False, "The transportation in day 1 should not be empty."
    kinds = [_transport_kind(first)]
    for i in range(min(q.days, len(plan))):
        value = plan[i].get("transportation")
        if _filled(value):
            kinds.append(_transport_kind(value))
    if ("Self-driving" in kinds and "Flight" in kinds) or (
        "Taxi" in kinds and "Self-driving" in kinds
    ):
        return False, "The transportation is conflicting."
    return True, None


def information_in_current_city(q: Query, plan: Sequence[Mapping[str, Any]], box: Sandbox) -> Check:
    for i in range(min(q.days, len(plan))):
        unit = plan[i]
        current = unit["current_city"]
        if "from" in current:
            one, two = from_to(current)
            cities: Sequence[str] = [before_parenthesis(one), before_parenthesis(two)]
        else:
            cities = before_parenthesis(current)  # the benchmark's: a string, read by characters
        if _filled(unit.get("transportation")):
            for city in cities:
                if city not in unit["transportation"]:
                    return False, f"The transportation in day {i + 1} is invalid city choice."
        for meal in ("breakfast", "lunch", "dinner"):
            if _filled(unit.get(meal)) and not any(city in unit[meal] for city in cities):
                return False, f"The {meal} in day {i + 1} is invalid city choice."
        if _filled(unit.get("attraction")):
            for attraction in unit["attraction"].split(";")[:-1]:
                if not any(city in attraction for city in cities):
                    return False, f"The attraction in day {i + 1} is invalid city choice."
        if _filled(unit.get("accommodation")) and cities[-1] not in unit["accommodation"]:
            return False, f"The accommodation in day {i + 1} is invalid city choice."
    return True, None


def information_in_sandbox(q: Query, plan: Sequence[Mapping[str, Any]], box: Sandbox) -> Check:
    for i in range(min(q.days, len(plan))):
        unit = plan[i]
        value = unit["transportation"]
        if _filled(value):
            start, end = from_to(value)
            if start is None or end is None:
                start, end = from_to(unit["current_city"])
            lowered = value.lower()
            if "flight number" in lowered:
                start, end = before_parenthesis(start), before_parenthesis(end)
                if "Flight Number: " not in value:
                    raise CheckCrash("a flight value without 'Flight Number: '")
                number = value.split("Flight Number: ")[1].split(",")[0]
                if not any(
                    f["Flight Number"] == number
                    and f["OriginCityName"] == start
                    and f["DestCityName"] == end
                    for f in box.flights
                ):
                    return False, f"The flight number in day {i + 1} is invalid in the sandbox."
            elif "self-driving" in lowered or "taxi" in lowered:
                try:
                    start, end = before_parenthesis(start), before_parenthesis(end)
                except CheckCrash:
                    start = end = "-"
                mode = "self-driving" if "self-driving" in lowered else "taxi"
                if box.distance_cost(start, end, mode) is None:
                    return False, f"The {mode} in day {i + 1} is invalid in the sandbox."
        for meal in ("breakfast", "lunch", "dinner"):
            if _filled(unit.get(meal)) and box.restaurant(*name_city(unit[meal])) is None:
                return False, f"The {meal} in day {i + 1} is invalid in the sandbox."
        if _filled(unit.get("attraction")):
            for attraction in unit["attraction"].split(";")[:-1]:
                if not box.has_attraction(*name_city(attraction)):
                    return (
                        False,
                        f"The attraction {attraction} in day {i + 1} is not in the sandbox.",
                    )
        if _filled(unit.get("accommodation")) and not box.accommodation_rows(
            *name_city(unit["accommodation"])
        ):
            return False, f"The accommodation in day {i + 1} is invalid in the sandbox."
    return True, None


def _visiting_city_number(q: Query, plan: Sequence[Mapping[str, Any]]) -> bool:
    cities: set[str] = set()
    for i in range(min(q.days, len(plan))):
        value = plan[i]["current_city"]
        if "from" in value:
            one, two = from_to(value)
            one, two = before_parenthesis(one), before_parenthesis(two)
            if i == 0 and one != q.org:
                return False
            cities |= {one, two}
        else:
            cities.add(before_parenthesis(value))
    cities.discard(q.org)
    return len(cities) == q.visiting_city_number


def not_absent(q: Query, plan: Sequence[Mapping[str, Any]], box: Sandbox) -> Check:
    units = plan[: min(q.days, len(plan))]
    days = sum(1 for u in units if u != {} and u["current_city"] != _LAST_DAY)
    if days != q.days:
        return False, "Invalid Days"
    if not _visiting_city_number(q, plan):
        return False, "Invalid City Number"
    filled = 0
    for i, unit in enumerate(units):
        for name in PLAN_FIELDS[1:]:
            if name not in unit:
                return False, f"No {name.title()} Info."
        current = unit["current_city"]
        if ("from " in current or "to " in current) and unit["transportation"] in ("", "-"):
            return False, f"No transportation in day {i + 1} is not allowed."
        if "from " not in current and " to " not in current and unit["attraction"] in ("", "-"):
            return False, f"No attaction in day {i + 1} is not allowed."
        if i != q.days - 1 and unit["accommodation"] in ("", "-"):
            return False, f"No accommodation in day {i + 1} is not allowed."
        meals = (unit["breakfast"], unit["lunch"], unit["dinner"])
        if any(m in ("", "-") for m in meals) and "from " not in current:
            return False, f"No meal in day {i + 1} is not allowed."
        filled += sum(1 for key in unit if unit[key] and unit[key] != "-")
    if filled / (6 * q.days) < 0.5:
        return False, "The absent information is more than 50%."
    return True, None


def hard_cuisine(q: Query, plan: Sequence[Mapping[str, Any]], box: Sandbox) -> Check:
    wanted = q.local_constraint.get("cuisine")
    if not wanted:
        return None, None
    found: set[str] = set()
    for i in range(min(q.days, len(plan))):
        for meal in ("breakfast", "lunch", "dinner"):
            value = plan[i][meal]
            if _filled(value):
                name, city = name_city(value)
                if city == q.org:
                    break  # the benchmark's `continue` skips the rest of the day
                row = box.restaurant(name, city)
                if row is not None:
                    found.update(c for c in wanted if c in row["Cuisines"])
    if len(found) == len(wanted):
        return True, None
    missing = next((c for c in wanted if c not in found), None)
    return False, f"The cuisine {missing} is not satisfied."


_RULE_TEXT = {
    "smoking": "No smoking",
    "parties": "No parties",
    "children under 10": "No children under 10",
    "visitors": "No visitors",
    "pets": "No pets",
}
_ROOM_RULES = {
    "not shared room": lambda room: room == "Shared room",
    "shared room": lambda room: room != "Shared room",
    "private room": lambda room: room != "Private room",
    "entire room": lambda room: room != "Entire home/apt",
}
"""For each requested room type, the room types that break it."""


def hard_room_rule(q: Query, plan: Sequence[Mapping[str, Any]], box: Sandbox) -> Check:
    rule = q.local_constraint.get("house rule")
    if rule is None:
        return None, None
    for i in range(min(q.days, len(plan))):
        value = plan[i]["accommodation"]
        if _filled(value):
            rows = box.accommodation_rows(*name_city(value))
            if rows and rule in _RULE_TEXT and _RULE_TEXT[rule] in str(rows[0]["house_rules"]):
                return False, f"The house rule should be {rule}."
    return True, None


def hard_transportation(q: Query, plan: Sequence[Mapping[str, Any]], box: Sandbox) -> Check:
    rule = q.local_constraint.get("transportation")
    if rule is None:
        return None, None
    for i in range(min(q.days, len(plan))):
        value = plan[i]["transportation"]
        forbidden = {"no flight": "Flight", "no self-driving": "Self-driving"}.get(rule)
        if _filled(value) and forbidden is not None and forbidden in value:
            return False, f"The transportation should not be {rule}."
    return True, None


def hard_room_type(q: Query, plan: Sequence[Mapping[str, Any]], box: Sandbox) -> Check:
    room = q.local_constraint.get("room type")
    if room is None:
        return None, None
    breaks = _ROOM_RULES.get(room)
    for i in range(min(q.days, len(plan))):
        value = plan[i]["accommodation"]
        if _filled(value):
            rows = box.accommodation_rows(*name_city(value))
            if rows and breaks is not None and breaks(rows[0]["room type"]):
                return False, f"The room type should be {room}."
    return True, None


def total_cost(q: Query, plan: Sequence[Mapping[str, Any]], box: Sandbox) -> float:
    """The benchmark's `get_total_cost`."""
    people = q.people_number
    total = 0.0
    for i in range(min(q.days, len(plan))):
        unit = plan[i]
        value = unit["transportation"]
        if _filled(value):
            start, end = from_to(value)
            if start is None or end is None:
                start, end = from_to(unit["current_city"])
            if start is not None and end is not None:
                lowered = value.lower()
                if "flight number" in lowered:
                    if "Flight Number: " not in value:
                        raise CheckCrash("a flight value without 'Flight Number: '")
                    number = value.split("Flight Number: ")[1].split(",")[0]
                    prices = [f["Price"] for f in box.flights if f["Flight Number"] == number]
                    price = prices[0] if prices else None
                    if price is not None:
                        total += price * people
                elif "self-driving" in lowered or "taxi" in lowered:
                    mode = "self-driving" if "self-driving" in lowered else "taxi"
                    cost = box.distance_cost(start, end, mode)
                    if cost is None:
                        raise CheckCrash(f"a {mode} route without a cost")
                    total += cost * math.ceil(people / (5 if mode == "self-driving" else 4))
        for meal in ("breakfast", "lunch", "dinner"):
            if _filled(unit[meal]):
                row = box.restaurant(*name_city(unit[meal]))
                if row is not None:
                    total += row["Average Cost"] * people
        if _filled(unit["accommodation"]):
            rows = box.accommodation_rows(*name_city(unit["accommodation"]))
            if rows:
                total += rows[0]["price"] * math.ceil(people / rows[0]["maximum occupancy"])
    return total


def hard_cost(q: Query, plan: Sequence[Mapping[str, Any]], box: Sandbox) -> Check:
    return bool(total_cost(q, plan, box) <= q.budget), None


COMMONSENSE = {
    "is_reasonable_visiting_city": reasonable_visiting_city,
    "is_valid_restaurants": valid_restaurants,
    "is_valid_attractions": valid_attractions,
    "is_valid_accommodation": valid_accommodation,
    "is_valid_transportation": valid_transportation,
    "is_valid_information_in_current_city": information_in_current_city,
    "is_valid_information_in_sandbox": information_in_sandbox,
    "is_not_absent": not_absent,
}
HARD = {
    "valid_cuisine": hard_cuisine,
    "valid_room_rule": hard_room_rule,
    "valid_transportation": hard_transportation,
    "valid_room_type": hard_room_type,
    "valid_cost": hard_cost,
}


def _run(check: Any, q: Query, plan: Sequence[Mapping[str, Any]], box: Sandbox) -> Check:
    try:
        return check(q, plan, box)
    except (CheckCrash, TypeError, IndexError, KeyError, ValueError, AttributeError) as error:
        return False, f"the benchmark's check raises here ({type(error).__name__}: {error})"


def benchmark_plan(merged_plan: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The merged plan in the benchmark's format: {"days": d, "current_city": ..., ...}."""
    return [
        {"days": row["day"], **{name: row[name] for name in PLAN_FIELDS}} for row in merged_plan
    ]


@dataclass(frozen=True)
class BenchmarkResult:
    commonsense: dict[str, Check]
    hard: dict[str, Check] | None
    metrics: dict[str, float]


def evaluate(q: Query, plan: Sequence[Mapping[str, Any]], box: Sandbox) -> BenchmarkResult:
    """The benchmark's evaluation of one plan (its `eval.py` per query), in its format."""
    applicable = 1 + sum(
        1 for key in LEVEL_CONSTRAINTS.get(q.level, ()) if q.local_constraint.get(key) is not None
    )
    delivered = any(_filled(row.get(name)) for row in plan for name in PLAN_FIELDS)
    if not delivered:
        zero = dict.fromkeys(
            ("delivery", "commonsense_passed", "commonsense_micro", "commonsense_macro",
             "hard_passed", "hard_micro", "hard_macro", "final_pass"), 0.0,
        )  # fmt: skip
        return BenchmarkResult({}, None, {**zero, "hard_applicable": float(applicable)})
    commonsense = {name: _run(check, q, plan, box) for name, check in COMMONSENSE.items()}
    hard = None
    if commonsense["is_not_absent"][0] and commonsense["is_valid_information_in_sandbox"][0]:
        hard = {name: _run(check, q, plan, box) for name, check in HARD.items()}
    passed = sum(1 for ok, _ in commonsense.values() if ok is True)
    hard_passed = sum(1 for ok, _ in (hard or {}).values() if ok is True)
    commonsense_all = hard is not None and all(ok is not False for ok, _ in commonsense.values())
    hard_all = hard is not None and all(ok is not False for ok, _ in hard.values())
    metrics = {
        "delivery": 1.0,
        "commonsense_passed": float(passed),
        "commonsense_micro": passed / len(COMMONSENSE),
        "commonsense_macro": float(commonsense_all),
        "hard_passed": float(hard_passed),
        "hard_applicable": float(applicable),
        "hard_micro": hard_passed / applicable,
        "hard_macro": float(hard_all),
        "final_pass": float(commonsense_all and hard_all),
    }
    return BenchmarkResult(commonsense, hard, metrics)


def pooled_rates(episodes: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The benchmark's split-level rates from per-episode metrics: micro rates pooled over the
    checks (passes over 8 per query, and over the applicable hard constraints), macro rates and
    delivery over the queries."""
    n = len(episodes)
    if not n:
        raise ValueError("no episodes to pool")
    total = {k: math.fsum(e[k] for e in episodes) for k in episodes[0]}
    return {
        "delivery_rate": total["delivery"] / n,
        "commonsense_micro": total["commonsense_passed"] / (len(COMMONSENSE) * n),
        "commonsense_macro": total["commonsense_macro"] / n,
        "hard_micro": total["hard_passed"] / total["hard_applicable"],
        "hard_macro": total["hard_macro"] / n,
        "final_pass_rate": total["final_pass"] / n,
    }
