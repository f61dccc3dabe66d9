"""The bench's batched evaluation against a plain batched `generate`, side by side in one run.

For each task: `collabzoo bench` plays `--episodes` episodes of a real model (SmolLM2-135M-
Instruct by default) in the `parallel` protocol, first one episode at a time
(`--episodes-at-once 1`), then all at once (their prompts of a turn in one padded generate);
then one plain `model.generate` over the same first-turn rows (the agents' prompts under the
chat template, left padded, the same sampling). Reported: generated tokens per second of wall
time for each, and the ratios batched / plain and batched / one by one. The bench's time
includes what the plain call skips (env steps, scoring, later turns), which is the point.

Greedy decoding, so the three make comparable rows (and the batched run's answers equal the
one-by-one run's). Torch uses `--threads` threads.

    python benchmarks/bench_batching.py [--envs tldr,coophumaneval] [--episodes 8]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def bench_rate(env: str, model: str, episodes: int, at_once: int, args: Any) -> dict[str, Any]:
    from collabzoo.bench.results import read_results
    from collabzoo.cli import main as cli

    with tempfile.TemporaryDirectory() as out:
        command = [
            "bench",
            "--env",
            env,
            "--team",
            f"hf:{model}",
            "--protocol",
            "parallel",
            "--greedy",
            "--max-new-tokens",
            str(args.new_tokens),
            "--episodes",
            str(episodes),
            "--episodes-at-once",
            str(at_once),
            "--threads",
            str(args.threads),
            "--output",
            out,
            "--no-progress",
            *[part for d in args.data if d.startswith(f"{env}=") for part in ("--data", d)],
        ]
        started = time.perf_counter()
        if cli(command) != 0:
            raise SystemExit(f"bench failed: {' '.join(command)}")
        seconds = time.perf_counter() - started
        (path,) = Path(out).glob("*.json")
        found = read_results(path)["episodes"]
    tokens = sum(e["cost"] for e in found)
    first = [
        sorted(e["turns"][0]["actions"].items()) for e in sorted(found, key=lambda e: e["index"])
    ]
    return {"seconds": seconds, "tokens": tokens, "tokens_per_s": tokens / seconds, "first": first}


def plain_rate(env: str, model: str, episodes: int, args: Any) -> dict[str, Any]:
    """One left-padded `generate` over the bench's first-turn rows (same seeds, same tasks)."""
    import torch

    import collabzoo
    from collabzoo.algos import LLMPolicy, load_causal_lm
    from collabzoo.algos.placement import set_torch_threads
    from collabzoo.bench.runner import plan_episodes

    set_torch_threads(args.threads)
    made = collabzoo.make(env, **data_kwargs(env, args.data))
    plan = plan_episodes(made, "eval", episodes, seed=0)
    rows = []
    for item in plan:
        observations, _ = made.reset(seed=item.seed, options={"task": item.task, "split": "eval"})
        rows += [observations[a] for a in made.possible_agents]
    network, tokenizer = load_causal_lm(model)
    policy = LLMPolicy(network, tokenizer, max_prompt_tokens=4096, keep_generation_config=True)
    encoded = [policy.encode_prompt(r) for r in rows]
    ids, attention, _ = policy._left_padded(encoded)
    started = time.perf_counter()
    with torch.no_grad():
        output = network.generate(
            input_ids=ids,
            attention_mask=attention,
            max_new_tokens=args.new_tokens,
            do_sample=False,
            pad_token_id=policy.pad_id,
            eos_token_id=policy.stop_ids,
        )
    seconds = time.perf_counter() - started
    stops = set(policy.stop_ids)
    tokens = 0
    for row in output[:, ids.size(1) :].tolist():
        end = next((j for j, t in enumerate(row) if t in stops), None)
        tokens += len(row) if end is None else end + 1
    return {"seconds": seconds, "tokens": tokens, "tokens_per_s": tokens / seconds}


def data_kwargs(env: str, data: list[str]) -> dict[str, Any]:
    for item in data:
        name, _, path = item.partition("=")
        if name == env:
            return {"data": path}
    return {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", default="tldr,coophumaneval")
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--data", action="append", default=[], help="as bench --data NAME=PATH")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)
    report = []
    for env in args.envs.split(","):
        one = bench_rate(env, args.model, args.episodes, 1, args)
        batched = bench_rate(env, args.model, args.episodes, args.episodes, args)
        plain = plain_rate(env, args.model, args.episodes, args)
        row = {
            "env": env,
            "episodes": args.episodes,
            "one_by_one": {k: v for k, v in one.items() if k != "first"},
            "batched": {k: v for k, v in batched.items() if k != "first"},
            "plain_generate": plain,
            "batched_over_plain": batched["tokens_per_s"] / plain["tokens_per_s"],
            "batched_over_one_by_one": batched["tokens_per_s"] / one["tokens_per_s"],
            "same_answers": one["first"] == batched["first"],
        }
        report.append(row)
        print(
            f"{env}: one by one {one['tokens_per_s']:.1f} tokens/s, batched "
            f"{batched['tokens_per_s']:.1f}, plain generate {plain['tokens_per_s']:.1f}; "
            f"batched / plain {row['batched_over_plain']:.2f}x, batched / one by one "
            f"{row['batched_over_one_by_one']:.2f}x; same answers: {row['same_answers']}",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
