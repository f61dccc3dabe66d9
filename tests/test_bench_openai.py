"""The OpenAI-compatible path end to end: the real `openai` client against a real HTTP server
on loopback (tests/chat_server.py) that answers from a scripted policy."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from collabzoo.bench import read_results
from collabzoo.bench.openai_model import parse_endpoint
from collabzoo.bench.rescore import rescore
from collabzoo.cli import main
from collabzoo.envs.scripted_teams import strbuild_oracle, tinycoop_oracle
from tests.chat_server import ChatServer
from tests.optional import require_module


@pytest.fixture(autouse=True)
def openai():
    """Every test here needs the openai client: a skip outside CI, a failure under CI=true."""
    return require_module("openai", "bench")


def bench(tmp_path: Path, server: ChatServer, *extra: str, env: str = "strbuild") -> list[str]:
    return [
        "bench",
        "--env",
        env,
        "--team",
        server.team,
        "--output",
        str(tmp_path),
        "--no-progress",
        *extra,
    ]


def only_results(tmp_path: Path) -> dict:
    (path,) = tmp_path.glob("*.json")
    return read_results(path)


def test_an_endpoint_team_plays_through_the_real_client(tmp_path: Path, capsys) -> None:
    with ChatServer(strbuild_oracle) as server:
        assert main(bench(tmp_path, server, "--seed", "3", "--max-new-tokens", "300")) == 0
    document = only_results(tmp_path)
    summary = document["summary"]
    # the server's scripted oracle builds every word perfectly
    assert summary["IoU"]["mean"] == 100.0 and summary["Adj"]["mean"] == 0.0
    assert all(e["final_reward"] == document["env"]["max_reward"] for e in document["episodes"])
    # Cost is what the server reported (its count is UTF-8 bytes, unlike any local count)
    answered = [
        g["text"] for e in document["episodes"] for t in e["turns"] for g in t["generations"]
    ]
    assert len(server.requests) == len(answered) == 2 * 2 * 4  # episodes x agents x turns
    assert sum(e["cost"] for e in document["episodes"]) == sum(len(a.encode()) for a in answered)
    # what the client sent: the model, the prompt as one user message, the sampling settings
    first = server.requests[0]
    assert first["model"] == server.model and first["messages"][0]["role"] == "user"
    assert first["max_tokens"] == 300 and first["temperature"] == 0.6 and first["top_p"] == 0.6
    assert "top_k" not in first  # hosted APIs reject it: sent only when asked for
    assert len({r["seed"] for r in server.requests}) == len(server.requests)
    member = document["team"]["members"]["first_builder"]
    assert member["base_url"] == server.base_url and member["model"] == server.model
    assert document["sampling"]["top_k"] is None
    assert "IoU 100.0" in capsys.readouterr().out
    (path,) = tmp_path.glob("*.json")
    assert rescore(path).ok  # an endpoint team's file re-scores without the endpoint


def test_seeds_and_top_k_reach_the_server(tmp_path: Path) -> None:
    with ChatServer(tinycoop_oracle) as server:
        assert main(bench(tmp_path, server, "--top-k", "20", env="tinycoop")) == 0
        first_run = [(r["seed"], r["messages"][0]["content"]) for r in server.requests]
        assert all(r["top_k"] == 20 for r in server.requests)
        assert main(bench(tmp_path / "again", server, "--top-k", "20", env="tinycoop")) == 0
        again = [
            (r["seed"], r["messages"][0]["content"]) for r in server.requests[len(first_run) :]
        ]
    # the same run sends the same seeded requests again (order may differ: they are concurrent)
    assert sorted(again) == sorted(first_run)


def test_failed_and_slow_requests_are_retried(tmp_path: Path) -> None:
    with ChatServer(tinycoop_oracle, fail_first=2) as server:
        assert main(bench(tmp_path / "a", server, "--retries", "2", env="tinycoop")) == 0
        assert len(server.requests) == 2 + 2 * 2  # two failures, then every request once
    assert only_results(tmp_path / "a")["summary"]["Win"]["mean"] == 100.0
    with ChatServer(tinycoop_oracle, stall_first=1, stall_seconds=5) as server:
        args = bench(tmp_path / "b", server, "--timeout", "1", "--retries", "1", env="tinycoop")
        assert main(args) == 0
        assert len(server.requests) == 1 + 2 * 2  # the stalled request timed out, was resent
    assert only_results(tmp_path / "b")["summary"]["Win"]["mean"] == 100.0


def test_requests_run_concurrently_up_to_the_limit(tmp_path: Path) -> None:
    # the first two requests wait for each other: the run only gets past them if the client
    # really has two in flight at once
    with ChatServer(tinycoop_oracle, barrier=2) as server:
        args = bench(tmp_path, server, "--concurrency", "2", "--episodes", "6", env="tinycoop")
        assert main(args) == 0
    assert server.max_in_flight == 2
    assert len(only_results(tmp_path)["episodes"]) == 6


def test_an_endpoint_that_keeps_failing_stops_the_run_and_keeps_what_finished(
    tmp_path: Path, capsys
) -> None:
    with ChatServer(tinycoop_oracle, fail_first=10**6) as server:
        assert main(bench(tmp_path, server, "--retries", "0", env="tinycoop")) == 1
    err = capsys.readouterr().err
    assert "failed after 0 retries" in err and "InternalServerError" in err and "--resume" in err
    document = only_results(tmp_path)
    assert document["status"] == "failed" and document["episodes"] == []


def test_an_unreachable_endpoint_is_a_clear_error(tmp_path: Path, capsys) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    team = f"openai:http://127.0.0.1:{port}/v1/my-model"
    args = ["bench", "--env", "strbuild", "--team", team, "--output", str(tmp_path)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"cannot reach the OpenAI-compatible endpoint http://127.0.0.1:{port}/v1" in err
    assert "is the server running? expected openai:http://HOST:PORT/v1/MODEL" in err
    assert not list(tmp_path.glob("*.json"))


def test_a_model_the_endpoint_does_not_serve_is_a_clear_error(tmp_path: Path, capsys) -> None:
    with ChatServer(strbuild_oracle, model="served-model") as server:
        team = f"openai:{server.base_url}/other-model"
        args = ["bench", "--env", "strbuild", "--team", team, "--output", str(tmp_path)]
        assert main(args) == 2
    assert "does not serve model 'other-model'; it serves: served-model" in capsys.readouterr().err


def test_endpoint_specs() -> None:
    assert parse_endpoint("http://localhost:8000/v1/my-model") == (
        "http://localhost:8000/v1",
        "my-model",
    )
    assert parse_endpoint("https://h.example/api/v1/Qwen/Qwen2.5-3B") == (
        "https://h.example/api/v1",
        "Qwen/Qwen2.5-3B",
    )
    assert parse_endpoint("http://h:8080/openai#gpt-x") == ("http://h:8080/openai", "gpt-x")
    with pytest.raises(ValueError, match="cannot tell the base URL"):
        parse_endpoint("http://h:8080/models/x")


def test_results_record_the_endpoint_settings_but_never_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_ENDPOINT_KEY", "sk-secret-1234")
    with ChatServer(tinycoop_oracle) as server:
        args = bench(
            tmp_path,
            server,
            "--timeout",
            "7",
            "--retries",
            "4",
            "--concurrency",
            "3",
            "--api-key-env",
            "MY_ENDPOINT_KEY",
            env="tinycoop",
        )
        assert main(args) == 0
    assert server.api_keys == {"sk-secret-1234"}
    document = only_results(tmp_path)
    member = document["team"]["members"]["alpha"]
    assert (member["timeout_s"], member["retries"], member["concurrency"]) == (7.0, 4, 3)
    assert "usage.completion_tokens" in member["tokens"]
    assert "sk-secret-1234" not in json.dumps(document)
    assert document["command"] == ["collabzoo", *args]


def test_a_team_can_mix_kinds_one_per_agent(tmp_path: Path) -> None:
    with ChatServer(strbuild_oracle) as server:
        team = f"scripted:oracle,{server.team}"
        args = ["bench", "--env", "strbuild", "--team", team, "--output", str(tmp_path)]
        assert main([*args, "--no-progress"]) == 0
    # only the second builder's prompts went to the endpoint
    prompts = [r["messages"][0]["content"] for r in server.requests]
    assert len(prompts) == 2 * 4 and all("You are the second of 2" in p for p in prompts)
    document = only_results(tmp_path)
    members = document["team"]["members"]
    assert members["first_builder"]["kind"] == "scripted"
    assert members["second_builder"]["kind"] == "openai"
    assert document["summary"]["IoU"]["mean"] == 100.0
