"""Running a merged ClassEval program's unittest suites in the sandbox, as the reference runs
them, and reading what came out.

ClassEval's tests build the class's objects and inspect them, so they must run in the same
process as the class: the sandbox's program is a small harness (`HARNESS`), and its one test
calls the harness with the program text. Inside the sandbox's runner the harness writes the
program to a file, imports it as a module, discovers every TestCase and runs them with
unittest, each test under its own alarm (40 s); after 3 timed-out tests it stops and the tests
not yet run are neither run nor counted; the whole call has the reference's 40 x 3 + 5 s. It
reports, as one JSON line on the runner's stdout, what the reference's child reported (tests
run, failures, errors, skips, the ids of the tests that did not pass) and, for ClassEval's own
metrics, how many tests of each TestCase class passed.

Two reference behaviours are kept: anything but whitespace printed on the child's stdout
outside the test run (at import, say) made its report unreadable, so no test counts
(`polluted`); and an import that raises, or a `SystemExit`, runs no test.

The sandbox isolates the machine from the program as for every code task, but the tests run
beside the program here, as in the reference: a program could falsify its own test results.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from collabzoo.sandbox import ExecResult, Job

TEST_TIMEOUT = 40.0
"""Seconds per test (the reference's alarm)."""
MAX_TIMEOUTS = 3
"""Timed-out tests after which the run stops."""
RUN_GRACE = 5.0
ENTRY = "classeval_run"
MARKER = "CLASSEVAL-REPORT "
FAILING_IDS_KEPT = 5
"""The report carries the first ids of the tests that did not pass (the feedback shows 5)."""
_ID_CHARS = 200
SANDBOX_PACKAGES = (
    "numpy==1.26.4",
    "pandas==2.2.3",
    "python-dateutil==2.9.0.post0",
    "pytz==2024.2",
    "tzdata==2024.2",
    "six==1.16.0",
    "openpyxl==3.1.5",
    "et-xmlfile==2.0.0",
    "PyPDF2==2.12.1",
    "python-docx==1.1.2",
    "lxml==5.3.0",
    "typing-extensions==4.12.2",
    "gensim==4.3.3",
    "scipy==1.13.1",
    "smart-open==7.0.5",
    "wrapt==1.16.0",
    "beautifulsoup4==4.12.3",
    "soupsieve==2.6",
    "pillow==10.4.0",
    "reportlab==4.2.5",
    "chardet==5.2.0",
    "netifaces-plus==0.12.4",
)
"""What ClassEval's skeletons, solutions and tests import beyond the standard library (numpy,
pandas, openpyxl, PyPDF2, python-docx, gensim, bs4 with lxml, Pillow, reportlab, netifaces),
with their dependencies, pinned: the sandbox image a ClassEval run uses holds exactly these.
PyPDF2 stays at 2.x: task 69's solution calls `PdfFileReader`, which 3.0 removed. netifaces-plus
is the maintained fork that installs the `netifaces` module as a wheel for Python 3.11. nltk is
left out: task 52's tests need NLTK's corpora (punkt, wordnet, the perceptron tagger), which
only NLTK's own data host serves (no package registry carries them). No sandbox reaches it and
the image is built from registries alone, so the skeleton's `nltk.download` at import gets
nothing (offline it returns False, it does not raise) and the tests fail with or without the
module; a machine with the corpora could add them to an image of its own."""

HARNESS = r'''
import contextlib, io, json, os, signal, sys, unittest
import importlib.util


class ClassEvalTimeout(Exception):
    """A test's alarm went off."""


def _alarm(signum, frame):
    raise ClassEvalTimeout("Test timed out")


def _arm(seconds):
    if seconds > 0:
        signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)


def _disarm(seconds):
    if seconds > 0:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _result_class(seconds, limit):
    class Recording(unittest.TextTestResult):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.records = []
            self.timeouts = 0

        def startTest(self, test):
            super().startTest(test)
            if limit > 0 and self.timeouts >= limit:
                self.shouldStop = True
                return
            _arm(seconds)

        def stopTest(self, test):
            _disarm(seconds)
            super().stopTest(test)

        def _record(self, test, outcome):
            self.records.append((test, outcome))

        def addSuccess(self, test):
            _disarm(seconds)
            super().addSuccess(test)
            self._record(test, "passed")

        def addFailure(self, test, err):
            _disarm(seconds)
            super().addFailure(test, err)
            self._record(test, "failed")

        def addError(self, test, err):
            _disarm(seconds)
            super().addError(test, err)
            timed_out = bool(err) and isinstance(err, tuple) and err[0] is ClassEvalTimeout
            self.timeouts += timed_out
            self._record(test, "timeout" if timed_out else "error")
            if limit > 0 and self.timeouts >= limit:
                self.shouldStop = True

        def addSkip(self, test, reason):
            _disarm(seconds)
            super().addSkip(test, reason)
            self._record(test, "skipped")

    return Recording


def _cases(suite):
    for test in suite:
        if isinstance(test, unittest.TestSuite):
            yield from _cases(test)
        else:
            yield test


def _suite_report(module, seconds, limit, kept, id_chars):
    suite = unittest.defaultTestLoader.loadTestsFromModule(module)
    sizes = {}
    for test in _cases(suite):
        name = type(test).__name__
        sizes[name] = sizes.get(name, 0) + 1
    stream = io.StringIO()
    with contextlib.redirect_stdout(stream), contextlib.redirect_stderr(stream):
        runner = unittest.TextTestRunner(
            stream=stream, verbosity=2, resultclass=_result_class(seconds, limit)
        )
        result = runner.run(suite)
    passed_by_class = dict.fromkeys(sizes, 0)
    failing = []
    for test, outcome in result.records:
        if outcome == "passed":
            name = type(test).__name__
            passed_by_class[name] = passed_by_class.get(name, 0) + 1
        else:
            failing.append(str(test))
    run = result.testsRun
    bad = len(result.failures) + len(result.errors) + len(result.skipped)
    return {
        "status": "ran",
        "run": run,
        "failures": len(result.failures),
        "errors": len(result.errors),
        "skipped": len(result.skipped),
        "passed": run - bad,
        "timeouts": result.timeouts,
        "failing": [i[:id_chars] for i in failing[:kept]],
        "failing_count": len(failing),
        "classes": {n: [sizes.get(n, 0), passed_by_class.get(n, 0)] for n in passed_by_class},
    }


def classeval_run(code, seconds, limit, kept, id_chars):
    """Import `code` as the module task_module and run its tests; the report goes to stdout."""
    saved_out, saved_err = os.dup(1), os.dup(2)
    capture = os.open(".classeval-output", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    os.unlink(".classeval-output")  # an open file no listing of the folder shows
    os.dup2(capture, 1)
    os.dup2(capture, 2)
    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout = open(1, "w", closefd=False, buffering=1)
    sys.stderr = open(2, "w", closefd=False, buffering=1)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.path.insert(0, os.getcwd())
    try:
        with open("task_module_payload.py", "w", encoding="utf-8") as f:
            f.write(code)
        try:
            spec = importlib.util.spec_from_file_location(
                "task_module", os.path.join(os.getcwd(), "task_module_payload.py")
            )
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            report = _suite_report(module, seconds, limit, kept, id_chars)
        except SystemExit as error:
            report = {"status": "exit", "error": "SystemExit: %s" % (error.code,)}
        except BaseException as error:
            report = {"status": "import_error", "error": "%s: %s" % (type(error).__name__, error)}
    finally:
        _disarm(seconds)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        sys.stdout, sys.stderr = stdout, stderr
        os.dup2(saved_out, 1)
        os.dup2(saved_err, 2)
    os.lseek(capture, 0, os.SEEK_SET)
    printed = os.read(capture, 1 << 16)
    os.close(capture)
    report["polluted"] = bool(printed.strip()) and report.get("status") == "ran"
    report["error"] = str(report.get("error", ""))[:300]
    line = "CLASSEVAL-REPORT " + json.dumps(report, ensure_ascii=True) + "\n"
    os.write(saved_out, line.encode())
    return True
'''
"""The sandbox program: standard library only; `classeval_run` is its entry point."""


def run_budget(test_timeout: float = TEST_TIMEOUT, max_timeouts: int = MAX_TIMEOUTS) -> float:
    """The reference's limit on the whole run: one timeout per tolerated timed-out test, plus
    5 s."""
    return test_timeout * max(1, max_timeouts) + RUN_GRACE


def job(code: str, *, test_timeout: float = TEST_TIMEOUT, max_timeouts: int = MAX_TIMEOUTS) -> Job:
    """The sandbox job that runs `code` (merged class + tests)."""
    budget = run_budget(test_timeout, max_timeouts)
    arguments = (code, float(test_timeout), int(max_timeouts), FAILING_IDS_KEPT, _ID_CHARS)
    snippet = f"assert candidate{arguments!r}"
    return Job(
        program=HARNESS,
        tests=(snippet,),
        entry_point=ENTRY,
        timeout=budget,
        max_timeouts=1,
        job_timeout=budget + RUN_GRACE,
    )


@dataclass(frozen=True)
class TestRun:
    """What running a program's tests gave, in the reference's terms."""

    tests_run: int = 0
    passed: int = 0
    failures: int = 0
    errors: int = 0
    skipped: int = 0
    timeouts: int = 0
    timed_out: bool = False
    """The whole run passed its limit (the reference's TimeoutExpired: no test counts)."""
    status: str = "not run"
    """ran; import_error (the module raised); exit (SystemExit); polluted (the child's
    stdout held more than its report, so the reference could not read it); timed_out;
    crashed (the process died without a report); not run (no program)."""
    error: str = ""
    failing: tuple[str, ...] = ()
    failing_count: int = 0
    classes: dict[str, tuple[int, int]] = field(default_factory=dict)
    """TestCase class -> (its tests, how many passed), from the run whether or not the
    reference could read it."""

    @property
    def counted(self) -> bool:
        """Whether the reference saw this run's counts."""
        return self.status == "ran"

    def class_passed(self, name: str) -> bool:
        total, passed = self.classes.get(name, (0, 0))
        return total > 0 and passed == total


def read_report(result: ExecResult) -> TestRun:
    """The harness's report in a sandbox result, in the reference's terms."""
    line = next((x for x in (result.stdout or "").splitlines() if x.startswith(MARKER)), None)
    report: dict[str, Any] | None = None
    if line is not None:
        try:
            report = json.loads(line[len(MARKER) :])
        except ValueError:
            report = None
    if not isinstance(report, dict):
        if result.timed_out:
            return TestRun(timed_out=True, status="timed_out", error=result.error or "")
        return TestRun(status="crashed", error=result.error or result.load_error or "")
    classes = {
        str(k): (int(v[0]), int(v[1]))
        for k, v in dict(report.get("classes") or {}).items()
        if isinstance(v, list) and len(v) == 2
    }
    status = str(report.get("status", "crashed"))
    if status != "ran":
        return TestRun(status=status, error=str(report.get("error", "")))
    if report.get("polluted"):
        return TestRun(status="polluted", classes=classes)
    return TestRun(
        tests_run=int(report.get("run", 0)),
        passed=int(report.get("passed", 0)),
        failures=int(report.get("failures", 0)),
        errors=int(report.get("errors", 0)),
        skipped=int(report.get("skipped", 0)),
        timeouts=int(report.get("timeouts", 0)),
        status="ran",
        failing=tuple(str(i) for i in report.get("failing", [])),
        failing_count=int(report.get("failing_count", 0)),
        classes=classes,
    )
