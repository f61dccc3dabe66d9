"""ClassEval, collaborative class completion: the reference reward, ClassEval's own pass rates,
and the turn feedback (tasks-2.md section 6 and its Corrections).

Two agents complete the methods of one class skeleton. The methods to write (V) are the stubs
of the skeleton's class; a method with exactly one parameter (`self` counts) is agent 0's,
every other one agent 1's. Each answer is read by the reference's text rules
(`collabzoo.tasks.classeval.rewards.reading`), the owner's blocks that parse replace their
stubs, the merged file is normalized with autopep8, and the program (merged class + the
benchmark's unittest code) runs in the sandbox (`collabzoo.tasks.classeval.rewards.harness`).
The team earns (max 6.0; the reference trains on reward - 6):

    level1_syntax           2 x (methods with an accepted block) / V        (0 if V = 0)
    level2_tests            4 x passed / tests run                         (0 if none ran)
    level3_overlap_penalty  -(methods written by both agents) / V           (0 if V = 0)

and 0 in all, whatever the levels, when the program does not compile. Quirks kept: a broken
program (0) beats a valid one with overlap and no passing test; tests that pass on untouched
stubs earn level 2 even for empty answers; ClassEval_5 and ClassEval_22 have no method to write
(their skeletons open a docstring they never close) and always score 0; a method written by
the wrong agent counts as overlap but is never built; a decorated stub overrides the agent's
method (its decorator lines alone are replaced); a nested or helper `def` cuts a method short.

ClassEval's own metrics are reported beside it: `class_pass` (every test of every TestCase
the task lists passed) and `method_pass` (the share of the task's methods whose TestCase
passed whole), from the same run.
"""

from __future__ import annotations

import ast
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from collabzoo.rewards.breakdown import RewardBreakdown
from collabzoo.sandbox import ExecResult, Job, default_sandbox
from collabzoo.tasks.classeval.rewards import harness, reading
from collabzoo.tasks.classeval.rewards.harness import MAX_TIMEOUTS, TEST_TIMEOUT, TestRun

MAX_SCORE = 6.0
REFERENCE_SHIFT = -6.0
"""The reference's reward processor adds this, so that 0 is the best a turn can earn."""
SYNTAX_WEIGHT = 2.0
TESTS_WEIGHT = 4.0
OVERLAP_WEIGHT = 1.0
COMPONENTS = ("level1_syntax", "level2_tests", "level3_overlap_penalty")
CACHE_SIZE = 256
"""The reference keeps the results of this many programs (by code hash) and reruns none."""
FEEDBACK_MODES = ("code_feedback", "plain")
"""The reference's external modes: diagnostics of the joint program, or none."""
FAILING_SHOWN = 5


class ClassEvalRunner(Protocol):
    """What scoring needs of a sandbox (`collabzoo.sandbox`): run jobs, one result per job."""

    def run_many(self, jobs: Sequence[Job]) -> list[ExecResult]: ...


@dataclass(frozen=True)
class ClassTask:
    """One ClassEval task: the skeleton shown, the tests, and what the reference reads of it."""

    task_id: str
    skeleton: str
    test: str
    solution: str = ""
    """The benchmark's solution (`solution_code`): never shown, only the oracle reads it."""
    test_classes: tuple[str, ...] = ()
    """The TestCase classes of `test`, all of which pass for the class to pass."""
    method_tests: tuple[tuple[str, str], ...] = ()
    """(method, its TestCase class) for ClassEval's method-level pass rate."""
    class_name: str = field(init=False)
    methods: tuple[str, ...] = field(init=False)
    """V: the methods to write, in class order."""
    owner: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        for name in ("task_id", "skeleton", "test", "solution"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"a ClassEval task's {name} must be a str")
        object.__setattr__(self, "class_name", reading.class_name(self.skeleton) or "")
        object.__setattr__(self, "methods", reading.methods_to_write(self.skeleton))
        object.__setattr__(self, "owner", reading.owners(self.skeleton))
        if not self.test_classes:
            object.__setattr__(self, "test_classes", _test_classes(self.test))
        if not self.method_tests:
            object.__setattr__(self, "method_tests", tuple((c, c) for c in self.test_classes))

    @property
    def shown_skeleton(self) -> str:
        """The skeleton as the prompts show it: sanitized, stripped."""
        return reading.sanitize(self.skeleton).strip()

    def assigned(self, agent: int) -> tuple[str, ...]:
        return tuple(m for m in self.methods if self.owner[m] == agent)

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> ClassTask:
        missing = [k for k in ("task_id", "skeleton", "test") if k not in record]
        if missing:
            raise ValueError(f"a ClassEval record lacks {missing}: {str(record)[:200]}")
        methods_info = record.get("methods_info") or []
        method_tests = tuple(
            (str(m.get("method_name", "")), str(m.get("test_class", "")).strip())
            for m in methods_info
            if isinstance(m, Mapping) and m.get("test_class")
        )
        return cls(
            str(record["task_id"]),
            str(record["skeleton"]),
            str(record["test"]),
            str(record.get("solution_code") or ""),
            tuple(str(c).strip() for c in record.get("test_classes") or ()),  # " X" in row 97
            method_tests,
        )


def _test_classes(test: str) -> tuple[str, ...]:
    """The classes of the test code that derive from a `TestCase` (for data without
    `test_classes`)."""
    try:
        tree = reading.parse(test)
    except Exception:
        return ()
    names = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            bases = [ast.unparse(b) for b in node.bases]
            if any(b.endswith("TestCase") for b in bases):
                names.append(node.name)
    return tuple(names)


# ----- what an answer pair builds ---------------------------------------------------------------
@dataclass(frozen=True)
class AnswerReport:
    """What one agent's answer was read into (reported per step in infos)."""

    assigned: tuple[str, ...]
    written: tuple[str, ...]
    """Methods to write that the answer has a block for (any agent's)."""
    accepted: tuple[str, ...]
    """Its own methods whose block parses and is built."""
    rejected: tuple[tuple[str, str], ...]
    """(method, why) for its own methods whose block is not built."""
    not_yours: tuple[str, ...]
    """The teammate's methods it wrote: ignored by the build, counted as overlap."""
    repeated: tuple[str, ...]
    """Methods it wrote more than once (the last block counts)."""
    other_defs: tuple[str, ...]
    """`def` lines naming no method to write (helpers): each cuts the block above it short."""
    fenced: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "assigned": list(self.assigned),
            "written": list(self.written),
            "accepted": list(self.accepted),
            "rejected": [{"method": m, "why": why} for m, why in self.rejected],
            "not_yours": list(self.not_yours),
            "repeated": list(self.repeated),
            "other_defs": list(self.other_defs),
            "fenced": self.fenced,
        }


def _parse_error(code: str) -> str:
    try:
        reading.parse(code)
    except SyntaxError as error:
        return f"does not parse: {error.msg} (line {error.lineno})"
    except Exception as error:
        return f"does not parse: {type(error).__name__}"
    return ""


def report_answer(
    task: ClassTask, agent: int, answer: str, built: Mapping[str, str], self_select: bool = False
) -> AnswerReport:
    """How `answer` of `agent` was read, given the methods `built` from both answers."""
    text = answer if isinstance(answer, str) else ""
    found = reading.blocks(text, task.methods)
    mine = set(task.methods) if self_select else set(task.assigned(agent))
    last = {b.name: b.code for b in found}
    names = [b.name for b in found]
    code = reading.strip_fence(text)
    wanted = set(task.methods)
    rejected = []
    for method in task.methods:
        if method in mine and method in last and built.get(method) != last[method]:
            why = _parse_error(last[method]) or "another agent's block was built"
            rejected.append((method, why))
    return AnswerReport(
        assigned=task.assigned(agent),
        written=tuple(m for m in task.methods if m in last),
        accepted=tuple(
            m for m in task.methods if m in mine and m in last and built.get(m) == last[m]
        ),
        rejected=tuple(rejected),
        not_yours=tuple(m for m in task.methods if m in last and m not in mine),
        repeated=tuple(m for m in task.methods if names.count(m) > 1),
        other_defs=tuple(name for _, name in reading.def_lines(code) if name not in wanted),
        fenced=reading.FENCE in text,
    )


@dataclass(frozen=True)
class Build:
    """Everything about an answer pair known without running it."""

    task: ClassTask
    answers: tuple[str, str]
    built: dict[str, str]
    """method -> the block merged in (the accepted methods)."""
    overlap: tuple[str, ...]
    merged: str
    program: str
    compile_error: str | None
    reports: tuple[AnswerReport, AnswerReport]
    format_error: str = ""
    """autopep8 failed on the merged file (then the unformatted merge is used)."""

    @property
    def compiles(self) -> bool:
        return self.compile_error is None


def build(
    task: ClassTask,
    answer_0: str,
    answer_1: str,
    *,
    use_autopep8: bool = True,
    self_select: bool = False,
    choose: Callable[[list[str]], str] | None = None,
) -> Build:
    """Read both answers, merge the accepted methods into the skeleton, and check that the
    program compiles (nothing is executed)."""
    answers = (
        answer_0 if isinstance(answer_0, str) else "",
        answer_1 if isinstance(answer_1, str) else "",
    )
    built = reading.accepted_methods(
        answers, task.methods, task.owner, self_select=self_select, choose=choose
    )
    format_error = ""
    try:
        merged = reading.merge(task.skeleton, task.class_name, built, use_autopep8=use_autopep8)
    except ImportError:
        raise
    except Exception as error:  # autopep8 failing on odd text: keep the unformatted merge
        format_error = f"{type(error).__name__}: {error}"[:300]
        merged = reading.merge(task.skeleton, task.class_name, built, use_autopep8=False)
    code = reading.program(merged, task.test)
    return Build(
        task=task,
        answers=answers,
        built=built,
        overlap=reading.overlap(answers, task.methods),
        merged=merged,
        program=code,
        compile_error=reading.compile_error(code),
        reports=(
            report_answer(task, 0, answers[0], built, self_select),
            report_answer(task, 1, answers[1], built, self_select),
        ),
        format_error=format_error,
    )


# ----- scoring ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class ClassEvalOutcome:
    """A scored answer pair: the reward, the build, and what the tests did."""

    breakdown: RewardBreakdown
    build: Build
    run: TestRun


def levels(b: Build, run: TestRun) -> dict[str, float]:
    """The reference's three levels, before the compile gate."""
    v = len(b.task.methods)
    return {
        "level1_syntax": SYNTAX_WEIGHT * len(b.built) / v if v else 0.0,
        "level2_tests": TESTS_WEIGHT * run.passed / run.tests_run if run.tests_run > 0 else 0.0,
        "level3_overlap_penalty": -OVERLAP_WEIGHT * len(b.overlap) / v if b.overlap else 0.0,
    }


def breakdown(b: Build, run: TestRun) -> RewardBreakdown:
    """The reward of a built pair given its test run, with ClassEval's metrics."""
    parts = levels(b, run)
    if not b.compiles:
        parts = dict.fromkeys(COMPONENTS, 0.0)
    task = b.task
    method_passes = [run.class_passed(test) for _, test in task.method_tests]
    metrics = {
        "class_pass": float(
            b.compiles and bool(task.test_classes) and all(map(run.class_passed, task.test_classes))
        ),
        "method_pass": sum(method_passes) / len(method_passes) if method_passes else 0.0,
        "compiles": float(b.compiles),
        "methods_total": float(len(task.methods)),
        "methods_accepted": float(len(b.built)),
        "overlap": float(len(b.overlap)),
        "tests_run": float(run.tests_run),
        "tests_passed": float(run.passed),
        "pass_rate": run.passed / run.tests_run if run.tests_run > 0 else 0.0,
        "timed_out": float(run.timed_out),
        "test_timeouts": float(run.timeouts),
    }
    return RewardBreakdown(total=sum(parts.values()), components=parts, metrics=metrics)


class ResultCache:
    """The reference's memo of test runs by program hash (least recently used out), so that a
    program scored twice (a turn and its feedback, a repeated answer) runs once."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self.size = size
        self._runs: OrderedDict[str, TestRun] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def key(program: str, test_timeout: float, max_timeouts: int) -> str:
        digest = hashlib.sha256(f"{test_timeout}\0{max_timeouts}\0".encode())
        digest.update(program.encode("utf-8", "surrogatepass"))
        return digest.hexdigest()

    def get(self, key: str) -> TestRun | None:
        with self._lock:
            run = self._runs.get(key)
            if run is not None:
                self._runs.move_to_end(key)
            return run

    def put(self, key: str, run: TestRun) -> None:
        if self.size <= 0:
            return
        with self._lock:
            self._runs[key] = run
            self._runs.move_to_end(key)
            while len(self._runs) > self.size:
                self._runs.popitem(last=False)


def run_builds(
    builds: Sequence[Build],
    sandbox: ClassEvalRunner | None = None,
    *,
    test_timeout: float = TEST_TIMEOUT,
    max_timeouts: int = MAX_TIMEOUTS,
    cache: ResultCache | None = None,
) -> list[TestRun]:
    """The test run of each build that compiles (one `run_many` call for all of them; a
    program in `cache` is not run again); `TestRun()` for the others."""
    if not (isinstance(test_timeout, (int, float)) and test_timeout > 0):
        raise ValueError(f"test_timeout must be positive seconds, got {test_timeout!r}")
    if isinstance(max_timeouts, bool) or not isinstance(max_timeouts, int) or max_timeouts < 1:
        raise ValueError(f"max_timeouts must be a positive int, got {max_timeouts!r}")
    runs: list[TestRun | None] = [None] * len(builds)
    jobs: list[Job] = []
    owners: dict[str, list[int]] = {}
    for index, b in enumerate(builds):
        if not b.compiles:
            runs[index] = TestRun()
            continue
        key = ResultCache.key(b.program, test_timeout, max_timeouts)
        cached = cache.get(key) if cache is not None else None
        if cached is not None:
            runs[index] = cached
            continue
        if key not in owners:
            owners[key] = []
            jobs.append(
                harness.job(b.program, test_timeout=test_timeout, max_timeouts=max_timeouts)
            )
        owners[key].append(index)
    if jobs:
        if sandbox is None:
            sandbox = default_sandbox(harness.SANDBOX_PACKAGES)
        results = sandbox.run_many(jobs)
        if len(results) != len(jobs):
            raise RuntimeError(f"the sandbox returned {len(results)} results for {len(jobs)} jobs")
        for (key, indices), result in zip(owners.items(), results, strict=True):
            run = harness.read_report(result)
            if cache is not None and run.status != "crashed":
                cache.put(key, run)
            for index in indices:
                runs[index] = run
    return [r if r is not None else TestRun() for r in runs]


def evaluate_batch(
    pairs: Sequence[tuple[ClassTask, str, str]],
    sandbox: ClassEvalRunner | None = None,
    *,
    test_timeout: float = TEST_TIMEOUT,
    max_timeouts: int = MAX_TIMEOUTS,
    use_autopep8: bool = True,
    cache: ResultCache | None = None,
) -> list[ClassEvalOutcome]:
    """Score (task, answer of agent 0, answer of agent 1) triples, every test run in one
    `sandbox.run_many` call (`None`: the ClassEval default sandbox, made only when
    some program compiles)."""
    builds = [build(t, a0, a1, use_autopep8=use_autopep8) for t, a0, a1 in pairs]
    runs = run_builds(
        builds, sandbox, test_timeout=test_timeout, max_timeouts=max_timeouts, cache=cache
    )
    return [
        ClassEvalOutcome(breakdown(b, run), b, run) for b, run in zip(builds, runs, strict=True)
    ]


def evaluate(
    task: ClassTask, answer_0: str, answer_1: str, sandbox: ClassEvalRunner | None = None, **options
) -> ClassEvalOutcome:
    """`evaluate_batch` for one answer pair."""
    return evaluate_batch([(task, answer_0, answer_1)], sandbox, **options)[0]


def score_classeval(
    task: ClassTask, answer_0: str, answer_1: str, sandbox: ClassEvalRunner | None = None, **options
) -> RewardBreakdown:
    """The reference reward of one answer pair (max 6.0) with its named components."""
    return evaluate(task, answer_0, answer_1, sandbox, **options).breakdown


# ----- turn feedback ----------------------------------------------------------------------------
def diagnostics(outcome: ClassEvalOutcome) -> str:
    """What both agents are told of their joint program after a turn (mode code_feedback):
    whether it compiles, whether the runner timed out, the tests passed, the failing ids."""
    run = outcome.run
    lines = ["Diagnostics of the joint program:"]
    lines.append(f"- Syntax: {'OK' if outcome.build.compiles else 'ERROR'}")
    if run.timed_out:
        lines.append("- The test runner timed out before it finished.")
    if outcome.build.compiles and run.tests_run > 0:
        lines.append(f"- Hidden tests passed: {run.passed}/{run.tests_run}")
    else:
        lines.append("- Hidden tests: not available or not run.")
    if run.failing:
        more = run.failing_count - min(len(run.failing), FAILING_SHOWN)
        shown = ", ".join(run.failing[:FAILING_SHOWN])
        lines.append(f"- Failing tests: {shown}" + (f" (+{more} more)" if more > 0 else ""))
    return "\n".join(lines)


def own_blocks(task: ClassTask, agent: int, answer: str) -> str:
    """An earlier answer cut down to the `def` blocks of the agent's own methods, as the
    history shows it ("" when it has none)."""
    found = reading.snippets(answer or "", task.assigned(agent))
    return "\n\n".join(found.values()).strip()


def skeleton_block(task: ClassTask) -> str:
    return (
        f"The class skeleton of '{task.class_name or 'unknown'}':\n"
        f"SKELETON START\n{task.skeleton.strip()}\nSKELETON END"
    )


def followup_prompt(
    task: ClassTask,
    agent: int,
    role: str,
    history: Sequence[tuple[str, str]],
    diagnostics_text: str | None,
    first_turn: int = 1,
) -> str:
    """A later turn's whole prompt, in the reference's layout: the request, the agent's history
    (its earlier prompts, its earlier answers cut to its own methods; `history[0]` is turn
    `first_turn`), the skeleton, the diagnostics (none in mode plain), and the answer format."""
    if diagnostics_text is None:
        sections = [
            f"You are {role}. Read the history below and revise your implementation. Keep "
            "every method signature unchanged."
        ]
    else:
        sections = [
            f"You are {role}. Read the history and the diagnostics below. Keep every method "
            "signature unchanged and give only the improved implementation."
        ]
    turns = list(enumerate(history, first_turn))
    prompts = [f"- Turn {t} prompt:\n{prompt}" for t, (prompt, _) in turns]
    answers = [
        f"- Turn {t} answer:\n{own}"
        for t, (_, answer) in turns
        if (own := own_blocks(task, agent, answer))
    ]
    past = []
    if prompts:
        past += ["Your earlier prompts:", *prompts, ""]
    if answers:
        past += ["Your earlier answers:", *answers, ""]
    if past:
        sections += ["\n".join(past).rstrip(), ""]
    sections += [skeleton_block(task), ""]
    if diagnostics_text is not None:
        sections += [diagnostics_text, ""]
    sections += [
        "Answer with your revised methods only, in one ```python ...``` block.",
        "No explanation, no tests, nothing outside that block.",
    ]
    return "\n".join(sections).strip()
