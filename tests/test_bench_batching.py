"""Batched evaluation: the episodes played at once share one padded generate per turn.

`CallBatcher` is checked with real threads on a recording batch function (what goes into a
batch, who gets which rows, failures reaching every caller); the bench end to end with a real
model under greedy decoding, where every episode must come out exactly as when played one by
one.
"""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path

import pytest

from collabzoo.bench.batching import CallBatcher
from collabzoo.bench.models import Generation, Sampling
from collabzoo.bench.results import read_results

GREEDY = Sampling(max_new_tokens=4, greedy=True)


def echo(batches: list[list[str]], seeds_seen: list[list[int]] | None = None):
    def run(prompts: list[str], sampling: Sampling, seeds: list[int]) -> list[Generation]:
        batches.append(list(prompts))
        if seeds_seen is not None:
            seeds_seen.append(list(seeds))
        return [Generation(f"answer to {p}", 1, "stop") for p in prompts]

    return run


def in_play(batcher: CallBatcher, count: int) -> contextlib.ExitStack:
    stack = contextlib.ExitStack()
    for _ in range(count):
        stack.enter_context(batcher.episode())
    return stack


def call_together(batcher: CallBatcher, calls: list[list[str]]) -> list[list[str]]:
    results: list[list[str]] = [[] for _ in calls]

    def one(index: int) -> None:
        seeds = [100 * index + row for row in range(len(calls[index]))]
        got = batcher.generate(calls[index], GREEDY, seeds)
        results[index] = [g.text for g in got]

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return results


def test_calls_that_arrive_together_are_one_batch_and_each_gets_its_rows() -> None:
    batches: list[list[str]] = []
    seeds: list[list[int]] = []
    batcher = CallBatcher(echo(batches, seeds), gather_s=30.0)
    calls = [[f"e{i} a", f"e{i} b"] for i in range(4)]
    with in_play(batcher, 4):  # four episodes in play: the batch waits for all four calls
        results = call_together(batcher, calls)
    assert len(batches) == 1 and sorted(batches[0]) == sorted(p for c in calls for p in c)
    assert results == [[f"answer to {p}" for p in call] for call in calls]
    assert batcher.batches == [8]
    # every row keeps its own call's seed, in the batch's row order (vLLM seeds rows one by one)
    expected = [100 * int(p[1]) + (p[-1] == "b") for p in batches[0]]
    assert seeds == [expected]


def test_a_call_needs_a_seed_per_prompt() -> None:
    batcher = CallBatcher(echo([]), gather_s=0.05)
    with pytest.raises(ValueError, match="2 prompts need as many seeds, got 1"):
        batcher.generate(["a", "b"], GREEDY, [7])


def test_a_batch_starts_after_the_wait_when_fewer_calls_come() -> None:
    batches: list[list[str]] = []
    batcher = CallBatcher(echo(batches), gather_s=0.05)
    with in_play(batcher, 16):  # more than will call: the safety wait ends it
        assert call_together(batcher, [["x"], ["y"]]) == [["answer to x"], ["answer to y"]]
    assert sum(len(b) for b in batches) == 2


def test_an_episode_that_ends_releases_the_batch_waiting_for_it() -> None:
    batches: list[list[str]] = []
    batcher = CallBatcher(echo(batches), gather_s=60.0)
    done: list[str] = []
    with batcher.episode():
        ending = batcher.episode()
        ending.__enter__()  # a second episode in play, which will end without calling
        caller = threading.Thread(
            target=lambda: done.extend(g.text for g in batcher.generate(["p"], GREEDY, [0]))
        )
        started = time.monotonic()
        caller.start()
        time.sleep(0.2)
        assert not done  # the batch waits for the other episode's call
        ending.__exit__(None, None, None)
        caller.join(timeout=30)
    assert done == ["answer to p"] and time.monotonic() - started < 10


def test_a_failed_batch_fails_every_caller_of_it() -> None:
    def broken(prompts, sampling, seeds):
        raise RuntimeError("out of memory")

    batcher = CallBatcher(broken, gather_s=30.0)
    errors: list[str] = []

    def one() -> None:
        try:
            batcher.generate(["p"], GREEDY, [0])
        except RuntimeError as error:
            errors.append(str(error))

    threads = [threading.Thread(target=one) for _ in range(3)]
    with in_play(batcher, 3):
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
    assert errors == ["out of memory"] * 3


def episodes(tmp_path: Path, env: str, team: str, at_once: int, *extra: str) -> list[dict]:
    from collabzoo.cli import main

    out = tmp_path / f"{env}-{at_once}"
    command = [
        "bench",
        "--env",
        env,
        "--team",
        team,
        "--greedy",
        "--max-new-tokens",
        "12",
        "--episodes-at-once",
        str(at_once),
        "--output",
        str(out),
        "--no-progress",
        *extra,
    ]
    assert main(command) == 0
    found = [e for path in sorted(out.glob("*.json")) for e in read_results(path)["episodes"]]
    return [
        {k: e[k] for k in ("index", "seed", "total_reward")} | {"turns": strip(e)} for e in found
    ]


def strip(episode: dict) -> list[dict]:
    return [{"actions": t["actions"], "reward": t["reward"]} for t in episode["turns"]]


@pytest.mark.parametrize(
    ("env", "protocols", "count", "extra"),
    [
        ("tldr", "parallel,single", "4", []),
        ("strbuild", "parallel", "2", ["--env-arg", "horizon=2"]),
    ],
    ids=["tldr", "strbuild"],
)
@pytest.mark.slow(seconds=80)
def test_batched_episodes_equal_one_by_one_under_greedy_decoding(
    env: str, protocols: str, count: str, extra: list[str], smollm2: Path, tmp_path: Path
) -> None:
    """The real SmolLM2-135M-Instruct: its answers differ from episode to episode, so a row
    handed to the wrong episode, or padding that changed a token, would show."""
    team = "hf:smollm2-135m-instruct"
    options = ["--protocol", protocols, "--episodes", count, *extra]
    one_by_one = episodes(tmp_path, env, team, 1, *options)
    batched = episodes(tmp_path, env, team, int(count), *options)
    assert len(one_by_one) == int(count) * len(protocols.split(",")) and batched == one_by_one
    texts = {str(t["actions"]) for e in batched for t in e["turns"]}
    assert len(texts) > 1  # real, varied answers


@pytest.mark.slow(seconds=70)
def test_the_real_model_plays_coophumaneval_and_its_code_runs_in_docker(
    smollm2: Path, shared_data: Path, docker_sandbox, tmp_path: Path
) -> None:
    """Two CoopHumanEval episodes of SmolLM2-135M-Instruct (two turns, both agents), batched,
    at the reference sampling settings but for a shorter answer: the answers are scored by
    running them in the Docker sandbox, and the results file re-scores to the same values."""
    from collabzoo.bench import BenchRun, parse_team, run_bench
    from collabzoo.bench.rescore import rescore

    data = shared_data / "coophumaneval" / "CoopHumanEval.json"
    outcome = run_bench(
        BenchRun(
            "coophumaneval",
            parse_team("hf:smollm2-135m-instruct"),
            episodes=2,
            env_kwargs={"data": str(data), "sandbox": docker_sandbox},
            sampling=Sampling(max_new_tokens=96),
        ),
        tmp_path,
        progress=False,
    )
    document = outcome.document
    assert document["sandbox"]["backend"] == "docker"
    turns = [t for e in document["episodes"] for t in e["turns"]]
    assert len(turns) == 4  # two turns per episode
    assert all(g["tokens"] > 0 for t in turns for g in t["generations"])
    assert all(t["components"] for t in turns)  # the code reward's levels, scored
    replayed = rescore(outcome.path, sandbox_factory=lambda: docker_sandbox)
    assert replayed.ok and replayed.episodes == 2


def test_episodes_a_call_apart_on_a_two_model_team_do_not_wait_for_each_other() -> None:
    """A team with a model per agent shares one batcher. Episode A is at agent 1's model while
    episode B is already at agent 2's (B started alone, so its first batch ran without A): the
    two pending calls, to different models, make a full round and run at once, one batch per
    model, instead of each waiting for the other until the 30 s safety net."""
    first: list[list[str]] = []
    second: list[list[str]] = []
    batcher = CallBatcher(echo(first), gather_s=30.0)
    done: dict[str, list[str]] = {}

    def call(name: str, run, prompt: str) -> None:
        done[name] = [g.text for g in batcher.generate([prompt], GREEDY, [0], run)]

    with in_play(batcher, 2):
        threads = [
            threading.Thread(target=call, args=("a", echo(first), "a: agent 1")),
            threading.Thread(target=call, args=("b", echo(second), "b: agent 2")),
        ]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    assert time.monotonic() - started < 10
    assert done == {"a": ["answer to a: agent 1"], "b": ["answer to b: agent 2"]}
    assert first == [["a: agent 1"]] and second == [["b: agent 2"]]
    assert sorted(batcher.batches) == [1, 1]


def test_a_team_of_batching_models_shares_one_batcher() -> None:
    from collabzoo.bench.teams import Team

    class Member:  # the part of HFModel / VLLMModel a team looks at
        kind = "hf"
        concurrent = False

        def __init__(self) -> None:
            self.batcher = CallBatcher(echo([]))

    one, two = Member(), Member()
    team = Team("two models", {"agent_1": one, "agent_2": two})
    assert one.batcher is two.batcher
    with team.episode():
        assert one.batcher.live == 1  # counted once, not once per model
    assert one.batcher.live == 0
