"""BFCL v4: conformance with the reference's reward code and BFCL's own AST checker, the prompts,
the loaders (the offline build, local copies, the hub through a real `datasets` cache), bad data,
the PettingZoo contract, the scripted teams and the quirks kept.

The conformance cases (tests/data/bfcl_conformance.json) were made by benchmarks/bfcl_conformance.py
running the reference's own reward code and formatters and the `bfcl-eval` package's checker on
rows built from the shipped BFCL files; nothing here runs either.
"""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from pettingzoo.test import parallel_api_test, parallel_seed_test

import collabzoo
from collabzoo.bench.protocols import make_protocol
from collabzoo.envs.prompt_form import RawPrompt
from collabzoo.envs.scripted_teams import scripted_team
from collabzoo.tasks.bfcl.envs.data import NATIVE_CATEGORIES, offline_label
from collabzoo.tasks.bfcl.envs.prompts import ROLE_MODES, multiturn_prompt, native_prompt
from collabzoo.tasks.bfcl.rewards import (
    MULTITURN_MAX,
    NATIVE_MAX,
    CallTask,
    MultiTurnRules,
    NativeRules,
    ast_match,
    parse_calls,
    score_multiturn,
    score_native,
)
from tests.conftest import REPOSITORY, require

CONFORMANCE = json.loads(
    (REPOSITORY / "tests" / "data" / "bfcl_conformance.json").read_text(encoding="utf-8")
)
VALUES = CONFORMANCE["provenance"]["reference_values"]


@pytest.fixture(scope="module")
def bfcl_data(shared_data: Path) -> Path:
    return require(shared_data / "bfcl", "the BFCL v4 data files")


@pytest.fixture(scope="module")
def rows(bfcl_data: Path) -> dict[str, dict]:
    """The offline builds' rows by id: native (all four categories), multi-turn steps with two
    or more gold calls, and with one or more."""
    builds = {
        "native": collabzoo.make("bfcl", data=bfcl_data, categories=NATIVE_CATEGORIES),
        "multiturn": collabzoo.make("bfclmultiturn", data=bfcl_data),
        "multiturn_one": collabzoo.make("bfclmultiturn", data=bfcl_data, min_calls=1),
    }
    return {k: {i.row_id: i for i in env.items("all")} for k, env in builds.items()}


def _row(rows: dict, case: dict):
    kind = "multiturn_one" if case.get("min_calls") == 1 else case["variant"]
    return rows[kind][case["id"]]


# ----- conformance -----------------------------------------------------------------------------
def test_the_conformance_set_covers_what_the_issue_asks() -> None:
    cases = CONFORMANCE["reward_cases"]
    kinds = {c["kind"] for c in cases}
    assert len(cases) >= 300 and sum(c["variant"] == "native" for c in cases) >= 300
    assert {
        "oracle_split",
        "overlap",
        "idle_agent",
        "extra_calls",
        "wrong_values",
        "omitted_optional",
        "malformed_json",
        "string_arguments",
    } <= kinds
    assert sum("raises" in c["reference"] for c in cases) >= 20, "string-valued arguments"
    assert len(CONFORMANCE["ast_cases"]) >= 440


def test_rewards_and_terms_equal_the_reference(rows: dict) -> None:
    """Every pair's reward and every term's rate as the reference's reward code gave them; where
    the pinned parser raises (string-valued JSON arguments), as its later parser gives them."""
    checked = 0
    for case in CONFORMANCE["reward_cases"]:
        row = _row(rows, case)
        expected = case.get("later_reference", case["reference"])
        if case["variant"] == "native":
            outcome = score_native(
                case["answers"], row.task, NativeRules(self_duplicate_mode=case["mode"])
            )
        else:
            outcome = score_multiturn(case["answers"], row.task)
        breakdown = outcome.breakdown
        assert math.isclose(sum(breakdown.components.values()), breakdown.total, abs_tol=1e-9)
        ours = [breakdown.total, *(breakdown.metrics.get(k) for k in VALUES[1:])]
        for name, want, got in zip(VALUES, expected, ours, strict=True):
            if want is not None:
                assert got is not None and abs(got - want) <= 1e-6, (case["id"], case["kind"], name)
        assert outcome.ast.valid == case["bfcl"]["valid"], (case["id"], case["kind"])
        assert outcome.ast.error_type == case["bfcl"]["error_type"], (case["id"], case["kind"])
        checked += 1
    assert checked == len(CONFORMANCE["reward_cases"])


def test_where_the_reference_parser_raises_the_env_reads_or_rejects(rows: dict) -> None:
    """String-valued `arguments`: "coerce" (default) equals the reference's later parser (checked
    above); "reject" drops the call and says so, and never raises."""
    raising = [c for c in CONFORMANCE["reward_cases"] if "raises" in c["reference"]]
    assert raising and all("later_reference" in c for c in raising)
    for case in raising:
        row = _row(rows, case)
        rules = NativeRules(string_arguments="reject")
        outcome = score_native(case["answers"], row.task, rules)
        reasons = [r.reason for p in outcome.parsed for r in p.rejected]
        assert any("not an object" in reason for reason in reasons), case["id"]


def _answers_as_calls(ground_truth: list) -> list[dict]:
    """The conformance file's rule for an AST case without an output (its provenance)."""
    calls = []
    for answer in ground_truth:
        name, accepted = next(iter(answer.items()))
        arguments = {}
        for parameter, values in accepted.items():
            kept = [v for v in values if v != ""]
            if kept:
                arguments[parameter] = kept[0]
        calls.append({name: arguments})
    return calls


def test_ast_match_equals_bfcl_eval_on_every_shipped_answer(rows: dict) -> None:
    """collabzoo's AST checker gives bfcl-eval's verdict and error type on each native row's
    possible answers written as calls, and on perturbations of them."""
    cases = CONFORMANCE["ast_cases"]
    assert {c["id"] for c in cases} == set(rows["native"])
    for case in cases:
        row = rows["native"][case["id"]]
        record = row.record
        output = case.get("output") or _answers_as_calls(record["ground_truth"])
        verdict = ast_match(record["function"], output, record["ground_truth"], row.category)
        assert (verdict.valid, verdict.error_type) == (
            case["bfcl"]["valid"],
            case["bfcl"]["error_type"],
        ), case["id"]
    assert sum(c["bfcl"]["valid"] for c in cases) >= 400
    assert sum(not c["bfcl"]["valid"] for c in cases) >= 100


def test_prompts_are_the_references(rows: dict) -> None:
    for case in CONFORMANCE["prompt_cases"]:
        record = rows[case["variant"]][case["id"]].record
        write = native_prompt if case["variant"] == "native" else multiturn_prompt
        texts = [write(record, agent, 2, mode) for mode in ROLE_MODES for agent in (0, 1)]
        digest = hashlib.sha256("\0".join(texts).encode("utf-8")).hexdigest()
        assert digest == case["sha256"], case["id"]


# ----- parsing -----------------------------------------------------------------------------------
def test_rejected_parts_are_reported_never_raised(rows: dict) -> None:
    task = rows["native"]["parallel_0"].task
    broken = parse_calls('[{"name": "spotify.play", "arguments": {"artist": "A"', task.order)
    assert broken.calls == [] and "not JSON" in broken.rejected[0].reason
    prose = parse_calls(
        'Sure: spotify.play(artist="A", duration=1) and spotify.play(artist="B")', task.order
    )
    assert [c.arguments for c in prose.calls] == [{"artist": "A", "duration": 1}]
    assert "only its first readable call" in prose.rejected[0].reason
    extra = parse_calls('spotify.play("A", 2, 3, **more)\n5', task.order)
    assert extra.calls[0].arguments == {"artist": "A", "duration": 2}
    reasons = " | ".join(r.reason for r in extra.rejected)
    assert "positional argument 3" in reasons and "unpacking" in reasons and "not a call" in reasons
    for text in ("", "[]", "   ", "```\n```"):
        assert parse_calls(text, task.order).calls == []


def test_the_env_reports_each_agents_reading_in_its_infos(bfcl_data: Path) -> None:
    env = collabzoo.make("bfcl", data=bfcl_data, render_mode="ansi")
    env.reset(options={"task": "parallel_0", "split": "train"})
    answers = {
        "agent_0": 'spotify.play(artist="Taylor Swift", duration=20)',
        "agent_1": '[{"name": "spotify.play", "arguments": "{\\"artist\\": \\"Maroon 5\\"',
    }
    _, rewards, terminations, _, infos = env.step(answers)
    assert all(terminations.values()) and env.agents == []
    parsed = infos["agent_1"]["parsed"]
    assert parsed["calls"] == [] and parsed["rejected"], "a malformed answer is reported"
    assert infos["agent_0"]["parsed"]["team_calls"] == [
        "spotify.play(artist='Taylor Swift', duration=20)"
    ]
    metrics = infos["agent_0"]["metrics"]
    assert metrics["ast_match"] == 0.0 == metrics["ast_match_parallel"]
    assert metrics["lazy_agents"] == 1.0 and rewards["agent_0"] < NATIVE_MAX
    assert "not read" in env.render()


@pytest.mark.parametrize("name", ["bfcl", "bfclmultiturn"])
def test_chat_template_never_gives_the_references_raw_prompts(bfcl_data: Path, name: str) -> None:
    """CoMLRL tokenizes the formatter's text with no chat template; "never" marks each prompt
    raw (a policy then tokenizes it as it is), the text unchanged; the default templates."""
    prompts = {}
    for mode in ("every_turn", "never"):
        env = collabzoo.make(name, data=bfcl_data, chat_template=mode)
        prompts[mode], _ = env.reset(seed=3)
    for agent, text in prompts["never"].items():
        assert isinstance(text, RawPrompt) and text.chat_template is False
        assert type(prompts["every_turn"][agent]) is str and text == prompts["every_turn"][agent]
    with pytest.raises(ValueError, match="chat_template must be one of"):
        collabzoo.make(name, data=bfcl_data, chat_template="raw")


# ----- the quirks kept ------------------------------------------------------------------------
def test_list_of_lists_golds_and_repeated_calls_are_the_references_quirks(rows: dict) -> None:
    native = rows["native"]
    nested = next(
        r
        for r in native.values()
        if any(
            isinstance(v, list) and v and isinstance(v[0], list)
            for g in r.record["ground_truth"]
            for v in next(iter(g.values())).values()
        )
    )
    task = nested.task
    answers = ["\n".join(_sources(task)), "[]"]
    outcome = score_native(answers, task)
    assert outcome.breakdown.metrics["exact_match"] == 0.0, "a nested gold list never matches"
    assert outcome.ast.valid or outcome.ast.error_type, "BFCL's checker reads it as a list"
    repeated = native["parallel_158"].task
    outcome = score_native(["\n".join(_sources(repeated)), "[]"], repeated)
    assert outcome.breakdown.metrics["pred_call_count"] < len(repeated.gold)
    collapsed = native["parallel_116"].task
    outcome = score_native(["\n".join(_sources(collapsed)), "[]"], collapsed)
    assert outcome.breakdown.metrics["pred_call_count"] < len(collapsed.gold), "lower-cased keys"


def _sources(task: CallTask) -> list[str]:
    from collabzoo.tasks.bfcl.teams import call_source

    return [call_source(a, task.functions) for a in task.ground_truth]


def test_a_one_call_step_cannot_reach_the_multiturn_maximum(rows: dict) -> None:
    step = next(r for r in rows["multiturn_one"].values() if len(r.task.gold) == 1)
    (call,) = _sources(step.task)
    lazy = score_multiturn([call, "[]"], step.task).breakdown.total
    both = score_multiturn([call, call], step.task).breakdown.total
    assert max(lazy, both) < MULTITURN_MAX


# ----- loaders and bad data -------------------------------------------------------------------
def test_the_offline_build_is_bfcls_categories_labelled_as_such(bfcl_data: Path) -> None:
    env = collabzoo.make("bfcl", data=bfcl_data)
    assert (len(env.items("train")), len(env.items("eval"))) == (320, 80)
    assert {r.category for r in env.items("all")} == {"parallel", "parallel_multiple"}
    _, infos = env.reset(seed=3)
    assert infos["agent_0"]["dataset"] == offline_label(("parallel", "parallel_multiple"))
    assert "offline split" in infos["agent_0"]["dataset"]
    live = collabzoo.make("bfcl", data=bfcl_data, categories=["live_parallel"])
    assert [len(live.items(s)) for s in ("train", "eval")] == [13, 3]
    steps = collabzoo.make("bfclmultiturn", data=bfcl_data)
    train_ids = {r.row_id.partition("/")[0] for r in steps.items("train")}
    eval_ids = {r.row_id.partition("/")[0] for r in steps.items("eval")}
    assert train_ids.isdisjoint(eval_ids), "a trajectory's steps stay in one split"
    assert all(len(r.task.gold) >= 2 for r in steps.items("all"))
    held = steps.items("all")
    missing = next(r for r in held if r.row_id.startswith("multi_turn_miss_func_0/"))
    assert "sort" not in [f["name"] for f in missing.record["function"]], "withheld until turn 3"


def test_a_local_copy_laid_out_as_the_hub_is_sliced_then_filtered(
    bfcl_data: Path, tmp_path: Path
) -> None:
    env = collabzoo.make("bfcl", data=bfcl_data, categories=NATIVE_CATEGORIES, split="all")
    records = [dict(r.record, task_type="demo") for r in env.items("all")]
    live_first = [r for r in records if r["official_category"].startswith("live")] + records
    for name, part in (("train", live_first[:300]), ("eval", records[300:])):
        with (tmp_path / f"{name}.jsonl").open("w", encoding="utf-8") as f:
            f.writelines(json.dumps(r) + "\n" for r in part)
    local = collabzoo.make("bfcl", data=tmp_path)
    expected = [
        r["id"]
        for r in live_first[:160]
        if r["official_category"] in ("parallel", "parallel_multiple")
    ]
    assert [r.row_id for r in local.items("train")] == expected
    assert len(local.items("eval")) == len(
        [r for r in records[300:][:40] if not r["official_category"].startswith("live")]
    )
    _, infos = local.reset(seed=0)
    assert infos["agent_0"]["dataset"] == tmp_path.name
    assert "Heuristic task type: demo" in local.observe("agent_0")


def test_bad_data_gets_a_clear_error(bfcl_data: Path, tmp_path: Path) -> None:
    wrong = tmp_path / "humaneval.jsonl"
    wrong.write_text(json.dumps({"task_id": "HumanEval/0", "prompt": "def f():"}) + "\n")
    with pytest.raises(ValueError, match="lacks official_category, user_prompt, function"):
        collabzoo.make("bfcl", data=wrong)
    env = collabzoo.make("bfcl", data=bfcl_data, split="all")
    rows_ = [dict(r.record) for r in env.items("all")[:10]]
    del rows_[4]["ground_truth"]
    partial = tmp_path / "rows.jsonl"
    partial.write_text("".join(json.dumps(r) + "\n" for r in rows_))
    with pytest.raises(ValueError, match="row 4 lacks ground_truth"):
        collabzoo.make("bfcl", data=partial)
    source = tmp_path / "bfcl"
    (source / "possible_answer").mkdir(parents=True)
    for name in ("BFCL_v4_parallel.json", "possible_answer/BFCL_v4_parallel.json"):
        (source / name).write_text((bfcl_data / name).read_text())
    assert len(collabzoo.make("bfcl", data=source, categories=["parallel"]).items()) == 160
    assert len(collabzoo.make("bfcl", data=source / "BFCL_v4_parallel.json").items()) == 160
    with pytest.raises(FileNotFoundError, match="no BFCL question file BFCL_v4_parallel_multiple"):
        collabzoo.make("bfcl", data=source)
    (source / "possible_answer" / "BFCL_v4_parallel.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"possible answers .* are missing"):
        collabzoo.make("bfcl", data=source / "BFCL_v4_parallel.json")
    with pytest.raises(ValueError, match=r"got \('parallel',\) \(those of"):
        collabzoo.make("bfclmultiturn", data=bfcl_data / "BFCL_v4_parallel.json")
    with pytest.raises(FileNotFoundError, match="neither an existing file"):
        collabzoo.make("bfcl", data=str(tmp_path / "missing" / "rows.jsonl"))
    with pytest.raises(ValueError, match="categories must be"):
        collabzoo.make("bfcl", data=bfcl_data, categories=["simple"])
    with pytest.raises(ValueError, match="unknown reward_weights"):
        collabzoo.make("bfcl", data=bfcl_data, reward_weights={"parse": 1.0})
    with pytest.raises(ValueError, match="role_mode"):
        collabzoo.make("bfcl", data=bfcl_data, role_mode="round_robin")


HUB_RUN = r"""
import glob, json, os, shutil, sys
import datasets
cache, hub_cache, rows_file = sys.argv[1], sys.argv[2], sys.argv[3]
import collabzoo
from collabzoo.envs import hub
from collabzoo.envs.hub import DatasetUnavailable


def loaded(env):
    _, infos = env.reset(seed=0)
    return {
        "train": [r.row_id for r in env.items("train")],
        "eval": [r.row_id for r in env.items("eval")],
        "dataset": infos["agent_0"]["dataset"],
        "records": [r.record for r in env.items("all")],
    }


try:
    collabzoo.make("bfcl")
    sys.exit("no error without a copy")
except DatasetUnavailable as error:
    advice = str(error)
rows = json.load(open(rows_file))
parts = {"train": rows[:300], "eval": rows[300:]}
# 1. the hub set in the local `datasets` cache (schemas and answers as JSON text)
files = {}
for split, part in parts.items():
    files[split] = os.path.join(cache, f"{split}.jsonl")
    with open(files[split], "w") as f:
        for r in part:
            text = {k: json.dumps(r[k]) for k in ("function", "ground_truth")}
            f.write(json.dumps({**r, **text}) + "\n")
datasets.load_dataset("json", data_files=files, cache_dir=cache)
found = glob.glob(os.path.join(cache, "json", "*", "*", "*", "json-train.arrow"))
target = os.path.join(cache, "OpenMLRL___bfcl-v4-parallel-native", "default", "0.0.0", "0" * 8)
shutil.copytree(os.path.dirname(found[0]), target)
for split in parts:
    os.rename(os.path.join(target, f"json-{split}.arrow"),
              os.path.join(target, f"bfcl-v4-parallel-native-{split}.arrow"))
hub._unavailable.clear()  # this process found no copy above and remembers it: forget that
through_datasets = loaded(collabzoo.make("bfcl"))
# 2. the hub set's files in the hub cache, as the reference downloads them
repo = os.path.join(hub_cache, "datasets--OpenMLRL--BFCL-V4-Parallel-Native")
commit = "0" * 40
os.makedirs(os.path.join(repo, "refs"))
open(os.path.join(repo, "refs", "main"), "w").write(commit)
snapshot = os.path.join(repo, "snapshots", commit)
os.makedirs(snapshot)
for split, part in parts.items():
    with open(os.path.join(snapshot, f"{split}.jsonl"), "w") as f:
        f.writelines(json.dumps({**r, "task_type": "file"}) + "\n" for r in part)
downloaded = loaded(collabzoo.make("bfcl"))
print(json.dumps({"advice": advice, "datasets": through_datasets, "files": downloaded}))
"""


def test_the_hub_loader_reads_the_hub_cache_and_a_real_datasets_cache(
    bfcl_data: Path, tmp_path: Path
) -> None:
    """With the hub offline and nothing cached, `make("bfcl")` says what to pass; with the hub
    set in the local `datasets` cache, or its files in the hub cache (both built here from the
    shipped files), it loads the reference's slices (slice, then category filter), rows as
    written."""
    env = collabzoo.make("bfcl", data=bfcl_data, categories=NATIVE_CATEGORIES, split="all")
    records = [dict(r.record, task_type="demo") for r in env.items("all")]
    rows_file = tmp_path / "rows.json"
    rows_file.write_text(json.dumps(records))
    cache, hub_cache = tmp_path / "hf" / "datasets", tmp_path / "hf" / "hub"
    cache.mkdir(parents=True)
    env_vars = {
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf"),
        "HF_DATASETS_CACHE": str(cache),
        "HF_HUB_CACHE": str(hub_cache),
        "PYTHONPATH": str(REPOSITORY),
        "PATH": "/usr/bin:/bin",
    }
    done = subprocess.run(
        [sys.executable, "-c", HUB_RUN, str(cache), str(hub_cache), str(rows_file)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env_vars,
        cwd=REPOSITORY,
    )
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert (
        "data=PATH" in result["advice"] and "OpenMLRL/BFCL-V4-Parallel-Native" in result["advice"]
    )
    keep = ("parallel", "parallel_multiple")
    written = {r["id"]: r for r in records}
    for way, task_type in (("datasets", "demo"), ("files", "file")):
        loaded = result[way]
        assert loaded["train"] == [r["id"] for r in records[:160] if r["official_category"] in keep]
        assert loaded["eval"] == [
            r["id"] for r in records[300:340] if r["official_category"] in keep
        ]
        assert loaded["dataset"] == "OpenMLRL/BFCL-V4-Parallel-Native"
        for record in loaded["records"]:  # the schemas and answers read back as written
            assert record == {**written[record["id"]], "task_type": task_type}, (way, record["id"])


# ----- the env and its teams --------------------------------------------------------------------
@pytest.mark.parametrize("name", ["bfcl", "bfclmultiturn"])
def test_pettingzoo_parallel_api_and_seeds(bfcl_data: Path, name: str) -> None:
    parallel_api_test(collabzoo.make(name, data=bfcl_data), num_cycles=3)
    parallel_seed_test(lambda: collabzoo.make(name, data=bfcl_data))
    env = collabzoo.make(name, data=bfcl_data, split="eval")
    first = env.reset(seed=11)[1]["agent_0"]["task_id"]
    assert env.reset(seed=11)[1]["agent_0"]["task_id"] == first


@pytest.mark.parametrize(("name", "best"), [("bfcl", NATIVE_MAX), ("bfclmultiturn", MULTITURN_MAX)])
def test_the_oracle_splits_the_answers_and_beats_naive(
    bfcl_data: Path, name: str, best: float
) -> None:
    env = collabzoo.make(name, data=bfcl_data, split="all")
    oracle, naive = scripted_team(name, "oracle", env), scripted_team(name, "naive")
    rewards, ast, at_best = [], [], 0
    for index in range(0, len(env.items()), 3):
        observations, _ = env.reset(options={"task": index})
        answers = oracle(observations)
        first, second = (
            len(parse_calls(answers[a], env.item.task.order).calls) for a in env.agents
        )
        assert first - second in (0, 1), "agent_0 takes the odd call"
        _, reward, _, _, infos = env.step(answers)
        observations, _ = env.reset(options={"task": index})
        _, beaten, _, _, _ = env.step(naive(observations))
        assert reward["agent_0"] > beaten["agent_0"]
        rewards.append(reward["agent_0"])
        ast.append(infos["agent_0"]["metrics"]["ast_match"])
        at_best += abs(reward["agent_0"] - best) < 1e-9
    assert sum(ast) / len(ast) > 0.97 and at_best / len(rewards) > 0.7


def test_the_leaderboard_shows_ast_match_per_category_over_its_own_episodes(
    bfcl_data: Path, tmp_path: Path
) -> None:
    """BFCL reports AST match per category. A run over two parallel rows (the oracle misses
    parallel_116: its three gold calls differ only in case, which the reference's lower-cased
    de-duplication collapses) and two parallel_multiple ones: each category's
    column is the mean over its own episodes (50 and 100, not 25 with the others as 0), says
    over how many, and the categories the run did not play are not shown."""
    from collabzoo.bench import BenchRun, parse_team, run_bench
    from collabzoo.bench.leaderboard import leaderboard, render_markdown
    from collabzoo.tasks.bfcl.envs.data import MULTITURN_CATEGORIES
    from collabzoo.tasks.bfcl.family import MULTITURN_STEPS
    from collabzoo.tasks.bfcl.family import NATIVE_CATEGORIES as DECLARED
    from tests.bench_tables import parse_tables

    assert DECLARED == NATIVE_CATEGORIES, "a column for every category the env knows"
    assert tuple(f"multi_turn_{s}_step" for s in MULTITURN_STEPS) == MULTITURN_CATEGORIES
    source = collabzoo.make("bfcl", data=bfcl_data, split="all")
    by_id = {r.row_id: r.record for r in source.items()}
    chosen = ["parallel_116", "parallel_1", "parallel_multiple_0", "parallel_multiple_1"]
    data = tmp_path / "mixed.jsonl"
    data.write_text("".join(json.dumps(by_id[i]) + "\n" for i in chosen), encoding="utf-8")
    run = BenchRun(
        "bfcl", parse_team("scripted:oracle"), split="all", env_kwargs={"data": str(data)}
    )
    document = run_bench(run, tmp_path / "runs", progress=False).document
    finals = {e["task_id"]: e["final_metrics"] for e in document["episodes"]}
    assert [finals[i]["ast_match"] for i in chosen] == [0.0, 1.0, 1.0, 1.0]
    summary = document["summary"]
    assert summary["AST match"]["mean"] == pytest.approx(75.0)
    assert (summary["AST parallel"]["mean"], summary["AST parallel"]["n"]) == (50.0, 2)
    assert (summary["AST parallel_multiple"]["mean"], summary["AST parallel_multiple"]["n"]) == (
        100.0,
        2,
    )
    assert summary["AST live_parallel"]["n"] == 0
    ((_, columns, _),) = leaderboard([document], published=False)
    assert [c.name for c in columns.columns] == [
        "AST match",
        "Exact",
        "AST parallel",
        "AST parallel_multiple",
    ]
    (row,) = parse_tables(render_markdown([document], published=False))["BFCL"]
    assert row["AST parallel %"] == "50.0 ± 635.3 (2 of 4 episodes)"
    assert (
        row["AST parallel_multiple %"].startswith("100.0")
        and "(2 of 4 episodes)" in row["AST parallel_multiple %"]
    )
    assert row["AST match %"].startswith("75.0") and "episodes" not in row["AST match %"]


def test_the_oracle_follows_the_role_mode(bfcl_data: Path) -> None:
    env = collabzoo.make("bfcl", data=bfcl_data, role_mode="odd_even")
    oracle = scripted_team("bfcl", "oracle", env)
    observations, _ = env.reset(options={"task": "parallel_1"})
    assert observations["agent_0"] != observations["agent_1"]
    answers = oracle(observations)
    assert "d_time=4" in answers["agent_0"] and "d_time=10" in answers["agent_1"]
    solo = collabzoo.make("bfcl", data=bfcl_data, single_agent=True)
    observations, _ = solo.reset(options={"task": "parallel_1"})
    assert observations["caller"].startswith("You are a single function-calling agent.")
    _, reward, *_ = solo.step(scripted_team("bfcl", "oracle", solo)(observations))
    assert reward["caller"] == pytest.approx(NATIVE_MAX), "one agent, the whole answer"


@pytest.mark.parametrize("name", ["bfcl", "bfclmultiturn"])
def test_the_single_protocol_plays_the_references_one_agent_baseline(
    bfcl_data: Path, name: str
) -> None:
    """Both variants take `single_agent` in their signature, where the bench's `single` protocol
    looks for it, so it plays the reference's baseline prompt (one caller), not the two roles'
    prompts joined (the multi-turn env once hid it behind **kwargs: 13,000-token prompts)."""
    env_class = type(collabzoo.make(name, data=bfcl_data))
    kwargs = make_protocol("single").env_kwargs(env_class)
    assert kwargs == {"single_agent": True}
    solo = collabzoo.make(name, data=bfcl_data, **kwargs)
    observations, _ = solo.reset(seed=0)
    assert list(observations) == ["caller"]
    assert observations["caller"].startswith("You are a single function-calling agent")


def test_reward_options_change_only_what_they_name(rows: dict) -> None:
    task = rows["native"]["parallel_1"].task
    calls = _sources(task)
    answers = ["\n".join(calls[:1] * 2), calls[1]]
    kept = score_native(answers, task).breakdown
    charged = score_native(answers, task, NativeRules(self_duplicate_mode="penalize")).breakdown
    assert kept.components["self_duplicates"] == 0.0 and kept.total == pytest.approx(NATIVE_MAX)
    assert charged.total == pytest.approx(NATIVE_MAX - 0.10 * 0.5)
    heavier = score_native(answers, task, NativeRules(exact_bonus=0.5)).breakdown
    assert heavier.components["exact"] == 0.5 and heavier.total == pytest.approx(1.2)
    assert heavier.components["clamp"] == pytest.approx(-0.2)
    step = next(iter(rows["multiturn"].values())).task
    assert score_multiturn(["[]", "[]"], step, MultiTurnRules()).breakdown.total == pytest.approx(
        -0.25
    )
