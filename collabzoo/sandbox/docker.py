"""The Docker backend: a pool of warm, hardened containers, each running our executor as PID 1.

Every container: no network, read-only root with a small tmpfs for scratch, memory limit with
swap equal to it, pids limit, CPU limit, all capabilities dropped, no-new-privileges, no IPC
namespace sharing, user nobody. Jobs are fed to the executor over the container's attach socket
(no `docker exec` per job), which is what makes RL-scale throughput possible.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import time
import uuid
import warnings
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from collabzoo.sandbox.image import ensure_image
from collabzoo.sandbox.pool import LineBuffer, PooledSandbox, Worker, WorkerBroken

T = TypeVar("T")

LABEL = "collabzoo.sandbox"
OWNER_LABEL = "collabzoo.sandbox.owner"
POOL_LABEL = "collabzoo.sandbox.pool"
READY_SECONDS = 60.0
SEND_SECONDS = 30.0
API_SECONDS = 30.0
"""Per call to the Docker daemon: a busy daemon costs a bounded wait, then a retry."""
ATTEMPTS = 3
RUNTIMES = (None, "runc", "runsc")


class DaemonError(RuntimeError):
    """The Docker daemon did not do what was asked, after retries where a retry is safe."""


def _transient(error: BaseException) -> bool:
    """Worth retrying: the daemon was unreachable, slow, or failed on its side (5xx)."""
    import docker.errors
    import requests

    if isinstance(error, (requests.exceptions.ConnectionError, requests.exceptions.Timeout)):
        return True
    if isinstance(error, docker.errors.APIError):
        return error.is_server_error()
    return isinstance(error, (WorkerBroken, ConnectionError, TimeoutError))


def _retry(call: Callable[[], T], what: str, attempts: int = ATTEMPTS) -> T:
    """`call()`, retried with backoff while the daemon is unreachable, slow or failing; then a
    DaemonError that says what could not be done and why."""
    delay = 0.5
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except Exception as error:
            if not _transient(error):
                raise
            if attempt == attempts:
                raise DaemonError(
                    f"could not {what} after {attempts} attempts: {type(error).__name__}: "
                    f"{str(error)[:300]}"
                ) from error
        time.sleep(delay)
        delay *= 2
    raise AssertionError("unreachable")


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def remove_stale_containers(client: Any) -> int:
    """Remove sandbox containers whose owning process (on this host) is gone. Another pool may
    remove its own containers between the daemon's listing and their inspection: those are
    skipped, not an error."""
    removed = 0
    host = socket.gethostname()
    listed = client.containers.list(all=True, filters={"label": LABEL}, ignore_removed=True)
    for container in listed:
        owner_host, _, pid = container.labels.get(OWNER_LABEL, ":").partition(":")
        if owner_host == host and pid.isdigit():
            try:
                os.kill(int(pid), 0)
                continue  # its owner is alive: not ours to remove
            except ProcessLookupError:
                pass
            except PermissionError:
                continue
        try:
            container.remove(force=True)
            removed += 1
        except Exception:  # already gone
            pass
    return removed


class DockerWorker(Worker):
    def __init__(self, client: Any, image: str, options: dict[str, Any]) -> None:
        self.client = client
        self.container = None
        self._socket: socket.socket | None = None
        self._attached: Any = None
        self._frames = bytearray()
        self._lines = LineBuffer()
        try:
            self.container = client.containers.create(image, **options)
            self._attached = client.api.attach_socket(
                self.container.id, params={"stdin": 1, "stdout": 1, "stream": 1}
            )
            self._socket = self._attached._sock
            self.container.start()
            self.info = self.hello(time.monotonic() + READY_SECONDS)
            check_isolation(self.info)
        except BaseException:
            self.close()
            raise

    def send(self, data: bytes) -> None:
        assert self._socket is not None
        self._socket.settimeout(SEND_SECONDS)
        try:
            self._socket.sendall(data)
        except TimeoutError:
            raise WorkerBroken("the executor did not take the job in time") from None
        except OSError as error:
            raise WorkerBroken(f"the container's executor is gone ({error})") from None

    def _recv(self, deadline: float) -> None:
        assert self._socket is not None
        left = deadline - time.monotonic()
        if left <= 0:
            raise WorkerBroken("the executor did not answer in time")
        self._socket.settimeout(left)
        try:
            chunk = self._socket.recv(1 << 20)
        except TimeoutError:
            raise WorkerBroken("the executor did not answer in time") from None
        if not chunk:
            raise WorkerBroken("the container's executor exited")
        self._frames += chunk

    def read_line(self, deadline: float) -> bytes:
        # The attach stream is multiplexed: 8-byte headers (stream, 0, 0, 0, size) + payload.
        while (line := self._lines.line()) is None:
            while len(self._frames) < 8:
                self._recv(deadline)
            stream, size = struct.unpack(">BxxxL", self._frames[:8])
            while len(self._frames) < 8 + size:
                self._recv(deadline)
            if stream == 1:
                self._lines.feed(self._frames[8 : 8 + size])
            del self._frames[: 8 + size]
        return line

    def close(self) -> None:
        """Close the attach stream first (its socket too: a container still attached makes a
        forced removal wait out the client's timeout), then remove the container."""
        for action in (
            lambda: self._socket.close(),
            lambda: self._attached.close(),
            lambda: _retry(lambda: self.container.remove(force=True), "remove", attempts=1),
        ):
            with contextlib.suppress(Exception):
                action()


def check_isolation(info: dict[str, Any]) -> None:
    """Refuse an executor that could not separate users (a runner could then damage it)."""
    isolation = info.get("isolation") or {}
    if isolation.get("users") != "separate":
        raise RuntimeError(
            "the sandbox container could not run programs as a separate user "
            f"({isolation.get('users', 'no report')}); is the image current?"
        )
    if isolation.get("seccomp") != "active":
        warnings.warn(
            f"collabzoo sandbox: the extra seccomp filter is {isolation.get('seccomp')}",
            RuntimeWarning,
            stacklevel=2,
        )


class DockerSandbox(PooledSandbox):
    """A pool of hardened containers. Limits are options with safe defaults; `runtime="runsc"`
    runs them under gVisor, a second wall between the program and the host's kernel;
    `packages` (pinned "name==version") picks the image that also holds them."""

    kind = "docker"

    def __init__(
        self,
        size: int | None = None,
        *,
        image: str | None = None,
        packages: Sequence[str] = (),
        memory_mb: int = 512,
        pids: int = 128,
        cpus: float = 1.0,
        scratch_mb: int = 64,
        max_file_mb: int = 16,
        runtime: str | None = None,
        client: Any = None,
    ) -> None:
        import docker

        if runtime not in RUNTIMES:
            raise ValueError(f"runtime must be one of {RUNTIMES}, got {runtime!r}")
        self.client = client or docker.from_env(timeout=API_SECONDS)
        _retry(self.client.ping, "reach the Docker daemon")
        if runtime is not None:
            known = _retry(self.client.info, "read the daemon's runtimes").get("Runtimes", {})
            if runtime not in known:
                raise RuntimeError(
                    f"the Docker daemon has no {runtime!r} runtime (it has {sorted(known)}); "
                    "install gVisor (Debian: apt-get install runsc) and register it in the "
                    'daemon\'s daemon.json: {"runtimes": {"runsc": {"path": "/usr/bin/runsc", '
                    '"runtimeArgs": ["--network=none"]}}}'
                )
        self.runtime = runtime
        self.pool_id = uuid.uuid4().hex
        self.image = image or ensure_image(self.client, packages=packages)
        _retry(lambda: remove_stale_containers(self.client), "remove stale containers")
        self.options = {
            "command": ["python3", "-u", "/opt/collabzoo/executor.py", "container"],
            "stdin_open": True,
            "network_mode": "none",
            "read_only": True,
            "tmpfs": {"/tmp": f"size={scratch_mb}m,mode=1777"},
            "ipc_mode": "none",
            "mem_limit": f"{memory_mb}m",
            "memswap_limit": f"{memory_mb}m",
            "pids_limit": pids,
            "nano_cpus": int(cpus * 1e9),
            # Root only to split users at once: the executor keeps CAP_KILL, its zygote
            # SETUID/SETGID, and every program runs as nobody with none (see confinement.py).
            "user": "0:0",
            "cap_drop": ["ALL"],
            "cap_add": ["KILL", "SETUID", "SETGID"],
            "security_opt": ["no-new-privileges"],
            "hostname": "sandbox",
            "environment": {"PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8"},
            "labels": {LABEL: "1", OWNER_LABEL: _owner(), POOL_LABEL: self.pool_id},
            # the daemon removes a container once its executor exits (its stream closed)
            "auto_remove": True,
        }
        if runtime is not None:
            self.options["runtime"] = runtime
        limits = {
            "RLIMIT_AS": (memory_mb * 3 // 4) << 20,
            "RLIMIT_FSIZE": max_file_mb << 20,
            "RLIMIT_CORE": 0,
        }
        super().__init__(size or os.cpu_count() or 1, limits)

    def _release(self) -> None:
        """Remove every container of this pool still known to the daemon: one whose start
        failed half-way (a timeout after `create`) is not held by any worker."""
        with contextlib.suppress(Exception):
            mine = {"label": f"{POOL_LABEL}={self.pool_id}"}
            listed = self.client.containers.list(all=True, filters=mine, ignore_removed=True)
            for container in listed:
                with contextlib.suppress(Exception):
                    container.remove(force=True)

    def _start_worker(self) -> Worker:
        return _retry(
            lambda: DockerWorker(self.client, self.image, self.options), "start a container"
        )
