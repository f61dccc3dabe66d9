"""Build the real-output conformance set: real model answers with the reference's own rewards.

`tests/test_real_output_conformance.py` replays every episode of
`tests/data/real_output_conformance.json` through collabzoo's envs and asserts that each turn's
reward equals the one the reference task repositories' own reward functions gave the same
answers. This script made that file, in three steps:

1. Answers: SmolLM2-135M-Instruct (`collabzoo model pull smollm2-135m-instruct`) on vLLM's
   CPU engine at the reference sampling settings (temperature 0.6, top-p 0.6, top-k 50; 256
   new tokens, truncation included), the parallel protocol, two turns with level feedback,
   on a seeded sample of each task's train split:

       B="collabzoo bench --team vllm:smollm2-135m-instruct --protocol parallel --split train
          --seed 1000"
       $B --episodes 24 --env coophumaneval,humaneval,mbpp --data coophumaneval=CoopHumanEval.json
          --data humaneval=HumanEval.jsonl.gz --data mbpp=MBPP.json --sandbox docker --output code
       $B --episodes 16 --env tldr,arxiv --data tldr=sample --data arxiv=sample --output writing

2. Targeted answers (`TARGETED`): a few hand-written answer pairs for what the sample never
   reaches with a 135M model: the aux-call bonus and the anti-wrapper bonus, the "aux result
   ignored" penalty, a thin wrapper, and timed-out tests.

3. Reference rewards: the code pairs are scored by `execution_reward_aux` of
   OpenMLRL/LLM_Collab_Code_Generation (`rewards/code_rewards.py`, with its `rewards/code_utils.py`;
   `VERBOSE` off, as the training scripts set it), the writing pairs by `tldr_combined_reward`
   and `arxiv_combined_reward` of OpenMLRL/LLM_Collab_Writing (`rewards/`). The reference runs
   model code with a bare `exec`, so the code pairs are scored inside a Docker container: no
   network, a read-only root, an unprivileged user, memory, process and CPU caps, gVisor when
   Docker has it, one fresh interpreter per pair.

       python benchmarks/real_output_conformance.py code writing \\
           --code-reference CODE_CHECKOUT --writing-reference WRITING_CHECKOUT \\
           --output tests/data/real_output_conformance.json

`--compare` then scores the file with collabzoo (both answer readings) and prints how many
turns equal the reference under each; with `--json` (alone: benchmarks/results/
real_output_conformance.json) it also writes the counts, from which `conformance_table` builds
the Performance page's table.
"""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from collabzoo.bench.results import read_results

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_table import markdown_table, results_path, write_results

CODE_ENVS = ("coophumaneval", "humaneval", "mbpp")
WRITING_ENVS = {"tldr": "tldr_combined_reward", "arxiv": "arxiv_combined_reward"}
WRITING_MODULES = {"tldr": "rewards.tldr_rewards", "arxiv": "rewards.arxiv_rewards"}
REFERENCE_COMMITS = {
    "code": "OpenMLRL/LLM_Collab_Code_Generation rewards/ (code_rewards.py 0b914ca, code_utils.py "
    "c0ec726)",
    "writing": "OpenMLRL/LLM_Collab_Writing rewards/ (7e59995)",
}
PAIR_TIMEOUT = 300.0
"""Seconds for one pair in the container: its tests' own timeouts are 10 s each, 3 at most."""

X_OR_Y_AUX = "def aux(n):\n    return n > 1 and all(n % k for k in range(2, n))"
TARGETED: tuple[dict[str, Any], ...] = (
    {
        "why": "aux-call and anti-wrapper bonuses: main calls aux and adds logic",
        "env": "coophumaneval",
        "task": "CoopHumanEval/0",
        "aux": X_OR_Y_AUX,
        "main": "def x_or_y(n, x, y):\n    if aux(n):\n        return x\n    return y",
    },
    {
        "why": "thin wrapper: main only returns aux's result",
        "env": "coophumaneval",
        "task": "CoopHumanEval/0",
        "aux": "def aux(n, x, y):\n    if n > 1 and all(n % k for k in range(2, n)):\n"
        "        return x\n    return y",
        "main": "def x_or_y(n, x, y):\n    return aux(n, x, y)",
    },
    {
        "why": "the 'aux result ignored' penalty (its exact pattern: `aux (n)` alone on a line)",
        "env": "coophumaneval",
        "task": "CoopHumanEval/0",
        "aux": X_OR_Y_AUX,
        "main": "def x_or_y(n, x, y):\n    aux (n)\n    if aux(n):\n        return x\n    return y",
    },
    {
        "why": "timed-out tests: three time out, the rest are skipped",
        "env": "coophumaneval",
        "task": "CoopHumanEval/0",
        "aux": X_OR_Y_AUX,
        "main": "def x_or_y(n, x, y):\n    while True:\n        pass\n    return x",
    },
    {
        "why": "a fenced aux, prose around the main with a stray closing fence, repeated copies",
        "env": "humaneval",
        "task": "HumanEval/0",
        "aux": "```python\ndef aux(a, b, t):\n    return abs(a - b) < t\n```",
        "main": "def has_close_elements(numbers, threshold):\n    for i in range(len(numbers)):\n"
        "        for j in range(i + 1, len(numbers)):\n"
        "            if aux(numbers[i], numbers[j], threshold):\n                return True\n"
        "    return False\n```\nThis checks every pair.\n\n"
        "def has_close_elements(numbers, threshold):\n    return False\n",
    },
)


def _episodes(folder: Path) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    for path in sorted(folder.glob("*.json")):
        document = read_results(path)
        for episode in document["episodes"]:
            yield document["env"], episode


def collect(folders: Sequence[Path]) -> list[dict[str, Any]]:
    """Every episode of the bench folders: env, data file, task, seed and each turn's answers
    (data paths reduced to the file's name)."""
    episodes = []
    for folder in folders:
        for env, episode in _episodes(folder):
            name = env["name"]
            if name not in CODE_ENVS and name not in WRITING_ENVS:
                continue
            episodes.append(
                {
                    "env": name,
                    "data": Path(env["kwargs"]["data"]).name,
                    "split": episode["split"],
                    "task": episode.get("task_id", episode["task"]),
                    "seed": episode["seed"],
                    "source": "smollm2-135m-instruct",
                    "turns": [{"actions": dict(turn["actions"])} for turn in episode["turns"]],
                }
            )
    return episodes


def targeted() -> list[dict[str, Any]]:
    data = {"coophumaneval": "CoopHumanEval.json", "humaneval": "HumanEval.jsonl.gz"}
    return [
        {
            "env": t["env"],
            "data": data[t["env"]],
            "split": "all",
            "task": t["task"],
            "seed": 0,
            "source": "targeted",
            "why": t["why"],
            "turns": [{"actions": {"aux": t["aux"], "main": t["main"]}}],
        }
        for t in TARGETED
    ]


# ----- the reference's rewards ------------------------------------------------------------------
_CONTAINER_DRIVER = r"""
import json, subprocess, sys
ONE = '''
import json, sys
sys.path.insert(0, "/reference")
import rewards.code_rewards as reference
reference.VERBOSE = False
pair = json.load(sys.stdin)
reward = reference.execution_reward_aux(
    [pair["aux"]], [pair["main"]], [pair["test"]], [pair["entry_point"]], [pair["prompt"]]
)[0]
print("REWARD " + json.dumps(reward))
'''
for line in sys.stdin:
    try:
        done = subprocess.run([sys.executable, "-c", ONE], input=line, capture_output=True,
                              text=True, timeout=float(sys.argv[1]))
        found = [l for l in done.stdout.splitlines() if l.startswith("REWARD ")]
        answer = {"reward": json.loads(found[-1][7:])} if found else {
            "error": (done.stderr or done.stdout)[-500:] or f"exit {done.returncode}"}
    except subprocess.TimeoutExpired:
        answer = {"error": "timed out"}
    print(json.dumps(answer), flush=True)
"""


def _problem_records(name: str, data: Path) -> dict[str, dict[str, Any]]:
    from collabzoo.envs import make

    env = make(name, data=str(data), split="all")
    return {p.task_id: p for p in env.items("all")}


def code_rewards(
    episodes: list[dict[str, Any]], checkout: Path, data_root: Path, runtime: str | None
) -> None:
    """Fill `reference_reward` of every code turn, by the reference's function in a container
    of the sandbox's base image (a plain Python; collabzoo's executor plays no part)."""
    import docker

    from collabzoo.sandbox.image import resolve_base

    folders = {"coophumaneval": "coophumaneval", "humaneval": "humaneval", "mbpp": "mbpp"}
    problems: dict[tuple[str, str], Any] = {}
    pairs, owners = [], []
    for episode in episodes:
        if episode["env"] not in CODE_ENVS:
            continue
        key = (episode["env"], episode["data"])
        if key not in problems:
            path = data_root / folders[episode["env"]] / episode["data"]
            problems[key] = _problem_records(episode["env"], path)
        problem = problems[key][episode["task"]]
        for turn in episode["turns"]:
            actions = turn["actions"]
            pairs.append(
                {
                    "aux": actions["aux"],
                    "main": actions["main"],
                    "test": problem.test,
                    "entry_point": problem.entry_point,
                    "prompt": problem.prompt,
                }
            )
            owners.append(turn)
    command = ["docker", "run", "--rm", "-i", "--network", "none", "--read-only"]
    command += ["--user", "65534:65534", "--memory", "2g", "--pids-limit", "256", "--cpus", "1"]
    command += ["--tmpfs", "/tmp:size=64m", "--cap-drop", "ALL"]
    command += ["--security-opt", "no-new-privileges"]
    if runtime:
        command += ["--runtime", runtime]
    command += ["-v", f"{checkout.resolve()}:/reference:ro", "--entrypoint", "python3"]
    command += [resolve_base(docker.from_env()), "-c", _CONTAINER_DRIVER, str(PAIR_TIMEOUT)]
    lines = "".join(json.dumps(pair) + "\n" for pair in pairs)
    done = subprocess.run(command, input=lines, capture_output=True, text=True, check=True)
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if len(answers) != len(pairs):
        raise RuntimeError(f"{len(answers)} answers for {len(pairs)} pairs: {done.stderr[-2000:]}")
    for turn, answer in zip(owners, answers, strict=True):
        if "error" in answer:
            raise RuntimeError(f"the reference failed on a pair: {answer['error']}")
        turn["reference_reward"] = answer["reward"]


def writing_rewards(episodes: list[dict[str, Any]], checkout: Path) -> None:
    """Fill `reference_reward` of every writing turn (text functions only: no code runs)."""
    sys.path.insert(0, str(checkout.resolve()))
    for episode in episodes:
        name = episode["env"]
        if name not in WRITING_ENVS:
            continue
        module = importlib.import_module(WRITING_MODULES[name])
        module.VERBOSE = False
        function = getattr(module, WRITING_ENVS[name])
        agents = None
        for turn in episode["turns"]:
            agents = agents or list(turn["actions"])
            first, second = (turn["actions"][a] for a in agents)
            turn["reference_reward"] = function([first], [second])[0]


def compare(document: dict[str, Any], data_root: Path) -> dict[str, Any]:
    """Print, per answer reading, how many turns collabzoo scores as the reference does; return
    the counts by reading and by kind of task (code, writing)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.conformance_replay import replay

    kinds = {
        "code": [e for e in document["episodes"] if e["env"] in CODE_ENVS],
        "writing": [e for e in document["episodes"] if e["env"] in WRITING_ENVS],
    }
    readings: dict[str, Any] = {}
    for reading in ("clean", "reference"):
        counts = readings[reading] = {}
        for kind, episodes in kinds.items():
            mismatches, total = replay({"episodes": episodes}, data_root, answer_reading=reading)
            counts[kind] = {"equal": total - len(mismatches), "turns": total}
            if kind == "code":
                turns = [e["source"] == "targeted" for e in episodes for _ in e["turns"]]
                counts[kind].update(targeted=sum(turns), real=len(turns) - sum(turns))
        equal = sum(c["equal"] for c in counts.values())
        total = sum(c["turns"] for c in counts.values())
        print(f"answer_reading={reading}: {equal} of {total} turns equal")
    return {"readings": readings}


# ----- the Performance page's table --------------------------------------------------------------
READING_NOTES = {"clean": "the default until now", "reference": "the default"}


def conformance_table(results: dict[str, Any]) -> str:
    """Per answer reading, the turns scored as the reference's own functions scored them; a
    column whose every turn agrees is bold."""
    readings = results["readings"]
    code = next(iter(readings.values()))["code"]
    writing = next(iter(readings.values()))["writing"]
    header = [
        "Turns scored the same as the reference",
        f"Code ({code['turns']} turns: {code['real']} real, {code['targeted']} targeted)",
        f"Writing ({writing['turns']} turns)",
    ]
    cells = []
    for reading, counts in readings.items():
        code_cell = (
            f"{counts['code']['equal']} ({counts['code']['equal'] / counts['code']['turns']:.0%})"
        )
        if counts["code"]["equal"] == counts["code"]["turns"]:
            code_cell = f"**{code_cell}**"
        label = f'`answer_reading="{reading}"` ({READING_NOTES.get(reading, reading)})'
        cells.append([label, code_cell, str(counts["writing"]["equal"])])
    return markdown_table(header, cells, "lrr")


def headline(results: dict[str, Any]) -> dict[str, Any]:
    counts = results["readings"]["reference"]
    equal = sum(c["equal"] for c in counts.values())
    total = sum(c["turns"] for c in counts.values())
    return {
        "benchmark": "Rewards on real output",
        "figure": f"{equal} of {total} turns of real model output scored as the reference's own "
        "reward functions score them (the default answer reading)",
        "ratio": None,
        "section": "Rewards on real output, against the reference's own functions",
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folders", nargs="*", type=Path, help="collabzoo bench results folders")
    parser.add_argument("--code-reference", type=Path, help="checkout with rewards/code_*.py")
    parser.add_argument("--writing-reference", type=Path, help="checkout with rewards/*_rewards.py")
    parser.add_argument("--data-root", type=Path, default=Path("../shared/data"))
    parser.add_argument(
        "--runtime", help="Docker runtime for the reference (default: runsc if any)"
    )
    parser.add_argument(
        "--output", type=Path, default=Path("tests/data/real_output_conformance.json")
    )
    parser.add_argument("--compare", action="store_true", help="only compare the --output file")
    parser.add_argument(
        "--json",
        nargs="?",
        const=str(results_path("real_output_conformance")),
        help="with --compare, write the counts here "
        "(alone: benchmarks/results/real_output_conformance.json)",
    )
    args = parser.parse_args(argv)
    if args.compare:
        results = compare(json.loads(args.output.read_text()), args.data_root)
        if args.json:
            write_results(args.json, {"headline": headline(results), **results})
        return 0
    if not args.folders or not args.code_reference or not args.writing_reference:
        parser.error("give bench folders, --code-reference and --writing-reference")
    episodes = collect(args.folders) + targeted()
    runtime = args.runtime
    if runtime is None:
        info = subprocess.run(
            ["docker", "info", "--format", "{{json .Runtimes}}"], capture_output=True, text=True
        )
        runtime = "runsc" if '"runsc"' in info.stdout else None
    code_rewards(episodes, args.code_reference, args.data_root, runtime)
    writing_rewards(episodes, args.writing_reference)
    document = {
        "about": "Real model answers with the rewards the reference's own functions gave them; "
        "made by benchmarks/real_output_conformance.py (its docstring says how).",
        "model": "SmolLM2-135M-Instruct (collabzoo model pull smollm2-135m-instruct), vLLM CPU",
        "sampling": {"temperature": 0.6, "top_p": 0.6, "top_k": 50, "max_new_tokens": 256},
        "reference": REFERENCE_COMMITS,
        "episodes": episodes,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")
    turns = sum(len(e["turns"]) for e in episodes)
    print(f"{len(episodes)} episodes, {turns} scored turns -> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
