"""The bench's batched evaluation against a plain batched `generate`, side by side in one run.

For each task: `collabzoo bench` plays `--episodes` episodes of a real model (SmolLM2-135M-
Instruct by default) in the `parallel` protocol, first one episode at a time
(`--episodes-at-once 1`), then all at once (their prompts of a turn in one padded generate);
then plain `model.generate` calls over the same rows: the batched run's episodes are replayed
through the env to rebuild every turn's prompts, and each turn's rows (of the episodes still in
play) go to one left-padded `generate`, timed alone. Reported: generated tokens per second of
wall time for each, and the ratios batched / plain and batched / one by one. The bench's time
includes what the plain calls skip (loading the model, env steps, scoring between turns),
which is the point.

Greedy decoding, so the three make comparable rows (and the batched run's answers equal the
one-by-one run's). Torch uses `--threads` threads.

    python benchmarks/bench_batching.py [--envs tldr,coophumaneval] [--episodes 8] [--json [PATH]]

`--json` alone writes benchmarks/results/bench_batching.json, from which `bench_batching_table`
builds the Performance page's table.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_table import markdown_table, results_path, times, write_results


def bench_rate(env: str, model: str, episodes: int, at_once: int, args: Any) -> dict[str, Any]:
    from collabzoo.bench.results import read_results
    from collabzoo.cli import main as cli

    with tempfile.TemporaryDirectory() as out:
        command = [
            "bench",
            "--env",
            env,
            "--team",
            f"{args.engine}:{model}",
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
        found = sorted(read_results(path)["episodes"], key=lambda e: e["index"])
    tokens = sum(e["cost"] for e in found)
    actions = [[sorted(t["actions"].items()) for t in e["turns"]] for e in found]
    return {
        "seconds": seconds,
        "tokens": tokens,
        "tokens_per_s": tokens / seconds,
        "actions": actions,
        "plan": [(e["task"], e["seed"]) for e in found],
    }


def turn_rows(env: str, played: dict[str, Any], args: Any) -> list[list[str]]:
    """Every turn's prompts of the bench's episodes, rebuilt by replaying their actions through
    the env: rows[k] holds turn k's prompts of the episodes still in play at turn k."""
    import collabzoo

    made = collabzoo.make(env, **data_kwargs(env, args.data))
    rows: list[list[str]] = []
    for (task, seed), turns in zip(played["plan"], played["actions"], strict=True):
        observations, _ = made.reset(seed=seed, options={"task": task, "split": "eval"})
        for k, actions in enumerate(turns):
            if k == len(rows):
                rows.append([])
            rows[k] += [observations[a] for a in made.possible_agents]
            observations, *_ = made.step(dict(actions))
    return rows


def plain_rate(env: str, model: str, played: dict[str, Any], args: Any) -> dict[str, Any]:
    """One left-padded `generate` per turn over the bench's rows of that turn."""
    import torch

    from collabzoo.algos import LLMPolicy, load_causal_lm
    from collabzoo.algos.runtime.placement import set_torch_threads

    set_torch_threads(args.threads)
    network, tokenizer = load_causal_lm(model)
    policy = LLMPolicy(network, tokenizer, max_prompt_tokens=4096, keep_generation_config=True)
    stops = set(policy.stop_ids)
    seconds, tokens = 0.0, 0
    for rows in turn_rows(env, played, args):
        ids, attention, _ = policy._left_padded([policy.encode_prompt(r) for r in rows])
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
        seconds += time.perf_counter() - started
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
    parser.add_argument(
        "--engine", choices=("hf", "vllm"), default="hf", help="the bench team's kind"
    )
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--data", action="append", default=[], help="as bench --data NAME=PATH")
    parser.add_argument(
        "--json",
        nargs="?",
        const=str(results_path("bench_batching")),
        help="write the figures here (alone: benchmarks/results/bench_batching.json)",
    )
    args = parser.parse_args(argv)
    report = []
    for env in args.envs.split(","):
        one = bench_rate(env, args.model, args.episodes, 1, args)
        batched = bench_rate(env, args.model, args.episodes, args.episodes, args)
        plain = plain_rate(env, args.model, batched, args)
        row = {
            "env": env,
            "data": data_kwargs(env, args.data).get("data"),
            "episodes": args.episodes,
            "engine": args.engine,
            "one_by_one": {k: one[k] for k in ("seconds", "tokens", "tokens_per_s")},
            "batched": {k: batched[k] for k in ("seconds", "tokens", "tokens_per_s")},
            "plain_generate": plain,
            "batched_over_plain": batched["tokens_per_s"] / plain["tokens_per_s"],
            "batched_over_one_by_one": batched["tokens_per_s"] / one["tokens_per_s"],
            "same_answers": one["actions"] == batched["actions"],
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
        settings = {"model": args.model, "new_tokens": args.new_tokens, "threads": args.threads}
        results = {"settings": settings, "rows": report}
        write_results(args.json, {"headline": headline(results), **results})
    return 0


# ----- the Performance page's table --------------------------------------------------------------
TASK_NAMES = {"tldr": "TLDR", "arxiv": "arXiv", "coophumaneval": "CoopHumanEval (two turns)"}


def task_name(row: dict[str, Any]) -> str:
    name = TASK_NAMES.get(row["env"], row["env"])
    return f"{name} (embedded sample)" if row.get("data") == "sample" else name


def bench_batching_table(results: dict[str, Any]) -> str:
    cells = [
        [
            task_name(row),
            f"{row['one_by_one']['tokens_per_s']:.1f}",
            f"{row['batched']['tokens_per_s']:.1f}",
            f"{row['plain_generate']['tokens_per_s']:.1f}",
            times(row["batched_over_plain"]),
            times(row["batched_over_one_by_one"]),
            "yes" if row["same_answers"] else "no",
        ]
        for row in results["rows"]
    ]
    header = [
        "Task",
        "One by one (tokens/s)",
        "Batched (tokens/s)",
        "Plain `generate` (tokens/s)",
        "Batched / plain",
        "Batched / one by one",
        "Same answers",
    ]
    return markdown_table(header, cells, "lrrrrrl")


def headline(results: dict[str, Any]) -> dict[str, Any]:
    """The task the bench serves worst against a plain `generate` of the same rows."""
    row = min(results["rows"], key=lambda r: r["batched_over_plain"])
    return {
        "benchmark": "The bench's batched evaluation",
        "figure": f"{task_name(row)}: {row['batched']['tokens_per_s']:.1f} tokens/s batched, "
        f"{row['plain_generate']['tokens_per_s']:.1f} in a plain `generate` of the same rows",
        "ratio": round(row["batched_over_plain"], 2),
        "section": "A real pretrained model on the CPU",
    }


if __name__ == "__main__":
    sys.exit(main())
