"""Data-parallel MAGRPO: updates/s with 1 process and with N gloo ranks (torchrun), side by side.

The same total work per update in every run: `--episodes` TinyCoop episodes x K=`--k` joint
samples, `--new-tokens` tokens each, two separate byte-level models (`--hidden`). N ranks split
the episodes. On a CPU machine this is a correctness path, not a speed claim: N processes share
the machine's cores, and each rank still steps both agents' optimizers.

    python benchmarks/data_parallel.py --ranks 1,2 --updates 6
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


if __name__ == "__main__":
    main()
