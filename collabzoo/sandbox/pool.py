"""A pool of warm workers, each an executor (in a container or a local process).

Jobs are dispatched to idle workers from a shared queue, so many environments (threads) can
share one pool. A worker whose job timed out, crashed its executor or left anything behind is
replaced before it serves again.
"""

from __future__ import annotations

import json
import math
import queue
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from collabzoo.sandbox.result import OUTPUT_LIMIT, ExecResult, Job

GRACE_SECONDS = 5.0
"""Beyond a job's budget: forking, loading, cleaning up; then the worker counts as hung."""
MAX_REPLY = 1 << 20
"""Bytes of one reply line from an executor (its outputs and errors are capped well below)."""
TEXT_LIMIT = 4 * OUTPUT_LIMIT


class WorkerBroken(Exception):
    """The executor stopped answering, or answered nonsense: the worker must be replaced."""


class LineBuffer:
    """Bytes in, lines out, in time linear in the bytes: each byte is scanned for a newline
    once, and a line longer than MAX_REPLY breaks the worker instead of growing without end."""

    def __init__(self) -> None:
        self._data = bytearray()
        self._scanned = 0

    def feed(self, chunk: bytes) -> None:
        self._data += chunk

    def line(self) -> bytes | None:
        end = self._data.find(b"\n", self._scanned)
        if end < 0:
            self._scanned = len(self._data)
            if self._scanned > MAX_REPLY:
                raise WorkerBroken(f"the executor's reply passed {MAX_REPLY} bytes")
            return None
        line = bytes(self._data[:end])
        del self._data[: end + 1]
        self._scanned = 0
        return line


def _text(value: object) -> str | None:
    """A reply's text field, capped (the executor caps it too: this is the second wall)."""
    if value is None:
        return None
    text = str(value)
    return text if len(text) <= TEXT_LIMIT else text[:TEXT_LIMIT] + "... [cut]"


class Worker:
    """One executor; a transport implements `send` and `read_line`."""

    def send(self, data: bytes) -> None:
        raise NotImplementedError

    def read_line(self, deadline: float) -> bytes:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def hello(self, deadline: float) -> dict[str, Any]:
        reply = json.loads(self.read_line(deadline))
        if not reply.get("ready"):
            raise WorkerBroken(f"unexpected greeting from the executor: {reply!r}")
        return reply

    def execute(self, job: Job, limits: dict[str, int]) -> tuple[ExecResult, bool]:
        """Run one job; returns (result, worker still healthy)."""
        budget = job.budget
        request = {
            "id": 0,
            "program": job.program,
            "tests": list(job.tests),
            "entry_point": job.entry_point,
            "timeout": job.timeout,
            "max_timeouts": job.max_timeouts,
            "job_timeout": budget,
            "output_limit": OUTPUT_LIMIT,
            "limits": {**limits, "RLIMIT_CPU": math.ceil(budget) + 1},
        }
        started = time.monotonic()
        deadline = started + budget + GRACE_SECONDS
        try:
            self.send((json.dumps(request, ensure_ascii=True) + "\n").encode())
            reply = json.loads(self.read_line(deadline))
            passed = tuple(bool(p) for p in reply["passed"])
            if len(passed) != len(job.tests):
                raise WorkerBroken("the executor answered for the wrong number of tests")
            dirty = [_text(reason) for reason in reply["dirty"]]
        except (WorkerBroken, OSError, ValueError, KeyError, TypeError) as error:
            return (
                ExecResult(
                    passed=(False,) * len(job.tests),
                    error=f"SandboxError: {_text(error)}",
                    timed_out=time.monotonic() >= deadline,
                    duration=time.monotonic() - started,
                    details={"replaced": [f"SandboxError: {_text(error)}"]},
                ),
                False,
            )
        failed = reply.get("failed_test")
        result = ExecResult(
            passed=passed,
            error=_text(reply.get("error")),
            failed_test=failed if isinstance(failed, int) else None,
            load_error=_text(reply.get("load_error")),
            timed_out=bool(reply.get("timed_out")),
            stdout=_text(reply.get("stdout")) or "",
            stderr=_text(reply.get("stderr")) or "",
            duration=time.monotonic() - started,
            details={"replaced": dirty},
        )
        return result, not dirty


class Sandbox:
    """What every sandbox offers: `run`, `run_many`, `close`, use as a context manager; a
    backend implements `run_many` and `close`."""

    kind = "sandbox"
    _closed = False

    def run(
        self,
        program: str,
        tests: Sequence[str],
        timeout: float = 10.0,
        *,
        entry_point: str | None = None,
        max_timeouts: int = 3,
        job_timeout: float | None = None,
    ) -> ExecResult:
        """Run `program`, then each test snippet on its own; see `Job`."""
        job = Job(program, tuple(tests), entry_point, timeout, max_timeouts, job_timeout)
        return self.run_many([job])[0]

    def run_many(self, jobs: Sequence[Job]) -> list[ExecResult]:
        raise NotImplementedError

    def checked(self, jobs: Sequence[Job]) -> list[Job]:
        """`jobs` as a list, refused on a closed sandbox or when one is not a `Job`."""
        if self._closed:
            raise RuntimeError("this sandbox is closed")
        jobs = list(jobs)
        if not all(isinstance(j, Job) for j in jobs):
            raise TypeError("run_many takes a sequence of collabzoo.sandbox.Job")
        return jobs

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PooledSandbox(Sandbox):
    """Base of the Docker and process sandboxes: a pool of warm workers."""

    kind = "pool"

    def __init__(self, size: int, limits: dict[str, int]) -> None:
        if size < 1:
            raise ValueError(f"pool size must be at least 1, got {size}")
        self.size = size
        self.limits = limits
        self._idle: queue.Queue[Worker | None] = queue.Queue()
        self._lock = threading.Lock()
        self._closed = False
        self._threads = ThreadPoolExecutor(max_workers=size, thread_name_prefix="sandbox")
        started = list(self._threads.map(self._try_start, range(size)))
        errors = [w for w in started if isinstance(w, Exception)]
        if len(errors) == size:  # nothing works: say so now, not at the first job
            self._threads.shutdown()
            raise errors[0]
        for worker in started:  # a slot that failed to start is started again on first use
            self._idle.put(None if isinstance(worker, Exception) else worker)

    def _try_start(self, _: int) -> Worker | Exception:
        try:
            return self._start_worker()
        except Exception as error:
            return error

    def _start_worker(self) -> Worker:
        raise NotImplementedError

    def run_many(self, jobs: Sequence[Job]) -> list[ExecResult]:
        """Run jobs concurrently on the pool; results in the order of `jobs`."""
        return list(self._threads.map(self._run_one, self.checked(jobs)))

    def _run_one(self, job: Job) -> ExecResult:
        worker = self._idle.get()  # None: a slot whose worker must be (re)started first
        healthy = False
        try:
            if worker is None:
                worker = self._start_worker()
            result, healthy = worker.execute(job, self.limits)
            return result
        except Exception as error:  # the backend itself failed (e.g. the daemon went away)
            return ExecResult(
                passed=(False,) * len(job.tests),
                error=f"SandboxError: {error}",
                details={"replaced": [f"could not start a worker: {error}"]},
            )
        finally:
            if not healthy and worker is not None:
                worker.close()
                worker = None
            self._idle.put(worker)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._threads.shutdown(wait=True)
        workers = []
        while not self._idle.empty():
            worker = self._idle.get_nowait()
            if worker is not None:
                workers.append(worker)
        if workers:
            _close_all(workers)
        self._release()

    def _release(self) -> None:
        """After the workers are closed: anything else the backend holds (e.g. containers whose
        start failed half-way)."""


def _close_all(workers: list[Any]) -> None:
    """Close the workers all at once, so a slow backend costs one wait rather than one per
    worker; one by one where no thread pool may start, as in an `atexit` close (the default
    sandbox's): concurrent.futures refuses new work once the interpreter begins to exit."""
    closing = ThreadPoolExecutor(max_workers=len(workers))
    futures = []
    try:
        for worker in workers:
            futures.append(closing.submit(worker.close))
    except RuntimeError:  # "cannot schedule new futures after interpreter shutdown"
        for worker in workers[len(futures) :]:
            worker.close()
    finally:
        closing.shutdown(wait=True)
    for future in futures:
        future.result()
