"""ClassEval: conformance with the reference's own reward code, the 100 canonical classes in the
sandbox, the env (prompts, feedback, rejected parts, splits), the hub loader against a local
`datasets` cache, and bad data.

The conformance cases (tests/data/classeval_conformance.json) were scored by the reference
(OpenMLRL/LLM_Collab_Code_Completion) in a container of ClassEval's sandbox image (the
sandbox's Python with the pinned packages its tasks import); see
benchmarks/classeval_conformance.py. Every case is replayed here, in a pool of that image: its
answers (an oracle answer is named, rebuilt and checked against the stored hash), our merged
program against the reference's by hash, the three levels, the test counts and the reward
within 1e-6.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pettingzoo.test import parallel_api_test, parallel_seed_test

import collabzoo
from collabzoo.sandbox import docker_available, get_sandbox
from collabzoo.sandbox.probe import isolation_proven
from collabzoo.sandbox.process import lacking_packages
from collabzoo.tasks.classeval import rewards as rules
from collabzoo.tasks.classeval.rewards import harness, reading
from collabzoo.tasks.classeval.teams import env_oracle, naive, oracle_answers
from tests.conftest import REPOSITORY, benchmark_module, require, require_docker, skip_or_fail

CONFORMANCE = REPOSITORY / "tests" / "data" / "classeval_conformance.json"
TOLERANCE = 1e-6

DECORATED = "decorated stubs: the merge leaves each @staticmethod stub below the agent's method"
REFERENCE_FAILS = {
    3: "a decorated stub (@staticmethod) overrides the merged method",
    5: "the skeleton opens a docstring it never closes: no method to write, 15 tests fail",
    9: DECORATED,
    11: DECORATED,
    18: DECORATED,
    22: "the skeleton does not parse: no method to write, the program never compiles",
    23: DECORATED,
    24: DECORATED,
    25: "the tests call set_cookies, which the skeleton lacks",
    31: DECORATED,
    39: DECORATED,
    44: DECORATED,
    45: "the skeleton imports Image and ImageEnhance, not the ImageChops the solution uses",
    46: DECORATED,
    48: DECORATED,
    49: "the tests need matches_requirements, which the skeleton lacks",
    51: DECORATED,
    52: "nltk: the skeleton downloads its corpora at import, and no sandbox reaches the network",
    64: DECORATED,
    66: DECORATED,
    80: DECORATED,
    81: DECORATED,
    91: "a decorated stub (fix_path)",
    92: "the skeleton lacks `import sqlite3`",
    93: DECORATED,
}
"""The tasks whose canonical solution, split by the reference's rule, does not reach 6.0 in the
reference itself (run in the same image), and why."""
THIRD_PARTY = {
    28: "pandas",
    30: "numpy",
    34: "docx (python-docx)",
    38: "openpyxl",
    44: "gensim, bs4",
    45: "PIL (Pillow)",
    48: "netifaces",
    51: "numpy",
    52: "nltk, and nltk.download of its data at import",
    57: "numpy",
    59: "numpy",
    69: "PyPDF2, reportlab",
    93: "numpy, gensim",
}
"""Tasks whose code imports third-party modules: ClassEval's sandbox image holds all of them but
nltk (`harness.SANDBOX_PACKAGES`)."""
NOT_IN_IMAGE = {52: "nltk"}
CLASSEVAL_METRIC_QUIRKS = {
    69: (
        0.0,
        0.5,
        "the data's methods_info maps merge_pdfs to TestPDFHandler, a base class without "
        "tests, which its test classes list too; ClassEval's own evaluation counts a class "
        "that runs no test as an error",
    ),
}
"""Passing tasks that ClassEval's own metrics can never count as passed: (class_pass,
method_pass, why)."""
MACHINE_DEPENDENT = {
    0: "compares with today's date",
    17: "expects events of 2024 to be upcoming",
    20: "compares with today's date",
    35: "test_solve_3 runs for about 26 s of CPU against its 40 s alarm",
    36: "compares with today's date",
    58: "unseeded randomness",
}
"""Tasks whose tests depend on the machine, not on the answer."""


@pytest.fixture(scope="module")
def data_path(shared_data: Path) -> Path:
    return require(shared_data / "classeval" / "ClassEval_data.json", "the ClassEval data")


@pytest.fixture(scope="module")
def rows(data_path: Path) -> list[dict[str, Any]]:
    return json.loads(data_path.read_text())


@pytest.fixture(scope="module")
def tasks(rows: list[dict[str, Any]]) -> list[rules.ClassTask]:
    return [rules.ClassTask.from_record(r) for r in rows]


@pytest.fixture(scope="module")
def conformance(data_path: Path) -> dict[str, Any]:
    document = json.loads(CONFORMANCE.read_text())
    assert document["reference"]["commit"].startswith("1b754a3")
    shipped = hashlib.sha256(data_path.read_bytes()).hexdigest()
    assert document["reference"]["data_sha256"] == shipped, "scored on another data file"
    return document


@pytest.fixture(scope="module")
def classeval_sandbox(request: pytest.FixtureRequest):
    """ClassEval's sandbox: a Docker pool of the image holding the packages its tasks import
    (built on first use; .ci/run builds it beforehand), else, outside CI only, the process
    backend (which warns about the packages this interpreter lacks)."""
    if os.environ.get("CI") == "true" or docker_available()[0]:
        require_docker()
        kind = "docker"
    else:
        kind = "process"
    with get_sandbox(kind, size=2, packages=harness.SANDBOX_PACKAGES) as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def built(
    conformance: dict[str, Any], rows: list[dict[str, Any]], tasks: list[rules.ClassTask]
) -> list[rules.Build]:
    """Every case's answers (checked against the hash of what the reference scored), built."""
    generator = benchmark_module("classeval_conformance")
    builds = []
    for case in conformance["cases"]:
        answers = generator.resolve_answers(case, rows)
        assert generator.answers_digest(answers) == case["answers_sha256"], case["kind"]
        builds.append(rules.build(tasks[case["task"]], *answers))
    return builds


@pytest.fixture(scope="module")
def replayed(
    conformance: dict[str, Any], built: list[rules.Build], classeval_sandbox
) -> list[tuple[dict[str, Any], rules.Build, harness.TestRun]]:
    """Every case run in the sandbox (one `run_many` per test timeout)."""
    cases, builds = conformance["cases"], built
    runs: list[harness.TestRun | None] = [None] * len(cases)
    by_timeout: dict[float, list[int]] = {}
    for index, case in enumerate(cases):
        by_timeout.setdefault(case.get("test_timeout", rules.TEST_TIMEOUT), []).append(index)
    for timeout, indices in by_timeout.items():
        ran = rules.run_builds(
            [builds[i] for i in indices], classeval_sandbox, test_timeout=timeout
        )
        for index, run in zip(indices, ran, strict=True):
            runs[index] = run
    return [(c, b, r) for c, b, r in zip(cases, builds, runs, strict=True) if r is not None]


# ----- conformance --------------------------------------------------------------------------------
def test_the_conformance_set_covers_what_the_issue_asks(conformance: dict[str, Any]) -> None:
    kinds: dict[str, int] = {}
    for case in conformance["cases"]:
        kinds[case["kind"]] = kinds.get(case["kind"], 0) + 1
    assert len(conformance["cases"]) >= 300
    for kind in (
        "oracle", "agent_0_empty", "agent_1_empty", "overlap_all", "swapped", "syntax_error",
        "fences", "prose", "nested_def", "helper_def", "failing_method", "truncated",
        "timeout_loop", "timeout_run", "import_output",
    ):  # fmt: skip
        assert kinds.get(kind, 0) >= 2, kind
    assert kinds["oracle"] == 100


@pytest.mark.slow(seconds=40)  # builds every case (the merge and autopep8), used by the rest
def test_merge_and_static_levels_equal_the_references(
    conformance: dict[str, Any], built: list[rules.Build]
) -> None:
    """Without running anything: the merged program (by hash), the accepted methods, the
    compile check and levels 1 and 3, on every case (machine-dependent ones included)."""
    wrong = []
    for case, b in zip(conformance["cases"], built, strict=True):
        ref = case["reference"]
        run = harness.TestRun()
        got = rules.levels(b, run)
        digest = hashlib.sha256(b.merged.encode("utf-8", "surrogatepass")).hexdigest()
        if (
            digest != ref["merged_sha256"]
            or sorted(b.built) != ref["accepted"]
            or b.compiles != ref["syntax_ok"]
            or abs(got["level1_syntax"] - ref["level1_syntax"]) > TOLERANCE
            or abs(got["level3_overlap_penalty"] - ref["level3_overlap_penalty"]) > TOLERANCE
        ):
            wrong.append((case["kind"], case["task"]))
    assert not wrong


def _facts(lines: list[str]) -> dict[str, Any]:
    text = "\n".join(lines)
    passed = re.search(r"passed: (\d+)/(\d+)", text)
    failing = re.search(r"- Failing (?:cases|tests): (.*)", text)
    return {
        "syntax": "Syntax: OK" in text,
        "timed_out": "timed out" in text,
        "passed": passed.groups() if passed else None,
        "failing": failing.group(1) if failing else None,
    }


@pytest.mark.slow(seconds=80)  # runs the 365 cases' programs in the sandbox, used by the rest
def test_rewards_and_test_counts_equal_the_references_in_the_sandbox(
    replayed: list[tuple[dict[str, Any], rules.Build, harness.TestRun]],
) -> None:
    wrong = []
    compared = 0
    for case, b, run in replayed:
        if case.get("machine_dependent"):
            continue
        compared += 1
        ref = case["reference"]
        out = rules.breakdown(b, run)
        terms = {k: ref[k] if ref["syntax_ok"] else 0.0 for k in rules.COMPONENTS}
        mine = rules.diagnostics(rules.ClassEvalOutcome(out, b, run)).splitlines()
        checks = {
            "total": abs(out.total - ref["total"]) <= TOLERANCE,
            "terms": all(abs(out.components[k] - v) <= TOLERANCE for k, v in terms.items()),
            "counts": (run.tests_run, run.passed, run.timed_out)
            == (ref["tests_run"], ref["passed"], ref["timeout"]),
            "failing": run.failing_count == ref["failing_count"],
            "diagnostics": _facts(mine) == _facts(ref["diagnostics"]),
        }
        if not all(checks.values()):
            wrong.append((case["kind"], case["task"], [k for k, ok in checks.items() if not ok]))
    assert compared >= 300 and not wrong


def test_timed_out_tests_leave_the_denominator(
    replayed: list[tuple[dict[str, Any], rules.Build, harness.TestRun]],
) -> None:
    """After 3 timed-out tests the run stops and the tests not run do not count; a run past its
    whole limit counts no test at all (both as the reference)."""
    timing = [(c, r) for c, _, r in replayed if c["kind"].startswith("timeout")]
    stopped = [(c, r) for c, r in timing if r.timeouts == rules.MAX_TIMEOUTS]
    assert len(stopped) >= 2
    for case, run in stopped:
        total = sum(size for size, _ in run.classes.values())
        assert run.counted and run.tests_run < total
        assert run.tests_run == case["reference"]["tests_run"]
    whole = [r for c, r in timing if c["reference"]["timeout"]]
    assert whole and all(r.timed_out and r.tests_run == 0 for r in whole)


# ----- the 100 canonical classes ------------------------------------------------------------------
def test_the_100_canonical_classes_pass_except_where_the_reference_fails(
    replayed: list[tuple[dict[str, Any], rules.Build, harness.TestRun]], classeval_sandbox
) -> None:
    """Every canonical solution, split by the reference's rule, in ClassEval's sandbox: 6.0
    except where the reference itself (in the same image) scores less, each named above with
    its reason, and the tasks whose tests depend on the machine."""
    lacking = (
        lacking_packages(harness.SANDBOX_PACKAGES) if classeval_sandbox.kind == "process" else []
    )
    if lacking:
        pytest.skip(f"the process sandbox's interpreter lacks {lacking}: start Docker to run this")
    oracle = {c["task"]: (c, b, r) for c, b, r in replayed if c["kind"] == "oracle"}
    assert len(oracle) == 100
    below = {}
    for task, (case, b, run) in oracle.items():
        out = rules.breakdown(b, run)
        if out.total < rules.MAX_SCORE - TOLERANCE:
            below[task] = out
        if task not in MACHINE_DEPENDENT:
            assert not case.get("machine_dependent"), task
            assert abs(out.total - case["reference"]["total"]) <= TOLERANCE, task
    assert set(below) - set(MACHINE_DEPENDENT) == set(REFERENCE_FAILS)
    for task in REFERENCE_FAILS:
        assert oracle[task][0]["reference"]["total"] < rules.MAX_SCORE - TOLERANCE, task
    for task in set(THIRD_PARTY) - set(NOT_IN_IMAGE):  # every import works in the image
        run = oracle[task][2]
        assert run.status == "ran" and run.tests_run > 0, (task, run.status, run.error)
    for task, module in NOT_IN_IMAGE.items():
        run = oracle[task][2]
        assert run.status == "import_error" and module in run.error, (task, run.error)
        assert below[task].components["level1_syntax"] == pytest.approx(2.0)
    passing = [task for task in oracle if task not in below]
    assert len(passing) >= 70
    assert set(THIRD_PARTY) - set(REFERENCE_FAILS) <= set(passing)
    for task in passing:
        metrics = rules.breakdown(*oracle[task][1:]).metrics
        class_pass, method_pass, _ = CLASSEVAL_METRIC_QUIRKS.get(task, (1.0, 1.0, ""))
        assert (metrics["class_pass"], metrics["method_pass"]) == (class_pass, method_pass), task


# ----- the rules on their own ---------------------------------------------------------------------
def test_methods_and_roles_match_the_specs_counts(tasks: list[rules.ClassTask]) -> None:
    assert sum(len(t.methods) for t in tasks) == 411
    assert sum(len(t.methods) for t in tasks[:66]) == 258
    assert sum(len(t.methods) for t in tasks[66:82]) == 70
    assert sum(not t.assigned(0) for t in tasks) == 33
    assert sum(not t.assigned(0) for t in tasks[:66]) == 23
    assert sum(not t.assigned(1) for t in tasks) == 13
    assert sum(len(t.assigned(0)) for t in tasks) == 143
    assert sum("__init__" in t.methods for t in tasks) == 8
    assert not tasks[5].methods and not tasks[22].methods


def test_answer_reading_quirks() -> None:
    assert reading.strip_fence("x\n```python\ndef a(self):\n    pass\n```\nmore") == (
        "def a(self):\n    pass"
    )
    assert reading.strip_fence("```python def a(self): pass") == ""
    assert reading.strip_fence("```py\ndef a(self):\n    pass") == "def a(self):\n    pass"
    cut = reading.snippets(
        "def a(self):\n    def inner():\n        return 1\n    return inner()\nprose", ["a"]
    )
    assert cut == {"a": "def a(self):"}
    trailing = reading.snippets("def a(self):\n    return 1\nThat is all.", ["a"])
    assert trailing["a"].endswith("That is all.") and not reading.parses(trailing["a"])
    assert reading.snippets("def a(self):\n    return 1\ndef a(self):\n    return 2", ["a"]) == {
        "a": "def a(self):\n    return 2"
    }


def test_a_decorated_stub_keeps_overriding_the_agents_method() -> None:
    skeleton = (
        "class K:\n    @staticmethod\n    def f(x):\n        pass\n\n"
        "    def g(self, y):\n        pass\n"
    )
    task = rules.ClassTask("ClassEval_x", skeleton, "")
    b = rules.build(task, "def f(x):\n    return x", "def g(self, y):\n    return y")
    tree = reading.parse(b.merged)
    body = [n.name for n in tree.body[0].body]
    assert body == ["f", "f", "g"], b.merged  # the agent's f, then the stub that overrides it
    assert "@staticmethod" not in b.merged.split("def f")[0].split("class K:")[1]


def test_the_packages_image_keeps_the_sandboxs_hardening(classeval_sandbox) -> None:
    """The layer holding ClassEval's packages changes nothing the isolation probe checks: the
    root stays read-only (a program cannot plant a module beside numpy) and programs run as
    nobody, with the pinned versions importable."""
    if classeval_sandbox.kind != "docker":
        pytest.skip("the packages image is Docker's; start Docker to check it")
    proven, summary = isolation_proven(classeval_sandbox)
    assert proven, summary
    program = (
        "import os\n"
        "def f():\n"
        "    import numpy, pandas, gensim, netifaces, PyPDF2\n"
        "    folder = os.path.dirname(numpy.__file__)\n"
        "    try:\n"
        "        with open(os.path.join(folder, 'planted.py'), 'w') as handle:\n"
        "            handle.write('x = 1')\n"
        "        wrote = True\n"
        "    except OSError:\n"
        "        wrote = False\n"
        "    return [wrote, os.getuid(), folder, numpy.__version__, PyPDF2.__version__]\n"
    )
    pins = dict(p.split("==") for p in harness.SANDBOX_PACKAGES)
    result = classeval_sandbox.run(
        program,
        [
            "assert candidate()[:2] == [False, 65534]",
            "assert candidate()[2].startswith('/opt/collabzoo/site/')",
            f"assert candidate()[3:] == [{pins['numpy']!r}, {pins['PyPDF2']!r}]",
        ],
        60.0,
        entry_point="f",
    )
    assert result.passed == (True, True, True), result


def test_the_harness_counts_what_the_reference_counts(code_sandbox) -> None:
    """Stubs that pass, an import-time print (the reference cannot read its child's report),
    a SystemExit at import, and the per-class counts of ClassEval's metrics."""
    test = (
        "import unittest\n\nclass KTestA(unittest.TestCase):\n"
        "    def test_1(self):\n        self.assertIsNone(K().a())\n"
        "    def test_2(self):\n        self.assertEqual(K().a(), 1)\n\n"
        "class KTestB(unittest.TestCase):\n    @unittest.skip('no')\n"
        "    def test_1(self):\n        pass\n"
    )
    skeleton = "class K:\n    def a(self):\n        pass\n"
    task = rules.ClassTask("ClassEval_t", skeleton, test, test_classes=("KTestA", "KTestB"))
    printed = rules.ClassTask("ClassEval_t", skeleton + "print('hello')\n", test)
    exits = rules.ClassTask("ClassEval_t", skeleton + "raise SystemExit(2)\n", test)
    outs = rules.evaluate_batch(
        [
            (task, "", ""),
            (task, "def a(self):\n    return 1", ""),
            (printed, "", ""),
            (exits, "", ""),
        ],
        code_sandbox,
    )
    stub, one, polluted, exited = (o.run for o in outs)
    assert (stub.tests_run, stub.passed, stub.skipped) == (3, 1, 1)
    assert outs[0].breakdown.components["level2_tests"] == pytest.approx(4 / 3)
    assert outs[0].breakdown.components["level1_syntax"] == 0.0
    assert (one.tests_run, one.passed) == (3, 1) and one.classes["KTestA"] == (2, 1)
    assert outs[1].breakdown.total == pytest.approx(2.0 + 4 / 3)
    assert polluted.status == "polluted" and polluted.tests_run == 0
    assert polluted.classes["KTestA"] == (2, 1)
    assert exited.status == "exit" and exited.tests_run == 0
    assert outs[0].breakdown.metrics["class_pass"] == 0.0


# ----- the env ------------------------------------------------------------------------------------
@pytest.fixture
def env(data_path: Path, code_sandbox):
    return collabzoo.make("classeval", data=str(data_path), sandbox=code_sandbox)


def test_splits_and_options(env, tasks) -> None:
    assert [t.task_id for t in env.items("train")] == [f"ClassEval_{i}" for i in range(66)]
    assert [t.task_id for t in env.items("eval")] == [f"ClassEval_{i}" for i in range(66, 82)]
    assert len(env.items("all")) == 100
    _, infos = env.reset(options={"task": "ClassEval_70", "split": "eval"})
    assert infos["agent_0"]["task_id"] == "ClassEval_70"
    with pytest.raises(ValueError, match="in split 'eval'"):
        env.reset(options={"task": "ClassEval_70"})
    _, infos = env.reset(seed=3)
    again = collabzoo.make("classeval", data=env._data, sandbox=env.sandbox)
    assert again.reset(seed=3)[1]["agent_0"]["task_id"] == infos["agent_0"]["task_id"]


def test_prompts_name_each_agents_methods(env) -> None:
    observations, infos = env.reset(options={"task": "ClassEval_1"})
    task = env.item
    for i, agent in enumerate(env.agents):
        text = observations[agent]
        assert text.startswith(f"You are {agent},")
        assert all(f"- {m}\n" in text for m in task.assigned(i))
        assert f"SKELETON START\n{task.shown_skeleton}\nSKELETON END" in text
    assert infos["agent_0"]["assigned"]["agent_0"] == list(task.assigned(0))
    observations, _ = env.reset(options={"task": "ClassEval_2"})  # agent 0 has no method
    assert "(none)" in observations["agent_0"] and "empty answer" in observations["agent_0"]


def test_oracle_scores_six_and_the_second_turn_holds_history_and_diagnostics(env) -> None:
    observations, _ = env.reset(options={"task": "ClassEval_1"})
    oracle = env_oracle(env)
    answers = {a: oracle(observations[a]) for a in env.agents}
    observations, rewards, *_, infos = env.step(
        {
            "agent_0": "Sure!\n```python\n" + answers["agent_0"] + "\n```",
            "agent_1": answers["agent_1"],
        }
    )
    assert rewards["agent_0"] == pytest.approx(rules.MAX_SCORE)
    metrics = infos["agent_0"]["metrics"]
    assert metrics["class_pass"] == 1.0 and metrics["method_pass"] == 1.0
    second = observations["agent_0"]
    assert second.startswith("You are agent_0.")
    assert "- Turn 1 prompt:\nYou are agent_0, one of two" in second
    assert "- Turn 1 answer:\ndef calculate_circle_area" in second and "Sure!" not in second
    assert "Hidden tests passed: 26/26" in second and "```python" in second
    observations, rewards, terminations, *_ = env.step(
        {a: oracle(observations[a]) for a in env.agents}
    )
    assert rewards["agent_1"] == pytest.approx(rules.MAX_SCORE) and all(terminations.values())


def test_malformed_answers_are_reported_never_a_crash(env) -> None:
    env.reset(options={"task": "ClassEval_1"})
    task = env.item
    mine, theirs = task.assigned(0), task.assigned(1)
    broken = (
        f"def {mine[0]}(self)\n    return 1\n\ndef helper(x):\n    return x\n\n"
        f"def {theirs[0]}(self, height):\n    return 0"
    )
    _, rewards, _, _, infos = env.step({"agent_0": broken, "agent_1": "\x00 not code at all ```"})
    parsed = infos["agent_0"]["parsed"]
    assert (
        parsed["rejected"][0]["method"] == mine[0]
        and "does not parse" in parsed["rejected"][0]["why"]
    )
    assert parsed["not_yours"] == [theirs[0]] and parsed["other_defs"] == ["helper"]
    assert parsed["accepted"] == [] and parsed["written"] == [mine[0], theirs[0]]
    assert infos["agent_1"]["parsed"]["written"] == [] and infos["agent_1"]["parsed"]["fenced"]
    assert infos["agent_0"]["reward_components"]["level1_syntax"] == 0.0
    assert rewards["agent_0"] == pytest.approx(sum(infos["agent_0"]["reward_components"].values()))


def test_naive_team_earns_level_one_only(env) -> None:
    observations, _ = env.reset(options={"task": "ClassEval_1"})
    _, rewards, *_, infos = env.step({a: naive(observations[a]) for a in env.agents})
    assert rewards["agent_0"] == pytest.approx(2.0)
    assert infos["agent_0"]["metrics"]["class_pass"] == 0.0


def test_parallel_api_and_seed(data_path: Path, code_sandbox) -> None:
    def make() -> Any:
        return collabzoo.make("classeval", data=str(data_path), sandbox=code_sandbox)

    parallel_api_test(make(), num_cycles=4)
    parallel_seed_test(make, num_cycles=4)


def test_plain_feedback_and_memory_none(data_path: Path, code_sandbox) -> None:
    env = collabzoo.make(
        "classeval", data=str(data_path), sandbox=code_sandbox, feedback="plain", memory="none"
    )
    observations, _ = env.reset(options={"task": "ClassEval_1"})
    observations, *_ = env.step({a: "" for a in env.agents})
    assert "Diagnostics" not in observations["agent_1"]
    assert "Turn 1 prompt" not in observations["agent_1"]
    assert "SKELETON START" in observations["agent_1"]


# ----- data ---------------------------------------------------------------------------------------
def test_bad_data_gets_a_clear_error(tmp_path: Path, rows: list[dict[str, Any]]) -> None:
    lacking = tmp_path / "lacking.json"
    lacking.write_text(json.dumps([{k: v for k, v in rows[0].items() if k != "test"}]))
    with pytest.raises(ValueError, match="row 0 lacks test"):
        collabzoo.make("classeval", data=str(lacking))
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps([{**rows[0], "task_id": "HumanEval/0"}]))
    with pytest.raises(ValueError, match="another task's rows"):
        collabzoo.make("classeval", data=str(foreign))
    with pytest.raises(FileNotFoundError):
        collabzoo.make("classeval", data=str(tmp_path / "missing.json"))


BUILD_CACHE = """
import glob, json, os, shutil, sys
import datasets
cache, data = sys.argv[1], sys.argv[2]
datasets.load_dataset("json", data_files={"test": data}, cache_dir=cache)
built = glob.glob(os.path.join(cache, "json", "*", "*", "*", "json-test.arrow"))[0]
target = os.path.join(cache, "FudanSELab___class_eval", "default", "0.0.0", "0" * 8)
shutil.copytree(os.path.dirname(built), target)
os.rename(os.path.join(target, "json-test.arrow"), os.path.join(target, "class_eval-test.arrow"))
"""
LOAD_FROM_HUB = """
import json
import collabzoo
env = collabzoo.make("classeval")
items = env.items("all")
print(json.dumps({"ids": [t.task_id for t in items], "methods": [list(t.methods) for t in items],
                  "tests": [list(t.method_tests) for t in items]}))
"""


def test_the_hub_loader_reads_a_local_datasets_cache(
    tmp_path: Path, data_path: Path, tasks: list[rules.ClassTask]
) -> None:
    """A real `datasets` load of `FudanSELab/ClassEval` (split test) from a cache built from the
    shipped file, the hub unreachable: the same 100 tasks as the file."""
    cache = tmp_path / "hf" / "datasets"
    cache.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HTTP", "http"))}
    env.update(
        HF_HUB_OFFLINE="1",
        HF_HOME=str(tmp_path / "hf"),
        HF_DATASETS_CACHE=str(cache),
        PYTHONPATH=str(REPOSITORY),
    )
    built = subprocess.run(
        [sys.executable, "-c", BUILD_CACHE, str(cache), str(data_path)],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    if built.returncode != 0:
        skip_or_fail(f"this datasets version cannot be given a cache entry here: {built.stderr}")
    done = subprocess.run(
        [sys.executable, "-c", LOAD_FROM_HUB],
        capture_output=True, text=True, timeout=300, env=env, cwd=REPOSITORY,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded["ids"] == [t.task_id for t in tasks]
    assert loaded["methods"] == [list(t.methods) for t in tasks]
    assert loaded["tests"] == [[list(p) for p in t.method_tests] for t in tasks]


def test_without_data_offline_make_fails_in_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path), PYTHONPATH=str(REPOSITORY))
    code = (
        "import collabzoo\nfrom collabzoo.envs.hub import DatasetUnavailable\n"
        "try:\n    collabzoo.make('classeval')\nexcept DatasetUnavailable as e:\n    print(e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env
    )
    assert "data=PATH" in done.stdout and "FudanSELab/ClassEval" in done.stdout


def test_the_oracle_of_every_task_is_its_solution_split(tasks: list[rules.ClassTask]) -> None:
    for task in tasks:
        zero, one = oracle_answers(task)
        assert set(reading.snippets(zero, task.methods)) <= set(task.assigned(0))
        assert set(reading.snippets(one, task.methods)) <= set(task.assigned(1))


def test_self_select_builds_any_agents_valid_block_and_copies_share_the_cache(env) -> None:
    """The reference's other strategy, seeded here: a method both agents wrote is built from
    one of their valid blocks; a lone surrogate (which the parser refuses) is rejected."""
    import copy

    made = collabzoo.make("classeval", data=env._data, sandbox=env.sandbox, self_select=True)
    made.reset(seed=1, options={"task": "ClassEval_1"})
    clone = copy.deepcopy(made)
    assert clone.cache is made.cache and clone.sandbox is made.sandbox
    zero, one = oracle_answers(made.item)
    bad = "def calculate_circle_area(self):\n    return 'x\ud800'"
    *_, infos = made.step({"agent_0": f"{zero}\n\n{one}", "agent_1": f"{one}\n\n{bad}"})
    components = infos["agent_0"]["reward_components"]
    assert components["level1_syntax"] == 2.0 and components["level2_tests"] == 4.0
    assert components["level3_overlap_penalty"] == pytest.approx(-4 / 5)
    assert infos["agent_1"]["parsed"]["rejected"][0]["method"] == "calculate_circle_area"
    _, again, *_ = clone.step({"agent_0": zero, "agent_1": one})
    assert again["agent_0"] == pytest.approx(rules.MAX_SCORE)
