"""The reference's checks of a merged plan against the query's own catalog (its evaluator, never
a target plan): which slots are valid, grounding, the eight soft commonsense checks, the hard
constraints that apply, and the pass/fail end metrics.

Slot validity: current_city must be the scaffold's day ("from A to B" on a move day, the single
city on a stay day) through allowed cities; transportation "-" is valid on a stay day only,
otherwise it must name exactly one catalog option on the scaffold's route (a flight also on the
day's date); an entity slot is valid when it is empty and not required, or when every entity in
it ("Name, City"; attractions split on ";") is in the catalog and in the right city (lodging:
the city the day ends in; the others: either city of the day).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from collabzoo.tasks.travelplanner.rewards.catalog import (
    COST_FIELDS,
    MEAL_FIELDS,
    PLAN_FIELDS,
    TRANSPORT_RULES,
    Entry,
    Route,
    Slot,
    canonical,
    owned_slots,
    parse_current_city,
    satisfies_house_rule,
    satisfies_room_type,
    satisfies_transport_rule,
    split_attractions,
)
from collabzoo.tasks.travelplanner.rewards.parsing import Merge
from collabzoo.tasks.travelplanner.rewards.task import TravelTask

COMMONSENSE = (
    "reasonable_route",
    "restaurant_diversity",
    "attraction_diversity",
    "minimum_nights",
    "transport_consistency",
    "within_current_city",
    "within_reference",
    "complete_information",
)
"""The reference's eight commonsense checks, each soft in [0, 1], passing at 1."""
_CATEGORY = {
    "breakfast": "restaurant",
    "lunch": "restaurant",
    "dinner": "restaurant",
    "attraction": "attraction",
    "accommodation": "accommodation",
}
_EPSILON = 1e-9


def _mean(values: Sequence[float], default: float = 0.0) -> float:
    return sum(values) / len(values) if values else default


def _harmonic(values: Sequence[float]) -> float:
    if not values or any(v <= 0.0 for v in values):
        return 0.0
    return len(values) / sum(1.0 / v for v in values)


def _same_route(actual: Route | None, expected: Route | None) -> bool:
    return (
        actual is not None
        and expected is not None
        and actual[0] == expected[0]
        and canonical(actual[1]) == canonical(expected[1])
        and canonical(actual[2]) == canonical(expected[2])
    )


def _in_cities(entry: Entry, cities: Iterable[str]) -> bool:
    return bool(entry.city) and canonical(entry.city) in {canonical(c) for c in cities if c}


@dataclass(frozen=True)
class PlanCheck:
    """The reference evaluator's scores of one plan (the keys of its details, unprefixed)."""

    slot_validity: dict[Slot, float]
    scores: dict[str, float]
    commonsense_soft: dict[str, float]
    commonsense_pass: dict[str, float]
    hard_soft: dict[str, float]
    hard_pass: dict[str, float]

    def required_validity(self, task: TravelTask) -> dict[Slot, float]:
        return {slot: self.slot_validity.get(slot, 0.0) for slot in task.required}


def _route(task: TravelTask, parsed: Sequence[Route | None]) -> dict[str, float]:
    origin = canonical(task.org)
    current = origin
    continuity: list[float] = []
    compressed = [origin]
    for route in parsed:
        if route is None:
            continuity.append(0.0)
            continue
        start, end = canonical(route[1]), canonical(route[2])
        continuity.append(float(start == current))
        if start == current:
            current = end
            if compressed[-1] != end:
                compressed.append(end)
    parse_rate = _mean([float(r is not None) for r in parsed])
    continuity_rate = _mean(continuity)
    starts = float(bool(parsed) and parsed[0] is not None and canonical(parsed[0][1]) == origin)
    closed = float(bool(parsed) and current == origin and continuity_rate == 1.0)
    visited = {city for city in compressed if city and city != origin}
    city_count = float(len(visited) == int(task.visiting_city_number or 0))
    allowed = set(task.catalog.allowed_cities) | {origin}
    route_cities = {canonical(c) for r in parsed if r is not None for c in r[1:]}
    allowed_rate = _mean([float(c in allowed) for c in route_cities]) if route_cities else 0.0
    middle = compressed[1:-1] if len(compressed) >= 2 else []
    no_revisit = float(len(middle) == len(set(middle)))
    destination = canonical(task.dest)
    reached = float(destination not in allowed or destination in visited)
    scaffold = task.scaffold
    matches = [
        float(_same_route(parsed[d] if d < len(parsed) else None, scaffold[d]))
        for d in range(task.days)
    ]
    match_rate = _mean(matches)
    parts = [
        parse_rate, continuity_rate, starts, closed, city_count, allowed_rate, no_revisit,
        reached, match_rate,
    ]  # fmt: skip
    return {
        "soft": _mean(parts),
        "pass": float(all(p >= 1.0 for p in parts)),
        "parse_rate": parse_rate,
        "continuity_rate": continuity_rate,
        "closed_loop": closed,
        "visiting_city_count": city_count,
        "allowed_city_rate": allowed_rate,
        "scaffold_match_rate": match_rate,
    }


def _transport_validity(task: TravelTask, value: str, day: int) -> tuple[float, Entry | None]:
    route = task.scaffold[day - 1] if day - 1 < len(task.scaffold) else None
    if canonical(value) == "-":
        return float(route is not None and route[0] == "stay"), None
    entry = task.catalog.transport(value)
    if entry is None or route is None or route[0] != "move":
        return 0.0, entry
    on_route = canonical(entry.origin) == canonical(route[1]) and canonical(
        entry.destination
    ) == canonical(route[2])
    dated = (
        entry.mode != "flight"
        or not entry.date
        or day - 1 >= len(task.dates)
        or entry.date == str(task.dates[day - 1])
    )
    return float(on_route and dated), entry


def check_plan(task: TravelTask, merged: Merge) -> PlanCheck:
    """The reference's `evaluate_reference_plan` on a merged plan."""
    days = task.days
    catalog = task.catalog
    scaffold = task.scaffold
    required = task.required
    people = max(1, int(task.people_number or 1))
    origin = canonical(task.org)
    parsed_route = [parse_current_city(merged.value(d, "current_city")) for d in range(1, days + 1)]
    route = _route(task, parsed_route)
    validity: dict[Slot, float] = {}
    selected: dict[Slot, list[Entry]] = {}
    grounded_bits: list[float] = []
    city_bits: list[float] = []
    transport_bits: list[float] = []
    fill_bits: list[float] = []
    valid_bits: list[float] = []
    costed_slots: set[Slot] = set()
    cost_complete = True
    cost = 0.0
    for day in range(1, days + 1):
        expected = scaffold[day - 1] if day - 1 < len(scaffold) else None
        if expected is None:
            cities: tuple[str, ...] = ()
        elif expected[0] == "move":
            cities = (expected[1], expected[2])
        else:
            cities = (expected[1],)
        for name in PLAN_FIELDS:
            slot = (day, name)
            value = merged.value(day, name).strip() or "-"
            filled = canonical(value) != "-"
            if filled and name in COST_FIELDS:
                costed_slots.add(slot)
            if slot in required:
                fill_bits.append(float(filled))
            if name == "current_city":
                valid = float(
                    _same_route(parsed_route[day - 1], expected)
                    and all(
                        canonical(c) in catalog.allowed_cities or canonical(c) == origin
                        for c in cities
                    )
                )
            elif name == "transportation":
                valid, entry = _transport_validity(task, value, day)
                transport_bits.append(valid)
                if filled:
                    grounded_bits.append(float(entry is not None))
                    city_bits.append(valid)
                    if entry is not None:
                        selected[slot] = [entry]
                    paid = None if entry is None else entry.party_cost(people)
                    if paid is None:
                        cost_complete = False
                    else:
                        cost += paid
            else:
                parts = (
                    (split_attractions(value) if name == "attraction" else [value])
                    if filled
                    else []
                )
                entries = [catalog.entity(p, _CATEGORY[name]) for p in parts]
                grounded = bool(entries) and all(e is not None for e in entries)
                where = cities[-1:] if name == "accommodation" else cities
                if filled:
                    grounded_bits.extend(float(e is not None) for e in entries)
                    city_bits.extend(float(e is not None and _in_cities(e, where)) for e in entries)
                in_city = grounded and all(_in_cities(e, where) for e in entries if e is not None)
                valid = float((not filled and slot not in required) or in_city)
                matched = [e for e in entries if e is not None]
                if matched:
                    selected[slot] = matched
                if filled and not grounded:
                    cost_complete = False
                if name != "attraction":
                    for entry in matched:
                        paid = entry.party_cost(people)
                        if paid is None:
                            cost_complete = False
                        else:
                            cost += paid
            validity[slot] = valid
            if slot in required:
                valid_bits.append(valid)
    coverage = len(merged.merged) / max(1, len(PLAN_FIELDS) * days)
    fill_rate = _mean(fill_bits)
    recall = _mean(valid_bits)
    precision = _mean(grounded_bits)
    f1 = _harmonic([precision, recall])
    restaurants = [e.identity for (_, f), es in selected.items() if f in MEAL_FIELDS for e in es]
    attractions = [e.identity for (_, f), es in selected.items() if f == "attraction" for e in es]
    runs: list[list[Any]] = []
    active: Entry | None = None
    for day in range(1, days + 1):
        chosen = selected.get((day, "accommodation"), [])
        entry = chosen[0] if len(chosen) == 1 else None
        if entry is None:
            active = None
            continue
        if active is not None and runs and active.identity == entry.identity:
            runs[-1][1] += 1
        else:
            runs.append([entry, 1])
        active = entry
    modes = {e.mode for (_, f), es in selected.items() if f == "transportation" for e in es}
    compatible = not ({"self-driving", "flight"} <= modes or {"self-driving", "taxi"} <= modes)
    parse_success = float(catalog.parse_success)
    soft = {
        "reasonable_route": route["soft"],
        "restaurant_diversity": len(set(restaurants)) / len(restaurants) if restaurants else 1.0,
        "attraction_diversity": len(set(attractions)) / len(attractions) if attractions else 1.0,
        "minimum_nights": _mean([float(n >= e.minimum_nights) for e, n in runs], default=1.0),
        "transport_consistency": _mean(transport_bits) * float(compatible),
        "within_current_city": _mean(city_bits),
        "within_reference": _mean([precision, route["allowed_city_rate"], parse_success]),
        "complete_information": _mean([coverage, fill_rate]),
    }
    passed = {k: float(v >= 1.0 - _EPSILON) for k, v in soft.items()}

    def known(slot: Slot) -> float:
        chosen = selected.get(slot)
        return float(bool(chosen) and all(e.cost is not None for e in chosen))

    required_costed = {s for s in required if s[1] in COST_FIELDS}
    required_cost_bits = [known(s) for s in required_costed]
    budget_cost_bits = [known(s) for s in required_costed | costed_slots]
    budget = float(task.budget or 0)
    if budget <= 0:
        margin = 0.0
    elif cost <= budget:
        margin = 1.0
    else:
        margin = max(0.0, 1.0 - (cost - budget) / budget)
    hard_soft = {"budget": recall * _mean(budget_cost_bits) * margin}
    hard_pass = {
        "budget": float(cost_complete and budget > 0 and cost <= budget and recall >= 1 - _EPSILON)
    }
    lodgings = [e for es in selected.values() for e in es if e.category == "accommodation"]
    cuisines = task.constraint("cuisine")
    if cuisines:
        wanted = list(cuisines) if isinstance(cuisines, (list, tuple, set)) else [cuisines]
        served = {
            canonical(c) for es in selected.values() for e in es if e.category == "restaurant"
            for c in e.cuisines
        }  # fmt: skip
        score = _mean([float(canonical(c) in served) for c in wanted])
        hard_soft["cuisine"] = score
        hard_pass["cuisine"] = float(score >= 1.0)
    rule = task.constraint("house rule")
    if rule:
        bits = [float(satisfies_house_rule(e, rule)) for e in lodgings]
        hard_soft["room_rule"] = _mean(bits)
        hard_pass["room_rule"] = float(bool(bits) and _mean(bits) >= 1.0)
    room = task.constraint("room type")
    if room:
        bits = [float(satisfies_room_type(e, room)) for e in lodgings]
        hard_soft["room_type"] = _mean(bits)
        hard_pass["room_type"] = float(bool(bits) and _mean(bits) >= 1.0)
    travel_rule = task.constraint("transportation")
    if travel_rule:
        options = [e for es in selected.values() for e in es if e.category == "transportation"]
        score = float(
            canonical(travel_rule) in TRANSPORT_RULES
            and all(satisfies_transport_rule(e, travel_rule) for e in options)
        )
        hard_soft["transportation"] = hard_pass["transportation"] = score
    commonsense_count = sum(passed.values())
    hard_count = sum(hard_pass.values())
    commonsense_macro = float(commonsense_count == len(passed))
    hard_macro = float(hard_count == len(hard_pass))
    nonempty = float(any(canonical(v) != "-" for v in merged.merged.values()))
    roles_complete = len(merged.parses) == 2 and all(
        p.strict and set(a) == set(owned_slots(i, days)) and len(a) == p.raw_count
        for i, (p, a) in enumerate(zip(merged.parses, merged.per_agent, strict=True))
    )
    clean = not (
        merged.overlap or merged.conflicts or merged.invalid or merged.self_duplicates
        or merged.extra
    )  # fmt: skip
    scores = {
        "assignment_coverage": coverage,
        "required_fill_rate": fill_rate,
        "required_grounded_recall": recall,
        "entity_grounding_precision": precision,
        "grounding_f1": f1,
        "commonsense_soft": _mean(list(soft.values())),
        "hard_constraint_soft": _mean(list(hard_soft.values())),
        "required_cost_completeness": _mean(required_cost_bits),
        "budget_cost_completeness": _mean(budget_cost_bits),
        "budget_margin": margin,
        "estimated_cost": cost,
        "cost_complete": float(cost_complete),
        "route_scaffold_match": float(route["scaffold_match_rate"] >= 1.0 - _EPSILON),
        "reasonable_route": route["pass"],
        "plan_delivery": nonempty,
        "required_plan_completion": float(
            roles_complete and clean and coverage >= 1 - _EPSILON and fill_rate >= 1 - _EPSILON
        ),
        "commonsense_micro": commonsense_count / len(passed),
        "commonsense_macro": commonsense_macro,
        "hard_micro": hard_count / len(hard_pass),
        "hard_macro": hard_macro,
        "budget_pass": hard_pass["budget"],
        "plan_success": float(commonsense_macro and hard_macro),
    }
    return PlanCheck(validity, scores, soft, passed, hard_soft, hard_pass)
