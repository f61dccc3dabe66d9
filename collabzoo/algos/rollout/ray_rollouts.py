"""Env steps of the rollout trees as Ray tasks: `LearnerConfig(env_executor="ray")`.

A rollout depth's joint actions are stepped on the cluster's CPUs instead of the trainer's
threads, so rewards that cost real CPU (a code task's tests, a long scorer) scale with the
cluster. Sampling stays in the trainer; a task gets a node's environment and one joint action,
and returns what `env.step` returned, the env after the step and its joint state. The learners
keep seeing the PettingZoo API only: the tasks call `reset` and `step`, nothing else.

Copies: each task receives its own deserialised copy of the node's env (one `ray.put` per
node, shared by its K children), so no two children share a state. An env whose pickle is a
fresh env (gymnasium's `EzPickle`, most PettingZoo envs) is rebuilt on the worker from the env
factory and replayed from its seed and the joint actions so far, as the thread pool does.

Every step is independent and deterministic given its env and actions, so a learner's rollouts
are the same on Ray as on threads (tests/test_ray_rollouts.py). Install the `distributed`
extra (`pip install 'collabzoo[distributed]'`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from collabzoo.algos.rollout.tree import (
    Child,
    Node,
    TreeRollout,
    copy_loses_state,
    replayed,
    step_env,
)


def step_on_worker(
    env: Any,
    factory: Callable[[], Any],
    seed: int,
    prefix: list[dict[str, str]],
    actions: dict[str, str],
    record_state: bool,
) -> tuple[Any, tuple[Any, ...], list[str], Any]:
    """One child's step, on a Ray worker: (the env after it, or None when its pickle would
    lose its state; what `step` returned; the live agents; the joint state when recorded)."""
    if env is None:  # rebuilt and replayed: its pickle would be a fresh env
        env = replayed(factory, seed, prefix)
    stepped, live, state = step_env(env, actions, record_state)
    return (None if copy_loses_state(env) else env), stepped, live, state


class RayEnvSteps:
    """Steps a rollout depth's children as Ray tasks (see the module docstring)."""

    def __init__(self, address: str | None = None) -> None:
        try:
            import ray
        except ImportError as error:
            raise ImportError(
                f"env_executor=\"ray\" needs Ray ({error}): pip install 'collabzoo[distributed]'"
            ) from None
        self.ray = ray
        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        self.task = ray.remote(step_on_worker)
        self.tasks = 0
        """Steps run as tasks so far."""
        self._factories: dict[int, Any] = {}

    def step(
        self, rollout: TreeRollout, jobs: Sequence[tuple[Node, tuple[int, ...]]]
    ) -> list[tuple[Child, Node | None]]:
        """Every (node, joint action) stepped as a task; the children, in job order."""
        ray = self.ray
        factory = self._factories.get(id(rollout.env_factory))
        if factory is None:
            factory = self._factories[id(rollout.env_factory)] = ray.put(rollout.env_factory)
        envs: dict[int, Any] = {}
        futures, texts = [], []
        for node, joint in jobs:
            if id(node) not in envs:
                state_kept = node.env is not None and not copy_loses_state(node.env)
                envs[id(node)] = ray.put(node.env if state_kept else None)
            actions = rollout.joint_texts(node, joint)
            texts.append(actions)
            futures.append(
                self.task.remote(
                    envs[id(node)],
                    factory,
                    node.seed,
                    node.actions,
                    actions,
                    rollout.record_state,
                )
            )
        results = ray.get(futures)
        self.tasks += len(futures)
        return [
            rollout.outcome(node, joint, actions, env, stepped, live, state)
            for (node, joint), actions, (env, stepped, live, state) in zip(
                jobs, texts, results, strict=True
            )
        ]


__all__ = ["RayEnvSteps", "step_on_worker"]
