"""Build TravelPlanner's conformance set: answer pairs scored by the reference's own reward code,
and plans checked by TravelPlanner's own evaluation code.

`tests/test_travelplanner.py` replays `tests/data/travelplanner_conformance.json` through
collabzoo's scoring and asserts the same rewards, terms and metrics. This script made it:

1. Queries: the 45 train queries shipped for tests (`std_travelplanner.jsonl`, TravelPlanner's
   finetuning file), read by collabzoo's loader (the structured fields from the query text); the
   reference is handed each row through its own normaliser (`normalize_travelplanner_row`).
2. Answer pairs, for every query: the annotated plan split by slot ownership (as the prompt asks
   its values, and as annotated), and seeded perturbations of the plan (a repeated restaurant,
   bare names, a wrong city, a broken flight number, mixed transport, missing lodging, shuffled
   values, ...) and of the answers (all "-", an empty or truncated answer, fences and prose,
   Python literals, wrong ids, field case, string days, repeated, foreign and overlapping slots,
   triples, extra keys, blank values, copied reference text, agent 1 cut to the cap).
3. Reference rewards: `score_single_turn_response` of OpenMLRL/LLM_Collab_Travel
   (`single_turn/rewards/single_turn_reward.py@c7cb5b1` with the modules it imports, see
   REFERENCE_FILES), with the reference's shared cap; and, for the corrected cap, the same code
   with its two merger calls given each agent's slot count (`capacities=`, the merger's own
   parameter).
4. Benchmark checks: `evaluation()` of TravelPlanner's `evaluation/commonsense_constraint.py`
   and `evaluation/hard_constraint.py` (OSU-NLP-Group/TravelPlanner@da7c1d4) on the annotated
   plans, perturbed plans and merged plans, with its database tools replaced by tables of the
   query's own reference information (`database/train_ref_info.jsonl`, the same rows as JSON)
   and its city-to-state map by the approximation collabzoo uses (`rewards/benchmark.py`).
5. The split: the reference's `filter_rows` and `partition_rows` on the 45 rows; and each
   query's budget contract (`build_role_budget_contract` of `single_turn/formatting.py`: the
   floors and caps the prompts show).

    python benchmarks/travelplanner_conformance.py --reference TRAVEL_CHECKOUT \\
        --benchmark TRAVELPLANNER_CHECKOUT [--data DIR] [--output PATH]

TRAVEL_CHECKOUT holds `single_turn/` of LLM_Collab_Travel; TRAVELPLANNER_CHECKOUT the
TravelPlanner repository. Neither is imported by collabzoo; both run here only.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import hashlib
import importlib
import json
import math
import os
import random
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY))
from collabzoo.envs.records import load_records  # noqa: E402
from collabzoo.tasks.travelplanner.envs.data import tasks_from_records  # noqa: E402
from collabzoo.tasks.travelplanner.rewards import TravelTask  # noqa: E402
from collabzoo.tasks.travelplanner.rewards.catalog import (  # noqa: E402
    PLAN_FIELDS,
    owned_slots,
    reference_capacity,
)
from collabzoo.tasks.travelplanner.teams import prompt_value, split_plan  # noqa: E402

DATA_FILE = "std_travelplanner.jsonl"
TABLES_FILE = "train_ref_info.jsonl"
REFERENCE_FILES = {
    "repository": "OpenMLRL/LLM_Collab_Travel",
    "single_turn/rewards/single_turn_reward.py": "c7cb5b1",
    "single_turn/rewards/reward_shaping.py": "6dafe39",
    "single_turn/rewards/reference_evaluator.py": (
        "the newest stored version (the one README@c7cb5b1 describes: budget soft = G x emitted "
        "cost completeness x margin, required_plan_completion); 5c40b77 has G x margin"
    ),
    "single_turn/evaluation.py": "5c40b77",
    "single_turn/aggregation.py": "919ad28",
    "single_turn/parsing.py": "cbdc516",
    "single_turn/data.py": "688613b",
    "single_turn/formatting.py": "06bd07e (build_role_budget_contract: the prompts' budget caps)",
}
BENCHMARK_FILES = {
    "repository": "OSU-NLP-Group/TravelPlanner",
    "commit": "da7c1d4",
    "files": ["evaluation/commonsense_constraint.py", "evaluation/hard_constraint.py"],
}
COMMONSENSE_ORDER = (
    "is_reasonable_visiting_city",
    "is_valid_restaurants",
    "is_valid_attractions",
    "is_valid_accommodation",
    "is_valid_transportation",
    "is_valid_information_in_current_city",
    "is_valid_information_in_sandbox",
    "is_not_absent",
)
HARD_ORDER = (
    "valid_cuisine",
    "valid_room_rule",
    "valid_transportation",
    "valid_room_type",
    "valid_cost",
)
KEPT_DETAILS = (
    "required_cooperative_contribution",
    "required_grounded_recall",
    "entity_grounding_precision",
    "grounding_f1",
    "assignment_coverage",
    "commonsense_soft",
    "hard_constraint_soft",
    "required_cost_completeness",
    "budget_constraint_soft",
    "estimated_cost",
    "plan_score",
    "recovered_semantic_balance",
    "recovered_plan_score",
    "shaping/recovery_violation_rate",
    "ultimate/collaboration_success",
    "ultimate/reference_plan_delivery",
    "ultimate/required_plan_completion",
    "ultimate/reference_commonsense_micro",
    "ultimate/reference_hard_micro",
    "ultimate/reference_plan_success",
    "ultimate/reference_budget_pass",
    "ultimate/reference_route_scaffold_match",
)


# ----- perturbations ------------------------------------------------------------------------
Plan = list[dict[str, Any]]


def plan_rows(task: TravelTask) -> Plan:
    return [dict(r) for r in task.annotated_plan or () if r][: task.days]


def _filled(value: Any) -> bool:
    return isinstance(value, str) and value.strip() not in ("", "-")


def _cells(plan: Plan, names: tuple[str, ...]) -> list[tuple[int, str]]:
    return [(i, n) for i, row in enumerate(plan) for n in names if _filled(row.get(n))]


def repeat_restaurant(plan: Plan, rng: random.Random, task: TravelTask) -> Plan:
    meals = _cells(plan, ("breakfast", "lunch", "dinner"))
    if len(meals) >= 2:
        (i, a), (j, b) = rng.sample(meals, 2)
        plan[j][b] = plan[i][a]
    return plan


def bare_names(plan: Plan, rng: random.Random, task: TravelTask) -> Plan:
    for i, name in _cells(plan, ("breakfast", "lunch", "dinner", "accommodation")):
        if rng.random() < 0.5:
            plan[i][name] = plan[i][name].rsplit(",", 1)[0]
    return plan


def wrong_city(plan: Plan, rng: random.Random, task: TravelTask) -> Plan:
    cells = _cells(plan, ("breakfast", "lunch", "dinner", "accommodation"))
    if cells:
        i, name = rng.choice(cells)
        plan[i][name] = plan[i][name].rsplit(",", 1)[0] + ", " + task.org
    return plan


def broken_flight(plan: Plan, rng: random.Random, task: TravelTask) -> Plan:
    for row in plan:
        if "Flight Number: F" in str(row.get("transportation")):
            value = row["transportation"]
            row["transportation"] = value.replace("Flight Number: F", "Flight Number: F9", 1)
            break
    return plan


def mixed_transport(plan: Plan, rng: random.Random, task: TravelTask) -> Plan:
    moves = [row for row in plan if str(row.get("current_city", "")).startswith("from ")]
    if moves:
        row = moves[0]
        route = prompt_value("current_city", row["current_city"])[len("from ") :]
        start, _, end = route.partition(" to ")
        row["transportation"] = f"Self-driving, from {start} to {end}"
    return plan


def no_lodging(plan: Plan, rng: random.Random, task: TravelTask) -> Plan:
    if plan:
        plan[0]["accommodation"] = "-"
    return plan


def shuffled_values(plan: Plan, rng: random.Random, task: TravelTask) -> Plan:
    cells = _cells(plan, ("breakfast", "attraction", "lunch", "dinner"))
    values = [plan[i][n] for i, n in cells]
    rng.shuffle(values)
    for (i, n), v in zip(cells, values, strict=True):
        plan[i][n] = v
    return plan


def one_attraction(plan: Plan, rng: random.Random, task: TravelTask) -> Plan:
    for row in plan:
        if _filled(row.get("attraction")):
            row["attraction"] = row["attraction"].split(";")[0].strip()
    return plan


def expensive_lodging(plan: Plan, rng: random.Random, task: TravelTask) -> Plan:
    lodging = sorted(task.catalog.accommodations, key=lambda e: -(e.cost or 0))
    for row in plan:
        if _filled(row.get("accommodation")) and lodging:
            row["accommodation"] = f"{lodging[0].name}, {lodging[0].city}"
    return plan


PLAN_PERTURBATIONS: dict[str, Callable[[Plan, random.Random, TravelTask], Plan]] = {
    "repeat_restaurant": repeat_restaurant,
    "bare_names": bare_names,
    "wrong_city": wrong_city,
    "broken_flight": broken_flight,
    "mixed_transport": mixed_transport,
    "no_lodging": no_lodging,
    "shuffled_values": shuffled_values,
    "one_attraction": one_attraction,
    "expensive_lodging": expensive_lodging,
}


def _payload(answer: str) -> dict[str, Any]:
    return json.loads(answer)


def _dump(payload: Any) -> str:
    return json.dumps(payload, ensure_ascii=False)


def all_dash(pair: list[str], rng: random.Random, task: TravelTask) -> list[str]:
    out = []
    for answer in pair:
        payload = _payload(answer)
        for item in payload["assignments"]:
            item["value"] = "-"
        out.append(_dump(payload))
    return out


def empty_agent(pair: list[str], rng: random.Random, task: TravelTask) -> list[str]:
    pair[rng.randrange(2)] = ""
    return pair


def fenced_prose(pair: list[str], rng: random.Random, task: TravelTask) -> list[str]:
    agent = rng.randrange(2)
    pair[agent] = f"Here is my part of the plan.\n```json\n{pair[agent]}\n```\nHope this helps!"
    return pair


def truncated(pair: list[str], rng: random.Random, task: TravelTask) -> list[str]:
    agent = rng.randrange(2)
    pair[agent] = pair[agent][: int(len(pair[agent]) * rng.uniform(0.3, 0.9))]
    return pair


def python_literal(pair: list[str], rng: random.Random, task: TravelTask) -> list[str]:
    agent = rng.randrange(2)
    pair[agent] = repr(_payload(pair[agent]))
    return pair


def wrong_agent_id(pair: list[str], rng: random.Random, task: TravelTask) -> list[str]:
    agent = rng.randrange(2)
    payload = _payload(pair[agent])
    payload["agent_id"] = rng.choice([1 - agent, str(agent), None])
    pair[agent] = _dump(payload)
    return pair


def field_case(pair: list[str], rng: random.Random, task: TravelTask) -> list[str]:
    payload = _payload(pair[0])
    for item in payload["assignments"]:
        item["field"] = item["field"].title() if rng.random() < 0.5 else item["field"]
    pair[0] = _dump(payload)
    return pair


def string_days(pair: list[str], rng: random.Random, task: TravelTask) -> list[str]:
    agent = rng.randrange(2)
    payload = _payload(pair[agent])
    for item in payload["assignments"]:
        item["day"] = rng.choice([str(item["day"]), float(item["day"]), item["day"]])
    pair[agent] = _dump(payload)
    return pair


def duplicate_slot(pair: list[str], rng: random.Random, task: TravelTask) -> list[str]:
    agent = rng.randrange(2)
    payload = _payload(pair[agent])
    item = dict(rng.choice(payload["assignments"]))
    item["value"] = rng.choice([item["value"], "-"])
    payload["assignments"].append(item)
    pair[agent] = _dump(payload)
    return pair


def foreign_slot(pair: list[str], rng: random.Random, task: TravelTask) -> list[str]:
    zero, one = _payload(pair[0]), _payload(pair[1])
    taken = rng.choice(one["assignments"])
    value = taken["value"] if rng.random() < 0.5 else "Some Diner, " + task.org
    zero["assignments"].append({"day": taken["day"], "field": taken["field"], "value": value})
    pair[0] = _dump(zero)
    return pair


def out_of_range(pair: list[str], rng: random.Random, task: TravelTask) -> list[str]:
    payload = _payload(pair[0])
    payload["assignments"].append(
        {"day": task.days + 1, "field": "current_city", "value": task.org}
    )
    payload["assignments"].append({"day": 1, "field": "hotel", "value": "-"})
    pair[0] = _dump(payload)
    return pair


def capped_agent1(pair: list[str], rng: random.Random, task: TravelTask) -> list[str]:
    payload = _payload(pair[1])
    payload["assignments"] = payload["assignments"][: reference_capacity(task.days)]
    pair[1] = _dump(payload)
    return pair


def triples(pair: list[str], rng: random.Random, task: TravelTask) -> list[str]:
    agent = rng.randrange(2)
    payload = _payload(pair[agent])
    payload["assignments"] = [[i["day"], i["field"], i["value"]] for i in payload["assignments"]]
    pair[agent] = _dump(payload)
    return pair


def extra_keys(pair: list[str], rng: random.Random, task: TravelTask) -> list[str]:
    agent = rng.randrange(2)
    payload = _payload(pair[agent])
    payload["note"] = "checked every slot"
    for item in payload["assignments"][:2]:
        item["why"] = "cheap"
    pair[agent] = _dump(payload)
    return pair


def blank_values(pair: list[str], rng: random.Random, task: TravelTask) -> list[str]:
    agent = rng.randrange(2)
    payload = _payload(pair[agent])
    for item in payload["assignments"]:
        if rng.random() < 0.3:
            item["value"] = rng.choice(["", "  ", None, 3])
    pair[agent] = _dump(payload)
    return pair


def copied_reference(pair: list[str], rng: random.Random, task: TravelTask) -> list[str]:
    agent = rng.randrange(2)
    text = task.reference_information
    start = rng.randrange(max(1, len(text) - 3000))
    pair[agent] = pair[agent] + "\nReference: " + text[start : start + rng.choice([400, 3000])]
    return pair


def garbage(pair: list[str], rng: random.Random, task: TravelTask) -> list[str]:
    agent = rng.randrange(2)
    pair[agent] = rng.choice(
        [
            "I will book a flight and a hotel.",
            '{"agent_id": 1, "assignments": "all of them"}',
            "[1, 2, 3]",
            '{"agent_id": 0, "assignments": [{"day": 1, "field": "current_city"',
            "```\nnot json\n```",
        ]
    )
    return pair


ANSWER_PERTURBATIONS: dict[str, Callable[[list[str], random.Random, TravelTask], list[str]]] = {
    "all_dash": all_dash,
    "empty_agent": empty_agent,
    "fenced_prose": fenced_prose,
    "truncated": truncated,
    "python_literal": python_literal,
    "wrong_agent_id": wrong_agent_id,
    "field_case": field_case,
    "string_days": string_days,
    "duplicate_slot": duplicate_slot,
    "foreign_slot": foreign_slot,
    "out_of_range": out_of_range,
    "capped_agent1": capped_agent1,
    "triples": triples,
    "extra_keys": extra_keys,
    "blank_values": blank_values,
    "copied_reference": copied_reference,
    "garbage": garbage,
}


def answers_for(task: TravelTask, recipe: dict[str, Any]) -> list[str]:
    """The answer pair a recipe names: the annotated plan, perturbed (`plan`, seeded by
    `seed`), split by slot ownership (values as the prompt asks them, or `as_annotated`), then
    the answers perturbed (`answer`)."""
    plan = plan_rows(task)
    if recipe.get("plan"):
        rng = random.Random(f"{task.task_id}/{recipe['seed']}/plan")
        plan = PLAN_PERTURBATIONS[recipe["plan"]](copy.deepcopy(plan), rng, task)
    answers = list(split_plan(plan, task.days, as_prompted=not recipe.get("as_annotated")))
    if recipe.get("answer"):
        rng = random.Random(f"{task.task_id}/{recipe['seed']}/answer")
        answers = ANSWER_PERTURBATIONS[recipe["answer"]](answers, rng, task)
    return answers


def recipes_for(index: int) -> Iterator[tuple[dict[str, Any], str]]:
    """(recipe, capacity) of one query's cases: the oracle split under both caps, the annotated
    values for every third query, and perturbations in rotation under both caps."""
    yield {}, "reference"
    yield {}, "role"
    if index % 3 == 0:
        yield {"as_annotated": True}, "reference"
    plans, answers = sorted(PLAN_PERTURBATIONS), sorted(ANSWER_PERTURBATIONS)
    for k, capacity in enumerate(("reference", "role")):
        yield {"plan": plans[(2 * index + k) % len(plans)], "seed": k}, capacity
        yield {"answer": answers[(2 * index + k) % len(answers)], "seed": k}, capacity


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, ensure_ascii=False).encode()).hexdigest()[:16]


# ----- the reference's reward ---------------------------------------------------------------
def hub_row(task: TravelTask) -> dict[str, Any]:
    """The task as a hub row, for the reference's normaliser."""
    return {
        "query": task.query,
        "org": task.org,
        "dest": task.dest,
        "days": task.days,
        "visiting_city_number": task.visiting_city_number,
        "date": str(list(task.dates)),
        "people_number": task.people_number,
        "local_constraint": str(dict(task.local_constraint)),
        "budget": task.budget,
        "level": task.level,
        "reference_information": task.reference_information,
    }


@contextlib.contextmanager
def role_capacities(modules: list[types.ModuleType], merge: Callable[..., Any]) -> Iterator[None]:
    """The reference's two merger calls given each agent's own slot count."""

    def by_role(completions: Any, *, days: int, **kwargs: Any) -> Any:
        caps = [len(owned_slots(0, days)), len(owned_slots(1, days))]
        return merge(completions, days=days, capacities=caps)

    saved = [m.merge_agent_assignments for m in modules]
    for m in modules:
        m.merge_agent_assignments = by_role
    try:
        yield
    finally:
        for m, original in zip(modules, saved, strict=True):
            m.merge_agent_assignments = original


def reference_scorer(checkout: Path) -> tuple[Callable[..., Any], Any, Any]:
    sys.path.insert(0, str(checkout))
    reward = importlib.import_module("single_turn.rewards.single_turn_reward")
    evaluation = importlib.import_module("single_turn.evaluation")
    shaping = importlib.import_module("single_turn.rewards.reward_shaping")
    aggregation = importlib.import_module("single_turn.aggregation")
    data = importlib.import_module("single_turn.data")

    def score(answers: list[str], item: dict[str, Any], capacity: str) -> tuple[float, dict]:
        if capacity == "reference":
            return reward.score_single_turn_response(answers, batch_item=item)
        with role_capacities([evaluation, shaping], aggregation.merge_agent_assignments):
            return reward.score_single_turn_response(answers, batch_item=item)

    return score, data, aggregation


def _number(value: Any) -> Any:
    """A float kept to 12 significant digits (the test compares within 1e-9)."""
    if isinstance(value, float):
        return float(f"{value:.12g}") if math.isfinite(value) else repr(value)
    return value


TERMS = (
    "reward_component/protocol_progress",
    "reward_component/recovered_semantic",
    "reward_component/action_validity",
    "reward_component/team_action",
    "reward_component/strict_balance",
    "reward_component/strict_quality",
    "reward_component/strict_grounding",
    "reward_component/final_success",
    "reward_penalty/invalid_action",
    "reward_penalty/conflict",
    "reward_penalty/overlap",
    "reward_penalty/reference_copy",
    "reward_penalty/overlong",
)
"""The reference's reward terms (penalties as the positive amounts it subtracts)."""


def reference_outputs(reward: float, detail: dict[str, Any]) -> dict[str, Any]:
    """What the set keeps of one reference score: values in TERMS and KEPT_DETAILS order."""
    return {
        "reward": _number(reward),
        "unclamped": _number(detail["unclamped_reward"]),
        "terms": [_number(detail[k]) for k in TERMS],
        "details": [_number(detail[k]) for k in KEPT_DETAILS],
        "merged_plan": digest(detail["merged_plan"]),
        "parser_errors": detail["parser_errors"],
    }


# ----- TravelPlanner's evaluation, on the query's own tables --------------------------------
class _Table:
    """What the evaluation code's tools hold: a `data` frame, set per query."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.data = None


class _Distance(_Table):
    def run_for_evaluation(self, origin: str, destination: str, mode: str = "driving") -> dict:
        from utils.func import extract_before_parenthesis

        origin = extract_before_parenthesis(origin)
        destination = extract_before_parenthesis(destination)
        info = {"origin": origin, "destination": destination, "cost": None}
        rows = self.data[
            (self.data["origin"] == origin) & (self.data["destination"] == destination)
        ]
        if len(rows) > 0:
            duration, distance = rows["duration"].values[0], rows["distance"].values[0]
            if "day" not in duration:
                km = float(distance.replace("km", "").replace(",", ""))
                info["cost"] = int(km * 0.05) if "driving" in mode else int(km)
        return info


def benchmark_checker(checkout: Path) -> Callable[..., dict[str, Any]]:
    """TravelPlanner's `evaluation()` functions with their database replaced, per query."""
    import pandas as pd

    sys.modules.setdefault("gradio", types.ModuleType("gradio"))
    stubs = {
        "tools.flights.apis": {"Flights": _Table},
        "tools.accommodations.apis": {"Accommodations": _Table},
        "tools.restaurants.apis": {"Restaurants": _Table},
        "tools.googleDistanceMatrix.apis": {"GoogleDistanceMatrix": _Distance},
        "tools.attractions.apis": {"Attractions": _Table},
    }
    for name, attributes in stubs.items():
        module = types.ModuleType(name)
        module.__dict__.update(attributes)
        sys.modules[name] = module
    sys.path.insert(0, str(checkout))
    sys.path.insert(0, str(checkout / "evaluation"))
    background = checkout / "database" / "background"
    background.mkdir(parents=True, exist_ok=True)
    (background / "citySet_with_states.txt").write_text("Nowhere\tNowhere")
    here = os.getcwd()
    try:
        commonsense = importlib.import_module("commonsense_constraint")
        hard = importlib.import_module("hard_constraint")
    finally:
        os.chdir(here)

    def check(task: TravelTask, tables: dict[str, Any], plan: list[dict]) -> dict[str, Any]:
        flights, restaurants, lodging, attractions, distances = [], [], [], [], []
        for description, content in tables.items():
            if description.startswith("Flight from") and isinstance(content, list):
                flights += content
            elif description.startswith("Restaurants in") and isinstance(content, list):
                restaurants += content
            elif description.startswith("Accommodations in") and isinstance(content, list):
                lodging += content
            elif description.startswith("Attractions in") and isinstance(content, list):
                attractions += content
            elif description.startswith(("Self-driving from", "Taxi from")):
                route = description.split(" from ", 1)[1]
                start, _, end = route.partition(" to ")
                text = str(content)
                if "duration:" in text:
                    duration = text.split("duration:")[1].split(",")[0].strip()
                    distance = text.split("distance:")[1].split(", cost")[0].strip()
                    distances.append(
                        {
                            "origin": start,
                            "destination": end,
                            "duration": duration,
                            "distance": distance,
                        }
                    )
        frames = {
            "flight": pd.DataFrame(
                flights,
                columns=[
                    "Flight Number",
                    "Price",
                    "DepTime",
                    "ArrTime",
                    "ActualElapsedTime",
                    "FlightDate",
                    "OriginCityName",
                    "DestCityName",
                    "Distance",
                ],
            ),
            "restaurants": pd.DataFrame(
                restaurants,
                columns=["Name", "Average Cost", "Cuisines", "Aggregate Rating", "City"],
            ),
            "accommodation": pd.DataFrame(
                lodging,
                columns=[
                    "NAME",
                    "price",
                    "room type",
                    "house_rules",
                    "minimum nights",
                    "maximum occupancy",
                    "review rate number",
                    "city",
                ],
            ),
            "attractions": pd.DataFrame(
                attractions,
                columns=["Name", "Latitude", "Longitude", "Address", "Phone", "Website", "City"],
            ),
            "googleDistanceMatrix": pd.DataFrame(
                distances, columns=["origin", "destination", "duration", "distance"]
            ),
        }
        for module in (commonsense, hard):
            for name, frame in frames.items():
                getattr(module, name).data = frame
        entity_cities = {
            d.split(" in ", 1)[1]
            for d in tables
            if d.startswith(("Restaurants in", "Attractions in", "Accommodations in"))
        }
        states = dict.fromkeys(task.sandbox.cities | {task.org}, "elsewhere")
        states.update(dict.fromkeys(entity_cities, task.dest))
        commonsense.city_state_map = states
        query = {
            "org": task.org,
            "dest": task.dest,
            "days": task.days,
            "visiting_city_number": task.visiting_city_number,
            "people_number": task.people_number,
            "budget": task.budget,
            "local_constraint": dict(task.local_constraint),
            "level": task.level,
        }
        delivered = any(_filled(r.get(n)) for r in plan for n in PLAN_FIELDS)
        if not delivered:
            return {"delivered": False, "commonsense": None, "hard": None}

        def run(function: Callable[..., Any], names: tuple[str, ...]) -> str:
            """The checks' outcomes in `names` order: T passed, F failed, N not applicable;
            "raised" where the benchmark's code raises (its script would stop)."""
            try:
                outcome = function(query, plan)
            except Exception as error:
                return f"raised {type(error).__name__}"
            return "".join("N" if outcome[n][0] is None else "TF"[not outcome[n][0]] for n in names)

        cs = run(commonsense.evaluation, COMMONSENSE_ORDER)
        hd = None
        absent = COMMONSENSE_ORDER.index("is_not_absent")
        sandbox = COMMONSENSE_ORDER.index("is_valid_information_in_sandbox")
        if not cs.startswith("raised") and cs[absent] == cs[sandbox] == "T":
            hd = run(hard.evaluation, HARD_ORDER)
        return {"delivered": True, "commonsense": cs, "hard": hd}

    return check


def perturbed_plan(task: TravelTask, recipe: dict[str, Any]) -> list[dict[str, Any]]:
    """An annotated plan in the benchmark's format, perturbed as a recipe says."""
    plan = [dict(r) for r in task.annotated_plan or ()]
    if recipe.get("plan"):
        rng = random.Random(f"{task.task_id}/{recipe['seed']}/benchmark")
        plan = PLAN_PERTURBATIONS[recipe["plan"]](plan, rng, task)
    return plan


def official_plan(merged_plan: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"days": r["day"], **{n: r[n] for n in PLAN_FIELDS}} for r in merged_plan]


# ----- the set ------------------------------------------------------------------------------
def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build(reference: Path, benchmark: Path, data: Path) -> dict[str, Any]:
    score, ref_data, _ = reference_scorer(reference)
    formatting = importlib.import_module("single_turn.formatting")
    check = benchmark_checker(benchmark)
    records = load_records(data / DATA_FILE)
    tasks = tasks_from_records(records, DATA_FILE)
    tables = [json.loads(line) for line in (data / TABLES_FILE).read_text().splitlines()]
    items = [
        ref_data.normalize_travelplanner_row(hub_row(t), i, source_split="train")
        for i, t in enumerate(tasks)
    ]
    cases = []
    for index, (task, item) in enumerate(zip(tasks, items, strict=True)):
        for recipe, capacity in recipes_for(index):
            answers = answers_for(task, recipe)
            reward, detail = score(answers, item, capacity)
            case = {"task": task.task_id, "recipe": recipe, "capacity": capacity}
            case["answers"] = digest(answers)
            case["reference"] = reference_outputs(reward, detail)
            if capacity == "role" and "answer" not in recipe:
                case["benchmark"] = check(task, tables[index], official_plan(detail["merged_plan"]))
            cases.append(case)
    plans = []
    for task, table in zip(tasks, tables, strict=True):
        annotated = [dict(r) for r in task.annotated_plan or ()]
        plans.append(
            {"task": task.task_id, "recipe": {}, "benchmark": check(task, table, annotated)}
        )
        for seed, name in enumerate(
            random.Random(task.task_id).sample(sorted(PLAN_PERTURBATIONS), 2)
        ):
            recipe = {"plan": name, "seed": seed}
            changed = perturbed_plan(task, recipe)
            result = check(task, table, changed)
            plans.append(
                {
                    "task": task.task_id,
                    "recipe": recipe,
                    "plan": digest(changed),
                    "benchmark": result,
                }
            )
    contracts = {}
    for task, item in zip(tasks, items, strict=True):
        c = formatting.build_role_budget_contract(item)
        contracts[task.task_id] = [
            c.team_budget_cents, c.logistics_floor_cents, c.experience_floor_cents,
            c.logistics_cap_cents, c.experience_cap_cents, c.feasible, c.reason,
        ]  # fmt: skip
    filtered = ref_data.filter_rows(
        items, days=[3, 5], levels=["easy", "medium"], visiting_city_numbers=[1, 2],
        select_shortest=80,
    )  # fmt: skip
    train, evaluation = ref_data.partition_rows(
        filtered, train_samples=16, eval_samples=4, seed=42, stratify_by=["days", "level"],
        interleave_eval=True,
    )  # fmt: skip
    return {
        "about": (
            "TravelPlanner answer pairs scored by the reference's reward code and plans checked "
            "by TravelPlanner's evaluation code; made by benchmarks/travelplanner_conformance.py"
        ),
        "reference": {**REFERENCE_FILES, "terms": TERMS, "details": KEPT_DETAILS},
        "benchmark": {**BENCHMARK_FILES, "commonsense": COMMONSENSE_ORDER, "hard": HARD_ORDER},
        "data": {"file": DATA_FILE, "sha256": sha256(data / DATA_FILE), "tables": TABLES_FILE},
        "split": {"train": [r["id"] for r in train], "eval": [r["id"] for r in evaluation]},
        "budget_contracts": contracts,
        "cases": cases,
        "plans": plans,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reference", required=True, type=Path, help="LLM_Collab_Travel checkout")
    parser.add_argument("--benchmark", required=True, type=Path, help="TravelPlanner checkout")
    default_data = Path(
        os.environ.get("COLLABZOO_SHARED_DATA", REPOSITORY.parent / "shared" / "data")
    )
    parser.add_argument("--data", type=Path, default=default_data / "travelplanner")
    parser.add_argument(
        "--output",
        type=Path,
        default=REPOSITORY / "tests" / "data" / "travelplanner_conformance.json",
    )
    args = parser.parse_args(argv)
    document = build(args.reference.resolve(), args.benchmark.resolve(), args.data.resolve())
    args.output.write_text(json.dumps(document, ensure_ascii=False, separators=(",", ":")) + "\n")
    print(f"{len(document['cases'])} answer pairs, {len(document['plans'])} plans -> {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
