"""MAReMax on TinyCoop from scratch, from the command line: which group sizes let it learn.

MAReMax's advantage A_k = G_k - max(G) is 0 for a group's best sample and <= 0 for the others.
On a sparse win (TinyCoop's untrained team wins 2-3 % of its joint actions) a group with no
win gives every sample 0, so only the groups that hold a win teach anything, and they teach it
only by pushing the losers down. Its expected gradient is the policy gradient scaled by
1 - (1 - p)^(K-1) (p: the joint action's win probability, K: `num_generations`), so the share
of groups with a win, and with it the signal, grows with K at a fixed number of samples per
update. This script trains `collabzoo train maremax` (tiny byte-level models, its default
`advantage_normalization="none"`) with several group sizes over seeds 0-3, each run in its own
process on one torch thread, and records each seed's final evaluation return (64 episodes)
and the run's wall time.

    python benchmarks/maremax_tinycoop.py [--settings k8 k32] [--seeds 0 1 2 3]
        [--work runs/maremax_tinycoop] [--json [out.json]]

`--json` alone writes docs/assets/plots/maremax_tinycoop.json, from which `maremax_table`
builds the MAReMax page's table. A run whose folder under `--work` holds the same command's
summary is read back instead of run again.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_table import markdown_table, write_results

REPOSITORY = Path(__file__).resolve().parents[1]
RESULTS_FILE = REPOSITORY / "docs" / "assets" / "plots" / "maremax_tinycoop.json"

COMMON = [
    *("--env", "tinycoop", "--model", "tiny", "--eval-episodes", "64", "--threads", "1"),
    *("--set", "max_new_tokens=1", "--set", "progress=false", "--set", "tensorboard=false"),
    *("--set", "save_steps=0"),
]
"""What every run shares: the learner tests' command line (tests/test_named_learners_learn.py)."""

SETTINGS: dict[str, dict[str, Any]] = {
    "k8": {"updates": 50, "episodes": 8, "k": 8},
    "k16": {"updates": 50, "episodes": 8, "k": 16},
    "k32": {"updates": 50, "episodes": 4, "k": 32},
    "k64": {"updates": 50, "episodes": 4, "k": 64},
}
"""Named settings: updates, episodes per update (`rollout_buffer_size`) and K. k8 is the other
learners' test setting (64 joint actions per update); k16 doubles K; k32 and k64 trade episodes
for K (128 and 256 joint actions per update)."""


def command(setting: str, seed: int, output: Path) -> list[str]:
    found = SETTINGS[setting]
    return [
        *("train", "maremax", "--output", str(output), *COMMON),
        *("--updates", str(found["updates"])),
        *("--set", f"rollout_buffer_size={found['episodes']}"),
        *("--set", f"num_generations={found['k']}", "--set", f"seed={seed}"),
    ]


def run(setting: str, seed: int, work: Path) -> dict[str, Any]:
    """One run in its own process (or its stored result): eval return and wall seconds."""
    folder = work / f"{setting}-s{seed}"
    argv = command(setting, seed, folder / "run")
    record = folder / "record.json"
    if record.is_file():
        stored = json.loads(record.read_text(encoding="utf-8"))
        if stored["argv"] == argv:
            return stored["row"]
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "collabzoo.cli", *argv],
        cwd=REPOSITORY,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{setting} seed {seed} failed:\n{done.stdout}\n{done.stderr}")
    summary = json.loads((folder / "run" / "summary.json").read_text(encoding="utf-8"))
    metrics = (folder / "run" / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    first = json.loads(metrics[0])["mean_return"]
    row = {
        "setting": setting,
        "seed": seed,
        "eval_return": summary["eval"]["mean_return"],
        "first_update_return": first,
        "seconds": round(seconds, 1),
    }
    record.write_text(json.dumps({"argv": argv, "row": row}, indent=2) + "\n", encoding="utf-8")
    print(f"{setting} seed {seed}: eval {row['eval_return']:.3f} in {seconds:.0f} s", flush=True)
    return row


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per setting: its sizes, each seed's eval return, their mean and sd, the slowest run."""
    found = []
    for setting in dict.fromkeys(r["setting"] for r in rows):
        mine = [r for r in rows if r["setting"] == setting]
        returns = [r["eval_return"] for r in mine]
        found.append(
            {
                "setting": setting,
                **SETTINGS[setting],
                "seeds": [r["seed"] for r in mine],
                "eval_returns": returns,
                "mean": statistics.fmean(returns),
                "sd": statistics.stdev(returns) if len(returns) > 1 else 0.0,
                "max_seconds": max(r["seconds"] for r in mine),
            }
        )
    return found


def maremax_table(results: dict[str, Any]) -> str:
    """The MAReMax page's table: per setting, each seed's final evaluation return."""
    header = [
        "K",
        "episodes / update",
        "updates",
        "eval return per seed",
        "mean",
        "sd",
        "slowest run (s)",
    ]
    rows = [
        [
            str(s["k"]),
            str(s["episodes"]),
            str(s["updates"]),
            " ".join(f"{v:.3f}" for v in s["eval_returns"]),
            f"{s['mean']:.3f}",
            f"{s['sd']:.3f}",
            f"{s['max_seconds']:.0f}",
        ]
        for s in results["settings"]
    ]
    return markdown_table(header, rows, align="rrrlrrr")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", nargs="+", choices=sorted(SETTINGS), default=list(SETTINGS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3])
    parser.add_argument("--work", type=Path, default=REPOSITORY / "runs" / "maremax_tinycoop")
    parser.add_argument("--json", nargs="?", const=str(RESULTS_FILE), default=None)
    args = parser.parse_args(argv)
    rows = [run(s, seed, args.work) for s in args.settings for seed in args.seeds]
    results = {
        "benchmark": "maremax_tinycoop",
        "learner": "maremax",
        "advantage_normalization": "none",
        "shared_options": ["collabzoo", "train", "maremax", *COMMON],
        "rows": rows,
        "settings": summarise(rows),
    }
    print(maremax_table(results))
    if args.json:
        write_results(args.json, results, None if argv is None else ["maremax_tinycoop.py", *argv])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
