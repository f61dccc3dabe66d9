"""A thread pool of daemon threads, so Ctrl-C ends a benchmark at once.

`concurrent.futures.ThreadPoolExecutor` joins its threads when the interpreter exits, so an
interrupted run would hang until every request in flight (up to timeout x retries) came back.
Here the finished episodes are saved first, and whatever is still in flight dies with the
process.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any


class DaemonPool:
    """`submit(fn, *args) -> Future` on `size` daemon threads."""

    def __init__(self, size: int, name: str) -> None:
        if size < 1:
            raise ValueError(f"a pool needs at least one thread, got {size}")
        self._jobs: queue.SimpleQueue[tuple[Future, Callable[..., Any], tuple] | None] = (
            queue.SimpleQueue()
        )
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{k}", daemon=True)
            for k in range(size)
        ]
        for thread in self._threads:
            thread.start()

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            future, function, args = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(function(*args))
            except BaseException as error:  # KeyboardInterrupt raised by a policy included
                future.set_exception(error)

    def submit(self, function: Callable[..., Any], *args: Any) -> Future:
        future: Future = Future()
        self._jobs.put((future, function, args))
        return future

    def close(self) -> None:
        """Let the threads end after the jobs already queued."""
        for _ in self._threads:
            self._jobs.put(None)
