"""The sandbox on a Ray cluster: `get_sandbox("ray", address="auto", **limits)`.

One Ray actor per alive node holds that node's own sandbox pool (the hardened Docker pool by
default, with the same image, limits and guarantees as `get_sandbox("docker")`). `run_many`
sends the jobs to the actors in chunks of four jobs per worker of a node's pool, with
backpressure: a node holds at most two chunks (one running, one waiting, so no worker idles
through the round trip to the driver), so a slow node never queues work a fast one could take.
A job is one program with all its tests, and a chunk one actor call: on a 2-core machine a call
per job cost about 20% of the pool's throughput, a chunk of four jobs per worker 0-11%.

A node that dies mid-batch loses none of its jobs: the actor's in-flight jobs come back as
errors from Ray and are sent again to the nodes still alive. Each job's result is recorded
once, from the first run that returned it, so nothing is counted twice.

Install the `distributed` extra. Ray's workers must be able to import collabzoo and run
Docker on every node that should take jobs.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Sequence
from typing import Any

from collabzoo.sandbox.pool import Sandbox
from collabzoo.sandbox.result import ExecResult, Job

CHUNK_PER_WORKER = 4
"""Jobs per actor call, per worker of the node's pool (see the module docstring)."""
QUEUED_PER_WORKER = 2
"""Chunks in flight per node: the one it runs and one waiting on the node."""


class NodePool:
    """The pool of one node (runs inside a Ray actor pinned to that node)."""

    def __init__(self, kind: str, limits: dict[str, Any]) -> None:
        import socket

        from collabzoo.sandbox import get_sandbox

        self.pool = get_sandbox(kind, **limits)
        self.host = socket.gethostname()

    def describe(self) -> dict[str, Any]:
        pool_id = getattr(self.pool, "pool_id", None)  # the label of a Docker pool's containers
        return {"size": self.pool.size, "kind": self.pool.kind, "host": self.host, "pool": pool_id}

    def run_many(self, jobs: list[Job]) -> list[ExecResult]:
        return self.pool.run_many(jobs)

    def probe(self) -> tuple[bool, str, bool]:
        """This node's isolation probe and a trivial program: (isolated, summary, works)."""
        from collabzoo.sandbox.probe import isolation_proven

        works = self.pool.run(
            "def f(x):\n    return x + 1", ["assert candidate(1) == 2"], entry_point="f"
        ).all_passed
        isolated, summary = isolation_proven(self.pool)
        return isolated, summary, works

    def close(self) -> None:
        """Close this node's pool, then remove any container whose owner died on this host
        (the pools of nodes that died with their containers still up)."""
        self.pool.close()
        client = getattr(self.pool, "client", None)
        if client is not None:
            from collabzoo.sandbox.docker import remove_stale_containers

            remove_stale_containers(client)


class RaySandbox(Sandbox):
    """A sandbox whose workers are the pools of a Ray cluster's nodes (see the module)."""

    kind = "ray"

    def __init__(
        self, address: str | None = None, *, node_kind: str = "docker", **limits: Any
    ) -> None:
        try:
            import ray
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        except ImportError as error:
            raise ImportError(
                f"the ray sandbox needs Ray ({error}): pip install 'collabzoo[distributed]'"
            ) from None
        self.ray = ray
        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        actor_class = ray.remote(NodePool)
        self.actors: dict[str, Any] = {}
        for node in ray.nodes():
            if not node.get("Alive"):
                continue
            strategy = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
            self.actors[node["NodeID"]] = actor_class.options(
                scheduling_strategy=strategy,
                max_concurrency=QUEUED_PER_WORKER + 1,
                num_cpus=0,
            ).remote(node_kind, limits)
        if not self.actors:
            raise RuntimeError("the Ray cluster has no alive node to run a sandbox on")
        described = ray.get([a.describe.remote() for a in self.actors.values()])
        self.nodes = dict(zip(self.actors, described, strict=True))
        """Per node id: its pool's size, kind, host name and pool id."""
        self.size = sum(d["size"] for d in described)
        self._closed = False
        self.reruns = 0
        """Jobs sent again because the node running them died."""

    def probe(self) -> dict[str, dict[str, Any]]:
        """Per node: its host, whether a trivial program passes, and its pool's isolation probe
        (`collabzoo sandbox check --ray`; run it before trusting a node with hostile code)."""
        found = self.ray.get([actor.probe.remote() for actor in self.actors.values()])
        return {
            node: {
                "host": self.nodes[node]["host"],
                "works": works,
                "isolated": isolated,
                "summary": summary,
            }
            for node, (isolated, summary, works) in zip(self.actors, found, strict=True)
        }

    def run_many(self, jobs: Sequence[Job]) -> list[ExecResult]:
        """Run jobs on the cluster's pools; results in the order of `jobs`."""
        jobs = self.checked(jobs)
        ray = self.ray
        waiting = deque(range(len(jobs)))
        results: list[ExecResult | None] = [None] * len(jobs)
        in_flight: dict[Any, tuple[list[int], str]] = {}
        while waiting or in_flight:
            for node in list(self.actors):  # backpressure: QUEUED_PER_WORKER chunks per node
                size = self.nodes[node]["size"]
                held = sum(1 for _, owner in in_flight.values() if owner == node)
                while waiting and held < QUEUED_PER_WORKER:
                    count = min(CHUNK_PER_WORKER * size, len(waiting))
                    chunk = [waiting.popleft() for _ in range(count)]
                    call = self.actors[node].run_many.remote([jobs[i] for i in chunk])
                    in_flight[call] = (chunk, node)
                    held += 1
            if not in_flight:
                raise RuntimeError("every node of the Ray cluster died before the jobs ran")
            done, _ = ray.wait(list(in_flight), num_returns=1)
            for ref in done:
                chunk, node = in_flight.pop(ref)
                try:
                    found = ray.get(ref)
                except (ray.exceptions.RayActorError, ray.exceptions.ActorDiedError):
                    waiting.extendleft(reversed(chunk))
                    self.reruns += len(chunk)
                    self._lose(node, in_flight, waiting)
                    continue
                for index, result in zip(chunk, found, strict=True):
                    if results[index] is None:  # the first run to return counts, once
                        results[index] = result
        return [r for r in results if r is not None]  # every index holds its one result

    def _lose(
        self, node: str, in_flight: dict[Any, tuple[list[int], str]], waiting: deque[int]
    ) -> None:
        """A node's actor died: forget the node, and queue its other in-flight jobs again."""
        if node not in self.actors:
            return
        del self.actors[node]
        for ref, (chunk, owner) in list(in_flight.items()):
            if owner == node:
                del in_flight[ref]
                waiting.extendleft(reversed(chunk))
                self.reruns += len(chunk)

    def close(self) -> None:
        """Close every node's pool (its containers) and end the actors."""
        if self._closed:
            return
        self._closed = True
        ray = self.ray
        closing = [actor.close.remote() for actor in self.actors.values()]
        for ref in closing:
            with contextlib.suppress(ray.exceptions.RayError):  # a node that died meanwhile
                ray.get(ref)
        for actor in self.actors.values():
            ray.kill(actor)
        self.actors.clear()


__all__ = ["NodePool", "RaySandbox"]
