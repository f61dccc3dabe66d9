"""Many episodes' generate calls as one batched call on a local model.

The bench plays several episodes at once on threads; each turn, an episode asks its model for
its agents' answers and waits. `CallBatcher` gathers the calls of every live episode (the
bench counts episodes in and out with `episode()`) and makes one padded call for all of them:
the first caller leads, waits until every live episode has called (an episode still scoring
its last turn in the sandbox is waited for) or `gather_s` has passed, runs the batch, and
hands each caller its own rows. Episodes that finish leave the count, so the rest go on
batched.

Greedy decoding gives every row what a call of its own would (the test checks it). Each row
keeps its own seed: an engine that seeds rows one by one (vLLM) repeats a sampled run exactly
however the rows were batched; transformers' `generate` draws every row from one generator,
which an `hf:` team seeds with the batch's first row's seed, so there a sampled run repeats
exactly only one episode at a time (`--episodes-at-once 1`).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from collabzoo.bench.models import Generation, Sampling

GATHER_S = 30.0
"""Longest wait for the other live episodes' calls before a batch starts anyway (seconds): a
safety net; batches normally start as soon as every live episode has called."""

Batch = Callable[[list[str], Sampling, list[int]], list[Generation]]
"""(every prompt of the batch, the sampling, each prompt's seed) -> one generation per prompt."""


@dataclass
class _Call:
    prompts: list[str]
    sampling: Sampling
    seeds: list[int]
    run: Batch
    result: list[Generation] | None = None
    error: BaseException | None = None
    done: bool = False


class CallBatcher:
    """Concurrent `generate` calls, run as batched calls of `run`.

    One batcher may serve several models (a team with a model per agent shares one, see
    `Team`): each call names its model's batch function, and a leader runs one batch per
    model. A batch waits for a call from every live episode, to whichever model: with a batcher
    per model, two episodes one call apart (one at agent 1's model, the other already at agent
    2's) would each wait for the other until the safety net.
    """

    def __init__(self, run: Batch, *, gather_s: float = GATHER_S) -> None:
        self.run = run
        self.gather_s = gather_s
        self.live = 0
        """Episodes in play (`episode()`): the calls a batch waits for; 0 waits for none."""
        self.batches: list[int] = []
        """Rows of each batch run so far (how well the batching worked)."""
        self._changed = threading.Condition()
        self._pending: list[_Call] = []
        self._running = False

    @contextlib.contextmanager
    def episode(self) -> Iterator[None]:
        """Count an episode in play while the block runs."""
        with self._changed:
            self.live += 1
        try:
            yield
        finally:
            with self._changed:
                self.live -= 1
                self._changed.notify_all()  # a leader waiting for this episode's call

    def generate(
        self,
        prompts: Sequence[str],
        sampling: Sampling,
        seeds: Sequence[int],
        run: Batch | None = None,
    ) -> list[Generation]:
        """The generations of `prompts`, batched with the other live episodes' calls; `run` is
        this call's model (default: the batcher's own)."""
        if len(seeds) != len(prompts):
            raise ValueError(f"{len(prompts)} prompts need as many seeds, got {len(seeds)}")
        call = _Call(list(prompts), sampling, list(seeds), run or self.run)
        with self._changed:
            self._pending.append(call)
            self._changed.notify_all()
            while not call.done and self._running:
                self._changed.wait()
            if call.done:
                return self._unwrap(call)
            self._running = True  # this caller leads the next batch
        try:
            self._lead()
        finally:
            with self._changed:
                self._running = False
                self._changed.notify_all()
        return self._unwrap(call)

    def _lead(self) -> None:
        deadline = time.monotonic() + self.gather_s
        with self._changed:
            while len(self._pending) < self.live:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
            taken, self._pending = self._pending, []
        groups: dict[tuple[Batch, Sampling], list[_Call]] = {}
        for call in taken:  # one batch per model and sampling setting (a run has one setting)
            groups.setdefault((call.run, call.sampling), []).append(call)
        for (run, sampling), calls in groups.items():
            prompts = [p for call in calls for p in call.prompts]
            seeds = [s for call in calls for s in call.seeds]
            try:
                generations = run(prompts, sampling, seeds)
            except BaseException as error:  # every caller of the batch sees the failure
                for call in calls:
                    call.error, call.done = error, True
                continue
            self.batches.append(len(prompts))
            start = 0
            for call in calls:
                call.result = generations[start : start + len(call.prompts)]
                start += len(call.prompts)
                call.done = True

    @staticmethod
    def _unwrap(call: _Call) -> list[Generation]:
        if call.error is not None:
            raise call.error
        assert call.result is not None
        return call.result
