"""The skip rule of tests/conftest.py, checked on planted tests run by a real pytest.

Under CI=true a skip anywhere but the CUDA suite must fail the run; outside CI it stays a skip.
The planted files live in a temporary folder and load the project's conftest as a plugin, so
the hooks under test are the ones the suite runs with.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

from tests.conftest import REPOSITORY

PLANTED = {
    "test_planted.py": """
import pytest

def test_skips_inside():
    pytest.skip("planted skip")

@pytest.mark.skip(reason="planted marker skip")
def test_skip_marker():
    pass

@pytest.mark.cuda
def test_cuda_suite_skip():
    pytest.skip("no CUDA device here")

@pytest.mark.xfail(reason="planted xfail", strict=True)
def test_expected_failure():
    assert False

def test_passes():
    assert True
""",
    "test_planted_module.py": """
import pytest

pytest.skip("planted module skip", allow_module_level=True)

def test_never_collected():
    pass
""",
}


def run_planted(tmp_path: Path, ci: bool) -> dict[str, str]:
    """Each planted test's outcome (`{"file::test": outcome}`), from pytest's JUnit XML report,
    and the run's exit status under "exit"."""
    for name, text in PLANTED.items():
        (tmp_path / name).write_text(text)
    environment = {key: value for key, value in os.environ.items() if "XDIST" not in key}
    environment.pop("CI", None)
    if ci:
        environment["CI"] = "true"
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(REPOSITORY), environment.get("PYTHONPATH", "")]
    ).rstrip(os.pathsep)
    report = tmp_path / "report.xml"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), "-q", "--continue-on-collection-errors",
         f"--junitxml={report}", str(tmp_path)],
        cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    outcomes = {"exit": str(done.returncode)}
    for case in ElementTree.parse(report).iter("testcase"):
        module = case.get("classname", "").rsplit(".", 1)[-1]  # "" for a module's collection
        name = f"{module}.py::{case.get('name')}" if module else f"{case.get('name')}.py"
        kinds = {child.tag for child in case} & {"failure", "error", "skipped"}
        outcomes[name] = (
            "failed" if kinds & {"failure", "error"} else kinds.pop() if kinds else "passed"
        )
    return outcomes


def test_under_ci_every_skip_but_the_cuda_suites_fails(tmp_path: Path) -> None:
    outcomes = run_planted(tmp_path, ci=True)
    assert outcomes["test_planted.py::test_skips_inside"] == "failed", outcomes
    assert outcomes["test_planted.py::test_skip_marker"] == "failed", outcomes
    assert outcomes["test_planted_module.py"] == "failed", outcomes
    assert outcomes["test_planted.py::test_cuda_suite_skip"] == "skipped", outcomes
    assert outcomes["test_planted.py::test_expected_failure"] == "skipped", outcomes  # xfail
    assert outcomes["test_planted.py::test_passes"] == "passed", outcomes
    assert outcomes["exit"] == "1", outcomes


def test_outside_ci_a_skip_stays_a_skip(tmp_path: Path) -> None:
    outcomes = run_planted(tmp_path, ci=False)
    assert outcomes["test_planted.py::test_skips_inside"] == "skipped", outcomes
    assert outcomes["test_planted.py::test_skip_marker"] == "skipped", outcomes
    assert outcomes["test_planted_module.py"] == "skipped", outcomes
    assert outcomes["exit"] == "0", outcomes
