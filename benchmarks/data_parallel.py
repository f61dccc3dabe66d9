"""Data-parallel MAGRPO: updates/s with 1 process and with N gloo ranks (torchrun), side by side.

The same total work per update in every run: `--episodes` TinyCoop episodes x K=`--k` joint
samples, `--new-tokens` tokens each, two separate byte-level models (`--hidden`). N ranks split
the episodes. On a CPU machine this is a correctness path, not a speed claim: N processes share
the machine's cores, and each rank still steps both agents' optimizers.

    python benchmarks/data_parallel.py --ranks 1,2 --updates 6 [--json [PATH] [--append]]

`--json` alone writes benchmarks/results/data_parallel.json; `--append` adds the run (one
workload) to the runs already there. `data_parallel_table` builds the Performance page's table,
a row per workload.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_table import load_results, markdown_table, results_path, times, write_results


def train(args: argparse.Namespace) -> None:
    """One run (a rank of it, under torchrun): rank 0 prints the measured updates/s."""
    import torch

    import collabzoo
    from collabzoo.algos import LLMPolicy, MAGRPOConfig, MAGRPOTrainer, tiny_causal_lm

    team = {
        a: LLMPolicy(*tiny_causal_lm(seed=i, hidden_size=args.hidden, num_heads=4))
        for i, a in enumerate(("alpha", "beta"))
    }
    config = MAGRPOConfig(
        output_dir=args.run_dir,
        max_updates=args.updates + 1,
        rollout_buffer_size=args.episodes,
        num_generations=args.k,
        max_new_tokens=args.new_tokens,
        agent_learning_rate=1e-4,
        tensorboard=False,
        progress=False,
        save_steps=0,
        device="cpu",
        env_workers=2,
    )
    torch.manual_seed(0)
    trainer = MAGRPOTrainer(lambda: collabzoo.make("tinycoop"), team, config)
    trainer.train_step()  # warm-up
    started = time.perf_counter()
    for _ in range(args.updates):
        trainer.train_step()
    seconds = time.perf_counter() - started
    if trainer.is_main:
        ranks = trainer.parallel.world if trainer.parallel else 1
        print("RESULT " + json.dumps({"ranks": ranks, "updates_per_s": args.updates / seconds}))
    trainer.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def launch(ranks: int, args: argparse.Namespace, workdir: str) -> dict:
    own = [__file__, "--child", "--run-dir", str(Path(workdir) / f"ranks-{ranks}")]
    for name in ("updates", "episodes", "k", "new_tokens", "hidden"):
        own += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    if ranks == 1:
        command = [sys.executable, *own]
    else:
        command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(ranks)]
        command += ["--master-addr", "127.0.0.1", "--master-port", str(free_port()), *own]
    done = subprocess.run(command, capture_output=True, text=True, timeout=3600)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{ranks} ranks failed:\n{done.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT ") :])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", default="1,2")
    parser.add_argument("--updates", type=int, default=6)
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument(
        "--json",
        nargs="?",
        const=str(results_path("data_parallel")),
        help="write the results here (alone: benchmarks/results/data_parallel.json)",
    )
    parser.add_argument("--append", action="store_true", help="add the run to the file's runs")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--run-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        train(args)
        return
    with tempfile.TemporaryDirectory() as workdir:
        results = [launch(int(n), args, workdir) for n in args.ranks.split(",")]
    base = results[0]["updates_per_s"]
    for result in results:
        ratio = result["updates_per_s"] / base
        print(f"{result['ranks']} rank(s): {result['updates_per_s']:.3f} updates/s ({ratio:.2f}x)")
    if args.json:
        settings = {
            k: getattr(args, k) for k in ("updates", "episodes", "k", "new_tokens", "hidden")
        }
        path = Path(args.json)
        runs = load_results(path)["runs"] if args.append and path.is_file() else []
        record = {"runs": [*runs, {"settings": settings, "results": results}]}
        write_results(path, {"headline": headline(record), **record})


# ----- the Performance page's table --------------------------------------------------------------
def workload(settings: dict[str, Any]) -> str:
    return (
        f"{settings['episodes']} episodes × K = {settings['k']} × {settings['new_tokens']} new "
        f"tokens, hidden {settings['hidden']}"
    )


def rates(run: dict[str, Any]) -> dict[int, float]:
    return {r["ranks"]: r["updates_per_s"] for r in run["results"]}


def data_parallel_table(results: dict[str, Any]) -> str:
    """A row per workload: updates/s with 1 process and with 2 gloo ranks, and their ratio."""
    cells = []
    for run in results["runs"]:
        speed = rates(run)
        cells.append(
            [
                workload(run["settings"]),
                f"{speed[1]:.2f}",
                f"{speed[2]:.2f}",
                times(speed[2] / speed[1]),
            ]
        )
    header = ["work per update", "updates/s, 1 process", "updates/s, 2 gloo ranks", "2 ranks / 1"]
    return markdown_table(header, cells, "lrrr")


def headline(results: dict[str, Any]) -> dict[str, Any] | list:
    """The largest workload's ratio (the one least dominated by fixed costs)."""
    runs = [r for r in results["runs"] if {1, 2} <= set(rates(r))]
    if not runs:
        return []
    run = max(runs, key=lambda r: r["settings"]["episodes"] * r["settings"]["new_tokens"])
    speed = rates(run)
    return {
        "benchmark": "Data-parallel training",
        "figure": f"2 gloo ranks {speed[2]:.2f} updates/s against 1 process's {speed[1]:.2f} "
        f"({workload(run['settings'])}; a correctness path on 2 cores)",
        "ratio": round(speed[2] / speed[1], 2),
        "section": "Data-parallel training",
    }


if __name__ == "__main__":
    main()
