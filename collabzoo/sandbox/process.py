"""The process backend: executors as local child processes, for machines without Docker.

Weaker isolation than Docker, and documented as such: each program runs in a child process with
resource limits (address space, CPU time, file size, no core dumps), a fresh private working
directory, a scrubbed environment and, where the kernel allows it, an empty network namespace;
but it shares the host's filesystem, process table and user. Programs that would harm the
machine if they misbehaved must not be run here.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence

from collabzoo.sandbox.image import EXECUTOR
from collabzoo.sandbox.pool import LineBuffer, PooledSandbox, Worker, WorkerBroken

READY_SECONDS = 30.0


class ProcessWorker(Worker):
    def __init__(self) -> None:
        self.scratch = tempfile.mkdtemp(prefix="collabzoo-sandbox-")
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-u", str(EXECUTOR), "process", self.scratch],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"},
        )
        self._lines = LineBuffer()
        try:
            self.info = self.hello(time.monotonic() + READY_SECONDS)
        except BaseException:
            self.close()
            raise

    def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()

    def read_line(self, deadline: float) -> bytes:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        while (line := self._lines.line()) is None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise WorkerBroken("the executor did not answer in time")
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise WorkerBroken("the executor exited")
            self._lines.feed(chunk)
        return line

    def close(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, 9)
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


def lacking_packages(packages: Sequence[str]) -> list[str]:
    """The pinned "name==version" packages this interpreter does not have at that version."""
    lacking = []
    for pin in packages:
        name, _, version = pin.partition("==")
        try:
            found = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            lacking.append(pin)
            continue
        if version and found != version:
            lacking.append(f"{pin} (it has {found})")
    return lacking


class ProcessSandbox(PooledSandbox):
    """Executors as local processes (see the module docstring for what is and is not isolated)."""

    kind = "process"

    def __init__(
        self,
        size: int | None = None,
        *,
        packages: Sequence[str] = (),
        memory_mb: int = 1024,
        max_file_mb: int = 16,
    ) -> None:
        lacking = lacking_packages(packages)
        if lacking:
            message = (
                "collabzoo: the process sandbox runs code with this interpreter's packages, and "
                f"it lacks {', '.join(lacking)} (pip install them, or use Docker, whose image "
                "is built with them): code importing them will fail"
            )
            warnings.warn(message, RuntimeWarning, stacklevel=2)
        limits = {
            "RLIMIT_AS": memory_mb << 20,
            "RLIMIT_FSIZE": max_file_mb << 20,
            "RLIMIT_CORE": 0,
        }
        super().__init__(size or os.cpu_count() or 1, limits)

    def _start_worker(self) -> Worker:
        return ProcessWorker()
