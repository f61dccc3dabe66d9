"""collabzoo envs as verifiers environments (`collabzoo.integrations.verifiers`), evaluated by
verifiers' own runner (what `vf-eval` runs) against the loopback chat server of the bench tests,
whose scripted answers are deterministic: every reward verifiers reports must be the one that
stepping the collabzoo env directly with the same answers gives."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

import collabzoo
from collabzoo.envs.scripted_teams import code_oracle, tldr_heuristic
from tests.chat_server import ChatServer
from tests.conftest import require
from tests.optional import require_module

require_module("verifiers", "interop")

from collabzoo.integrations.verifiers import load_environment  # noqa: E402

TLDR = {"data": "sample"}


class ModelsServer(ChatServer):
    """The chat server answering several model names, as one server with a LoRA adapter per
    actor does; `asked` is each request's (model, user messages) in arrival order."""

    def __init__(self, policy: Callable[[str], str], models: tuple[str, ...], **options: Any):
        super().__init__(policy, model=models[0], **options)
        self.models = models
        self.asked: list[tuple[str, list[str]]] = []

    def _answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            sent = [m["content"] if m["role"] == "user" else m for m in body["messages"]]
            self.asked.append((body.get("model"), sent))
        if body.get("model") in self.models:
            body = {**body, "model": self.model}
        return super()._answer(body)


def evaluate(env: Any, server: ChatServer, output: Path) -> tuple[list[Any], list[dict]]:
    """verifiers' own evaluation of `env`: its episodes, and the records it saved."""
    from verifiers.v1 import EvalClientConfig
    from verifiers.v1.cli.eval.runner import run_eval
    from verifiers.v1.configs.cli.eval import EvalConfig

    client = EvalClientConfig(base_url=server.base_url, api_key_var="COLLABZOO_NO_KEY")
    config = EvalConfig(
        env=env.config, model=server.model, client=client, push=False, rich=None, output_dir=output
    )
    episodes = asyncio.run(run_eval(config))
    (saved,) = output.glob("*/traces.jsonl")
    return episodes, [json.loads(line) for line in saved.read_text().splitlines()]


def played_directly(
    name: str,
    kwargs: Mapping[str, Any],
    split: str,
    task: int,
    policy: Callable[[str], str],
    **options: Any,
) -> dict[str, Any]:
    """The episode stepped through the PettingZoo API with the policy's answers."""
    env = collabzoo.make(name, **kwargs, **options)
    observations, _ = env.reset(seed=0, options={"task": task, "split": split})
    prompts: list[dict[str, str]] = []
    total, components = 0.0, {}
    while env.agents:
        prompts.append(dict(observations))
        actions = {a: policy(observations[a]) for a in env.agents}
        observations, rewards, _, _, infos = env.step(actions)
        total += next(iter(rewards.values()))
        info = next(iter(infos.values()))
        for key, value in info["reward_components"].items():
            components[key] = components.get(key, 0.0) + value
    return {
        "total": total,
        "components": components,
        "metrics": info["metrics"],
        "prompts": prompts,
    }


def check_scores(trace: Mapping[str, Any], direct: Mapping[str, Any]) -> None:
    assert trace["rewards"] == {"total_reward": {"score": direct["total"], "weight": 1.0}}
    metrics = trace["metrics"]
    assert direct["components"] and all(
        metrics[f"component/{k}"] == pytest.approx(v) for k, v in direct["components"].items()
    )
    assert all(metrics[f"metric/{k}"] == pytest.approx(v) for k, v in direct["metrics"].items())


def test_a_writing_env_with_a_model_per_agent(tmp_path: Path) -> None:
    models = {"concise": "model-concise", "detailed": "model-detailed"}
    env = load_environment("tldr", split="eval", num_examples=2, env_kwargs=TLDR, models=models)
    assert env.seats == {"concise": "first", "detailed": "second"}
    with ModelsServer(tldr_heuristic, tuple(models.values())) as server:
        episodes, saved = evaluate(env, server, tmp_path)
    assert [e.ok for e in episodes] == [True, True] and len(saved) == 2
    asked = {tuple(sent): model for model, sent in server.asked}
    assert len(asked) == len(server.asked) == 4  # 2 episodes x 2 agents x 1 turn
    for record in saved:
        task = record["task"]["data"]["task"]
        direct = played_directly("tldr", TLDR, "eval", task, tldr_heuristic)
        (prompts,) = direct["prompts"]
        by_agent = {t["info"]["collabzoo_agent"]: t for t in record["traces"]}
        assert set(by_agent) == set(models)
        for agent, trace in by_agent.items():
            assert trace["agent"]["name"] == env.seats[agent]
            assert asked[(prompts[agent],)] == models[agent]  # its own prompt, its own model
            check_scores(trace, direct)
    assert direct["total"] > 1.0  # the heuristic team earns most of the TLDR reward (max 3.0)
    returned = sorted(t.reward for e in episodes for t in e.traces)
    assert returned == sorted(
        t["rewards"]["total_reward"]["score"] for r in saved for t in r["traces"]
    )


def test_a_code_env_plays_simultaneous_turns_in_the_docker_sandbox(
    tmp_path: Path, shared_data: Path, docker_sandbox: Any
) -> None:
    data = require(shared_data / "humaneval" / "HumanEval.jsonl.gz", "HumanEval")
    kwargs = {"data": str(data), "prompt_context": "definitions"}
    oracle = code_oracle(collabzoo.make("humaneval", **kwargs).items("eval")[:1])
    models = {"aux": "model-aux", "main": "model-main"}
    env = load_environment(
        "humaneval",
        split="eval",
        num_examples=1,
        env_kwargs=kwargs,
        sandbox="docker",
        models=models,
    )
    # barrier=2: the first two requests wait for each other, so they must be in flight together
    with ModelsServer(oracle, tuple(models.values()), barrier=2) as server:
        (episode,), (record,) = evaluate(env, server, tmp_path)
    assert episode.ok, episode.errors
    direct = played_directly("humaneval", kwargs, "eval", 0, oracle, sandbox=docker_sandbox)
    first, second = direct["prompts"]
    assert first != second and set(first) == set(second) == set(models)
    # both first-turn prompts went out before either second-turn prompt, each with its model;
    # the second turn sends the new observation alone (it holds the agent's memory of turn 1)
    assert sorted(server.asked[:2]) == sorted((models[a], [first[a]]) for a in models)
    assert sorted(server.asked[2:]) == sorted((models[a], [second[a]]) for a in models)
    assert direct["total"] == 6.0 and direct["components"]["tests"] == 2.0  # tests ran, passed
    for trace in record["traces"]:
        check_scores(trace, direct)
        assert trace["metrics"]["final_reward"] == 3.0
    assert [t.num_turns for t in episode.traces] == [2, 2]


def test_an_agent_without_an_answer_fails_its_episode_unscored(tmp_path: Path) -> None:
    def refuse(prompt: str) -> str:
        raise ValueError("no answer")  # the server answers HTTP 500

    env = load_environment("tldr", split="eval", num_examples=1, env_kwargs=TLDR)
    with ChatServer(refuse) as server:
        (episode,), (record,) = evaluate(env, server, tmp_path)
    assert not episode.ok and "gave no answer at turn 0" in episode.errors[-1].message
    assert all(not t["rewards"] for t in record["traces"])


def test_bad_input_gets_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown environment 'nosuch'"):
        load_environment("nosuch")
    with pytest.raises(TypeError, match="env_id must be a collabzoo env name"):
        load_environment(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"models names no agent .* \['nobody'\]"):
        load_environment("tldr", env_kwargs=TLDR, models={"nobody": "m"})
    with pytest.raises(TypeError, match="models must map agent names to model ids"):
        load_environment("tldr", env_kwargs=TLDR, models={"concise": 1})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="env_kwargs must hold JSON values"):
        load_environment("humaneval", env_kwargs={"sandbox": object()})
    with pytest.raises(TypeError, match="num_examples must be an int"):
        load_environment("tldr", env_kwargs=TLDR, num_examples="2")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="sandbox must be one of"):
        load_environment("tldr", env_kwargs=TLDR, sandbox="vm")
    with pytest.raises(ValueError, match="takes no sandbox"):
        load_environment("tldr", env_kwargs=TLDR, sandbox="process")
    with pytest.raises(ValueError, match="split must be one of"):
        load_environment("tldr", env_kwargs=TLDR, split="test")
    with pytest.raises(TypeError, match="it accepts"):
        load_environment("tldr", env_kwargs={"colour": "red"})


def test_vf_eval_finds_the_plugin_in_a_fresh_process(tmp_path: Path) -> None:
    """The `vf-eval` command itself, by plugin id, with nothing of collabzoo imported first."""
    vf_eval = shutil.which("vf-eval") or str(Path(sys.executable).with_name("vf-eval"))
    with ChatServer(tldr_heuristic) as server:
        run = subprocess.run(
            [
                vf_eval,
                "collabzoo-verifiers",
                "--env.taskset.env-id",
                "tldr",
                "--env.taskset.split",
                "eval",
                "--env.taskset.num-examples",
                "1",
                "--env.taskset.env-kwargs",
                json.dumps(TLDR),
                "-m",
                server.model,
                "--client.base-url",
                server.base_url,
                "--client.api-key-var",
                "COLLABZOO_NO_KEY",
                "--no-push",
                "-o",
                str(tmp_path),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "NO_COLOR": "1"},
        )
    assert run.returncode == 0, run.stderr[-3000:]
    (saved,) = tmp_path.glob("*/traces.jsonl")
    (record,) = [json.loads(line) for line in saved.read_text().splitlines()]
    direct = played_directly("tldr", TLDR, "eval", record["task"]["data"]["task"], tldr_heuristic)
    assert len(record["traces"]) == 2
    for trace in record["traces"]:
        check_scores(trace, direct)
