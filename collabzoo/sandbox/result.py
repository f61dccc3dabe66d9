"""The sandbox's job and result types: what goes in, and what the harness saw come out."""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_TEST_TIMEOUT = 10.0
DEFAULT_MAX_TIMEOUTS = 3
OUTPUT_LIMIT = 4096


@dataclass(frozen=True)
class Job:
    """A program and its tests.

    Each test is an independent snippet (one `assert ...`, or a `def check(candidate): ...`
    followed by `check(candidate)`) run after the program; `candidate` is bound to the program's
    `entry_point` function. Every test counts on its own and has its own `timeout` in seconds;
    after `max_timeouts` timed-out tests the remaining ones are not run and count as failed.
    The whole job (loading the program and every test) has `job_timeout` seconds, by default
    `timeout * (max_timeouts + 1)`: room for as many timed-out tests as are tolerated, plus one
    timeout's worth for the rest. Tests not finished when it runs out count as failed.
    """

    program: str
    tests: tuple[str, ...]
    entry_point: str | None = None
    timeout: float = DEFAULT_TEST_TIMEOUT
    max_timeouts: int = DEFAULT_MAX_TIMEOUTS
    job_timeout: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.program, str):
            raise TypeError(f"program must be a str, got {type(self.program).__name__}")
        tests = (self.tests,) if isinstance(self.tests, str) else tuple(self.tests)
        if not all(isinstance(t, str) for t in tests):
            raise TypeError("tests must be a sequence of str snippets")
        object.__setattr__(self, "tests", tests)
        if not self.timeout > 0:
            raise ValueError(f"timeout must be positive seconds, got {self.timeout!r}")
        if self.job_timeout is not None and not self.job_timeout > 0:
            raise ValueError(f"job_timeout must be positive seconds, got {self.job_timeout!r}")

    @property
    def budget(self) -> float:
        """Seconds the whole job may take (see `job_timeout`)."""
        if self.job_timeout is not None:
            return float(self.job_timeout)
        return float(self.timeout) * (self.max_timeouts + 1)


@dataclass(frozen=True)
class ExecResult:
    """What the harness saw. `passed[i]` is True only if the harness itself watched test i
    complete without an exception; nothing the program prints or does can set it."""

    passed: tuple[bool, ...]
    error: str | None = None
    """The first failure as 'Type: message' (a load error, a failed assert, a timeout...)."""
    failed_test: int | None = None
    """Index of the first failed test, or None (no test failed, or the program did not load)."""
    load_error: str | None = None
    """Set when the program itself could not run (syntax error, exception at import...)."""
    timed_out: bool = False
    stdout: str = ""
    stderr: str = ""
    duration: float = 0.0
    details: dict = field(default_factory=dict, compare=False)
    """What the pool knows beyond the verdict; "replaced" lists why the worker that ran this job
    was replaced afterwards (empty: it served on)."""

    @property
    def tests_passed(self) -> int:
        return sum(self.passed)

    @property
    def fraction_passed(self) -> float:
        return sum(self.passed) / len(self.passed) if self.passed else 0.0

    @property
    def all_passed(self) -> bool:
        return bool(self.passed) and all(self.passed)
