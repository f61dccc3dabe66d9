"""Decode speed at a real model shape against the memory-bandwidth bound, and where an update's
time goes.

Decode: `LLMPolicy.generate_ids` (what every learner samples with) on a randomly initialised
bf16 model of the Qwen2.5-0.5B shape (`shaped_causal_lm`), `--prompt-tokens` prompt ids and
`--new-tokens` new tokens per row (no stop token is ever sampled: the stop ids are moved out of
the vocabulary's reach), at each batch of `--batches`. The bound: a decode step reads every
weight once, so with B rows it makes at most B x bandwidth / weight bytes tokens per second
(KV-cache reads ignored: small at these lengths). The bandwidth is measured in the same run
(a device-to-device copy, bytes read plus written).

Profile: one MAGRPO update of `gpu_scale`'s workload (a LoRA team, 8 prompts x K=4 x
`--profile-new-tokens`, fewer than the decode's: every decode step launches hundreds of
kernels, and the profiler's own bookkeeping of a 256-token update outlasted 200 s on an H100)
under `torch.profiler`, summarised by collabzoo's named ranges (collabzoo.rollout, .generate,
.score, .backward, .optimizer_step) and the top operators.

    python benchmarks/gpu_decode.py [--device cuda] [--batches 1,32,64] [--profile] [--json [F]]

`--json` alone writes benchmarks/results/gpu_decode.json, from which `decode_bound_table`
builds the Performance page's table.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import torch

from collabzoo.algos import LLMPolicy, Sampling
from collabzoo.algos.policies.model_loading import QWEN25_VOCAB, shaped_causal_lm

sys.path.insert(0, str(Path(__file__).resolve().parent))
from decode_modes import bandwidth, best_seconds, synchronize
from results_table import markdown_table, results_path, significant, thousands, write_results

RANGES = (
    "collabzoo.rollout",
    "collabzoo.generate",
    "collabzoo.score",
    "collabzoo.backward",
    "collabzoo.optimizer_step",
)


class NoStop:
    """A tokenizer stand-in that `LLMPolicy` accepts: no text, a pad id, no reachable eos."""

    pad_token_id = 0
    eos_token_id = QWEN25_VOCAB + 1  # never sampled: every row runs its full length
    chat_template = None

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return ""


def decode_rates(args: argparse.Namespace) -> list[dict[str, Any]]:
    model = shaped_causal_lm(
        args.shape, num_layers=args.layers, dtype=torch.bfloat16, seed=0, device=args.device
    )
    model.generation_config.eos_token_id = NoStop.eos_token_id
    model.generation_config.pad_token_id = 0
    policy = LLMPolicy(model, NoStop())
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    device = torch.device(args.device)
    speed = bandwidth(device, megabytes=2048)  # the 2 GiB copy this script always measured
    sampling = Sampling(args.new_tokens, temperature=0.6, top_p=0.6, top_k=50)
    generator = torch.Generator().manual_seed(0)
    rows = []
    for batch in (int(b) for b in args.batches.split(",")):
        prompts = torch.randint(1, QWEN25_VOCAB, (batch, args.prompt_tokens), generator=generator)
        encoded = prompts.tolist()
        completions = policy.generate_ids(encoded, sampling)  # warm-up; no row stops early
        tokens = sum(len(c.completion_ids) for c in completions)
        seconds = best_seconds(partial(policy.generate_ids, encoded, sampling), device, args.rounds)
        bound = batch * speed / weight_bytes
        row = {
            "path": "collabzoo generate_ids",
            "batch": batch,
            "tokens": tokens,
            "seconds": seconds,
            "tokens_per_s": tokens / seconds,
            "bound_tokens_per_s": bound,
            "share_of_bound": tokens / seconds / bound,
        }
        rows.append(row)
        print(describe(row), flush=True)
    meta = {
        "shape": args.shape,
        "weight_bytes": weight_bytes,
        "bandwidth_bytes_per_s": speed,
        "device_name": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu",
    }
    print(json.dumps(meta))
    return [{**meta, **r} for r in rows]


def describe(row: dict[str, Any]) -> str:
    return (
        f"{row['path']:26} batch {row['batch']:4} {row['tokens_per_s']:10.1f} tokens/s  "
        f"bound {row['bound_tokens_per_s']:10.1f}  ({100 * row['share_of_bound']:.1f}% of it)"
    )


def profile_update(args: argparse.Namespace) -> dict[str, Any]:
    """One profiled MAGRPO update of gpu_scale's LoRA workload (after a warm-up update)."""
    import gpu_scale

    from collabzoo.algos import MAGRPOConfig, MAGRPOTrainer
    from collabzoo.algos.policies.model_loading import lora_team

    params = {"shape": args.shape, "layers": args.layers, "device": args.device, "team": "lora"}
    (model,) = gpu_scale.models_for(params)
    tokenizer = gpu_scale.word_tokenizer(QWEN25_VOCAB)
    policies = lora_team(model, tokenizer, list(gpu_scale.AGENTS))
    prompts = gpu_scale.prompt_texts(8, args.prompt_tokens, QWEN25_VOCAB, 0)
    with tempfile.TemporaryDirectory() as workdir:
        config = MAGRPOConfig(
            output_dir=workdir,
            num_turns=1,
            rollout_buffer_size=8,
            num_generations=4,
            max_new_tokens=args.profile_new_tokens,
            tensorboard=False,
            progress=False,
            save_steps=0,
            device=args.device,
            agent_learning_rate=gpu_scale.LEARNING_RATE,
            **gpu_scale.SAMPLING,
        )
        trainer = MAGRPOTrainer(gpu_scale.prompt_env_class(prompts), policies, config)
        trainer.train_step()  # warm-up
        activities = [torch.profiler.ProfilerActivity.CPU]
        device = torch.device(args.device)
        if device.type == "cuda":
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        synchronize(device)
        started = time.perf_counter()
        with torch.profiler.profile(activities=activities) as profiler:
            trainer.train_step()
            synchronize(device)
        wall = time.perf_counter() - started
        trainer.close()
    averages = profiler.key_averages()
    ranges = {}
    for event in averages:
        if event.key in RANGES:
            ranges[event.key] = {
                "cpu_s": event.cpu_time_total / 1e6,
                "device_s": getattr(event, "device_time_total", 0.0) / 1e6,
                "calls": event.count,
            }
    print(f"one MAGRPO update (LoRA team), profiled: {wall:.2f} s wall")
    for name in RANGES:
        if name in ranges:
            r = ranges[name]
            print(
                f"  {name:26} {r['calls']:4} calls  wall (CPU range) {r['cpu_s']:7.2f} s  "
                f"kernels inside {r['device_s']:7.2f} s"
            )
    kernel_sort = "device_time_total" if args.device.startswith("cuda") else "cpu_time_total"
    table = averages.table(sort_by=kernel_sort, row_limit=15)
    print(table)
    launches = sum(e.count for e in averages if e.key in ("cudaLaunchKernel", "cuLaunchKernel"))
    return {"wall_s": wall, "ranges": ranges, "kernel_launches": launches, "table": table}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--shape", default="qwen2.5-0.5b")
    parser.add_argument("--batches", default="1,32,64")
    parser.add_argument("--prompt-tokens", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--layers", type=int, help="fewer layers than the shape's (CPU checks)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--profile-new-tokens", type=int, default=32)
    parser.add_argument("--profile", action="store_true", help="profile one MAGRPO update")
    parser.add_argument(
        "--json",
        nargs="?",
        const=str(results_path("gpu_decode")),
        help="write the rows (and the profile) here (alone: benchmarks/results/gpu_decode.json)",
    )
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    result: dict[str, Any] = {"decode": decode_rates(args)}
    if args.profile:
        result["profile"] = profile_update(args)
    if args.json:
        write_results(args.json, {"headline": headline(result), **result})
    return 0


# ----- the Performance page's table --------------------------------------------------------------
def decode_bound_table(results: dict[str, Any]) -> str:
    """Each batch's decode rate beside the memory-bandwidth bound, and a decode step's time."""
    cells = [
        [
            str(row["batch"]),
            significant(row["tokens_per_s"]),
            thousands(row["bound_tokens_per_s"]),
            f"{row['share_of_bound']:.1%}",
            f"{1000 * row['batch'] / row['tokens_per_s']:.0f} ms",
        ]
        for row in results["decode"]
    ]
    header = ["Rows", "Tokens/s", "Bandwidth bound", "Share of the bound", "Time per decode step"]
    return markdown_table(header, cells, "rrrrr")


def headline(results: dict[str, Any]) -> dict[str, Any] | list:
    """None of its own where a file says `"summary": false` (its section's row is another's)."""
    if results.get("summary") is False:
        return []
    first, last = results["decode"][0], results["decode"][-1]
    return {
        "benchmark": "Decode speed against the memory bound",
        "figure": f"{significant(last['tokens_per_s'])} tokens/s at {last['batch']} rows, "
        f"{last['share_of_bound']:.1%} of the bandwidth bound ({first['batch']} row: "
        f"{first['share_of_bound']:.1%})",
        "ratio": None,
        "section": "Decode speed against the memory bound",
    }


if __name__ == "__main__":
    sys.exit(main())
