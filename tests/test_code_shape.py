"""The package's shape: import-linter layering contracts and ruff, run as part of the suite."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPOSITORY


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=REPOSITORY, capture_output=True, text=True, timeout=300)


def test_import_layering_contracts_hold() -> None:
    """envs/rewards/sandbox never import algos, torch or transformers; algos never import
    envs/rewards/sandbox (contracts in pyproject.toml)."""
    lint_imports = shutil.which("lint-imports")
    if lint_imports is None:
        pytest.fail("lint-imports not found: install the dev extra (pip install -e '.[dev]')")
    result = run(lint_imports, "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_envs_import_without_the_training_stack() -> None:
    code = (
        "import sys, collabzoo, collabzoo.tasks.building.envs.strbuild, "
        "collabzoo.tasks.building.envs.housebuild, "
        "collabzoo.cli; bad = {'torch', 'transformers', 'peft', 'accelerate'} & set(sys.modules);"
        " assert not bad, bad"
    )
    result = run(sys.executable, "-c", code)
    assert result.returncode == 0, result.stderr


PYTHON_SOURCES = ("collabzoo", "collabzoo_verifiers", "tests", "benchmarks", "docs/hooks")


def test_ruff_lint_and_format() -> None:
    check = run(sys.executable, "-m", "ruff", "check", *PYTHON_SOURCES)
    assert check.returncode == 0, check.stdout + check.stderr
    formatted = run(sys.executable, "-m", "ruff", "format", "--check", *PYTHON_SOURCES)
    assert formatted.returncode == 0, formatted.stdout + formatted.stderr
