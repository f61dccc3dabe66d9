"""The structured tasks' hub loaders through a real `datasets` cache, the hub out of reach: the
BFCL multi-turn hub set with its nested rows as the hub's JSON lines hold them, TravelPlanner's
validation config played through it, and bad data in the cache (another task's rows, a row
lacking a field) for both.

Each cache entry is built here from the shipped files: `datasets` loads rows in the hub's form
with its own JSON builder, and the built folder is put where `datasets` looks for the hub id
offline (`<namespace>___<name>/<config>/0.0.0/<hash>`, the newest hash winning). The native BFCL
set (its schemas as JSON text, and the hub cache's files) is covered in tests/test_bfcl.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import collabzoo
from collabzoo.envs.records import load_records
from collabzoo.envs.scripted_teams import scripted_team
from collabzoo.tasks.bfcl.envs.data import MULTITURN_CATEGORIES
from collabzoo.tasks.travelplanner.envs.data import tasks_from_records
from tests.conftest import REPOSITORY, benchmark_module, require, skip_or_fail

PUT_IN_CACHE = r"""
import glob, json, os, shutil, sys, time
import datasets


def put(cache, hub_id, config, parts, tag):
    '''Rows by split as `hub_id`'s `config` in the `datasets` cache, newer than any entry there.'''
    work = os.path.join(os.path.dirname(cache), "build-" + tag)
    os.makedirs(work)
    files = {}
    for split, rows in parts.items():
        files[split] = os.path.join(work, split + ".jsonl")
        with open(files[split], "w") as out:
            out.writelines(json.dumps(r) + "\n" for r in rows)
    datasets.load_dataset("json", data_files=files, cache_dir=os.path.join(work, "cache"))
    first = next(iter(parts))
    built = glob.glob(os.path.join(work, "cache", "json", "*", "*", "*", f"json-{first}.arrow"))
    namespace, name = hub_id.split("/")
    snake = datasets.naming.camelcase_to_snakecase(name)
    target = os.path.join(cache, f"{namespace}___{snake}", config, "0.0.0", tag.ljust(8, "0"))
    shutil.copytree(os.path.dirname(built[0]), target)
    for split in parts:
        os.rename(os.path.join(target, f"json-{split}.arrow"),
                  os.path.join(target, f"{snake}-{split}.arrow"))
    info_path = os.path.join(target, "dataset_info.json")
    info = json.load(open(info_path))
    info.update(config_name=config, dataset_name=snake)
    json.dump(info, open(info_path, "w"))
    stamp = time.time() + len(os.listdir(os.path.dirname(target)))
    os.utime(target, (stamp, stamp))


def refused(make):
    try:
        make()
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return "no error"
"""

BFCL_RUN = r"""
import collabzoo
from collabzoo.envs.records import load_records
from collabzoo.envs.scripted_teams import scripted_team
cache, rows_file = sys.argv[1], sys.argv[2]
given = json.load(open(rows_file))
hub = "OpenMLRL/BFCL-V4-Parallel-Multi-Turn"
put(cache, hub, "default", given["parts"], "1")
env = collabzoo.make("bfclmultiturn")
oracle = scripted_team("bfclmultiturn", "oracle", env)
played = {}
for split, task in given["play"]:
    observations, infos = env.reset(options={"task": task, "split": split})
    _, rewards, *_ = env.step(oracle(observations))
    played[task] = [observations, rewards["agent_0"], infos["agent_0"]["dataset"]]
loaded = {
    "ids": {s: [r.row_id for r in env.items(s)] for s in ("train", "eval")},
    "records": [r.record for r in env.items("all")],
    "played": played,
}
lacking = {s: [dict(r) for r in rows] for s, rows in given["parts"].items()}
del lacking["eval"][2]["turn_index"]
put(cache, hub, "default", lacking, "2")
put(cache, "OpenMLRL/BFCL-V4-Parallel-Native", "default", {"train": given["foreign"]}, "3")
loaded["lacking"] = refused(lambda: collabzoo.make("bfclmultiturn"))
loaded["foreign"] = refused(lambda: collabzoo.make("bfcl"))
print(json.dumps(loaded))
"""

TRAVEL_RUN = r"""
import collabzoo
cache, rows_file = sys.argv[1], sys.argv[2]
given = json.load(open(rows_file))
put(cache, "osunlp/TravelPlanner", "validation", {"validation": given["rows"]}, "1")
env = collabzoo.make("travelplanner")
observations, infos = env.reset(options={"task": given["play"], "split": "eval"})
found = {
    "ids": {s: [t.task_id for t in env.items(s)] for s in ("all", "train", "eval")},
    "observations": observations,
    "dataset": infos[env.agents[0]]["dataset"],
}
put(cache, "osunlp/TravelPlanner", "validation", {"validation": given["foreign"]}, "2")
found["foreign"] = refused(lambda: collabzoo.make("travelplanner"))
rows = [dict(r) for r in given["rows"]]
del rows[3]["org"]
put(cache, "osunlp/TravelPlanner", "validation", {"validation": rows}, "3")
found["lacking"] = refused(lambda: collabzoo.make("travelplanner"))
print(json.dumps(found))
"""


def _run_offline(tmp_path: Path, script: str, given: dict[str, Any]) -> dict[str, Any]:
    """`script` (after PUT_IN_CACHE) in a process with the hub offline and an empty cache."""
    cache = tmp_path / "hf" / "datasets"
    cache.mkdir(parents=True)
    rows_file = tmp_path / "given.json"
    rows_file.write_text(json.dumps(given))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HTTP", "http"))}
    env.update(
        HF_HUB_OFFLINE="1",
        HF_HOME=str(tmp_path / "hf"),
        HF_DATASETS_CACHE=str(cache),
        PYTHONPATH=str(REPOSITORY),
    )
    done = subprocess.run(
        [sys.executable, "-c", PUT_IN_CACHE + script, str(cache), str(rows_file)],
        capture_output=True, text=True, timeout=240, env=env, cwd=REPOSITORY,
    )  # fmt: skip
    if done.returncode != 0 and "Couldn't find cache" in done.stderr:
        skip_or_fail(f"this datasets version takes no cache entry here: {done.stderr[-500:]}")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def bfcl_data(shared_data: Path) -> Path:
    return require(shared_data / "bfcl", "the BFCL v4 data files")


def test_bfcl_multiturn_hub_set_loads_from_a_real_datasets_cache_and_bad_rows_are_named(
    bfcl_data: Path, tmp_path: Path
) -> None:
    """The multi-turn hub set (nested rows, every step category) loads through `datasets` with
    the reference's slices (all of train and eval), rows as written (built from BFCL's files),
    and plays the same prompts and oracle rewards as those rows read from the hub's file layout
    without `datasets`; a hub copy whose row lacks
    turn_index, or the native hub id holding another task's rows, is a one-line error naming
    the hub id, the row and what was expected."""
    offline = collabzoo.make("bfclmultiturn", data=bfcl_data)
    parts: dict[str, list[dict]] = {}
    for split, count in (("train", 4), ("eval", 2)):
        items = offline.items(split)
        parts[split] = [
            dict(r.record, task_type="parallel_calls")
            for category in MULTITURN_CATEGORIES
            for r in [i for i in items if i.category == category][:count]
        ]
    assert {r["official_category"] for r in parts["eval"]} == set(MULTITURN_CATEGORIES)
    play = [("train", parts["train"][0]["id"]), ("eval", parts["eval"][-1]["id"])]
    foreign = [{"task_id": "HumanEval/0", "prompt": "def f():\n", "test": "assert True"}]
    given = {"parts": parts, "play": play, "foreign": foreign}
    loaded = _run_offline(tmp_path, BFCL_RUN, given)

    assert loaded["ids"] == {s: [r["id"] for r in rows] for s, rows in parts.items()}
    written = {r["id"]: r for rows in parts.values() for r in rows}
    for record in loaded["records"]:
        assert record == written[record["id"]], record["id"]
    local = tmp_path / "local"  # the same rows as the hub's files, read without `datasets`
    local.mkdir()
    for split, rows in parts.items():
        (local / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    same = collabzoo.make("bfclmultiturn", data=local)
    oracle = scripted_team("bfclmultiturn", "oracle", same)
    for split, task in play:
        observations, reward, dataset = loaded["played"][task]
        assert dataset == "OpenMLRL/BFCL-V4-Parallel-Multi-Turn"
        expected, _ = same.reset(options={"task": task, "split": split})
        assert observations == expected
        assert "Heuristic task type: parallel_calls" in observations["agent_0"]
        _, rewards, *_ = same.step(oracle(expected))
        assert reward == pytest.approx(rewards["agent_0"]) and reward > 0
    assert loaded["lacking"].startswith("ValueError: BFCL data 'OpenMLRL/BFCL-V4-Parallel-Multi")
    assert "row 2 lacks turn_index" in loaded["lacking"]
    assert "expected rows with official_category" in loaded["lacking"]
    assert loaded["foreign"].startswith(
        "ValueError: BFCL data 'OpenMLRL/BFCL-V4-Parallel-Native' is not BFCL rows: row 0 lacks "
        "official_category, user_prompt, function, ground_truth (it has prompt, task_id, test)"
    )


def test_travelplanner_hub_copy_loads_and_plays_and_bad_rows_are_a_clear_error(
    shared_data: Path, tmp_path: Path
) -> None:
    """`osunlp/TravelPlanner` (config and split validation) in the `datasets` cache, built from
    the shipped queries as hub rows: the env loads it with the reference's curriculum and split
    and plays the same tasks, prompts included, as the same rows read from a file. Holding
    another task's rows, or a row lacking org (which arrow fills with null), `make` refuses it,
    naming the hub id, the row and the field."""
    data_file = require(
        shared_data / "travelplanner" / "std_travelplanner.jsonl",
        "the shipped TravelPlanner queries",
    )
    generator = benchmark_module("travelplanner_conformance")
    tasks = tasks_from_records(load_records(data_file), data_file.name)
    rows = []
    for task in tasks:
        row = generator.hub_row(task)
        row["annotated_plan"] = str(list(task.annotated_plan or ()))
        rows.append(row)
    local = tmp_path / "validation.jsonl"
    local.write_text("".join(json.dumps(r) + "\n" for r in rows))
    same = collabzoo.make("travelplanner", data=str(local))
    play = same.items("eval")[1].task_id
    foreign = [{"id": "simple_0", "question": "q", "function": "f"}]
    found = _run_offline(tmp_path, TRAVEL_RUN, {"rows": rows, "play": play, "foreign": foreign})
    assert found["ids"] == {s: [t.task_id for t in same.items(s)] for s in found["ids"]}
    assert len(found["ids"]["all"]) == len(tasks) and len(found["ids"]["eval"]) == 4
    expected, _ = same.reset(options={"task": play, "split": "eval"})
    assert found["observations"] == expected
    assert found["dataset"].startswith("osunlp/TravelPlanner validation@")
    source = "ValueError: TravelPlanner data 'osunlp/TravelPlanner'"
    assert found["foreign"].startswith(f"{source}, row 0: lacks query, org, dest, days")
    assert "(it has function, id, question); expected hub-layout rows" in found["foreign"]
    assert found["lacking"].startswith(f"{source}, row 3: lacks org (it has ")
