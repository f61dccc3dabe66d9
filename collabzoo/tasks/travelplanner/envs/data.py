"""TravelPlanner's queries from the hub or a local file, normalised to `TravelTask`s, and the
reference's curriculum filter and stratified split.

The hub rows (`osunlp/TravelPlanner`, config and split "validation", pinned revision) carry
every field. The offline copy shipped for tests (TravelPlanner's 45 train queries as chat
records: the planner's instructions, a user message holding the reference information and the
query, and the annotated plan) carries none: org, dest, days, dates, people_number, budget,
visiting_city_number, local_constraint and level are read from the query text here, with the
city names the reference information lists (`parse_query`). Such items are labelled "offline".
"""

from __future__ import annotations

import ast
import datetime
import json
import random
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from collabzoo.envs.records import FILE_SUFFIXES, load_records, read_file
from collabzoo.tasks.travelplanner.rewards import TravelTask
from collabzoo.tasks.travelplanner.rewards.catalog import literal_records
from collabzoo.tasks.travelplanner.rewards.task import CONSTRAINT_KEYS

HUB_ID = "osunlp/TravelPlanner"
HUB_CONFIG = "validation"
HUB_SPLIT = "validation"
HUB_REVISION = "8736504ecfc31b7f8b7e40122873c337e83fff7c"
HUB_FIELDS = (
    "query", "org", "dest", "days", "visiting_city_number", "date", "people_number",
    "local_constraint", "budget", "level", "reference_information",
)  # fmt: skip
"""What a hub row holds (and `annotated_plan` in the train and validation configs)."""
CURRICULUM = {"days": (3, 5), "level": ("easy", "medium"), "visiting_city_number": (1, 2)}
"""The reference's filter (config @c7cb5b1): 80 of the 180 validation rows."""
REFERENCE_SAMPLES = (60, 20)
"""(train, eval) rows of the reference's split of the 80."""
LOADER_SAMPLES = (16, 4)
"""The reference loader's own defaults, used where the rows cannot give 60 + 20 (the offline
copy: its 20 rows that pass the filter)."""
SEED = 42
RECORD_FORMAT = (
    "hub-layout rows (json / jsonl / csv with query, org, dest, days, visiting_city_number, date, "
    "people_number, local_constraint, budget, level, reference_information), or chat records "
    "{messages: [system, user 'Given Information:[...]\\nQuery:...', assistant plan]} as in "
    "TravelPlanner's finetuning_data/std_travelplanner.jsonl"
)

_MONTHS = {
    m: i
    for i, m in enumerate(
        (
            "january", "february", "march", "april", "may", "june", "july", "august",
            "september", "october", "november", "december",
        ),
        start=1,
    )
}  # fmt: skip
_NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "single": 1, "a": 1,
}  # fmt: skip
_NUMBER = r"(\d+|one|two|three|four|five|six|seven|eight|nine|ten)"
STATES = (
    "Alabama", "Alaska", "Arizona", "Arkansas", "California", "Colorado", "Connecticut",
    "Delaware", "Florida", "Georgia", "Hawaii", "Idaho", "Illinois", "Indiana", "Iowa", "Kansas",
    "Kentucky", "Louisiana", "Maine", "Maryland", "Massachusetts", "Michigan", "Minnesota",
    "Mississippi", "Missouri", "Montana", "Nebraska", "Nevada", "New Hampshire", "New Jersey",
    "New Mexico", "New York", "North Carolina", "North Dakota", "Ohio", "Oklahoma", "Oregon",
    "Pennsylvania", "Rhode Island", "South Carolina", "South Dakota", "Tennessee", "Texas", "Utah",
    "Vermont", "Virginia", "Washington", "West Virginia", "Wisconsin", "Wyoming",
)  # fmt: skip
CUISINES = ("American", "Chinese", "French", "Indian", "Italian", "Mediterranean", "Mexican")
_HOUSE_RULES = (
    ("parties", re.compile(r"\bparties\b", re.I)),
    ("smoking", re.compile(r"\bsmoking\b", re.I)),
    ("children under 10", re.compile(r"\bchildren under\b", re.I)),
    ("pets", re.compile(r"\bpets?\b|\bpet-friendly\b", re.I)),
    ("visitors", re.compile(r"\bvisitors\b", re.I)),
)
_ROOMS = (
    ("not shared room", re.compile(r"(?:not|n't|non-?)\s+(?:\w+\s+){0,2}shared rooms?", re.I)),
    ("entire room", re.compile(r"\bentire rooms?\b", re.I)),
    ("private room", re.compile(r"\bprivate rooms?\b", re.I)),
    ("shared room", re.compile(r"\bshared rooms?\b", re.I)),
)
_NO_SELF_DRIVING = re.compile(r"self-driv|self-drive|drive ourselves|driving ourselves", re.I)
_NO_FLIGHT = re.compile(r"\bflights?\b|\bflying\b|\bfly\b", re.I)
_ORDINAL = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)\b")
_MONTH = re.compile(r"\b(" + "|".join(m.title() for m in _MONTHS) + r")\b")
_YEAR = re.compile(r"\b(20\d\d)\b")
_DAYS = re.compile(r"\b" + _NUMBER + r"[- ]days?\b", re.I)
_WEEK = re.compile(r"\b(?:one[- ])?week\b|\bweek-long\b", re.I)
_CITY_COUNT = re.compile(
    r"\b" + _NUMBER + r"\s+(?:different\s+|distinct\s+|separate\s+|unique\s+)?cities\b", re.I
)
_BUDGET = re.compile(r"\$\s?([\d,]+(?:\.\d+)?)")
_PEOPLE = (
    re.compile(r"\bgroup of " + _NUMBER + r"\b", re.I),
    re.compile(r"\bparty of " + _NUMBER + r"\b", re.I),
    re.compile(r"\b" + _NUMBER + r" (?:people|persons|individuals|travell?ers)\b", re.I),
    re.compile(r"\bfor " + _NUMBER + r"\b(?! (?:days?|nights?|cities|weeks?)\b)", re.I),
)
_PAIR = re.compile(r"\b(?:a pair|a couple|two of us)\b", re.I)
_GIVEN = re.compile(r"^\s*Given Information:\s*", re.S)


def _count(word: str) -> int:
    word = word.lower()
    return int(word) if word.isdigit() else _NUMBER_WORDS[word]


def _fail(source: str, index: int, problem: str) -> ValueError:
    return ValueError(
        f"TravelPlanner data {source!r}, row {index}: {problem}; expected {RECORD_FORMAT}"
    )


def _positions(text: str, name: str) -> list[int]:
    return [m.start() for m in re.finditer(rf"(?<![\w]){re.escape(name)}(?![\w])", text)]


def parse_query(query: str, reference_information: str) -> dict[str, Any]:
    """The structured fields of a query, read from its text (the hub rows' fields, for a copy
    without them). City names come from the reference information: the origin is the route
    city without entity tables that the query names first, a one-city trip's destination is
    the city with entity tables, a trip of more cities goes to the US state the query names
    (the origin's name taken out first). Raises ValueError naming what it could not read."""
    text = " ".join(query.split())
    records = literal_records(reference_information)
    if not records:
        raise ValueError("the reference information holds no {Description, Content} records")
    tables: list[str] = []
    routes: list[tuple[str, str, str]] = []
    for record in records:
        description = str(record.get("Description", "")).strip()
        for prefix in ("Attractions in ", "Restaurants in ", "Accommodations in "):
            if description.startswith(prefix) and description[len(prefix) :] not in tables:
                tables.append(description[len(prefix) :])
        move = re.match(
            r"(?:Flight|Self-driving|Taxi) from (.+?) to (.+?)(?: on (\S+))?$", description
        )
        if move:
            routes.append((move.group(1), move.group(2), move.group(3) or ""))
    route_cities = {c for r in routes for c in r[:2]}
    origins = [
        (positions[0], city)
        for city in route_cities - set(tables)
        if (positions := _positions(text, city))
    ]
    if not origins:
        raise ValueError(f"no origin city found in the query {query[:80]!r}")
    org = min(origins)[1]
    days_found = _DAYS.search(text)
    days = _count(days_found.group(1)) if days_found else (7 if _WEEK.search(text) else 0)
    ordinals = [int(m.group(1)) for m in _ORDINAL.finditer(text)]
    month, year = _MONTH.search(text), _YEAR.search(text)
    if not ordinals or not month or not year:
        raise ValueError(f"no travel dates found in the query {query[:80]!r}")
    start = datetime.date(int(year.group(1)), _MONTHS[month.group(1).lower()], ordinals[0])
    if len(ordinals) > 1 and ordinals[1] >= ordinals[0]:
        span = ordinals[1] - ordinals[0] + 1
        if days and span != days:
            raise ValueError(f"the query's dates span {span} days, its length says {days}")
        days = span
    if days < 1:
        raise ValueError(f"no trip length found in the query {query[:80]!r}")
    dates = [(start + datetime.timedelta(days=d)).isoformat() for d in range(days)]
    cities = _CITY_COUNT.search(text)
    visiting = _count(cities.group(1)) if cities else 1
    if visiting == 1:
        if len(tables) != 1:
            raise ValueError(f"a one-city trip with entity tables for {tables}")
        dest = tables[0]
    else:
        without_origin = text.replace(org, " ")
        named = [(p[0], s) for s in STATES if (p := _positions(without_origin, s))]
        if not named:
            raise ValueError(f"no destination state found in the query {query[:80]!r}")
        dest = min(named)[1]
    people = 1
    for pattern in _PEOPLE:
        found = pattern.search(text)
        if found:
            people = _count(found.group(1))
            break
    else:
        if _PAIR.search(text):
            people = 2
    budget = _BUDGET.search(text)
    if not budget:
        raise ValueError(f"no budget found in the query {query[:80]!r}")
    amount = float(budget.group(1).replace(",", ""))
    constraint: dict[str, Any] = dict.fromkeys(CONSTRAINT_KEYS)
    constraint["house rule"] = next((r for r, p in _HOUSE_RULES if p.search(text)), None)
    constraint["room type"] = next((r for r, p in _ROOMS if p.search(text)), None)
    if _NO_SELF_DRIVING.search(text):
        constraint["transportation"] = "no self-driving"
    elif _NO_FLIGHT.search(text):
        constraint["transportation"] = "no flight"
    kinds = sorted((min(p), c) for c in CUISINES if (p := _positions(text, c)))
    constraint["cuisine"] = [c for _, c in kinds] or None
    count = sum(v is not None for v in constraint.values())
    return {
        "org": org,
        "dest": dest,
        "days": days,
        "date": dates,
        "visiting_city_number": visiting,
        "people_number": people,
        "budget": int(amount) if amount.is_integer() else amount,
        "local_constraint": constraint,
        "level": ("easy", "medium")[count] if count < 2 else "hard",
    }


def _literal(value: Any, default: Any) -> Any:
    """A field that the hub CSVs hold as the text of a Python literal."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text:
        return default
    for loader in (json.loads, ast.literal_eval):
        try:
            return loader(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
    return default


def _plan(value: Any) -> tuple[Mapping[str, Any], ...] | None:
    plan = _literal(value, None)
    if not isinstance(plan, list):
        return None
    return tuple(row for row in plan if isinstance(row, dict) and row)


def _task_from_hub_row(row: Mapping[str, Any], index: int, source: str, split: str) -> TravelTask:
    missing = [k for k in HUB_FIELDS if row.get(k) is None]  # `datasets` fills a gap with None
    if missing:
        found = ", ".join(sorted(str(k) for k, v in row.items() if v is not None))
        raise _fail(source, index, f"lacks {', '.join(missing)} (it has {found})")
    query = str(row.get("query") or "").strip()
    if not query:
        raise _fail(source, index, "has no query")
    try:
        days = int(row["days"])
    except (TypeError, ValueError):
        raise _fail(source, index, f"days {row['days']!r} is not a whole number") from None
    reference = row["reference_information"]
    if not isinstance(reference, str):
        reference = repr(reference)
    if days < 1 or not literal_records(reference):
        raise _fail(source, index, "has no days or no {Description, Content} records")
    constraint = _literal(row.get("local_constraint"), {})
    dates = _literal(row.get("date"), [])
    return TravelTask(
        task_id=str(row.get("id") or f"travelplanner-{split}-{index}"),
        query=query,
        org=str(row.get("org", "")),
        dest=str(row.get("dest", "")),
        days=days,
        dates=tuple(str(d) for d in dates) if isinstance(dates, list) else (),
        people_number=int(row.get("people_number") or 1),
        budget=row.get("budget") or 0,
        visiting_city_number=int(row.get("visiting_city_number") or 0),
        local_constraint=constraint if isinstance(constraint, dict) else {},
        level=str(row.get("level", "")),
        reference_information=reference,
        annotated_plan=_plan(row.get("annotated_plan")),
        source="hub",
    )


def _task_from_chat(record: Mapping[str, Any], index: int, source: str) -> TravelTask:
    messages = record.get("messages")
    if not isinstance(messages, list) or len(messages) < 2:
        raise _fail(source, index, "has no messages list")
    user = next((m for m in messages if isinstance(m, dict) and m.get("role") == "user"), None)
    content = str((user or {}).get("content", ""))
    given = _GIVEN.match(content)
    cut = content.rfind("Query:")
    if not given or cut < 0:
        raise _fail(source, index, "its user message is not 'Given Information:[...]\\nQuery:...'")
    reference = content[given.end() : cut].strip()
    query = content[cut + len("Query:") :].strip()
    try:
        fields = parse_query(query, reference)
    except ValueError as error:
        raise _fail(source, index, f"cannot read its query: {error}") from None
    answer = next((m for m in messages if isinstance(m, dict) and m.get("role") == "assistant"), {})
    constraint = fields.pop("local_constraint")
    return TravelTask(
        task_id=f"travelplanner-train-{index}",
        query=query,
        org=fields["org"],
        dest=fields["dest"],
        days=fields["days"],
        dates=tuple(fields["date"]),
        people_number=fields["people_number"],
        budget=fields["budget"],
        visiting_city_number=fields["visiting_city_number"],
        local_constraint=constraint,
        level=fields["level"],
        reference_information=reference,
        annotated_plan=_plan(answer.get("content")),
        source="offline",
    )


def tasks_from_records(
    records: Sequence[Mapping[str, Any]], source: str, split: str = "validation"
) -> list[TravelTask]:
    """Hub-layout rows or chat records (every row of one kind), in their order."""
    if not records:
        raise ValueError(f"TravelPlanner data {source!r} holds no rows; expected {RECORD_FORMAT}")
    tasks = []
    for index, record in enumerate(records):
        if not isinstance(record, Mapping):
            raise _fail(source, index, f"is a {type(record).__name__}, not an object")
        if "messages" in record:
            tasks.append(_task_from_chat(record, index, source))
        else:
            tasks.append(_task_from_hub_row(record, index, source, split))
    return tasks


def is_query_row(record: Any) -> bool:
    """A hub-layout row (it has `query`) or a chat record (`messages`): what a task is made of.
    The benchmark's `*_ref_info.jsonl` rows (tables of reference information) are neither."""
    return isinstance(record, Mapping) and ("query" in record or "messages" in record)


def query_records(path: Path) -> tuple[Path, list[dict[str, Any]]]:
    """The query rows at `path` and the file they are in. A folder (such as the benchmark's data
    folder, which also holds `train_ref_info.jsonl`) gives its one file of query rows; files of
    other rows are passed over, and none or several such files is an error naming them."""
    if not path.is_dir():
        return path, load_records(path)
    found: list[tuple[Path, list[dict[str, Any]]]] = []
    passed: list[str] = []
    for file in sorted(p for p in path.iterdir() if p.is_file()):
        if not file.name.lower().endswith(FILE_SUFFIXES):
            continue
        try:
            records = read_file(file)
        except ValueError as error:
            passed.append(f"{file.name} ({error})")
            continue
        if records and is_query_row(records[0]):
            found.append((file, records))
        else:
            passed.append(f"{file.name} (no query rows)")
    if len(found) == 1:
        return found[0]
    if found:
        names = ", ".join(f.name for f, _ in found)
        raise ValueError(
            f"{path}: several files of query rows ({names}); pass the one to play as data"
        )
    seen = "; ".join(passed) or f"no {' / '.join(FILE_SUFFIXES)} files"
    raise ValueError(f"{path}: no file of query rows ({seen})")


SHORTEST = 80
"""The reference keeps the 80 rows with the shortest reference information when more pass."""


def curriculum(tasks: Sequence[TravelTask]) -> list[TravelTask]:
    """The reference's filter: 3 or 5 days, easy or medium, 1 or 2 cities (then at most the 80
    with the shortest reference information, in their order)."""
    kept = [
        t
        for t in tasks
        if t.days in CURRICULUM["days"]
        and t.level.casefold() in CURRICULUM["level"]
        and t.visiting_city_number in CURRICULUM["visiting_city_number"]
    ]
    if len(kept) > SHORTEST:
        ranked = sorted(range(len(kept)), key=lambda i: (len(kept[i].reference_information), i))
        kept = [kept[i] for i in ranked[:SHORTEST]]
    return kept


def stratified_split(
    tasks: Sequence[TravelTask], train: int, evaluation: int, seed: int = SEED
) -> tuple[list[TravelTask], list[TravelTask]]:
    """The reference's split: groups by (days, level) in sorted order, each shuffled with one
    `random.Random(seed)`; its first eval/G rows to eval, the next train/G to train; the train
    rows shuffled once more; the eval rows interleaved (one of each group in turn)."""
    groups: dict[tuple[int, str], list[TravelTask]] = {}
    for task in tasks:
        groups.setdefault((task.days, task.level), []).append(task)
    keys = sorted(groups, key=lambda k: ((0, float(k[0])), (1, str(k[1]))))
    if not keys or train % len(keys) or evaluation % len(keys):
        raise ValueError(
            f"{train} train and {evaluation} eval rows do not divide over {len(keys)} "
            "(days, level) groups"
        )
    per_train, per_eval = train // len(keys), evaluation // len(keys)
    rng = random.Random(seed)
    train_rows: list[TravelTask] = []
    eval_groups: list[list[TravelTask]] = []
    for key in keys:
        rows = list(groups[key])
        if per_train + per_eval > len(rows):
            needs = per_train + per_eval
            raise ValueError(f"group {key} has {len(rows)} rows, the split needs {needs}")
        rng.shuffle(rows)
        eval_groups.append(rows[:per_eval])
        train_rows += rows[per_eval : per_eval + per_train]
    rng.shuffle(train_rows)
    eval_rows = [group[i] for i in range(per_eval) for group in eval_groups]
    return train_rows, eval_rows


def default_samples(count: int) -> tuple[int, int]:
    """The reference's 60 + 20 where the filtered rows allow it, else its loader's 16 + 4."""
    return REFERENCE_SAMPLES if count >= sum(REFERENCE_SAMPLES) else LOADER_SAMPLES
