"""A slow or unreachable Docker daemon costs the jobs that needed it, not the run.

Real daemon, real containers: a proxy (tests/docker_proxy.py) sits between the pool's client and
the daemon's socket and stalls or refuses the API on cue, while the containers' attach streams
keep flowing. The bounds come from the backend's constants: each call waits at most the client's
timeout, and is tried ATTEMPTS times with backoff in between.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import docker
import pytest
import requests

from collabzoo.sandbox import ExecResult, Job, get_sandbox
from collabzoo.sandbox.docker import ATTEMPTS, OWNER_LABEL, DaemonError
from collabzoo.sandbox.image import ensure_image
from collabzoo.sandbox.pool import PooledSandbox
from tests.conftest import require_docker
from tests.docker_proxy import DockerProxy

TIMEOUT = 2.0
"""The pool's client's timeout: each stalled call to the daemon costs this much."""
BACKOFF = sum(0.5 * 2**i for i in range(ATTEMPTS - 1))
"""What `_retry` sleeps between its attempts (0.5 s, doubling)."""
SLACK = 3.0
"""Everything else (a slow CI machine on 2 cores included)."""
START_BOUND = ATTEMPTS * TIMEOUT + BACKOFF + SLACK
"""The most a job may wait on a stalled daemon for its container."""
REFUSED_BOUND = BACKOFF + SLACK
"""The most a job may wait on a daemon that refuses at once."""
JOB = Job("def f(x):\n    return x + 1", ("assert candidate(1) == 2",), "f")
COULD_NOT_START = "SandboxError: could not start a container after"


@pytest.fixture(scope="module")
def direct() -> Iterator[Any]:
    """A client that bypasses the proxy; it builds the image first if the executor changed (a
    build would not fit in the pool's short timeout)."""
    require_docker()
    client = docker.from_env()
    ensure_image(client)
    yield client
    client.close()


@pytest.fixture
def proxy(direct: Any, tmp_path: Any) -> Iterator[DockerProxy]:
    with DockerProxy(tmp_path / "docker.sock") as proxy:
        yield proxy


@pytest.fixture
def make_client(proxy: DockerProxy) -> Iterator[Callable[[float], Any]]:
    """Clients that reach the daemon through the proxy, with a given timeout."""
    clients: list[Any] = []

    def make(timeout: float = TIMEOUT) -> Any:
        clients.append(docker.DockerClient(base_url=f"unix://{proxy.path}", timeout=timeout))
        return clients[-1]

    yield make
    for client in clients:
        client.close()


def ours(direct: Any) -> set[str]:
    """This process's sandbox containers, running or not."""
    owner = f"{socket.gethostname()}:{os.getpid()}"
    found = direct.containers.list(all=True, filters={"label": f"{OWNER_LABEL}={owner}"})
    return {container.id for container in found}


def kill(direct: Any, container: str) -> None:
    """Kill a container from outside, as the kernel's OOM killer or an operator would, and wait
    until the daemon has removed it (the pool's containers are auto-removed, so asking to `wait`
    on one can race its removal and get a 404)."""
    direct.containers.get(container).kill()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            direct.containers.get(container)
        except docker.errors.NotFound:
            return
        time.sleep(0.1)
    raise AssertionError(f"container {container[:12]} was killed but not removed within 30 s")


def timed(sandbox: PooledSandbox, count: int = 1) -> tuple[list[ExecResult], float]:
    started = time.monotonic()
    results = sandbox.run_many([JOB] * count)
    return results, time.monotonic() - started


def test_the_proxy_acts_on_kept_alive_connections(
    proxy: DockerProxy, make_client: Callable[[float], Any]
) -> None:
    client = make_client(1.0)
    client.ping()
    accepted = proxy.accepted
    client.ping()
    assert proxy.accepted == accepted, "the client did not reuse its connection: test is moot"
    proxy.mode = "stall"
    started = time.monotonic()
    with pytest.raises(requests.exceptions.Timeout):
        client.ping()
    assert time.monotonic() - started < 1.0 + SLACK, "a stalled call outlived its timeout"
    proxy.mode = "pass"
    client.ping()
    proxy.mode = "refuse"
    with pytest.raises(requests.exceptions.ConnectionError):
        client.ping()
    proxy.mode = "pass"
    assert client.ping()


def test_a_stalled_or_refusing_daemon_costs_one_job_each(
    proxy: DockerProxy, make_client: Callable[[float], Any], direct: Any
) -> None:
    before = ours(direct)
    with get_sandbox("docker", size=1, client=make_client(TIMEOUT)) as sandbox:
        try:
            [ok], _ = timed(sandbox)
            assert ok.all_passed, f"an ordinary job failed: {ok}"
            [container] = ours(direct) - before
            kill(direct, container)  # its executor dies under the pool

            [died], _ = timed(sandbox)
            assert not died.all_passed, "a job passed on a killed container"
            assert (died.error or "").startswith("SandboxError"), died
            assert died.details.get("replaced"), f"the dead worker was not replaced: {died}"

            proxy.mode = "stall"  # its slot must start a container now, and cannot
            [stalled], took = timed(sandbox)
            assert (stalled.error or "").startswith(COULD_NOT_START), stalled
            assert "Timeout" in stalled.error, f"not a timeout: {stalled.error}"
            assert ATTEMPTS * TIMEOUT <= took <= START_BOUND, (
                f"a stalled start took {took:.1f} s, not {ATTEMPTS} x {TIMEOUT} s to "
                f"{START_BOUND:.1f} s"
            )

            proxy.mode = "refuse"
            [refused], took = timed(sandbox)
            assert (refused.error or "").startswith(COULD_NOT_START), refused
            assert "ConnectionError" in refused.error, f"not refused: {refused.error}"
            assert took <= REFUSED_BOUND, f"a refused start took {took:.1f} s"

            proxy.mode = "pass"
            [healed], _ = timed(sandbox)
            assert healed.all_passed, f"the pool did not recover with the daemon: {healed}"
        finally:
            proxy.mode = "pass"  # so that close() can remove the containers
    left = ours(direct) - before
    assert not left, f"containers left behind: {left}"


def test_a_healthy_worker_keeps_serving_while_the_daemon_stalls(
    proxy: DockerProxy, make_client: Callable[[float], Any], direct: Any
) -> None:
    before = ours(direct)
    with get_sandbox("docker", size=2, client=make_client(TIMEOUT)) as sandbox:
        try:
            warm, _ = timed(sandbox, 2)
            assert all(r.all_passed for r in warm), f"ordinary jobs failed: {warm}"
            containers = sorted(ours(direct) - before)
            assert len(containers) == 2, f"expected 2 workers, found {containers}"
            kill(direct, containers[0])
            # Two jobs take both workers (a FIFO of two): the dead one fails and is dropped.
            probe, _ = timed(sandbox, 2)
            assert sorted(r.all_passed for r in probe) == [False, True], probe

            proxy.mode = "stall"
            batch, took = timed(sandbox, 8)
            failed = [r for r in batch if not r.all_passed]
            assert 1 <= len(failed) <= 2, f"{len(failed)} of 8 jobs failed: {failed}"
            for result in failed:
                assert (result.error or "").startswith(COULD_NOT_START), result
            assert took <= START_BOUND, f"the batch took {took:.1f} s"

            proxy.mode = "pass"
            after, _ = timed(sandbox, 8)
            assert all(r.all_passed for r in after), f"jobs failed after recovery: {after}"
        finally:
            proxy.mode = "pass"
    left = ours(direct) - before
    assert not left, f"containers left behind: {left}"


@pytest.mark.parametrize("mode", ["refuse", "stall"])
def test_an_unreachable_daemon_fails_the_pool_at_once(
    proxy: DockerProxy, make_client: Callable[[float], Any], mode: str
) -> None:
    timeout = 1.0
    client = make_client(timeout)  # asks the daemon's version: made while it answers
    proxy.mode = mode
    started = time.monotonic()
    with pytest.raises(DaemonError, match="could not reach the Docker daemon"):
        get_sandbox("docker", size=2, client=client)
    took = time.monotonic() - started
    bound = ATTEMPTS * timeout + BACKOFF + SLACK
    assert took <= bound, f"an unreachable daemon took {took:.1f} s to report (bound {bound} s)"
