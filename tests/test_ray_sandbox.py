"""The sandbox on a real Ray cluster: two nodes on this machine (`ray.cluster_utils.Cluster`),
each with its own Docker pool of one container. All 164 HumanEval canonical solutions pass and
their mutants fail; the hostile suite, run only after every node's isolation probe passed,
earns no pass and leaves nothing for the next jobs on either node; a node removed mid-batch
loses no job and counts none twice; `close()` leaves no container and no actor behind."""

from __future__ import annotations

import gzip
import json
import os
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import require_docker
from tests.optional import require_module
from tests.test_sandbox import canonical_jobs
from tests.test_sandbox_adversary import ATTACK_NAMES, ATTACKS, HUNT, TIMEOUT

ray = require_module("ray", "distributed")

from ray.cluster_utils import Cluster  # noqa: E402

from collabzoo.sandbox import Job, get_sandbox  # noqa: E402
from collabzoo.sandbox.docker import LABEL, POOL_LABEL  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PYTHONPATH = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]


@pytest.fixture(scope="module")
def cluster():
    require_docker()
    made = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    extra = made.add_node(num_cpus=1)
    ray.init(
        address=made.address,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join([str(ROOT), *PYTHONPATH])}},
    )
    # loopback only (tests/conftest.py): both nodes and the driver on 127.0.0.1
    assert {node["NodeManagerAddress"] for node in ray.nodes()} == {"127.0.0.1"}
    assert made.address.startswith("127.0.0.1:")
    yield made, extra
    ray.shutdown()
    made.shutdown()


@pytest.fixture(scope="module")
def problems(shared_data: Path) -> list[dict]:
    with gzip.open(shared_data / "humaneval" / "HumanEval.jsonl.gz", "rt") as f:
        return [json.loads(line) for line in f]


def containers(sandbox) -> list:
    """The containers of this sandbox's node pools (other pools may run beside it)."""
    import docker

    pools = {node["pool"] for node in sandbox.nodes.values()}
    found = docker.from_env().containers.list(
        all=True, filters={"label": LABEL}, ignore_removed=True
    )
    return [c for c in found if c.labels.get(POOL_LABEL) in pools]


def assert_nothing_left(sandbox, actors: list) -> None:
    assert not containers(sandbox), "close() removed every node's containers"
    for actor in actors:
        with pytest.raises(ray.exceptions.RayActorError):
            ray.get(actor.describe.remote(), timeout=60)


def test_canonical_solutions_pass_and_mutants_fail_across_two_nodes(cluster, problems) -> None:
    with get_sandbox("ray", size=1) as sandbox:
        assert len(sandbox.nodes) == 2 and sandbox.size == 2
        assert len(containers(sandbox)) == 2, "one container on each node"
        actors = list(sandbox.actors.values())
        results = sandbox.run_many(canonical_jobs(problems, mutate=False))
        failed = [
            (p["task_id"], r.error)
            for p, r in zip(problems, results, strict=True)
            if not r.all_passed
        ]
        assert not failed, failed
        mutants = sandbox.run_many(canonical_jobs(problems, mutate=True))
        survived = [p["task_id"] for p, r in zip(problems, mutants, strict=True) if r.all_passed]
        assert not survived, survived
    assert_nothing_left(sandbox, actors)


@pytest.mark.parametrize("name", ATTACK_NAMES)
def test_the_hostile_suite_is_contained_on_every_node(name: str, proven) -> None:
    sandbox = proven
    attack = next(a for a in ATTACKS if a.name == name)
    started = time.monotonic()
    result = sandbox.run(attack.program, list(attack.tests), TIMEOUT, entry_point="f")
    elapsed = time.monotonic() - started
    assert not any(result.passed), f"{name}: a hostile program earned a pass: {result}"
    assert elapsed < attack.bound + 5.0, f"{name}: took {elapsed:.1f} s (bound {attack.bound} s)"
    assert result.details["replaced"] == [], f"{name}: {result.details['replaced']}"
    # one ordinary job and one hunt on each node (one container each: one job per node)
    ordinary = Job("def f(x):\n    return x + 1", ("assert candidate(1) == 2",), "f", TIMEOUT)
    assert all(r.all_passed for r in sandbox.run_many([ordinary] * 2))
    hunt = Job(HUNT, ("assert candidate() == []",), "hunt", 10.0)
    hunted = sandbox.run_many([hunt] * 2)
    assert all(r.all_passed for r in hunted), [r.error for r in hunted]


@pytest.fixture(scope="module")
def proven(cluster):
    """The two nodes' sandbox, used for hostile programs only once each node's isolation probe
    has passed just now."""
    with get_sandbox("ray", size=1) as sandbox:
        report = sandbox.probe()
        assert len(report) == 2
        for node in report.values():
            if not (node["works"] and node["isolated"]):
                pytest.fail(f"isolation not proven on {node['host']}: {node['summary']}")
        yield sandbox


def test_a_code_env_scores_on_the_ray_sandbox_as_on_the_docker_pool(
    cluster, shared_data: Path, docker_sandbox
) -> None:
    """The HumanEval env with the oracle's answers: the same rewards and metrics from the Ray
    sandbox as from a local Docker pool, on five problems."""
    import collabzoo
    from collabzoo.envs.scripted_teams import code_oracle

    data = str(shared_data / "humaneval" / "HumanEval.jsonl.gz")
    with get_sandbox("ray", size=1) as sandbox:
        scored = {}
        for name, chosen in (("ray", sandbox), ("docker", docker_sandbox)):
            env = collabzoo.make("humaneval", data=data, split="eval", sandbox=chosen)
            oracle = code_oracle(list(env.items("eval")))
            scored[name] = []
            for task in range(5):
                observations, _ = env.reset(options={"task": task})
                answers = {a: oracle(o) for a, o in observations.items()}
                _, rewards, _, _, infos = env.step(answers)
                scored[name].append((rewards, infos["main"].get("metrics")))
    assert scored["ray"] == scored["docker"]
    assert all(rewards["main"] > 0 for rewards, _ in scored["ray"])


def test_sandbox_check_reports_every_node(cluster, capsys) -> None:
    from collabzoo.cli import main

    assert main(["sandbox", "check", "--ray"]) == 0  # joins the cluster this process is on
    out = capsys.readouterr().out
    assert "ray: 2 node(s)" in out
    assert out.count("trivial program passed") == 2 and "NO" not in out


def test_a_node_removed_mid_batch_loses_no_job(cluster) -> None:
    """40 jobs of 0.3 s each, one container per node; the second node is removed while they
    run. Every job returns exactly its own answer (job i prints i), the removed node's in-flight
    job ran again elsewhere, and nothing is left behind."""
    made, extra = cluster
    jobs = [
        Job(f"import time\ntime.sleep(0.3)\nprint({i})\n", ("assert True",), None, 10.0)
        for i in range(40)
    ]
    with get_sandbox("ray", size=1) as sandbox:
        assert len(sandbox.nodes) == 2
        actors = list(sandbox.actors.values())
        timer = threading.Timer(2.0, lambda: made.remove_node(extra))
        timer.start()
        started = time.monotonic()
        results = sandbox.run_many(jobs)
        timer.join()
        assert time.monotonic() - started > 2.0, "the node left while the batch ran"
        assert [r.stdout.strip() for r in results] == [str(i) for i in range(40)]
        assert all(r.all_passed for r in results)
        assert len(sandbox.actors) == 1, "the removed node's pool is gone from the sandbox"
        assert sandbox.reruns >= 1
    assert_nothing_left(sandbox, actors)
