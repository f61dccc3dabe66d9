"""A fixed sample of mutants that every CI run must kill: each is a plausible bug, applied to a
copy of the checkout, and the tests named beside it must fail on that copy. The full mutation
run (cosmic-ray, every operator over whole modules) is benchmarks/mutation.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPOSITORY, benchmark_module

# (module, the original text, the mutant's text, the tests that must fail)
SAMPLE = {
    "TD error with the next value subtracted": (
        "collabzoo/algos/objectives.py",
        "r + gamma * v_next - v",
        "r - gamma * v_next - v",
        ["tests/test_gae.py"],
    ),
    "a 2**63 int sent bare, past JSON's safe range": (
        "collabzoo/sandbox/plain_data.py",
        "-SMALL_INT <= value < SMALL_INT",
        "-SMALL_INT <= value <= SMALL_INT",
        ["tests/test_plain_data.py"],
    ),
    "the hash-collision bound off by one": (
        "collabzoo/sandbox/plain_data.py",
        "if shared[h] > MAX_SHARED_HASH:",
        "if shared[h] > MAX_SHARED_HASH + 1:",
        ["tests/test_plain_data.py"],
    ),
    "RLOO's baseline including the sample itself": (
        "collabzoo/algos/objectives.py",
        "[(k * g - total) / (k - 1) for g in returns]",
        "[(k * g - total) / k for g in returns]",
        ["tests/test_advantages.py"],
    ),
    "the population std taken over K - 1": (
        "collabzoo/algos/objectives.py",
        "math.sqrt(squares / k)",
        "math.sqrt(squares / (k - 1))",
        ["tests/test_advantages.py"],
    ),
    "StrBuild neighbours wrapping across rows": (
        "collabzoo/tasks/building/rewards/strbuild.py",
        "if i % w != last_column:",
        "if i + 1 < w * h:",
        ["tests/test_strbuild_rules.py"],
    ),
    "HouseBuild's allowance one block short": (
        "collabzoo/tasks/building/rewards/housebuild.py",
        "if spent > limit:",
        "if spent >= limit:",
        ["tests/test_housebuild_rules.py"],
    ),
    "writing rewards' word sets not lower-cased": (
        "collabzoo/tasks/writing/rewards.py",
        "_WORD.findall(text.lower())",
        "_WORD.findall(text)",
        ["tests/test_writing_rewards.py"],
    ),
}


def _copy_checkout():
    return benchmark_module("mutation", "collabzoo_mutation_benchmark").copy_checkout


@pytest.mark.parametrize("name", list(SAMPLE))
def test_the_suite_kills_the_mutant(name: str, tmp_path: Path) -> None:
    module, original, mutant, tests = SAMPLE[name]
    copy = _copy_checkout()(tmp_path)
    source = (copy / module).read_text()
    assert source.count(original) >= 1, f"the sample's original text is gone from {module}"
    (copy / module).write_text(source.replace(original, mutant, 1))
    present = [t for t in tests if (copy / t).exists()]
    env = {**os.environ, "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"}
    env.setdefault("COLLABZOO_SHARED_DATA", str(REPOSITORY.parent / "shared" / "data"))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *present],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 1, f"the mutant survived ({name}):\n{run.stdout[-2000:]}"
    where = subprocess.run(
        [sys.executable, "-c", "import collabzoo; print(collabzoo.__file__)"],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert where.startswith(str(copy)), f"the tests imported {where}, not the mutated copy"
