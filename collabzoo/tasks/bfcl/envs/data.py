"""Where the BFCL rows come from: the OpenMLRL hub sets (the reference's source), a local copy of
them, or BFCL's own category files (an offline build).

Every source is read into rows of the hub's form: `official_category`, `task_type` (absent in an
offline build), `user_prompt`, `function` (the schemas), `ground_truth` (BFCL's possible answers,
`[{name: {parameter: [accepted]}}]`), `id`, and for the multi-turn sets `turn_index`.

The offline build. The hub sets were made by a script that is not public, so their train/eval
membership and `task_type` labels cannot be rebuilt. From BFCL's files (`BFCL_v4_<category>.json`
beside `possible_answer/BFCL_v4_<category>.json`, as in BFCL's `bfcl_eval/data/`) the offline
build takes, per category in file order, the first 80% as train and the last 20% as eval (the
multi-turn ones by trajectory, so a trajectory's turns stay in one split), and labels every row
and result with what it is (`offline_label`). The request is the question's text (a system
message, where one is, first). A multi-turn step is one turn of a trajectory with at least
`min_calls` gold calls (2 by default: the hub set's name says parallel; which turns it kept is not
public); its request is the trajectory's earlier user turns with their gold calls, then the
current one; its functions are the involved classes' (BFCL's `multi_turn_func_doc/`), a missed
function withheld until its turn as BFCL does; its gold calls are BFCL's call strings read into
the possible-answer form, positional arguments by the schema's order.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from collabzoo.envs.hub import hub_unreachable_reason, offline_mode
from collabzoo.envs.records import REFERENCE_SPLITS, load_records, read_file, train_eval_split
from collabzoo.tasks.bfcl.rewards import parameter_order

NATIVE_HUB = "OpenMLRL/BFCL-V4-Parallel-Native"
MULTITURN_HUB = "OpenMLRL/BFCL-V4-Parallel-Multi-Turn"
NATIVE_CATEGORIES = ("parallel", "parallel_multiple", "live_parallel", "live_parallel_multiple")
REFERENCE_NATIVE_CATEGORIES = ("parallel", "parallel_multiple")
"""The reference's default (README @77db258, configs @2a16d23 / @0021494): the live ones can be
selected."""
MULTITURN_CATEGORIES = (
    "multi_turn_base_step",
    "multi_turn_long_context_step",
    "multi_turn_miss_func_step",
    "multi_turn_miss_param_step",
)
NATIVE_HUB_SPLITS = {"train": "train[:160]", "eval": "eval[:40]"}
"""The reference's slices: the first half of the non-live train and eval splits."""
MULTITURN_HUB_SPLITS = {"train": "train", "eval": "eval"}
ROW_FIELDS = ("official_category", "user_prompt", "function", "ground_truth")
FUNC_DOC_FILES = {
    "GorillaFileSystem": "gorilla_file_system.json",
    "MathAPI": "math_api.json",
    "MessageAPI": "message_api.json",
    "TwitterAPI": "posting_api.json",
    "TicketAPI": "ticket_api.json",
    "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json",
    "VehicleControlAPI": "vehicle_control.json",
    "WebSearchAPI": "web_search.json",
    "MemoryAPI_kv": "memory_kv.json",
    "MemoryAPI_vector": "memory_vector.json",
    "MemoryAPI_rec_sum": "memory_rec_sum.json",
}
"""BFCL's involved classes and their function docs (`MULTI_TURN_FUNC_DOC_FILE_MAPPING`)."""
DEFAULT_MIN_CALLS = 2
ROW_FORMAT = (
    "rows with official_category, user_prompt, function and ground_truth (the hub's train.jsonl "
    "/ eval.jsonl), or BFCL's own files (a folder with BFCL_v4_<category>.json and "
    "possible_answer/BFCL_v4_<category>.json)"
)
_SLICE = re.compile(r"^(?P<name>[\w-]+)(?:\[(?P<start>-?\d*):(?P<stop>-?\d*)\])?$")


def offline_label(categories: Sequence[str]) -> str:
    """The label of an offline build, in results and on the leaderboard."""
    steps = [c.removeprefix("multi_turn_").removesuffix("_step") for c in categories]
    if all(c.startswith("multi_turn_") for c in categories):
        return f"BFCL v4 multi-turn steps {', '.join(steps)} (offline split, not OpenMLRL's)"
    return f"BFCL v4 {', '.join(categories)} (offline split, not OpenMLRL's)"


# ----- BFCL's own files -------------------------------------------------------------------------
def _answers_file(question_file: Path) -> Path:
    return question_file.parent / "possible_answer" / question_file.name


def is_bfcl_source(path: Path) -> bool:
    """A folder of BFCL's data files (with `possible_answer/`), or one of its question files."""
    if path.is_dir():
        return (path / "possible_answer").is_dir() and any(path.glob("BFCL_v4_*.json"))
    return path.is_file() and source_category(path) is not None


def source_category(path: Path) -> str | None:
    """The BFCL category a question file is named for (`BFCL_v4_<category>.json`)."""
    name = path.name
    if name.startswith("BFCL_v4_") and name.endswith(".json"):
        return name.removeprefix("BFCL_v4_").removesuffix(".json")
    return None


def _source_file(source: Path, category: str) -> Path:
    name = f"BFCL_v4_{category}.json"
    path = source / name if source.is_dir() else source
    if path.name != name or not path.is_file():
        raise FileNotFoundError(
            f"{source}: no BFCL question file {name} for category {category!r} (an offline "
            f"build reads {name} and possible_answer/{name})"
        )
    if not _answers_file(path).is_file():
        raise FileNotFoundError(f"{path}: its possible answers {_answers_file(path)} are missing")
    return path


def read_bfcl_file(path: Path) -> list[dict]:
    """The rows of one of BFCL's files: JSON Lines under a `.json` name (a JSON list also)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 text ({error})") from None
    try:
        value = json.loads(text)
        rows = value if isinstance(value, list) else [value]
    except json.JSONDecodeError:
        rows = []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as error:
                    raise ValueError(f"{path}:{number}: not valid JSON: {error}") from None
    if not all(isinstance(r, dict) for r in rows):
        raise ValueError(f"{path}: expected one JSON object per line")
    return rows


def _read_pairs(question_file: Path) -> list[tuple[dict, dict]]:
    questions = read_bfcl_file(question_file)
    answers = {str(a.get("id")): a for a in read_bfcl_file(_answers_file(question_file))}
    pairs = []
    for index, question in enumerate(questions):
        missing = [k for k in ("id", "question") if k not in question]
        if missing:
            raise ValueError(
                f"{question_file}: row {index} lacks {', '.join(missing)}; expected BFCL "
                "question rows (id, question, function)"
            )
        answer = answers.get(str(question["id"]))
        if answer is None or "ground_truth" not in answer:
            raise ValueError(
                f"{_answers_file(question_file)}: no ground_truth for {question['id']!r}"
            )
        pairs.append((question, answer))
    return pairs


def _request(messages: Iterable[Mapping[str, Any]]) -> str:
    """The text of a turn's messages: one user message as it is; a system message first."""
    parts = []
    for message in messages:
        role, content = message.get("role", "user"), str(message.get("content", ""))
        parts.append(content if role == "user" else f"{str(role).capitalize()}: {content}")
    return "\n\n".join(parts)


def native_source_rows(source: Path, categories: Sequence[str]) -> dict[str, list[dict]]:
    """Train and eval rows of the offline native build."""
    rows: dict[str, list[dict]] = {"train": [], "eval": []}
    for category in categories:
        built = []
        for question, answer in _read_pairs(_source_file(source, category)):
            if "function" not in question:
                raise ValueError(
                    f"{source}: {question['id']} has no function schemas (a multi-turn file? "
                    "those are read by the multi-turn env)"
                )
            built.append(
                {
                    "id": str(question["id"]),
                    "official_category": category,
                    "user_prompt": _request(
                        question["question"][0] if question["question"] else []
                    ),
                    "function": question["function"],
                    "ground_truth": answer["ground_truth"],
                }
            )
        for split in REFERENCE_SPLITS:
            rows[split] += train_eval_split(built, split)
    return rows


def _call_strings_as_answers(calls: Sequence[str], order: Mapping[str, Sequence[str]]) -> list:
    """BFCL's multi-turn gold call strings (`"cd(folder='document')"`) in the possible-answer
    form, one accepted value per argument."""
    answers = []
    for text in calls:
        node = ast.parse(text, mode="eval").body
        if not isinstance(node, ast.Call):
            raise ValueError(f"a multi-turn gold call is not a call: {text!r}")
        name = ast.unparse(node.func)
        names = order.get(name, ())
        arguments: dict[str, list] = {}
        for index, value in enumerate(node.args):
            arguments[names[index]] = [_value(value)]
        for keyword in node.keywords:
            arguments[str(keyword.arg)] = [_value(keyword.value)]
        answers.append({name: arguments})
    return answers


def _value(node: ast.AST) -> Any:
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return ast.unparse(node)
    return list(value) if isinstance(value, tuple) else value


def _func_docs(folder: Path, classes: Sequence[str], cache: dict[str, list[dict]]) -> list[dict]:
    docs = []
    for name in classes:
        if name not in cache:
            file = folder / FUNC_DOC_FILES.get(name, f"{name}.json")
            if not file.is_file():
                raise FileNotFoundError(f"{folder}: no function doc {file.name} for class {name!r}")
            cache[name] = read_bfcl_file(file)
        docs += cache[name]
    return docs


def _steps(
    question: dict,
    answer: dict,
    functions: list[dict],
    category: str,
    min_calls: int,
) -> list[dict]:
    held = {int(k): list(v) for k, v in (question.get("missed_function") or {}).items()}
    withheld = {name for names in held.values() for name in names}
    available = [f for f in functions if f["name"] not in withheld]
    turns, gold = question["question"], answer["ground_truth"]
    steps, history = [], []
    for index, messages in enumerate(turns):
        for name in held.get(index, []):
            available += [f for f in functions if f["name"] == name]
        calls = gold[index] if index < len(gold) else []
        text = _request(messages)
        if not text:
            added = ", ".join(held.get(index, [])) or "none"
            text = f"(no new message: the functions {added} are now available for the request)"
        if len(calls) >= min_calls:
            earlier = "\n".join(history)
            context = f"Earlier turns:\n{earlier}\n\nCurrent turn:\n" if earlier else ""
            order = parameter_order(available)
            steps.append(
                {
                    "id": f"{question['id']}/turn_{index}",
                    "official_category": f"{category}_step",
                    "turn_index": index,
                    "user_prompt": f"{context}User: {text}",
                    "function": list(available),
                    "ground_truth": _call_strings_as_answers(calls, order),
                }
            )
        history.append(f"User: {text}")
        history.append(f"Calls made: {'; '.join(calls) if calls else '(none)'}")
    return steps


def multiturn_source_rows(
    source: Path, categories: Sequence[str], min_calls: int
) -> dict[str, list[dict]]:
    """Train and eval rows of the offline multi-turn flat build."""
    folder = source if source.is_dir() else source.parent
    docs = folder / "multi_turn_func_doc"
    rows: dict[str, list[dict]] = {"train": [], "eval": []}
    cache: dict[str, list[dict]] = {}
    for step_category in categories:
        category = step_category.removesuffix("_step")
        pairs = _read_pairs(_source_file(source, category))
        for split in REFERENCE_SPLITS:
            for question, answer in train_eval_split(pairs, split):
                if "question" not in question or "involved_classes" not in question:
                    raise ValueError(
                        f"{source}: {question.get('id')} is not a multi-turn row (it has no "
                        "involved_classes)"
                    )
                functions = _func_docs(docs, question["involved_classes"], cache)
                rows[split] += _steps(question, answer, functions, category, min_calls)
    return rows


# ----- hub rows ---------------------------------------------------------------------------------
def split_slice(spec: str) -> tuple[str, slice]:
    """("train", slice(None, 160)) of "train[:160]"."""
    match = _SLICE.match(spec.strip())
    if match is None:
        raise ValueError(f"a split is a name with an optional [start:stop] slice, got {spec!r}")
    start, stop = (int(v) if v else None for v in (match["start"], match["stop"]))
    return match["name"], slice(start, stop)


def _pruned(value: Any) -> Any:
    """A struct read back from arrow: the keys other rows had, filled with None, dropped."""
    if isinstance(value, dict):
        return {
            k: _pruned(v) if k == "parameters" else v for k, v in value.items() if v is not None
        }
    return value


def _short_floats(value: Any) -> Any:
    """Numbers to 15 significant digits: arrow's JSON reader reads some decimals one unit in the
    last place off (0.95 as 0.9500000000000001), which BFCL's exact comparison would fail."""
    if isinstance(value, float):
        return float(f"{value:.15g}")
    if isinstance(value, dict):
        return {k: _short_floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_short_floats(v) for v in value]
    return value


def normalized(record: Mapping[str, Any]) -> dict[str, Any]:
    """A hub row as the reference reads it from its JSON lines: `function` and `ground_truth`
    decoded where a copy holds them as JSON text, the None-filled keys that `datasets` adds to
    the schema structs dropped (`properties` is left as it is), numbers as written."""
    row = dict(record)
    for key in ("function", "ground_truth"):
        if isinstance(row.get(key), str):
            try:
                row[key] = json.loads(row[key])
            except json.JSONDecodeError as error:
                raise ValueError(
                    f"the {key} of row {row.get('id')!r} is not JSON: {error}"
                ) from None
    if isinstance(row.get("function"), list):
        row["function"] = _short_floats([_pruned(f) for f in row["function"]])
    if isinstance(row.get("ground_truth"), list):
        row["ground_truth"] = _short_floats(row["ground_truth"])
    return row


def local_split_rows(path: Path, split_spec: str) -> list[dict] | None:
    """Rows of a local copy laid out as the hub (`<split>.jsonl` in a folder, as the reference's
    local loader reads it), sliced; None where the folder has no such file."""
    name, part = split_slice(split_spec)
    file = path / f"{name}.jsonl"
    if not path.is_dir() or not file.is_file():
        return None
    return read_file(file)[part]


def hub_rows(hub_id: str, split_spec: str) -> list[dict]:
    """A hub split's rows as the reference reads a plain split: its `<split>.jsonl` file, as
    written (then sliced here, where the reference hands a slice to `datasets`); else, where that
    file cannot be had (the hub out of reach and not in the hub cache), through `datasets` (its
    local cache). `datasets` reads nested JSON through arrow, which changes numbers (8.854e-12
    read as 0.0, 0.95 as 0.9500000000000001): the file is the faithful copy."""
    name, part = split_slice(split_spec)
    downloaded = _downloaded(hub_id, name)
    if downloaded is not None:
        return downloaded[part]
    return load_records(hub_id, split=split_spec)


def _downloaded(hub_id: str, name: str) -> list[dict] | None:
    if not offline_mode() and hub_unreachable_reason() is not None:
        return None  # no download attempt (and its retries) when the probe found no hub
    try:
        from huggingface_hub import hf_hub_download  # deferred: only hub data needs it

        path = hf_hub_download(repo_id=hub_id, filename=f"{name}.jsonl", repo_type="dataset")
    except Exception:
        return None
    return read_file(Path(path))


def local_rows(path: Path, split: str) -> list[dict]:
    """Rows of any other local file or folder in the hub's form: the last 20% are eval."""
    return train_eval_split(load_records(path), split)


def check_rows(rows: Sequence[Mapping[str, Any]], source: str, *, multiturn: bool) -> None:
    """ValueError, in one line, when rows are not BFCL rows: what was found, what was expected.
    A null field is a missing one: `datasets` gives a row that lacks a field the others have
    that field as None."""
    fields = (*ROW_FIELDS, "turn_index") if multiturn else ROW_FIELDS
    for index, row in enumerate(rows):
        missing = [f for f in fields if row.get(f) is None]
        if missing:
            found = ", ".join(sorted(str(k) for k, v in row.items() if v is not None))
            found = found or "no fields"
            raise ValueError(
                f"BFCL data {source!r} is not BFCL rows: row {index} lacks {', '.join(missing)} "
                f"(it has {found}); expected {ROW_FORMAT}"
            )
        if not isinstance(row["function"], list) or not isinstance(row["ground_truth"], list):
            raise ValueError(
                f"BFCL data {source!r}: row {index} ({row.get('id', 'no id')}): function and "
                f"ground_truth must be lists; expected {ROW_FORMAT}"
            )


def choose(rows: Iterable[dict], categories: Sequence[str], task_types: Sequence[str] | None):
    """The rows of the chosen categories (and task types), in order, as the reference filters."""
    wanted_types = set(task_types) if task_types else None
    return [
        r
        for r in rows
        if r.get("official_category") in categories
        and (wanted_types is None or r.get("task_type") in wanted_types)
    ]
