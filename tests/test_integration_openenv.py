"""`collabzoo serve` (an OpenEnv server) and `remote_env` (a ParallelEnv backed by one): the same
episodes as in-process, isolated sessions, exact copies, the env's own errors, OpenEnv's own
client, and a learner trained through loopback. Every server listens on 127.0.0.1 only."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.optional import require_module

openenv = require_module("openenv", "interop")
uvicorn = require_module("uvicorn", "interop")

import collabzoo  # noqa: E402
from collabzoo.envs.scripted_teams import scripted_team  # noqa: E402
from collabzoo.integrations.openenv import (  # noqa: E402
    JointAction,
    RemoteEnvError,
    make_app,
    remote_env,
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def served(env: str, env_kwargs: dict[str, Any] | None = None, **options: Any) -> Iterator[str]:
    """A `make_app` server on a loopback port, on a thread of this process, for the block."""
    app = make_app(env, env_kwargs, **options)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


@pytest.fixture(scope="module")
def tinycoop_url() -> Iterator[str]:
    with served("tinycoop", {"horizon": 2}) as url:
        yield url


@pytest.fixture(scope="module")
def strbuild_url() -> Iterator[str]:
    with served("strbuild") as url:
        yield url


def plain(value: Any) -> Any:
    """What JSON carries of `value` (infos hold tuples; the wire has lists)."""
    return json.loads(json.dumps(value))


def play_both(remote: Any, local: Any, game: str, seed: int, options: dict[str, Any]) -> int:
    """One whole episode on both envs with the same scripted answers; every return must match.
    Returns the steps played."""
    if game == "tinycoop":  # any first characters: vary the parities with the seed and turn
        turns = iter(range(1000))

        def answer(observations: dict[str, str]) -> dict[str, str]:
            turn = next(turns)
            return {a: str(seed * 7 + 3 * i + turn) for i, a in enumerate(observations)}

    else:
        answer = scripted_team(game, "oracle" if seed % 2 else "naive")
    observations, infos = remote.reset(seed=seed, options=options)
    expected = local.reset(seed=seed, options=options)
    assert plain((observations, infos)) == plain(expected)
    assert remote.state() == local.state()
    steps = 0
    while local.agents:
        actions = answer(observations)
        stepped = remote.step(actions)
        assert plain(stepped) == plain(local.step(actions))
        assert remote.agents == local.agents
        assert remote.state() == local.state()
        observations = stepped[0]
        steps += 1
    return steps


def test_remote_strbuild_plays_the_same_episodes_as_in_process(strbuild_url: str) -> None:
    remote = remote_env(strbuild_url)
    local = collabzoo.make("strbuild")
    assert remote.possible_agents == local.possible_agents
    assert remote.env_id == "collabzoo/StrBuild-v0"
    steps = 0
    for split in ("train", "eval"):
        for task in range(len(local.items(split))):
            steps += play_both(remote, local, "strbuild", task, {"split": split, "task": task})
    assert steps > len(local.items("train"))  # multi-turn episodes were played to their end
    remote.close()


def test_the_observation_holds_prompts_team_reward_components_metrics_and_state(
    strbuild_url: str,
) -> None:
    """Through OpenEnv's own generic client, as a third-party trainer would connect."""
    from openenv.core.generic_client import GenericEnvClient

    local = collabzoo.make("strbuild")
    client = GenericEnvClient(base_url=strbuild_url).sync()
    with client:
        state = client.state()
        assert state["possible_agents"] == local.possible_agents
        first = client.reset(seed=4, options={"task": 1})
        observations, _ = local.reset(seed=4, options={"task": 1})
        assert first.observation["observations"] == observations
        assert first.reward is None and not first.done
        answers = scripted_team("strbuild", "oracle")(observations)
        result = client.step(JointAction(actions=answers))
        _, rewards, _, _, infos = local.step(answers)
        info = next(iter(infos.values()))
        assert result.reward == pytest.approx(rewards[local.possible_agents[0]])
        assert result.reward > 0
        assert result.observation["reward_components"] == plain(info["reward_components"])
        assert result.observation["metrics"] == plain(info["metrics"])
        assert result.observation["state"] == local.state()
        assert result.done == (not local.agents)
        assert client.state()["step_count"] == 1
    with urllib.request.urlopen(f"{strbuild_url}/health", timeout=10) as answer:
        assert answer.status == 200


def test_concurrent_sessions_are_isolated(tinycoop_url: str) -> None:
    """Four clients play interleaved episodes on their own threads; each sees exactly what its
    own in-process env gives."""
    errors: list[BaseException] = []

    def client(seed: int) -> None:
        try:
            remote, local = remote_env(tinycoop_url), collabzoo.make("tinycoop", horizon=2)
            for episode in range(12):
                play_both(remote, local, "tinycoop", 100 * seed + episode, {})
            remote.close()
        except BaseException as error:  # reported by the main thread
            errors.append(error)

    threads = [threading.Thread(target=client, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors


def test_a_copy_continues_exactly_where_the_original_is(tinycoop_url: str) -> None:
    remote, local = remote_env(tinycoop_url), collabzoo.make("tinycoop", horizon=2)
    remote.reset(seed=7)
    local.reset(seed=7)
    first = {"alpha": "1", "beta": "2"}
    assert plain(remote.step(first)) == plain(local.step(first))
    remote_copy, local_copy = copy.deepcopy(remote), copy.deepcopy(local)
    assert remote_copy.agents == local_copy.agents == ["alpha", "beta"]
    assert remote_copy.state() == local_copy.state()
    # the copy and the original go separate ways and each matches its in-process twin
    assert plain(remote_copy.step({"alpha": "0", "beta": "0"})) == plain(
        local_copy.step({"alpha": "0", "beta": "0"})
    )
    assert plain(remote.step(first)) == plain(local.step(first))
    # a reset without a seed draws from the generator both copies carry
    assert copy.deepcopy(remote).reset() == remote.reset()


def test_bad_input_raises_the_error_the_env_raises_in_process(tinycoop_url: str) -> None:
    remote, local = remote_env(tinycoop_url), collabzoo.make("tinycoop", horizon=2)
    calls = [
        lambda env: env.step({"alpha": "1", "beta": "1"}),  # before any reset
        lambda env: env.reset(options={"task": 999}),
        lambda env: env.reset(options={"split": "nope"}),
        lambda env: env.reset(seed=-1),
        lambda env: (env.reset(seed=0), env.step({"alpha": "1"})),
        lambda env: (env.reset(seed=0), env.step({"alpha": 1, "beta": "1"})),
        lambda env: (env.reset(seed=0), env.step({"alpha": "1", "beta": "1", "gamma": "1"})),
        lambda env: env.step(["1", "1"]),
    ]
    for number, call in enumerate(calls):
        with pytest.raises(Exception) as in_process:
            call(local)
        with pytest.raises(type(in_process.value)) as remote_error:
            call(remote)
        assert str(remote_error.value) == str(in_process.value), number
    # the session survives its client's mistakes
    assert play_both(remote, local, "tinycoop", 3, {}) == 2


def test_servers_refuse_bad_settings_before_serving() -> None:
    with pytest.raises(ValueError, match="unknown environment 'nosuch'"):
        make_app("nosuch")
    with pytest.raises(ValueError, match="horizon must be a positive int"):
        make_app("tinycoop", {"horizon": 0})
    with pytest.raises(RemoteEnvError, match="cannot reach the collabzoo server"):
        remote_env(f"http://127.0.0.1:{free_port()}", connect_timeout_s=2)
    with pytest.raises(ValueError, match="server's URL"):
        remote_env("127.0.0.1:8000")


def test_a_full_server_says_how_to_make_room() -> None:
    with served("tinycoop", max_sessions=2) as url:
        first, second = remote_env(url), remote_env(url)
        # the error message, or the close that follows it when that comes first
        with pytest.raises(RemoteEnvError, match="--max-sessions"):
            remote_env(url)
        first.close()  # returns once the server has freed the session
        third = remote_env(url)
        third.reset(seed=0)
        second.reset(seed=0)
        assert third.step({"alpha": "1", "beta": "2"}) == second.step({"alpha": "1", "beta": "2"})


def test_collabzoo_serve_command(tmp_path) -> None:
    port = free_port()
    command = [sys.executable, "-m", "collabzoo.cli", "serve", "tinycoop", "--port", str(port)]
    server = subprocess.Popen(
        [*command, "--env-arg", "horizon=3"],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert server.stderr is not None
        banner = server.stderr.readline()
        assert f"serving collabzoo/TinyCoop-v0 over OpenEnv at http://127.0.0.1:{port}" in banner
        deadline = time.monotonic() + 60
        while True:
            try:
                remote = remote_env(f"http://127.0.0.1:{port}", connect_timeout_s=2)
                break
            except RemoteEnvError:
                assert server.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
        local = collabzoo.make("tinycoop", horizon=3)
        assert play_both(remote, local, "tinycoop", 11, {}) == 3
        remote.close()
    finally:
        server.terminate()
        server.wait(30)
    bad = subprocess.run(
        [*command, "--env-arg", "bogus=1"], capture_output=True, text=True, timeout=120
    )
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        "collabzoo: error: collabzoo/TinyCoop-v0: got an unexpected keyword argument 'bogus'; "
        "it accepts: split, memory, horizon, sparse, render_mode"
    ]


def test_a_code_env_with_its_sandbox_serves_the_same_scores(
    shared_data, code_sandbox, tmp_path
) -> None:
    """HumanEval with its Docker sandbox on the server side: the oracle's and a broken team's
    answers score the same remotely as in-process."""
    from collabzoo.envs.scripted_teams import code_oracle

    kwargs = {"data": str(shared_data / "humaneval"), "sandbox": code_sandbox}
    local = collabzoo.make("humaneval", **kwargs)
    oracle = code_oracle(local.items("eval"))
    with served("humaneval", kwargs) as url:
        remote = remote_env(url)
        for task in range(3):
            options = {"split": "eval", "task": task}
            observations, _ = remote.reset(seed=task, options=options)
            assert plain((observations, _)) == plain(local.reset(seed=task, options=options))
            answers = {agent: oracle(text) for agent, text in observations.items()}
            if task == 2:
                answers = {agent: "def broken(:\n" for agent in answers}
            stepped = remote.step(answers)
            assert plain(stepped) == plain(local.step(answers))
            assert (stepped[1]["main"] > 0) == (task != 2)
        remote.close()


# ----- a learner trained through the server ------------------------------------------------------
torch = require_module("torch", "train")

from collabzoo.algos import MAGRPOConfig, MAGRPOTrainer  # noqa: E402
from tests.test_learners import (  # noqa: E402
    FROM_SCRATCH,
    LEARNED,
    LEARNING_SEEDS,
    parameters,
    team,
)


@pytest.fixture(scope="module")
def one_turn_tinycoop_url() -> Iterator[str]:
    with served("tinycoop") as url:
        yield url


def test_magrpo_through_the_server_equals_magrpo_in_process(
    one_turn_tinycoop_url: str, tmp_path
) -> None:
    """Three updates on the remote env and on the in-process env from the same seeds: the same
    rollout trees (every branch a server-side copy), hence identical weights and metrics."""
    config = MAGRPOConfig(
        **{**FROM_SCRATCH, "rollout_buffer_size": 4, "num_generations": 4},
        max_updates=3,
        save_steps=0,
        seed=5,
    )
    runs = {}
    for name, env in (
        ("remote", remote_env(one_turn_tinycoop_url)),
        ("local", collabzoo.make("tinycoop")),
    ):
        torch.manual_seed(0)  # the sampling's RNG
        trainer = MAGRPOTrainer(
            env, team(seed=5), dataclasses.replace(config, output_dir=str(tmp_path / name))
        )
        last = trainer.train()
        runs[name] = (parameters(trainer), last)
    (remote_weights, remote_last), (local_weights, local_last) = runs["remote"], runs["local"]
    assert all(torch.equal(a, b) for a, b in zip(remote_weights, local_weights, strict=True))
    assert remote_last["mean_return"] == local_last["mean_return"]
    assert remote_last["env_steps"] == local_last["env_steps"] == 3 * 4 * 4


def test_magrpo_learns_tinycoop_through_the_server(one_turn_tinycoop_url: str, tmp_path) -> None:
    """The learning test of tests/test_learners.py, every env step on the loopback server. One
    seed: the test above shows the remote run is the in-process run, update for update, and the
    in-process test covers every seed of LEARNING_SEEDS."""
    config = MAGRPOConfig(**FROM_SCRATCH, max_updates=50, save_steps=0)
    for seed in LEARNING_SEEDS[:1]:
        torch.manual_seed(seed)
        trainer = MAGRPOTrainer(
            remote_env(one_turn_tinycoop_url),
            team(seed=seed),
            dataclasses.replace(config, output_dir=str(tmp_path / str(seed)), seed=seed),
        )
        before = trainer.evaluate(64)["mean_return"]
        trainer.train()
        after = trainer.evaluate(64)["mean_return"]
        assert before <= 0.1, (seed, before)
        assert after >= LEARNED, (seed, before, after)
