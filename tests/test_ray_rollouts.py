"""env_executor="ray": a learner's rollouts step their envs as tasks on a real local Ray cluster
and equal the thread pool's for the same seeds: rewards, observations, joint states and, after
two updates, the weights. Both kinds of env: one whose pickle keeps its state (TinyCoop) and a
PettingZoo env whose pickle is a fresh env (`EzPickle`), replayed on the worker."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from gymnasium.utils import EzPickle

from tests.optional import require_module

torch = require_module("torch", "train")
ray = require_module("ray", "distributed")

import collabzoo  # noqa: E402
from collabzoo.algos import (  # noqa: E402
    CentralCriticConfig,
    CentralCriticTrainer,
    MAGRPOConfig,
    MAGRPOTrainer,
)
from collabzoo.algos.rollout.tree import expanded_nodes  # noqa: E402
from tests.test_learners import ScriptedPolicy, Sum, team  # noqa: E402

SETTINGS = {
    "rollout_buffer_size": 2,
    "num_generations": 2,
    "max_new_tokens": 2,
    "agent_learning_rate": 1e-2,
    "tensorboard": False,
    "progress": False,
    "save_steps": 0,
}


ROOT = Path(__file__).resolve().parent.parent
PYTHONPATH = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]


@pytest.fixture(scope="module", autouse=True)
def local_cluster():
    """A real Ray cluster on this machine (loopback only), shut down after the module; its
    workers import this repository's test envs. `address="local"`: always a new instance, never
    the cluster another test worker's `ray.cluster_utils.Cluster` advertises on this machine."""
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        _node_ip_address="127.0.0.1",
        runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join([str(ROOT), *PYTHONPATH])}},
    )
    assert {node["NodeManagerAddress"] for node in ray.nodes()} == {"127.0.0.1"}
    yield
    ray.shutdown()


class FreshPickleSum(Sum, EzPickle):
    """`Sum` whose pickle is a fresh env, as gymnasium's `EzPickle` makes most PettingZoo
    envs: sending one to a worker would lose its state."""

    def __init__(self) -> None:
        Sum.__init__(self)
        EzPickle.__init__(self)


def tree_record(roots) -> list:
    return [
        (
            node.depth,
            sorted(node.observations.items()),
            node.state,
            [(c.joint, c.reward, sorted(c.metrics.items()), c.ret) for c in node.children],
        )
        for root in roots
        for node in expanded_nodes(root)
    ]


def weights(trainer) -> list:
    return [p.detach().clone() for policy in trainer.distinct for p in policy.model.parameters()]


@pytest.mark.parametrize(
    ("make_env", "trainer_class", "config_class"),
    [
        (lambda: collabzoo.make("tinycoop", horizon=2), MAGRPOTrainer, MAGRPOConfig),
        (lambda: collabzoo.make("tinycoop", horizon=2), CentralCriticTrainer, CentralCriticConfig),
    ],
    ids=["magrpo", "cc-joint-states"],
)
def test_ray_rollouts_equal_the_thread_pools(
    make_env, trainer_class, config_class, tmp_path
) -> None:
    runs = {}
    for executor in ("threads", "ray"):
        torch.manual_seed(0)
        settings = {k: v for k, v in SETTINGS.items() if k in config_class.__dataclass_fields__}
        config = config_class(
            output_dir=str(tmp_path / executor), env_executor=executor, max_updates=2, **settings
        )
        trainer = trainer_class(make_env, team(), config)
        roots = trainer.rollout.build(trainer.episode_seeds(0), trainer.args.discount)
        trainer.train()
        runs[executor] = (tree_record(roots), weights(trainer), trainer.rollout.env_steps)
        if executor == "ray":  # every step (the first tree's and both updates') was a task
            assert trainer.remote.tasks == trainer.rollout.env_steps > 0
        trainer.close()
    assert runs["ray"][0] == runs["threads"][0]
    assert len(runs["ray"][0]) > 2, "two turns: nodes below the roots were stepped remotely"
    for ours, theirs in zip(runs["ray"][1], runs["threads"][1], strict=True):
        assert torch.equal(ours, theirs)
    assert runs["ray"][2] == runs["threads"][2]


def test_an_env_whose_pickle_is_fresh_is_replayed_on_the_worker(tmp_path) -> None:
    """The workers rebuild an `EzPickle` env from the factory and replay the seed and the joint
    actions so far, instead of stepping a fresh env."""
    roots = {}
    for executor in ("threads", "ray"):
        config = MAGRPOConfig(
            output_dir=str(tmp_path / executor), env_executor=executor, num_turns=3, **SETTINGS
        )
        trainer = MAGRPOTrainer(FreshPickleSum, team(("left", "right")), config)
        trainer.rollout.policies = {
            "left": ScriptedPolicy(["1", "2"]),
            "right": ScriptedPolicy(["3", "0"]),
        }
        roots[executor] = tree_record(trainer.rollout.build([4], 0.9))
        trainer.close()
    assert roots["ray"] == roots["threads"]
    assert max(depth for depth, *_ in roots["ray"]) == 1, "the second turn was replayed"


def test_unknown_executor_is_refused(tmp_path) -> None:
    with pytest.raises(ValueError, match="env_executor must be one of"):
        MAGRPOTrainer(
            lambda: collabzoo.make("tinycoop"),
            team(),
            MAGRPOConfig(output_dir=str(tmp_path), env_executor="dask", **SETTINGS),
        )
