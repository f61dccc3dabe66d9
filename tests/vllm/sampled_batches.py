"""Run by `test_vllm_bench.py` in a process of its own (vLLM's engine starts a child process,
hence the main guard): one vLLM engine serving SmolLM2-135M-Instruct plays the same sampled
TLDR episodes one at a time and all at once, then answers eight long seeded prompts in one
call and one by one (a batch over twice the engine's prefill budget, which a CPU engine must not
split), and loads the team again (a later run of the process reuses the engine); prints what it
saw as JSON. The engine's context is cut to CONTEXT tokens, which sets its budget to collabzoo's
CPU floor of 2,048 (the model's own 8,192 would need prompts four times as long: the same check
at several times the prefill).

    python -m tests.vllm.sampled_batches OUTPUT_FOLDER EPISODES
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from collabzoo.bench import BenchRun, run_bench
from collabzoo.bench.models import ModelOptions, Sampling
from collabzoo.bench.teams import Team, load_local_team

MODEL = "smollm2-135m-instruct"
CONTEXT = 1024


class LoadedTeam:
    """A team spec whose models are already loaded, so both runs share one engine."""

    kinds = frozenset({"vllm"})

    def __init__(self, label: str, team: Team) -> None:
        self.label = label
        self.team = team

    def check(self, game: str) -> None:
        return None

    def build(self, env: Any, game: str, agents: Any, options: ModelOptions) -> Team:
        return self.team


def main(output: Path, episodes: int) -> None:
    import collabzoo

    agents = collabzoo.pettingzoo_make("tldr", data="sample").possible_agents
    options = ModelOptions(dtype="float32", vllm_kwargs={"max_model_len": CONTEXT})
    members = load_local_team("vllm", [MODEL], agents, options)
    (model,) = {id(m): m for m in members.values()}.values()
    sampling = Sampling(max_new_tokens=40)  # the reference's temperature, top-p and top-k
    report: dict[str, Any] = {}
    for at_once in (1, episodes):
        team = LoadedTeam(f"vllm:{MODEL}", Team(f"vllm:{MODEL}", members))
        run = BenchRun(
            "tldr",
            team,
            episodes=episodes,
            env_kwargs={"data": "sample"},
            sampling=sampling,
            options=replace(options, episodes_at_once=at_once),
        )
        before = len(model.batcher.batches)
        outcome = run_bench(run, output / f"at-once-{at_once}", progress=False)
        found = sorted(outcome.document["episodes"], key=lambda e: e["index"])
        report[str(at_once)] = {
            "answers": [[t["actions"] for t in e["turns"]] for e in found],
            "batches": model.batcher.batches[before:],
        }
    post = collabzoo.make("tldr", data="sample").reset(seed=0)[0][agents[0]]
    long_prompts = [f"Variant {k}.\n" + post * 2 for k in range(8)]
    seeds = list(range(100, 108))
    free = Sampling(max_new_tokens=24, temperature=1.0, top_p=1.0, top_k=0)  # seeds matter
    together = model.generate(long_prompts, free, seeds)
    alone = [model.generate([p], free, [s])[0] for p, s in zip(long_prompts, seeds, strict=True)]
    report["long"] = {
        "prompt_tokens": [len(model.encoder.encode_prompt(p)) for p in long_prompts],
        "budget": model.engine.llm_engine.vllm_config.scheduler_config.max_num_batched_tokens,
        "context": CONTEXT,
        "new_tokens": free.max_new_tokens,
        "together": [g.text for g in together],
        "alone": [g.text for g in alone],
    }
    again = load_local_team("vllm", [MODEL], agents, options)
    report["same_engine"] = all(m.engine is model.engine for m in again.values())
    print("REPORT " + json.dumps(report))


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
