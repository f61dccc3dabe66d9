"""Scores right on what a real model writes to ClassEval's, BFCL's (native and multi-turn) and
TravelPlanner's own prompts: every pair of tests/data/real_output_task_conformance.json
(SmolLM2-135M-Instruct's answers at each task's reference sampling; made by
benchmarks/real_output_task_conformance.py, whose docstring says how) earns from collabzoo the
reward the reference's own code gave it, and the reward the bench recorded when the answers were
played.

BFCL: the reward and every term the reference reports, within 1e-6, from the reference's
`score_native_parallel_response` (native) and `score_multiturn_flat_response` (multi-turn).
ClassEval: the merged program (by hash), the methods built, the three levels, the test counts
and the reward, from the reference's `CE_reward`, the tests run in collabzoo's sandbox (tasks
whose tests depend on the machine, third-party modules or the clock, are compared on their
static parts only, as in tests/test_classeval.py). TravelPlanner: the reward, every term, the
kept details, the merged plan and each agent's parser error codes, from the reference's
`score_single_turn_response`.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import collabzoo
from collabzoo.rewards.breakdown import RewardBreakdown
from collabzoo.tasks.bfcl.envs.data import NATIVE_CATEGORIES
from collabzoo.tasks.bfcl.rewards import MultiTurnRules, NativeRules, score_multiturn, score_native
from collabzoo.tasks.classeval import rewards as rules
from collabzoo.tasks.classeval.rewards import harness
from collabzoo.tasks.travelplanner.envs.data import tasks_from_records
from collabzoo.tasks.travelplanner.rewards import score_travel
from tests.conftest import REPOSITORY, benchmark_module, require
from tests.test_travelplanner import DETAIL_KEYS

SET = json.loads(
    (REPOSITORY / "tests" / "data" / "real_output_task_conformance.json").read_text(
        encoding="utf-8"
    )
)
VALUES = SET["reference"]["bfcl"]["values"]
TOLERANCE = 1e-6


def test_the_set_is_real_answers_on_the_three_tasks() -> None:
    """Real SmolLM2 answers (not generated pairs) to the envs' own prompts, two answers per
    pair, every ClassEval episode with both its turns, each agent's own prompt (`parallel`)
    answered on BFCL and ClassEval."""
    for name in ("bfcl", "bfclmultiturn", "classeval", "travelplanner"):
        runs = SET["runs"][name]
        assert runs and all(r["model"] == "hf:smollm2-135m-instruct" for r in runs), name
        assert all(len(c["answers"]) == 2 for c in SET[name]), name
    for name in ("bfcl", "classeval"):
        assert any(c["protocol"] == "parallel" for c in SET[name]), name
    for name in ("bfcl", "bfclmultiturn"):
        assert {c["protocol"] for c in SET[name]} == {"parallel"}, "single is another reward"
    assert len(SET["bfcl"]) >= 4 and len(SET["classeval"]) >= 4 and SET["travelplanner"]
    assert len(SET["bfclmultiturn"]) >= 2
    turns = Counter((c["protocol"], c["episode"]) for c in SET["classeval"])
    assert set(turns.values()) == {2}, "ClassEval's two turns per episode"


@pytest.fixture(scope="module")
def bfcl_rows(shared_data: Path) -> dict[str, Any]:
    data = require(shared_data / "bfcl", "the BFCL v4 data files")
    env = collabzoo.make("bfcl", data=data, categories=NATIVE_CATEGORIES)
    return {item.row_id: item for item in env.items("all")}


def _bfcl_mismatches(case: dict[str, Any], breakdown: RewardBreakdown, values: list) -> list:
    """The reward and each term the reference reported that ours misses, and the bench's."""
    wrong = []
    ours = [breakdown.total, *(breakdown.metrics.get(k) for k in values[1:])]
    for name, want, got in zip(values, case["reference"], ours, strict=True):
        if want is not None and (got is None or abs(got - want) > TOLERANCE):
            wrong.append((case["id"], name, want, got))
    if abs(case["env_reward"] - breakdown.total) > TOLERANCE:
        wrong.append((case["id"], "the bench's recorded reward", breakdown.total))
    return wrong


def test_bfcl_rewards_and_terms_equal_the_reference(bfcl_rows: dict[str, Any]) -> None:
    wrong = []
    for case in SET["bfcl"]:
        outcome = score_native(case["answers"], bfcl_rows[case["id"]].task, NativeRules())
        wrong += _bfcl_mismatches(case, outcome.breakdown, VALUES)
    assert not wrong, wrong


def test_bfcl_multiturn_rewards_and_terms_equal_the_reference(shared_data: Path) -> None:
    """The multi-turn (flat) pairs against the reference's `score_multiturn_flat_response`: the
    order-sensitive terms (alignment, prefix) included; the self-duplicate terms are native's."""
    data = require(shared_data / "bfcl", "the BFCL v4 data files")
    values = SET["reference"]["bfclmultiturn"]["values"]
    builds: dict[str, dict[str, Any]] = {}
    wrong = []
    for case in SET["bfclmultiturn"]:
        options = case.get("env_kwargs", {})
        key = json.dumps(options, sort_keys=True)
        if key not in builds:
            env = collabzoo.make("bfclmultiturn", data=data, **options)
            builds[key] = {item.row_id: item for item in env.items("all")}
        task = builds[key][case["id"]].task
        outcome = score_multiturn(case["answers"], task, MultiTurnRules())
        wrong += _bfcl_mismatches(case, outcome.breakdown, values)
    assert not wrong, wrong


@pytest.fixture(scope="module")
def classeval_tasks(shared_data: Path) -> list[rules.ClassTask]:
    data = require(shared_data / "classeval" / "ClassEval_data.json", "the ClassEval data")
    shipped = hashlib.sha256(data.read_bytes()).hexdigest()
    assert SET["reference"]["classeval"]["data_sha256"] == shipped, "scored on another data file"
    return [rules.ClassTask.from_record(r) for r in json.loads(data.read_text())]


def test_classeval_rewards_equal_the_reference_in_the_sandbox(
    classeval_tasks: list[rules.ClassTask], code_sandbox
) -> None:
    cases = SET["classeval"]
    builds = [rules.build(classeval_tasks[c["task"]], *c["answers"]) for c in cases]
    runs = rules.run_builds(builds, code_sandbox)
    wrong = []
    for case, b, run in zip(cases, builds, runs, strict=True):
        ref = case["reference"]
        digest = hashlib.sha256(b.merged.encode("utf-8", "surrogatepass")).hexdigest()
        static = rules.levels(b, harness.TestRun())
        checks = {
            "merged": digest == ref["merged_sha256"],
            "accepted": sorted(b.built) == ref["accepted"],
            "compiles": b.compiles == ref["syntax_ok"],
            "level1": abs(static["level1_syntax"] - ref["level1_syntax"]) <= TOLERANCE,
            "level3": abs(static["level3_overlap_penalty"] - ref["level3_overlap_penalty"])
            <= TOLERANCE,
        }
        if not case["machine_dependent"]:
            out = rules.breakdown(b, run)
            checks["total"] = abs(out.total - ref["total"]) <= TOLERANCE
            checks["counts"] = (run.tests_run, run.passed, run.timed_out) == (
                ref["tests_run"],
                ref["passed"],
                ref["timeout"],
            )
            checks["bench"] = abs(case["env_reward"] - out.total) <= TOLERANCE
        if not all(checks.values()):
            wrong.append((case["task"], case["turn"], [k for k, ok in checks.items() if not ok]))
    assert not wrong, wrong


@pytest.fixture(scope="module")
def travel_tasks(shared_data: Path) -> dict[str, Any]:
    data = require(shared_data / "travelplanner" / "std_travelplanner.jsonl", "the queries")
    generator = benchmark_module("travelplanner_conformance")
    records = generator.load_records(data)
    return {t.task_id: t for t in tasks_from_records(records, data.name)}


def test_travelplanner_rewards_terms_and_plans_equal_the_reference(
    travel_tasks: dict[str, Any],
) -> None:
    generator = benchmark_module("travelplanner_conformance")
    terms = SET["reference"]["travelplanner"]["terms"]
    details = SET["reference"]["travelplanner"]["details"]
    wrong = []
    for case in SET["travelplanner"]:
        task = travel_tasks[case["task"]]
        outcome = score_travel(task, case["answers"], capacity=case["capacity"], official=False)
        b, expected = outcome.breakdown, case["reference"]
        ours = [
            b.components[n.split("/")[1]] * (1 if n.startswith("reward_component") else -1)
            for n in terms
        ]
        problems = ["reward"] * (abs(b.total - expected["reward"]) > TOLERANCE)
        problems += ["bench"] * (abs(case["env_reward"] - b.total) > TOLERANCE)
        problems += [
            n
            for n, o, e in zip(terms, ours, expected["terms"], strict=True)
            if abs(o - e) > TOLERANCE
        ]
        for name, value in zip(details, expected["details"], strict=True):
            if name in DETAIL_KEYS and abs(b.metrics[DETAIL_KEYS[name]] - value) > TOLERANCE:
                problems.append(name)
        if generator.digest(outcome.merged.plan()) != expected["merged_plan"]:
            problems.append("merged plan")
        if [list(p.errors) for p in outcome.merged.parses] != expected["parser_errors"]:
            problems.append("parser error codes")
        if problems:
            wrong.append((case["task"], case["protocol"], problems))
    assert not wrong, wrong
