"""Each agent's prompt, with what the reference's prompt holds (`formatting.py@06bd07e`, the
`partitioned_roles` prompt without its forced-decoding contract, since the env takes whole
completions): the role and its slots, a per-day checklist from the route scaffold, the hard
constraints the role answers for, the budget contract, the team's rules, the query and its
structured fields, the scaffold, and the catalog of the role's own options (exact values to
copy, full-party costs, usable days, eligibility), then the output contract. The wording is
this package's; the figures are computed as the reference computes them.

Budget contract: the cheapest transport plan that meets the constraints (flights and taxis
mixed, or self-driving throughout) plus the cheapest lodging for each consecutive city run that
meets its minimum nights is the logistics floor; the cheapest distinct restaurants for every
stay-day meal that together serve each requested cuisine are the experience floor (cents, costs
rounded up, the budget down). When both fit, logistics may spend its floor and half the slack
(rounded up) and experience the rest; otherwise the budget is split in proportion to the floors.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, InvalidOperation
from typing import Any

from collabzoo.tasks.travelplanner.rewards import TravelTask
from collabzoo.tasks.travelplanner.rewards.catalog import (
    PLAN_FIELDS,
    Entry,
    Route,
    canonical,
    owned_slots,
    satisfies_house_rule,
    satisfies_room_type,
    satisfies_transport_rule,
)

ROLE_NAMES = ("LOGISTICS", "EXPERIENCE")
_NO_COST = 10**18


def cents(value: Any, *, budget: bool = False) -> int | None:
    """Money as whole cents: a cost rounded up, a budget rounded down (so a plan within the
    shown caps is within the evaluator's budget)."""
    try:
        amount = Decimal(str(value))
    except (InvalidOperation, TypeError, ValueError):
        return None
    if not amount.is_finite() or amount < 0:
        return None
    return int((amount * 100).to_integral_value(rounding=ROUND_FLOOR if budget else ROUND_CEILING))


def money(value: int | None) -> str:
    return "unknown" if value is None else f"{value / 100:.2f}"


def _day_list(days: Sequence[int]) -> str:
    return ",".join(map(str, days)) if days else "none"


def _first_per_identity(entries: Iterable[Entry]) -> list[Entry]:
    """The row a "Name, City" value reaches (the first of its name and city)."""
    first: dict[tuple[str, str, str], Entry] = {}
    for entry in entries:
        first.setdefault(entry.identity, entry)
    return list(first.values())


def _unique_sorted(entries: Iterable[Entry], key: Any) -> list[Entry]:
    return sorted(dict.fromkeys(entries), key=key)


def _requested_cuisines(task: TravelTask) -> tuple[str, ...]:
    raw = task.constraint("cuisine")
    if not raw:
        return ()
    values = raw if isinstance(raw, (list, tuple, set)) else [raw]
    return tuple(dict.fromkeys(c for c in map(canonical, values) if c != "-"))


def _on_route(entry: Entry, day: int, route: Route, dates: Sequence[str]) -> bool:
    return (
        route[0] == "move"
        and canonical(entry.origin) == canonical(route[1])
        and canonical(entry.destination) == canonical(route[2])
        and (
            entry.mode != "flight"
            or not entry.date
            or day - 1 >= len(dates)
            or entry.date == str(dates[day - 1])
        )
    )


def transport_days(entry: Entry, task: TravelTask) -> tuple[int, ...]:
    return tuple(
        day
        for day, route in enumerate(task.scaffold, start=1)
        if _on_route(entry, day, route, task.dates)
    )


def stay_days(city: str, task: TravelTask) -> tuple[int, ...]:
    return tuple(
        day
        for day, route in enumerate(task.scaffold, start=1)
        if route[0] == "stay" and canonical(route[2]) == canonical(city)
    )


def _city_runs(task: TravelTask) -> list[tuple[str, list[int]]]:
    """Consecutive nights by the city each day ends in (every day but the last)."""
    runs: list[tuple[str, list[int]]] = []
    for day, route in enumerate(task.scaffold[:-1], start=1):
        if runs and canonical(runs[-1][0]) == canonical(route[2]):
            runs[-1][1].append(day)
        else:
            runs.append((route[2], [day]))
    return runs


def lodging_days(entry: Entry, task: TravelTask) -> tuple[int, ...]:
    """The nights of the city runs long enough for the lodging's minimum stay."""
    return tuple(
        day
        for city, days in _city_runs(task)
        if canonical(city) == canonical(entry.city) and len(days) >= entry.minimum_nights
        for day in days
    )


def _party_cents(entry: Entry, task: TravelTask) -> int | None:
    return cents(entry.party_cost(task.people_number))


@dataclass(frozen=True)
class BudgetContract:
    team: int
    floors: tuple[int | None, int | None]
    caps: tuple[int, int]
    feasible: bool
    reason: str


def _transport_floor(task: TravelTask) -> int | None:
    rule = task.constraint("transportation")
    legs: list[list[tuple[str, int]]] = []
    for day, route in enumerate(task.scaffold, start=1):
        if route[0] != "move":
            continue
        options = [
            (e.mode, c)
            for e in task.catalog.transportation
            if (c := _party_cents(e, task)) is not None
            and satisfies_transport_rule(e, rule)
            and _on_route(e, day, route, task.dates)
        ]
        if not options:
            return None
        legs.append(options)
    if not legs:
        return 0
    totals = []
    for driving in (False, True):  # flights and taxis mix; self-driving mixes with neither
        costs = [[c for mode, c in leg if (mode == "self-driving") == driving] for leg in legs]
        if all(costs):
            totals.append(sum(min(c) for c in costs))
    return min(totals) if totals else None


def _lodging_floor(task: TravelTask) -> int | None:
    total = 0
    room, rule = task.constraint("room type"), task.constraint("house rule")
    for city, days in _city_runs(task):
        nights = len(days)
        options = [
            c * nights
            for e in _first_per_identity(task.catalog.accommodations)
            if canonical(e.city) == canonical(city)
            and satisfies_room_type(e, room)
            and satisfies_house_rule(e, rule)
            and e.minimum_nights <= nights
            and (c := _party_cents(e, task)) is not None
        ]
        if not options:
            return None
        total += min(options)
    return total


def _meal_floor(task: TravelTask) -> int | None:
    """The cheapest distinct restaurants for three meals a stay day, per city, covering every
    requested cuisine over the trip (a 0/1 knapsack over (meals, cuisines covered))."""
    meals: dict[str, tuple[str, int]] = {}
    for route in task.scaffold:
        if route[0] == "stay":
            city, count = meals.get(canonical(route[2]), (route[2], 0))
            meals[canonical(route[2])] = (city, count + 3)
    wanted = _requested_cuisines(task)
    bit = {name: i for i, name in enumerate(wanted)}
    if not meals:
        return None if wanted else 0
    trip: dict[int, int] = {0: 0}
    for city, needed in meals.values():
        entries = sorted(
            _first_per_identity(
                e for e in task.catalog.restaurants if canonical(e.city) == canonical(city)
            ),
            key=lambda e: e.name.casefold(),
        )
        best: dict[tuple[int, int], int] = {(0, 0): 0}
        for entry in entries:
            cost = _party_cents(entry, task)
            if cost is None:
                continue
            served = {canonical(c) for c in entry.cuisines}
            cover = sum(1 << i for name, i in bit.items() if name in served)
            grown = dict(best)
            for (count, mask), spent in best.items():
                if count < needed:
                    key = (count + 1, mask | cover)
                    grown[key] = min(grown.get(key, spent + cost), spent + cost)
            best = grown
        done = {mask: spent for (count, mask), spent in best.items() if count == needed}
        if not done:
            return None
        merged: dict[int, int] = {}
        for old, old_cost in trip.items():
            for mask, spent in done.items():
                merged[old | mask] = min(merged.get(old | mask, old_cost + spent), old_cost + spent)
        trip = merged
    return trip.get((1 << len(wanted)) - 1)


def budget_contract(task: TravelTask) -> BudgetContract:
    team = cents(task.budget or 0, budget=True) or 0
    transport, lodging = _transport_floor(task), _lodging_floor(task)
    logistics = transport + lodging if transport is not None and lodging is not None else None
    experience = _meal_floor(task)
    if team <= 0:
        feasible, reason = False, "non_positive_budget"
    elif logistics is None:
        feasible, reason = False, "no_constraint_eligible_logistics_plan"
    elif experience is None:
        feasible, reason = False, "no_grounded_diverse_meal_plan"
    elif logistics + experience > team:
        feasible, reason = False, "minimum_role_costs_exceed_budget"
    else:
        feasible, reason = True, "feasible"
    if feasible:
        assert logistics is not None and experience is not None
        logistics_cap = logistics + (team - logistics - experience + 1) // 2
    elif logistics is not None and experience is not None and logistics + experience:
        logistics_cap = team * logistics // (logistics + experience)
    else:
        logistics_cap = (team + 1) // 2
    return BudgetContract(
        team, (logistics, experience), (logistics_cap, team - logistics_cap), feasible, reason
    )


def transport_value(entry: Entry) -> str:
    """The exact value a transport option is written as."""
    if entry.mode == "flight":
        return f"Flight Number: {entry.name}, from {entry.origin} to {entry.destination}"
    mode = "Self-driving" if entry.mode == "self-driving" else "Taxi"
    return f"{mode}, from {entry.origin} to {entry.destination}"


def _quoted(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _cost_key(value: int | None) -> int:
    return _NO_COST if value is None else value


def logistics_catalog(task: TravelTask) -> list[str]:
    rule = task.constraint("transportation")
    room, house = task.constraint("room type"), task.constraint("house rule")

    def moves(e: Entry) -> bool:
        c = _party_cents(e, task)
        return satisfies_transport_rule(e, rule) and c is not None and bool(transport_days(e, task))

    def sleeps(e: Entry) -> bool:
        ok = satisfies_room_type(e, room) and satisfies_house_rule(e, house)
        return ok and _party_cents(e, task) is not None and bool(lodging_days(e, task))

    lines = [
        "TRANSPORTATION OPTIONS (copy the quoted value exactly; team_cost covers the whole party)"
    ]
    options = _unique_sorted(
        task.catalog.transportation,
        key=lambda e: (
            not moves(e), e.date or "9999-99-99", e.origin.casefold(), e.destination.casefold(),
            _cost_key(_party_cents(e, task)), e.mode, e.name.casefold(),
        ),
    )  # fmt: skip
    for e in options:
        lines.append(
            f"- {_quoted(transport_value(e))} | team_cost={money(_party_cents(e, task))}"
            f" | days={_day_list(transport_days(e, task))} | eligible={_yes(moves(e))}"
        )
    lines += [
        "",
        "ACCOMMODATION OPTIONS (copy the quoted value exactly; team_cost_per_night covers every "
        "room the party needs)",
    ]
    stays = _unique_sorted(
        _first_per_identity(task.catalog.accommodations),
        key=lambda e: (
            e.city.casefold(),
            not sleeps(e),
            _cost_key(_party_cents(e, task)),
            e.name.casefold(),
        ),
    )
    for e in stays:
        lines.append(
            f"- {_quoted(f'{e.name}, {e.city}')} | team_cost_per_night="
            f"{money(_party_cents(e, task))} | days={_day_list(lodging_days(e, task))}"
            f" | room={e.room_type} | rules={e.house_rules or 'none'}"
            f" | min_nights={format(e.minimum_nights, '.15g')} | eligible={_yes(sleeps(e))}"
        )
    return lines


def experience_catalog(task: TravelTask) -> list[str]:
    wanted = set(_requested_cuisines(task))

    def hits(e: Entry) -> bool:
        return bool(wanted & {canonical(c) for c in e.cuisines})

    def usable(e: Entry) -> bool:
        return _party_cents(e, task) is not None and bool(stay_days(e.city, task))

    lines = [
        "RESTAURANT OPTIONS (copy the quoted value exactly; team_cost_per_meal covers the whole "
        "party)"
    ]
    restaurants = _unique_sorted(
        _first_per_identity(task.catalog.restaurants),
        key=lambda e: (
            e.city.casefold(), not usable(e), not hits(e), _cost_key(_party_cents(e, task)),
            e.name.casefold(),
        ),
    )  # fmt: skip
    for e in restaurants:
        lines.append(
            f"- {_quoted(f'{e.name}, {e.city}')} | team_cost_per_meal="
            f"{money(_party_cents(e, task))} | days={_day_list(stay_days(e.city, task))}"
            f" | cuisines={', '.join(e.cuisines) or 'unknown'} | eligible={_yes(usable(e))}"
        )
    lines += ["", "ATTRACTION OPTIONS (one quoted value per stay day; never join several)"]
    sights = _unique_sorted(
        _first_per_identity(task.catalog.attractions),
        key=lambda e: (e.city.casefold(), e.name.casefold()),
    )
    for e in sights:
        days = stay_days(e.city, task)
        value = _quoted(f"{e.name}, {e.city}")
        lines.append(f"- {value} | days={_day_list(days)} | eligible={_yes(bool(days))}")
    return lines


def scaffold_lines(task: TravelTask) -> list[str]:
    lines = []
    for day, (kind, start, end) in enumerate(task.scaffold, start=1):
        date = f" date={task.dates[day - 1]}" if day <= len(task.dates) else ""
        if kind == "move":
            city = _quoted(f"from {start} to {end}")
            lines.append(
                f"- day={day}{date} kind=move current_city={city} transportation=an exact "
                "option for this route"
            )
        else:
            lines.append(
                f"- day={day}{date} kind=stay current_city={_quoted(end or 'unknown')} "
                'transportation="-"'
            )
    return lines


def checklist(task: TravelTask, agent: int) -> list[str]:
    lines = ["DAY-BY-DAY CHECKLIST OF YOUR SLOTS (from the shared route scaffold)"]
    last = len(task.scaffold)
    for day, (kind, start, end) in enumerate(task.scaffold, start=1):
        if agent == 0:
            city = _quoted(f"from {start} to {end}" if kind == "move" else end)
            travel = (
                f"REQUIRED, an eligible option whose days include {day}"
                if kind == "move"
                else 'EMPTY, write "-"'
            )
            sleep = (
                'EMPTY, write "-"'
                if day == last
                else f"REQUIRED, an eligible option whose days include {day}"
            )
            lines.append(
                f"- day={day}: current_city exactly {city}; transportation {travel}; "
                f"accommodation {sleep}."
            )
        elif kind == "move":
            lines.append(f'- day={day}: breakfast, attraction, lunch and dinner EMPTY: "-" each.')
        else:
            lines.append(
                f"- day={day}: breakfast, lunch and dinner REQUIRED, three different eligible "
                f"restaurants whose days include {day}; attraction REQUIRED, one eligible "
                f"attraction whose days include {day}."
            )
    return lines


def duties(task: TravelTask, agent: int) -> list[str]:
    if agent == 0:
        return [
            "HARD CONSTRAINTS YOU ANSWER FOR",
            "- Pick only options marked eligible=yes, on a day their days list names; an eligible "
            "lodging's minimum stay fits its whole consecutive city run.",
            "- Every lodging you pick must meet a room-type or house-rule requirement.",
            "- Keep one lodging through a city run when its minimum nights need it. Never combine "
            "self-driving with a flight or a taxi in one trip.",
        ]
    wanted = _requested_cuisines(task)
    return [
        "HARD CONSTRAINTS YOU ANSWER FOR",
        f"- Cuisines to cover: {json.dumps(list(wanted)) if wanted else 'none'}. Together the "
        "restaurants of your required meals must serve each of them at least once.",
        "- A restaurant serving none of them may still fill another meal.",
        "- Every meal at a different grounded restaurant, every stay day a different single "
        "grounded attraction; never several attractions in one slot.",
    ]


def contract_lines(task: TravelTask, agent: int) -> list[str]:
    contract = budget_contract(task)
    status = (
        "feasible=yes: both caps include the role's cheapest grounded choice and share the "
        "remaining slack, so two agents within their caps stay within the team budget."
        if contract.feasible
        else f"feasible=no ({contract.reason}): the caps still add up to the team budget but "
        "cannot promise a feasible plan; keep costs low and still fill every required slot."
    )
    return [
        "TEAM BUDGET CONTRACT",
        f"- team_budget={money(contract.team)}",
        f"- logistics_floor={money(contract.floors[0])}",
        f"- experience_floor={money(contract.floors[1])}",
        f"- logistics_cap={money(contract.caps[0])}",
        f"- experience_cap={money(contract.caps[1])}",
        f"- YOUR_ROLE={ROLE_NAMES[agent]}; YOUR_CAP={money(contract.caps[agent])}; "
        f"YOUR_FLOOR={money(contract.floors[agent])}",
        f"- {status}",
        "Count each chosen option's full-party cost once per use: transport and every night of "
        'lodging are LOGISTICS, every meal is EXPERIENCE; cities, attractions and "-" are free. '
        "Stay within YOUR_CAP, but never leave a required slot empty or ungrounded to save money.",
    ]


@functools.lru_cache(maxsize=256)
def _cached_prompt(task: TravelTask, agent: int) -> str:
    days = task.days
    slots = owned_slots(agent, days)
    own = ", ".join(f"(day {d}, {f})" for d, f in slots)
    if agent == 0:
        role = (
            "You own LOGISTICS: current_city, transportation and accommodation on every day. "
            'Answer every one of these slots, with "-" where the plan leaves it empty. Do not '
            "answer breakfast, attraction, lunch or dinner: those are Agent 1's."
        )
    else:
        role = (
            "You own the DAILY EXPERIENCE: breakfast, attraction, lunch and dinner on every day. "
            'Answer every one of these slots, with "-" where the plan leaves it empty. Do not '
            "answer current_city, transportation or accommodation: those are Agent 0's."
        )
    constraints = json.dumps(dict(task.local_constraint or {}), ensure_ascii=False, sort_keys=True)
    catalog = logistics_catalog(task) if agent == 0 else experience_catalog(task)
    sections = [
        f"You are Agent {agent} of a travel-planning team of two. Both agents read the same "
        "request and answer at the same time, without seeing each other's answer. A fixed merger "
        "combines the two answers into one itinerary, and both agents get the same reward for it.",
        f"YOUR ROLE\n{role}",
        f"YOUR SLOTS ({len(slots)})\n{own}",
        "\n".join(checklist(task, agent)),
        "\n".join(duties(task, agent)),
        "\n".join(contract_lines(task, agent)),
        "TEAM RULES\n"
        f"- The itinerary has {days * len(PLAN_FIELDS)} slots: {days} days x "
        f"{len(PLAN_FIELDS)} fields; answer exactly your {len(slots)}, one assignment each.\n"
        "- A slot is (day, field). A slot both agents answer with different values becomes a "
        "conflict and is lost; the same value twice wastes it.\n"
        '- Write "-" for a slot that is meant to be empty; a slot you leave out counts as '
        "missing.\n"
        '- current_city is "from A to B" on a travel day and the one city on a stay day. The trip '
        "leaves the origin, visits the requested number of cities and comes back on the last "
        "day.\n"
        '- A travel day needs its transportation; a stay day has "-" there and needs breakfast, '
        'an attraction, lunch and dinner (these may be "-" on a travel day). Lodging is needed '
        "every day but the last.\n"
        '- Use "-" only in those cases, not because you are unsure.\n'
        "- Use only places and facts from the request, its constraints and the catalog below: "
        "invent no price, flight number, restaurant, attraction or lodging.\n"
        '- Write restaurants, attractions and lodging as "Name, City" and one attraction per '
        "slot; copy a transport option whole (its mode or flight number and its route).",
        f"FIELDS\n{', '.join(PLAN_FIELDS)}",
        f"TRIP REQUEST\n{task.query}",
        "STRUCTURED CONSTRAINTS\n"
        f"origin={task.org}\ndestination={task.dest}\ndays={days}\n"
        f"dates={list(task.dates)}\npeople={task.people_number}\nbudget={task.budget}\n"
        f"local_constraints={constraints}",
        "ROUTE SCAFFOLD (from the dated routes of the reference information only: it fixes which "
        "days move and which stay, and chooses nothing else)\n" + "\n".join(scaffold_lines(task)),
        "YOUR CATALOG\n" + "\n".join(catalog),
        "OUTPUT\n"
        "- Answer with one JSON object and nothing else: no Markdown fence, no text before or "
        "after it.\n"
        f'- Exactly two keys: "agent_id" (the integer {agent}) and "assignments" (a list of '
        f"exactly {len(slots)} objects).\n"
        '- Each object has exactly "day" (an integer), "field" (one of the fields above) and '
        '"value" (a string copied from the catalog, or "-").\n'
        f'- Begin with {{"agent_id": {agent}, "assignments": [ and end with ]}}.',
    ]
    return "\n\n".join(sections)


def role_prompt(task: TravelTask, agent: int) -> str:
    return _cached_prompt(task, agent)
