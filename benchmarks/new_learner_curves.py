"""Learning curves of the newer learners on TinyCoop, each run from the command line exactly as
its learning test runs it.

Each (learner, seed) is one `collabzoo train LEARNER --env tinycoop --model tiny ...` call with
the settings of that learner's learning test (below), plus `--set eval_interval=K --set
eval_num_samples=64`: the trainer evaluates 64 episodes (one sample per agent and turn, the
same episodes at every evaluation of a run) every K updates and logs them to metrics.jsonl as
`eval/mean_return`. The update-0 point is the same CLI call with training skipped (the CLI
refuses `--updates 0`): the team it builds is the untrained one of the training run (the tiny
models' start is the CLI's own, the same for every seed), evaluated on the same 64 episodes.
Torch's global RNG is seeded with the run seed before each call (the learner now seeds it with
the same seed when built, so this no longer changes a run).

Settings (one per learning test):
- marloo, maremax (no learning test: MARLOO's settings; it stalls, see its page), atgrpo:
  `COMMON` of tests/test_named_learners_learn.py, the same as tests/test_atgrpo.py's run
  (50 updates of 8 episodes x 8 samples, one new token);
- joint: tests/test_joint_actor.py's run (the same, fixed-width sections, two new tokens);
  joint-ac has no learning test and runs with joint's settings;
- madpo, madpo-iter, marlhf, marlhf-iter: tests/test_preference_learning.py's SETTINGS and
  update counts.

    python benchmarks/new_learner_curves.py [--learners marloo atgrpo] [--seeds 0 1 2]
        [--json docs/assets/plots/new_learner_curves.json] [--plot docs/assets/plots]
        [--work DIR]        # run folders and one result file per finished run (a rerun resumes)
    python benchmarks/new_learner_curves.py --from-json FILE --plot DIR      # re-plot only

The learners pages show seeds 0-3 (`--seeds 0 1 2 3`), the seeds the learning tests' bounds were
set from. Each run is a child process of its own with one torch thread, `--workers` at a time.
A run's record keeps the trainer's logged `env_steps` counter beside each evaluated update; the
curves' x is the update (an iteration, for the -iter learners).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_table import load_results, markdown_table, write_results

QUIET = [
    *("--set", "progress=false", "--set", "tensorboard=false", "--set", "save_steps=0"),
]
TEST_COMMON = [  # tests/test_named_learners_learn.py COMMON; tests/test_atgrpo.py's run
    "--updates",
    "50",
    "--eval-episodes",
    "64",
    *("--set", "rollout_buffer_size=8", "--set", "num_generations=8"),
    *QUIET,
]
PREFERENCE_COMMON = ["--eval-episodes", "64", "--set", "max_new_tokens=1", *QUIET]
PREFERENCE = {  # tests/test_preference_learning.py: (updates, SETTINGS[algo])
    "madpo": (
        40,
        ["preference_num_candidates=16", "preference_num_items=8", "train_batch_size=8"],
    ),
    "madpo-iter": (
        6,
        [
            "preference_num_candidates=16",
            "preference_num_items=8",
            "preference_pairs_per_sample=8",
            "train_batch_size=8",
            "num_train_epochs=2",
        ],
    ),
    "marlhf": (
        24,
        [
            "preference_num_candidates=32",
            "preference_num_items=8",
            "reward_learning_rate=0.003",
            "reward_num_train_epochs=3",
            "reward_train_batch_size=4",
            "rollout_buffer_size=8",
            "num_generations=8",
        ],
    ),
    "marlhf-iter": (
        4,
        [
            "preference_num_candidates=16",
            "preference_num_items=8",
            "preference_pairs_per_sample=8",
            "reward_learning_rate=0.01",
            "reward_num_train_epochs=3",
            "reward_train_batch_size=4",
            "rollout_buffer_size=8",
            "num_generations=8",
            "num_train_epochs=10",
        ],
    ),
}
JOINT = ["--set", "joint_format=fixed_width", "--set", "max_new_tokens=2"]


def settings(algo: str) -> list[str]:
    """The CLI arguments after `--env tinycoop --model tiny` of `algo`'s learning test."""
    if algo in PREFERENCE:
        updates, extra = PREFERENCE[algo]
        return [
            "--updates",
            str(updates),
            *PREFERENCE_COMMON,
            *(part for setting in extra for part in ("--set", setting)),
        ]
    if algo in ("joint", "joint-ac"):
        return [*TEST_COMMON, *JOINT]
    return [*TEST_COMMON, "--set", "max_new_tokens=1"]


LEARNERS = ("marloo", "maremax", "atgrpo", "joint", "joint-ac", *PREFERENCE)
EVAL_INTERVAL = {"madpo": 4, "madpo-iter": 1, "marlhf": 3, "marlhf-iter": 1}
"""Updates between evaluations: 5 for the 50-update runs, about ten points a run."""
LABELS = {
    "marloo": "MARLOO",
    "maremax": "MAReMax",
    "atgrpo": "AT-GRPO",
    "joint": "Joint actor",
    "joint-ac": "Joint actor-critic",
    "madpo": "MADPO",
    "madpo-iter": "MADPOIter",
    "marlhf": "MARLHF",
    "marlhf-iter": "MARLHFIter",
}
PAGES = {  # the docs page of each learner (a page may hold two)
    "marloo": "marloo",
    "maremax": "maremax",
    "atgrpo": "atgrpo",
    "joint": "joint",
    "joint-ac": "joint",
    "madpo": "madpo",
    "madpo-iter": "madpo",
    "marlhf": "marlhf",
    "marlhf-iter": "marlhf",
}
RANDOM_PLAY = (0.016, 0.031)
"""The share of TinyCoop episodes random byte-level policies win (tests/test_learners)."""


def command(algo: str, seed: int | str, output: str) -> list[str]:
    """The `collabzoo train` arguments of one run, evaluating every K updates."""
    interval = EVAL_INTERVAL.get(algo, 5)
    return [
        *("train", algo, "--env", "tinycoop", "--model", "tiny", "--output", output),
        *settings(algo),
        *("--set", f"eval_interval={interval}", "--set", "eval_num_samples=64"),
        *("--set", f"seed={seed}"),
    ]


def untrained_return(algo: str, seed: int, output: str) -> float:
    """The update-0 point: the run's CLI call with the trainer's `train` made a no-op, so the
    CLI builds the same untrained team and evaluates it on the run's 64 episodes."""
    from unittest import mock

    import torch

    from collabzoo.algos import LEARNER_ALIASES
    from collabzoo.algos import LEARNERS as CLASSES
    from collabzoo.cli import main

    trainer_class = CLASSES[LEARNER_ALIASES.get(algo, algo)][1]
    torch.manual_seed(seed)
    with mock.patch.object(trainer_class, "train", lambda self: {}):
        assert main(command(algo, seed, output)) == 0
    summary = json.loads((Path(output) / "summary.json").read_text())
    assert summary["updates"] == 0, summary
    return summary["eval"]["mean_return"]


def run(algo: str, seed: int, work: str) -> dict[str, Any]:
    """One learner and seed: {"updates", "returns", "env_steps", "final", "seconds"}; the
    curve's x is the update count, 0 the untrained team; "final" is the CLI's final eval
    (the number the learning test checks)."""
    import torch

    from collabzoo.cli import main

    output = os.path.join(work, f"{algo}-{seed}")
    started = time.perf_counter()
    torch.manual_seed(seed)  # training samples from torch's global RNG: the same start each run
    assert main(command(algo, seed, output)) == 0
    seconds = time.perf_counter() - started
    records = [
        json.loads(line) for line in (Path(output) / "metrics.jsonl").read_text().splitlines()
    ]
    steps = {r["update"]: r["env_steps"] for r in records if "env_steps" in r}
    evals = [(r["update"], r["eval/mean_return"]) for r in records if "eval/mean_return" in r]
    final = json.loads((Path(output) / "summary.json").read_text())["eval"]["mean_return"]
    with tempfile.TemporaryDirectory() as untrained:
        start = untrained_return(algo, seed, untrained)
    return {
        "updates": [0, *(u for u, _ in evals)],
        "returns": [start, *(v for _, v in evals)],
        "env_steps": [0, *(steps.get(u) for u, _ in evals)],
        "final": final,
        "seconds": round(seconds, 1),
    }


def _run_in_child(job: tuple[str, int, str]) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    algo, seed, work = job
    done = Path(work) / f"{algo}-{seed}.json"
    if done.exists():  # finished by an earlier invocation with the same --work
        return json.loads(done.read_text())
    result = run(algo, seed, work)
    done.write_text(json.dumps(result))
    print(
        f"{algo} seed {seed}: final {result['final']:.3f} in {result['seconds']:.0f} s", flush=True
    )
    return result


def run_all(
    learners: list[str], seeds: list[int], work: str, workers: int
) -> dict[str, list[dict[str, Any]]]:
    """{learner: one run record per seed}, each run in a fresh child process."""
    os.makedirs(work, exist_ok=True)
    jobs = [(a, s, work) for a in learners for s in seeds]
    with ProcessPoolExecutor(max_workers=workers, max_tasks_per_child=1) as pool:
        results = list(pool.map(_run_in_child, jobs))
    runs: dict[str, list[dict[str, Any]]] = {}
    for (algo, _, _), result in zip(jobs, results, strict=True):
        runs.setdefault(algo, []).append(result)
    return runs


def finals(results: dict[str, Any], algo: str) -> list[float]:
    return [r["final"] for r in results["runs"][algo]]


def mean_sd(values: list[float]) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.3f} ± {sd:.3f}"


def curves_table(results: dict[str, Any], learners: list[str] | None = None) -> str:
    """The learners pages' table: each learner's untrained and final eval (64 episodes), per
    seed and as mean ± sd over the seeds, and the minutes a run took."""
    seeds = ", ".join(map(str, results["seeds"]))
    rows = []
    for algo in learners or list(results["runs"]):
        runs = results["runs"][algo]
        starts = [r["returns"][0] for r in runs]
        rows.append(
            [
                LABELS[algo],
                str(runs[0]["updates"][-1]),
                mean_sd(starts),
                " ".join(f"{v:.3f}" for v in finals(results, algo)),
                mean_sd(finals(results, algo)),
                f"{statistics.mean(r['seconds'] for r in runs) / 60:.1f}",
            ]
        )
    header = [
        "learner",
        "updates",
        "untrained (mean ± sd)",
        f"final, seeds {seeds}",
        "final (mean ± sd)",
        "minutes a run",
    ]
    return markdown_table(header, rows, "lrrrrr")


def page_learners(results: dict[str, Any], page: str) -> list[str]:
    return [algo for algo in results["runs"] if PAGES[algo] == page]


def marloo_table(results: dict[str, Any]) -> str:
    """docs/learners/marloo.md's table."""
    return curves_table(results, page_learners(results, "marloo"))


def maremax_table(results: dict[str, Any]) -> str:
    """docs/learners/maremax.md's table."""
    return curves_table(results, page_learners(results, "maremax"))


def atgrpo_table(results: dict[str, Any]) -> str:
    """docs/learners/atgrpo.md's table."""
    return curves_table(results, page_learners(results, "atgrpo"))


def joint_table(results: dict[str, Any]) -> str:
    """docs/learners/joint.md's table: the joint actor and the joint actor-critic."""
    return curves_table(results, page_learners(results, "joint"))


def madpo_table(results: dict[str, Any]) -> str:
    """docs/learners/madpo.md's table: MADPO and MADPOIter."""
    return curves_table(results, page_learners(results, "madpo"))


def marlhf_table(results: dict[str, Any]) -> str:
    """docs/learners/marlhf.md's table: MARLHF and MARLHFIter."""
    return curves_table(results, page_learners(results, "marlhf"))


def plot(results: dict[str, Any], out: str) -> list[str]:
    """One figure per learner: each seed's eval curve, their mean, and random play's band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    os.makedirs(out, exist_ok=True)
    written = []
    date = results.get("provenance", {}).get("date", "not saved")
    for algo, runs in results["runs"].items():
        figure, axes = plt.subplots(figsize=(7, 4.2))
        axes.axhspan(*RANDOM_PLAY, color="grey", alpha=0.3, lw=0, label="random play")
        for seed, record in zip(results["seeds"], runs, strict=True):
            axes.plot(
                record["updates"],
                record["returns"],
                lw=1,
                alpha=0.6,
                marker=".",
                label=f"seed {seed}",
            )
        updates = runs[0]["updates"]
        mean = [statistics.mean(p) for p in zip(*(r["returns"] for r in runs), strict=True)]
        axes.plot(updates, mean, color="black", lw=2.2, label="mean")
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        iterative = algo.endswith("-iter")
        axes.set_xlabel("iterations (one update each)" if iterative else "updates")
        axes.set_ylabel("eval mean return (64 episodes)")
        axes.set_ylim(0, 1)
        axes.set_title(
            f"{LABELS[algo]} on TinyCoop: collabzoo train {algo} --model tiny\n"
            f"the project's 2-core CPU, no GPU, {date}"
        )
        axes.grid(alpha=0.3)
        axes.legend(loc="upper left", fontsize=8)
        figure.tight_layout()
        written.append(os.path.join(out, f"curve_{algo.replace('-', '_')}.png"))
        figure.savefig(written[-1], dpi=110)
        plt.close(figure)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--learners", nargs="+", choices=LEARNERS, default=list(LEARNERS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--workers", type=int, default=1, help="runs at a time")
    parser.add_argument("--work", help="run folders (default: a temporary folder)")
    parser.add_argument("--json", help="write the curves here")
    parser.add_argument("--plot", metavar="DIR", help="draw one curve_<learner>.png each into DIR")
    parser.add_argument("--from-json", metavar="FILE", help="plot curves saved by --json")
    args = parser.parse_args(argv)
    if args.from_json:
        results = load_results(args.from_json)
    else:
        with tempfile.TemporaryDirectory() as scratch:
            runs = run_all(args.learners, args.seeds, args.work or scratch, args.workers)
        results = {
            "machine_note": "the project's 2-core CPU, no GPU; shared with other jobs (loaded)",
            "seeds": args.seeds,
            "commands": {a: ["collabzoo", *command(a, "N", "RUN")] for a in args.learners},
            "runs": runs,
        }
        if args.json:
            write_results(args.json, results, None if argv is None else [__file__, *argv])
            results = load_results(args.json)
    print(curves_table(results))
    if args.plot:
        for path in plot(results, args.plot):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
