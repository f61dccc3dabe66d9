"""The sandbox's promises, read back: the settings Docker reports for every container, the
limits a program sees from inside, a probe that fails when any hardening option is removed, the
`auto` fallback, the stale-container sweep, and `collabzoo sandbox build|check`."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import warnings
from typing import Any

import docker
import pytest

from collabzoo.cli import main
from collabzoo.sandbox import get_sandbox
from collabzoo.sandbox.docker import (
    LABEL,
    OWNER_LABEL,
    POOL_LABEL,
    DockerSandbox,
    DockerWorker,
    remove_stale_containers,
)
from collabzoo.sandbox.probe import EXECUTOR_CAPABILITIES, PROBE_PROGRAM, isolation_report
from tests.conftest import RUNTIMES, isolated_pool, require_docker

MEMORY_MB, PIDS, CPUS, SCRATCH_MB = 512, 128, 1.0, 64  # the sandbox guide's defaults


def pool_containers(sandbox: DockerSandbox) -> list[Any]:
    mine = {"label": f"{POOL_LABEL}={sandbox.pool_id}"}
    return sandbox.client.containers.list(filters=mine)


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_docker_reports_every_promised_setting(runtime: str) -> None:
    with isolated_pool(runtime) as sandbox:
        containers = pool_containers(sandbox)
        assert len(containers) == 1
        for container in containers:
            container.reload()
            host, config = container.attrs["HostConfig"], container.attrs["Config"]
            assert host["NetworkMode"] == "none"
            assert host["ReadonlyRootfs"] is True
            assert host["Tmpfs"] == {"/tmp": f"size={SCRATCH_MB}m,mode=1777"}
            assert host["Memory"] == MEMORY_MB << 20
            assert host["MemorySwap"] == host["Memory"], "swap must not add to memory"
            assert host["PidsLimit"] == PIDS
            assert host["NanoCpus"] == int(CPUS * 1e9)
            assert host["CapDrop"] == ["ALL"]
            assert sorted(host["CapAdd"]) == ["KILL", "SETGID", "SETUID"]
            assert "no-new-privileges" in host["SecurityOpt"]
            assert not any("unconfined" in opt for opt in host["SecurityOpt"]), "seccomp off"
            assert host["Privileged"] is False
            assert host["IpcMode"] == "none"
            assert host["Runtime"] == runtime
            assert host["AutoRemove"] is True
            assert config["User"] == "0:0", "root only to split users (runners are nobody)"
            assert config["Labels"][OWNER_LABEL].endswith(f":{os.getpid()}")


def test_a_program_sees_the_limits_from_inside(docker_sandbox) -> None:
    """The same promises as the kernel shows them to the program: its cgroup files and
    /proc/self/status."""
    checks = [
        f"assert candidate()['memory_limit'] == {MEMORY_MB << 20}",
        f"assert candidate()['pids_limit'] == {PIDS}",
        f"assert candidate()['cpus'] == {CPUS}",
        "assert candidate()['capabilities'] == 0",
        f"assert candidate()['bounding_set'] == {EXECUTOR_CAPABILITIES}",
        "assert candidate()['no_new_privs'] == 1",
        "assert candidate()['seccomp'] == 2",
        "assert candidate()['seccomp_filters'] == 2",  # Docker's default profile, then ours
        "assert candidate()['routes'] == 0",
        "assert candidate()['uid'] == 65534",  # nobody
    ]
    result = docker_sandbox.run(PROBE_PROGRAM, checks, 20.0, entry_point="facts")
    failed = [check for check, ok in zip(checks, result.passed, strict=True) if not ok]
    assert not failed, failed


class _Weakened(DockerSandbox):
    """A pool whose containers lack one hardening option."""

    def __init__(self, change: dict[str, Any], remove: tuple[str, ...]) -> None:
        self.change, self.remove = change, remove
        super().__init__(size=1)

    def _start_worker(self) -> DockerWorker:
        options = {k: v for k, v in self.options.items() if k not in self.remove}
        return DockerWorker(self.client, self.image, {**options, **self.change})


WEAKENINGS = {
    "network": ({"network_mode": "bridge"}, (), ["no network but loopback", "no route"]),
    "read-only root": ({"read_only": False}, (), ["read-only root"]),
    "capabilities": ({}, ("cap_drop", "cap_add"), ["bounded capabilities"]),
    "memory limit": ({}, ("mem_limit", "memswap_limit"), ["memory limited"]),
    "pids limit": ({}, ("pids_limit",), ["pids limited"]),
    "CPU limit": ({}, ("nano_cpus",), ["CPU limited"]),
}


@pytest.mark.parametrize("weakening", list(WEAKENINGS))
def test_removing_a_hardening_option_fails_the_probe(weakening: str) -> None:
    """no-new-privileges is not in this list: the executor sets it for itself too (its seccomp
    filter needs it), so only the Docker settings can show it missing."""
    require_docker()
    change, remove, fails = WEAKENINGS[weakening]
    with _Weakened(change, remove) as sandbox:
        report = isolation_report(sandbox)
    assert [name for name, ok in report.items() if ok is False] == fails, report


def test_auto_falls_back_to_the_process_backend_and_says_so(monkeypatch, capfd) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/collabzoo-no-docker.sock")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with get_sandbox("auto", size=1) as sandbox:
            assert sandbox.kind == "process"
            assert sandbox.run("def f():\n    return 1", ["assert f() == 1"]).all_passed
        with pytest.raises(ValueError, match="needs the docker sandbox"):
            get_sandbox("auto", size=1, runtime="runsc")  # never a silent step down
    assert any("PROCESS backend" in str(w.message) for w in caught)
    assert "PROCESS backend" in capfd.readouterr().err


def dead_and_live_owners_containers(sandbox: DockerSandbox) -> tuple[str, dict[str, Any]]:
    """A sandbox container labelled with a pid that has exited, and one with this process's: a
    crashed run's leftover and a live pool's. Returns the dead pid and the containers by owner."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    made = {
        owner: sandbox.client.containers.create(
            sandbox.image,
            ["python3", "-c", "import time; time.sleep(60)"],
            network_mode="none",
            labels={LABEL: "1", OWNER_LABEL: f"{socket.gethostname()}:{owner}"},
        )
        for owner in (dead, str(os.getpid()))
    }
    return dead, made


def test_stale_containers_of_a_dead_owner_are_swept(docker_sandbox) -> None:
    """A run that crashed leaves containers labelled with its pid; the next sandbox removes them
    and leaves a live owner's alone."""
    client = docker_sandbox.client
    dead, made = dead_and_live_owners_containers(docker_sandbox)
    try:
        assert remove_stale_containers(client) >= 1
        listed = client.containers.list(all=True, filters={"label": LABEL}, ignore_removed=True)
        left = {c.id for c in listed}
        assert made[dead].id not in left, "the dead owner's container survived"
        assert made[str(os.getpid())].id in left, "a live owner's container was removed"
    finally:
        for container in made.values():
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)


def test_the_sweep_skips_a_container_removed_while_it_lists(docker_sandbox, monkeypatch) -> None:
    """Two pools starting at once: one removes its container after the daemon listed it for the
    other's sweep and before the sweep inspects it. The sweep still removes a dead owner's
    container (CI's two test workers once failed a pool's start here with the daemon's 404)."""
    client = docker_sandbox.client
    _, made = dead_and_live_owners_containers(docker_sandbox)
    vanishing = made[str(os.getpid())]
    listing = client.api.containers

    def list_then_lose_one(*args, **kwargs):
        answer = listing(*args, **kwargs)
        assert vanishing.id in {entry["Id"] for entry in answer}
        vanishing.remove(force=True)  # the other pool's shutdown, between list and inspect
        return answer

    monkeypatch.setattr(client.api, "containers", list_then_lose_one)
    try:
        assert remove_stale_containers(client) >= 1
        for container in made.values():
            with pytest.raises(docker.errors.NotFound):
                client.containers.get(container.id)
    finally:
        monkeypatch.undo()
        for container in made.values():
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)


def test_sandbox_build_and_check_on_the_command_line(capsys) -> None:
    require_docker()
    assert main(["sandbox", "build"]) == 0
    assert "sandbox image ready: collabzoo-sandbox:" in capsys.readouterr().out
    assert main(["sandbox", "check"]) == 0
    out = capsys.readouterr().out
    docker_line = next(line for line in out.splitlines() if line.startswith("docker: trivial"))
    assert "passed" in docker_line and "NO" not in docker_line and "n/a" not in docker_line
    assert "process: trivial program passed" in out
