"""The code-generation reward (tasks.md section 3): hand-worked scores on real CoopHumanEval
problems, the test split of `check`, and the static analysis on any text at all."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import collabzoo
from collabzoo.tasks.code import rewards as rules
from tests.conftest import require

# ----- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sandbox(code_sandbox):
    """The session's code sandbox (tests/conftest.py)."""
    return code_sandbox


def _records(path: Path) -> list[dict]:
    if path.name.endswith(".gz"):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def coop(shared_data: Path) -> dict[str, rules.CodeProblem]:
    path = require(shared_data / "coophumaneval" / "CoopHumanEval.json", "CoopHumanEval")
    return {r["task_id"]: rules.CodeProblem.from_record(r) for r in _records(path)}


@pytest.fixture(scope="module")
def humaneval(shared_data: Path) -> list[dict]:
    return _records(require(shared_data / "humaneval" / "HumanEval.jsonl.gz", "HumanEval"))


@pytest.fixture(scope="module")
def x_or_y(coop) -> rules.CodeProblem:
    """CoopHumanEval/0: x if n is prime else y; tests (7,34,12)->34, (15,8,5)->5,
    (2,10,20)->10, (1,100,200)->200, (13,1,2)->1."""
    return coop["CoopHumanEval/0"]


IS_PRIME = """def aux(n):
    if n < 2:
        return False
    for k in range(2, int(n ** 0.5) + 1):
        if n % k == 0:
            return False
    return True"""

MAIN_USING_AUX = """def x_or_y(n, x, y):
    if aux(n):
        return x
    return y"""

WHOLE_SOLUTION_AUX = """def aux(n, x, y):
    if n < 2:
        return y
    for k in range(2, n):
        if n % k == 0:
            return y
    return x"""

SELF_CONTAINED_MAIN = """def x_or_y(n, x, y):
    if n < 2 or any(n % k == 0 for k in range(2, n)):
        return y
    return x"""


def score(problem, aux, main, sandbox, **options) -> rules.RewardBreakdown:
    return rules.score_code(problem, aux, main, sandbox, **options)


def parts(breakdown) -> dict[str, float]:
    return {k: round(v, 6) for k, v in breakdown.components.items() if v}


# ----- hand-worked rewards ------------------------------------------------------------------------


def test_perfect_pair_with_a_real_helper_scores_4(x_or_y, sandbox) -> None:
    b = score(x_or_y, IS_PRIME, MAIN_USING_AUX, sandbox)
    assert b.total == pytest.approx(4.0) == rules.MAX_SCORE
    assert parts(b) == {
        "aux_defined": 0.4,
        "main_defined": 0.6,
        "syntax_ok": 0.5,
        "tests": 1.0,
        "aux_called": 0.5,
        "not_wrapper": 1.0,
    }
    assert set(b.components) == set(rules.COMPONENTS)
    assert math.isclose(sum(b.components.values()), b.total)
    assert b.metrics["pass"] == 1.0 and b.metrics["pass_fraction"] == 1.0
    assert b.metrics["aux_used"] == 1.0 and b.metrics["tests_total"] == 5.0


def test_factorize_uses_the_prompts_import(coop, sandbox) -> None:
    problem = coop["CoopHumanEval/15"]
    assert problem.imports == ("from typing import List",)
    aux = "def aux(n: int) -> int:\n    k = 2\n    while n % k:\n        k += 1\n    return k"
    main = (
        "def factorize(n: int) -> List[int]:\n    out: List[int] = []\n    while n > 1:\n"
        "        p = aux(n)\n        out.append(p)\n        n //= p\n    return out"
    )
    outcome = rules.evaluate_code(problem, aux, main, sandbox)
    # the reference binds `math` for every program: the reference reading imports it
    assert outcome.analysis.program.startswith("from typing import List\nimport math\n\ndef aux(")
    assert outcome.breakdown.total == pytest.approx(4.0)


@pytest.mark.parametrize(
    "main",
    [
        "def x_or_y(n, x, y):\n    return aux(n, x, y)",
        'def x_or_y(n, x, y):\n    """Pick."""\n    # delegate\n    result = aux(n, x, y)\n'
        "    return result",
        "def x_or_y(n, x, y):\n    result: int = aux(n, x, y)\n    return result",
        "def x_or_y(n, x, y):\n    return aux(n, x, y) or y",
    ],
    ids=["return-aux", "assign-then-return", "annotated-assign", "return-aux-and-more"],
)
@pytest.mark.parametrize("reading", ["reference", "clean"])
def test_thin_wrappers_miss_the_not_wrapper_bonus(x_or_y, sandbox, main: str, reading) -> None:
    """The reference's line test misses an annotated assignment (its pattern reads the
    annotation as the variable) and calls any one-line `return ...aux...` thin."""
    b = score(x_or_y, WHOLE_SOLUTION_AUX, main, sandbox, answer_reading=reading)
    thin = {"reference": ": int =" not in main, "clean": "or y" not in main}[reading]
    assert b.components["aux_called"] == 0.5
    assert b.components["not_wrapper"] == (0.0 if thin else 1.0)
    assert b.total == pytest.approx(4.0 - (1.0 if thin else 0.0))
    assert b.metrics["thin_wrapper"] == float(thin)


def test_a_wrapper_that_adds_logic_is_not_thin(x_or_y, sandbox) -> None:
    main = "def x_or_y(n, x, y):\n    chosen = aux(n, x, y)\n    return chosen if n else y"
    b = score(x_or_y, WHOLE_SOLUTION_AUX, main, sandbox)
    assert b.total == pytest.approx(4.0)


def test_missing_aux_gives_no_aux_points_but_scoring_goes_on(x_or_y, sandbox) -> None:
    b = score(x_or_y, "I could not think of a helper.", SELF_CONTAINED_MAIN, sandbox)
    assert parts(b) == {"main_defined": 0.6, "syntax_ok": 0.5, "tests": 1.0}
    assert b.total == pytest.approx(2.1)
    assert b.metrics["pass"] == 1.0 and b.metrics["aux_used"] == 0.0


def test_main_calling_a_missing_aux_fails_its_tests(x_or_y, sandbox) -> None:
    outcome = rules.evaluate_code(x_or_y, "", MAIN_USING_AUX, sandbox)
    assert outcome.breakdown.total == pytest.approx(0.6 + 0.5)
    assert outcome.result.error.startswith("NameError")
    # no test passed, so no collaboration bonus even though main calls aux
    assert outcome.breakdown.metrics["aux_used"] == 1.0
    assert outcome.breakdown.components["aux_called"] == 0.0


def test_aux_without_return_is_not_defined_but_still_joins_the_program(x_or_y, sandbox) -> None:
    aux = "def aux(n):\n    print(n)"
    b = score(x_or_y, aux, SELF_CONTAINED_MAIN, sandbox)
    assert b.components["aux_defined"] == 0.0
    # aux exists (without a return), tests pass, but main does not call it
    assert b.total == pytest.approx(2.1)


@pytest.mark.parametrize(
    ("aux", "main", "expected"),
    [
        (IS_PRIME, "", 0.4),
        (IS_PRIME, "def x_or_y(n, x, y):\n    print(x)", 0.4),
        (IS_PRIME, "def other(n, x, y):\n    return x", 0.4),
        ("", "", 0.0),
        ("prose only", "more prose", 0.0),
    ],
    ids=["empty-main", "main-without-return", "wrong-name", "both-empty", "both-prose"],
)
def test_missing_main_stops_scoring(x_or_y, aux: str, main: str, expected: float) -> None:
    # No test runs: no sandbox is needed at all.
    outcome = rules.evaluate_code(x_or_y, aux, main, sandbox=object())
    assert outcome.breakdown.total == pytest.approx(expected)
    assert outcome.result is None and outcome.analysis.program is None
    metrics = outcome.breakdown.metrics
    assert (metrics["tests_passed"], metrics["pass_fraction"], metrics["pass"]) == (0, 0, 0)


def test_syntax_error_stops_after_the_definitions(x_or_y) -> None:
    broken_aux = "def aux(n):\n    if n < 2\n        return False\n    return True"
    outcome = rules.evaluate_code(x_or_y, broken_aux, MAIN_USING_AUX, sandbox=object())
    b = outcome.breakdown
    assert parts(b) == {"aux_defined": 0.4, "main_defined": 0.6}
    problem = outcome.analysis.syntax
    assert (problem.part, problem.part_line) == ("aux", 2)
    assert problem.line == 4 and problem.column >= 1  # after `import math` and a blank line
    text = rules.level_feedback(outcome, "aux")
    assert "Syntax: ERROR in the aux code (yours), line 2, column" in text
    assert "Tests: not run" in text
    partner = rules.level_feedback(outcome, "main")
    assert "the aux code (your partner's), line 2" in partner


def test_partial_passes_add_the_exact_fraction(x_or_y, sandbox) -> None:
    # right for primes (tests 1, 3, 5), wrong for the others (tests 2, 4): 3/5
    main = "def x_or_y(n, x, y):\n    if aux(n):\n        return x\n    return y + 1"
    outcome = rules.evaluate_code(x_or_y, IS_PRIME, main, sandbox)
    b = outcome.breakdown
    assert b.components["tests"] == pytest.approx(0.6)
    assert b.total == pytest.approx(0.4 + 0.6 + 0.5 + 0.6 + 0.5 + 1.0)
    assert b.metrics["pass"] == 0.0 and b.metrics["pass_fraction"] == pytest.approx(0.6)
    assert outcome.result.passed == (True, False, True, False, True)
    assert outcome.result.failed_test == 1


def test_one_passing_test_is_enough_for_the_collaboration_levels(x_or_y, sandbox) -> None:
    """tasks.md: the aux-called and not-a-wrapper levels need at least one passing test. Only
    test 1 (n = 7) passes here: 0.4 + 0.6 + 0.5 + 1/5 + 0.5 + 1.0."""
    main = "def x_or_y(n, x, y):\n    if aux(n) and n == 7:\n        return x\n    return -1"
    outcome = rules.evaluate_code(x_or_y, IS_PRIME, main, sandbox)
    assert outcome.result.passed == (True, False, False, False, False)
    b = outcome.breakdown
    assert b.components["aux_called"] == 0.5 and b.components["not_wrapper"] == 1.0
    assert b.total == pytest.approx(0.4 + 0.6 + 0.5 + 0.2 + 0.5 + 1.0)


def test_fences_and_chatter_around_the_code(x_or_y, sandbox) -> None:
    aux = f"Sure! Here is the helper:\n\n```python\n{IS_PRIME}\n```\n\nIt returns True for primes."
    main = f"Here you go:\n{MAIN_USING_AUX}\nThis uses the helper from my partner."
    assert score(x_or_y, aux, main, sandbox).total == pytest.approx(4.0)
    indented = "    " + MAIN_USING_AUX.replace("\n", "\n    ")
    tilde = f"~~~py\n{IS_PRIME}\n~~~"
    assert score(x_or_y, tilde, indented, sandbox).total == pytest.approx(4.0)


def test_fence_rule() -> None:
    assert rules.clean_answer("no fence\nat all") == "no fence\nat all"
    assert rules.clean_answer("a\n```python\nx = 1\n```\nb\n```\ny = 2\n```\nc") == "x = 1\n\ny = 2"
    assert rules.clean_answer("text\n  ```\n    x = 1\n    y = 2") == "x = 1\ny = 2"
    assert rules.clean_answer("```\n```") == ""
    assert rules.clean_answer("```py\nx = '~~~'\n```") == "x = '~~~'"


def test_unfenced_docstring_at_column_zero_is_kept_whole() -> None:
    # CoopHumanEval prompts have docstring lines at column 0; a model copying them must not
    # lose the rest of its function (the reference's line-based reading cut it there).
    answer = (
        "Here is my solution.\ndef x_or_y(n, x, y):\n    '''Pick one.\n\nFor example:\n"
        ">>> x_or_y(7, 34, 12)\n34\n'''\n    return x\nThat is all."
    )
    found = rules.find_function(answer, "x_or_y")
    assert found is not None and found.parses and found.has_return
    assert found.source.endswith("    return x")


def test_the_last_definition_wins() -> None:
    code = "def aux(x):\n    return 1\n\ndef aux(x):\n    return 2\n"
    assert rules.find_function(code, "aux").source == "def aux(x):\n    return 2"


def test_main_redefining_aux_at_top_level_is_left_out(x_or_y, sandbox) -> None:
    main = "def aux(n):\n    return True\n\n" + MAIN_USING_AUX
    outcome = rules.evaluate_code(x_or_y, IS_PRIME, main, sandbox)
    assert outcome.breakdown.total == pytest.approx(4.0), "answer 1's aux is the one that runs"
    assert outcome.analysis.main_answer_defines_aux and not outcome.analysis.aux_shadowed
    assert "def aux(n):\n    return True" not in outcome.analysis.program
    assert "Your answer also defines aux" in rules.level_feedback(outcome, "main")


def test_main_hiding_aux_inside_itself_earns_no_collaboration_bonus(x_or_y, sandbox) -> None:
    main = (
        "def x_or_y(n, x, y):\n    def aux(m):\n        return m > 1 and all(m % k for k in "
        "range(2, m))\n    if aux(n):\n        return x\n    return y"
    )
    outcome = rules.evaluate_code(x_or_y, IS_PRIME, main, sandbox, answer_reading="clean")
    b = outcome.breakdown
    assert outcome.analysis.aux_shadowed and not outcome.analysis.aux_called
    assert parts(b) == {"aux_defined": 0.4, "main_defined": 0.6, "syntax_ok": 0.5, "tests": 1.0}
    assert "defines its own aux" in rules.level_feedback(outcome, "main")
    # The reference: a nested def closes the enclosing function's block, so main's lines
    # after it are dropped; what is left returns None and fails every test.
    outcome = rules.evaluate_code(x_or_y, IS_PRIME, main, sandbox)
    assert "if aux(n)" not in outcome.analysis.program
    assert parts(outcome.breakdown) == {"aux_defined": 0.4, "main_defined": 0.6, "syntax_ok": 0.5}


def test_aux_ignored_penalty_reference_pattern_and_variants(x_or_y, sandbox) -> None:
    with_space = "def x_or_y(n, x, y):\n    aux (n)\n    if aux(n):\n        return x\n    return y"
    plain = "def x_or_y(n, x, y):\n    aux(n)\n    if aux(n):\n        return x\n    return y"
    assert rules.aux_ignored_reference(with_space)
    assert not rules.aux_ignored_reference(plain)
    assert not rules.aux_ignored_reference("def f(a):\n    aux (ab)\n    return aux(a)")
    b = score(x_or_y, IS_PRIME, with_space, sandbox)
    assert b.components["aux_ignored_penalty"] == -0.5 and b.total == pytest.approx(3.5)
    assert score(x_or_y, IS_PRIME, plain, sandbox).total == pytest.approx(4.0)
    stricter = score(x_or_y, IS_PRIME, plain, sandbox, aux_ignored_rule="statement")
    assert stricter.total == pytest.approx(3.5)
    off = score(x_or_y, IS_PRIME, with_space, sandbox, aux_ignored_rule="off")
    assert off.total == pytest.approx(4.0)
    assert rules.discarded_aux_calls(plain) == (2,)


def test_program_that_fails_to_load_passes_nothing(x_or_y, sandbox) -> None:
    main = "def x_or_y(n, x, y=1 / 0):\n    return aux(n) and x or y"
    outcome = rules.evaluate_code(x_or_y, IS_PRIME, main, sandbox)
    assert outcome.breakdown.total == pytest.approx(1.5)
    assert outcome.result.load_error.startswith("ZeroDivisionError")
    assert "failed to load: ZeroDivisionError" in rules.level_feedback(outcome, "main")


def test_timeouts_stop_after_three(x_or_y, sandbox) -> None:
    main = "def x_or_y(n, x, y):\n    while True:\n        pass\n    return aux(n)"
    outcome = rules.evaluate_code(x_or_y, IS_PRIME, main, sandbox, timeout=0.5)
    assert outcome.breakdown.total == pytest.approx(1.5)
    assert outcome.breakdown.metrics["timed_out"] == 1.0
    assert outcome.result.passed == (False,) * 5


@pytest.mark.parametrize(
    "body",
    [
        "import os\n    os._exit(0)",
        "import sys\n    print('5 passed')\n    sys.exit(0)",
        "class Yes:\n        def __eq__(self, other):\n            return True\n    return Yes()",
    ],
    ids=["exit", "fake-output", "equal-to-anything"],
)
def test_cheating_programs_pass_nothing(x_or_y, sandbox, body: str) -> None:
    main = f"def x_or_y(n, x, y):\n    {body}"
    if "return" not in main:
        main += "\n    return aux(n)"
    b = score(x_or_y, IS_PRIME, main, sandbox)
    assert b.components["tests"] == 0.0 and b.metrics["pass"] == 0.0


def test_single_answer_scored_as_both(x_or_y, sandbox) -> None:
    solution = f"```python\n{IS_PRIME}\n\n\n{MAIN_USING_AUX}\n```"
    assert score(x_or_y, solution, solution, sandbox).total == pytest.approx(4.0)


def test_batch_scores_in_one_sandbox_call(x_or_y, coop, sandbox) -> None:
    class Counting:
        calls = 0

        def run_many(self, jobs):
            Counting.calls += 1
            return sandbox.run_many(jobs)

    pairs = [
        (x_or_y, IS_PRIME, MAIN_USING_AUX),
        (x_or_y, "", ""),
        (x_or_y, WHOLE_SOLUTION_AUX, "def x_or_y(n, x, y):\n    return aux(n, x, y)"),
    ]
    totals = [b.total for b in rules.score_code_batch(pairs, Counting())]
    assert totals == pytest.approx([4.0, 0.0, 3.0])
    assert Counting.calls == 1


def test_a_sandbox_that_loses_results_is_an_error(x_or_y, sandbox) -> None:
    """Fewer results than jobs would silently score some answers as never run."""

    class Losing:
        def run_many(self, jobs):
            return sandbox.run_many(jobs)[:-1]

    pairs = [(x_or_y, IS_PRIME, MAIN_USING_AUX), (x_or_y, IS_PRIME, SELF_CONTAINED_MAIN)]
    with pytest.raises(RuntimeError, match="returned 1 results for 2 jobs"):
        rules.score_code_batch(pairs, Losing())


class ExtraResult:
    """A sandbox answering one result more than it was asked for."""

    def __init__(self, sandbox) -> None:
        self.sandbox = sandbox

    def run_many(self, jobs):
        results = self.sandbox.run_many(jobs)
        return [*results, results[0]]


def test_a_sandbox_that_answers_extra_results_is_an_error(x_or_y, sandbox) -> None:
    pairs = [(x_or_y, IS_PRIME, MAIN_USING_AUX)]
    with pytest.raises(RuntimeError, match="returned 2 results for 1 jobs"):
        rules.score_code_batch(pairs, ExtraResult(sandbox))


@pytest.mark.parametrize("value", [0, -1, True, 2.5, "3"])
def test_max_timeouts_must_be_a_positive_int(x_or_y, value) -> None:
    with pytest.raises(ValueError, match="max_timeouts must be a positive int"):
        rules.evaluate_code(x_or_y, IS_PRIME, MAIN_USING_AUX, sandbox=object(), max_timeouts=value)


@pytest.mark.parametrize("value", [0, 0.0, -1, "3", None])
def test_timeout_must_be_positive_seconds(x_or_y, value) -> None:
    """Refused up front, also when no test would run (main missing: the sandbox's own check
    on each job never comes)."""
    for main in (MAIN_USING_AUX, ""):
        with pytest.raises(ValueError, match="timeout must be positive seconds"):
            rules.evaluate_code(x_or_y, IS_PRIME, main, sandbox=object(), timeout=value)


def test_a_wrapper_of_its_own_aux_is_no_thin_wrapper_of_the_partner(x_or_y, sandbox) -> None:
    """The thin-wrapper metric describes how main uses the partner's aux. A main that binds
    `aux` itself (here a parameter) only wraps its own function: no aux call, no thin
    wrapper, however thin its body."""
    wrapper = "def x_or_y(n, x, y, aux=lambda n, x, y: y):\n    return aux(n, x, y)"
    outcome = rules.evaluate_code(x_or_y, IS_PRIME, wrapper, sandbox, answer_reading="clean")
    assert outcome.analysis.thin_wrapper and outcome.analysis.aux_shadowed
    metrics = outcome.breakdown.metrics
    assert (metrics["aux_used"], metrics["thin_wrapper"]) == (0.0, 0.0)


def test_one_timeout_allowed_is_a_valid_setting(x_or_y, sandbox) -> None:
    outcome = rules.evaluate_code(x_or_y, IS_PRIME, MAIN_USING_AUX, sandbox, max_timeouts=1)
    assert outcome.breakdown.total == pytest.approx(4.0)


def test_hundreds_of_tests_pass_as_a_whole(sandbox) -> None:
    """EvalPlus-style problems carry hundreds of tests; "pass" is every one of them passing,
    past CPython's small-int cache (256), where `is` on counts stops meaning `==`."""
    checks = "\n".join(f"    assert candidate({k}) == {k + 1}" for k in range(300))
    problem = rules.CodeProblem(
        "many/0", "def inc(n):\n", f"def check(candidate):\n{checks}\n", "inc"
    )
    assert len(problem.tests) == 300
    main = "def inc(n):\n    return n + 1"
    metrics = rules.evaluate_code(problem, "", main, sandbox).breakdown.metrics
    assert (metrics["tests_passed"], metrics["tests_total"], metrics["pass"]) == (300, 300, 1.0)


def test_a_batch_of_hundreds_of_answers_is_one_call(sandbox) -> None:
    """300 jobs in one run_many call (past the small-int cache, as above), every answer
    scored; the wrong ones among them fail."""
    problem = rules.CodeProblem(
        "one/0", "def inc(n):\n", "def check(candidate):\n    assert candidate(1) == 2\n", "inc"
    )
    answers = [f"def inc(n):\n    return n + {k % 3}" for k in range(300)]
    outcomes = rules.evaluate_code_batch([(problem, "", a) for a in answers], sandbox=sandbox)
    assert [o.breakdown.metrics["pass"] for o in outcomes] == [
        float(k % 3 == 1) for k in range(300)
    ]


# ----- the tests of check(candidate) --------------------------------------------------------------


def test_check_split_on_humaneval(humaneval) -> None:
    problems = {r["task_id"]: rules.CodeProblem.from_record(r) for r in humaneval}
    # loops and locals join one extra test; multi-line asserts stay whole
    assert len(problems["HumanEval/53"].tests) == 6
    assert "for i in range(100)" in problems["HumanEval/53"].tests[-1].shown
    assert len(problems["HumanEval/44"].tests) == 7
    last = problems["HumanEval/151"].tests[-1]
    assert last.shown.startswith("lst = list(range(-99, 100, 2))")
    assert len(problems["HumanEval/32"].tests) == 1
    assert len(problems["HumanEval/87"].tests) == 6
    # `assert True` dropped, duplicates counted once
    assert len(problems["HumanEval/116"].tests) == 7
    assert len(problems["HumanEval/31"].tests) == 12
    assert all("candidate" in t.code for p in problems.values() for t in p.tests)


def test_every_canonical_humaneval_solution_passes(humaneval, sandbox) -> None:
    problems = [rules.CodeProblem.from_record(r) for r in humaneval]
    solutions = [r["prompt"] + r["canonical_solution"] for r in humaneval]
    pairs = [(p, "", main) for p, main in zip(problems, solutions, strict=True)]
    reference = rules.evaluate_code_batch(pairs, sandbox, answer_reading="clean")
    failing = {o.problem.task_id for o in reference if o.breakdown.metrics["pass"] != 1.0}
    # these four need a helper of the prompt, which the reference program leaves out
    assert failing == {"HumanEval/10", "HumanEval/32", "HumanEval/38", "HumanEval/50"}
    with_helpers = rules.evaluate_code_batch(
        pairs, sandbox, prompt_context="definitions", answer_reading="clean"
    )
    assert all(o.breakdown.metrics["pass"] == 1.0 for o in with_helpers)
    assert all(o.breakdown.total == pytest.approx(2.1) for o in with_helpers)


def test_mbpp_assert_naming_the_function_is_dropped(shared_data: Path) -> None:
    records = _records(require(shared_data / "mbpp" / "MBPP.json", "MBPP"))
    problem = rules.CodeProblem.from_record(next(r for r in records if r["task_id"] == "MBPP/26"))
    assert [t.shown for t in problem.tests] == [
        "assert candidate(1212112) == True",
        "assert candidate(1212) == False",
    ]


def test_bad_problem_records_get_clear_errors() -> None:
    good = {"task_id": "t", "prompt": "def f(x):\n    pass", "entry_point": "f"}
    with pytest.raises(ValueError, match="lacks"):
        rules.CodeProblem.from_record({"task_id": "t"})
    with pytest.raises(ValueError, match="does not parse"):
        rules.CodeProblem.from_record({**good, "test": "def check(candidate:"})
    with pytest.raises(ValueError, match="defines no"):
        rules.CodeProblem.from_record({**good, "test": "assert True"})
    with pytest.raises(ValueError, match="no test using candidate"):
        rules.CodeProblem.from_record({**good, "test": "def check(candidate):\n    assert True"})


# ----- analysis of any text ----------------------------------------------------------------------

JUNK = {
    "empty": "",
    "binary": "\x00\x01\x02\xff\udcff" * 1000,
    "latin1": bytes(range(256)).decode("latin-1") * 40,
    "10MB-line": "x" * 10_000_000,
    "deep-parens": "(" * 100_000,
    "deep-unary": "def aux(x):\n    return " + "-" * 200_000 + "1",
    "many-defs": "def aux(\n" * 50_000,
    "fences": "```" * 5000 + "\n```\n" * 5000,
    "nul-in-code": "def aux(x):\n    return '\x00'\n",
    "surrogate-in-code": "def aux(x):\n    return '\udcff'\n",
    "crlf": "def aux(x):\r\n    return x\r\n",
}


@pytest.mark.parametrize("junk", list(JUNK.values()), ids=list(JUNK))
def test_junk_answers_are_scored_without_raising(x_or_y, sandbox, junk: str) -> None:
    for answers in ((junk, junk), (IS_PRIME, junk), (junk, MAIN_USING_AUX)):
        outcome = rules.evaluate_code(x_or_y, *answers, sandbox)
        b = outcome.breakdown
        assert 0.0 <= b.total <= rules.MAX_SCORE
        assert math.isclose(sum(b.components.values()), b.total, abs_tol=1e-9)
        for role in rules.FEEDBACK_ROLES:
            assert isinstance(rules.level_feedback(outcome, role, tests_shown=None), str)


def test_line_endings_and_nul_bytes() -> None:
    assert rules.find_function(JUNK["crlf"], "aux").has_return
    found = rules.find_function(JUNK["nul-in-code"], "aux")
    assert found is not None and not found.parses
    assert rules.syntax_problem(found.source) is not None


ANALYSERS = [
    rules.clean_answer,
    lambda t: rules.find_function(t, "aux"),
    lambda t: rules.find_function(t, "x_or_y"),
    rules.calls_aux,
    rules.binds_aux,
    rules.is_thin_wrapper,
    rules.discarded_aux_calls,
    rules.aux_ignored_reference,
    rules.prompt_imports,
    rules.syntax_problem,
]
CODEISH = st.lists(
    st.one_of(
        st.text(max_size=20),
        st.sampled_from(
            [
                "def aux(x):",
                "def x_or_y(n, x, y):",
                "    return aux(n)",
                "    aux (n)",
                "    x = aux(n)",
                "    return x",
                "```python",
                "```",
                "    '''",
                "import math",
                "from typing import List",
                "\t",
                "    def aux(m):",
                "        return m",
            ]
        ),
    ),
    max_size=12,
).map("\n".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(), CODEISH))
def test_analysis_of_any_text_never_raises(text: str) -> None:
    for analyse in ANALYSERS:
        analyse(text)
    found = rules.find_function(text, "aux")
    if found is not None:
        assert found.source.lstrip().startswith(("def aux", "async def aux", "@"))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(), CODEISH), st.one_of(st.text(), CODEISH))
def test_static_scoring_of_any_pair_never_raises(x_or_y, aux: str, main: str) -> None:
    analysis = rules.analyze_code(x_or_y, aux, main)
    if not analysis.runs_tests:
        b = rules.score_code(x_or_y, aux, main, sandbox=object())
        assert 0.0 <= b.total <= 1.0 + 1e-9
        assert math.isclose(sum(b.components.values()), b.total, abs_tol=1e-9)


def test_parsing_is_safe_from_many_threads() -> None:
    """Envs are stepped from worker threads; CPython 3.11's ast.parse is not thread-safe."""
    import threading

    from collabzoo.tasks.code.rewards import parse_python

    program = "def f(x):\n" + "".join(f"    y{i} = [[{i}, (x, {{'k': x}})]]\n" for i in range(60))
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(150):
                parse_python(program)
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


# ----- the reference's reading on what real models write ----------------------------------------


@pytest.mark.parametrize(
    ("main", "reference_found", "clean_found"),
    [
        # code without an opening fence, a stray closing one, then prose: the reference deletes
        # every marker and finds the function by indentation; the clean reading takes the text
        # after the stray fence (prose) and finds nothing
        (
            "def x_or_y(n, x, y):\n    return x\n```\nThis returns x.\n```python\nprint(1)",
            True,
            False,
        ),
        # the only "return" is in the docstring: text for the reference, no return for the AST
        ('def x_or_y(n, x, y):\n    """Pick: return x or y."""\n    print(x)', True, False),
        # a bare `return` ending a truncated answer: no whitespace after it in stripped text
        ("def x_or_y(n, x, y):\n    if n:\n        print(x)\n    return", False, True),
    ],
    ids=["unbalanced-fence", "docstring-return", "bare-trailing-return"],
)
def test_the_reference_reading_on_real_answer_shapes(
    x_or_y, main: str, reference_found: bool, clean_found: bool
) -> None:
    for reading, found in (("reference", reference_found), ("clean", clean_found)):
        analysis = rules.analyze_code(x_or_y, IS_PRIME, main, answer_reading=reading)
        assert analysis.main_defined == found, reading


def test_the_reference_keeps_the_last_copy_of_the_first_run_of_repeats(x_or_y) -> None:
    """Small models repeat a definition until cut off: the reference keeps the last copy of
    the first run of adjacent copies; another function in between ends that run."""
    main = (
        "def x_or_y(n, x, y):\n    return 1\n\ndef x_or_y(n, x, y):\n    return 2\n\n"
        "def other():\n    return 0\n\ndef x_or_y(n, x, y):\n    return 3\n"
    )
    reference = rules.analyze_code(x_or_y, IS_PRIME, main).main.source
    assert reference == "def x_or_y(n, x, y):\n    return 2"
    clean = rules.analyze_code(x_or_y, IS_PRIME, main, answer_reading="clean").main.source
    assert clean == "def x_or_y(n, x, y):\n    return 3"


def test_an_unknown_answer_reading_is_a_clear_error(x_or_y) -> None:
    with pytest.raises(ValueError, match="answer_reading must be one of"):
        rules.analyze_code(x_or_y, IS_PRIME, IS_PRIME, answer_reading="ast")
    with pytest.raises(ValueError, match="answer_reading"):
        collabzoo.make("coophumaneval", answer_reading="ast")
