"""Build the second real-output conformance set: SmolLM2's answers to ClassEval's, BFCL's (native
and multi-turn) and TravelPlanner's own prompts, with the rewards the references' own code gives
them.

`tests/test_real_output_task_conformance.py` replays every pair of
`tests/data/real_output_task_conformance.json` through collabzoo's scoring and asserts the reward
within 1e-6 of what the reference's code gave the same answers, and more: BFCL (both variants),
every term the reference reports; ClassEval, the levels, the test counts and the merged program's
hash; TravelPlanner, every reward term, the kept details, the merged plan and the parser's error
codes.
This script made that file, in two steps:

1. Answers: SmolLM2-135M-Instruct through the `hf` engine at each task's reference sampling, on
   the first rows of the eval split (the Performance page's commands):

       B="collabzoo bench --team hf:smollm2-135m-instruct --protocol single,parallel --top-k 50"
       $B --env bfcl --data bfcl=BFCL_DATA --episodes 4 --max-new-tokens 256 \\
          --temperature 0.7 --top-p 0.8 --output runs
       $B --env classeval --data classeval=ClassEval_data.json --episodes 1 --max-new-tokens 600 \\
          --temperature 0.6 --top-p 0.6 --sandbox docker --output runs
       $B --env travelplanner --data travelplanner=std_travelplanner.jsonl --episodes 1 \\
          --max-new-tokens 1024 --temperature 0.7 --top-p 0.8 --max-prompt-tokens 7168 --output runs
       $B --env bfclmultiturn --data bfclmultiturn=BFCL_DATA --episodes 2 --max-new-tokens 256 \\
          --temperature 0.7 --top-p 0.8 --max-prompt-tokens 7936 --output runs

   A pair is one turn's two answers: under `parallel` each agent's answer to its own prompt (as
   the reference trains); under `single` (ClassEval and TravelPlanner) the one answer to the
   combined prompt, as the protocol split it into the roles' parts. ClassEval has two turns per
   episode, its second turn's prompts carrying the first turn's diagnostics, as the reference's
   do. BFCL's `single` (both variants) is the reference's one-agent baseline, another reward:
   left out. The multi-turn prompts hold 3,500 to 7,500 tokens: `--max-prompt-tokens 7936`
   keeps them whole beside 256 new tokens in SmolLM2's 8,192.
2. Reference rewards: the BFCL pairs by `score_native_parallel_response` of
   OpenMLRL/LLM_Collab_BFCL-v4 (`native_parallel/rewards/native_parallel_reward.py` with its
   parser; the files `bfcl_conformance.REFERENCE` names) in a fresh interpreter, the
   multi-turn pairs by `score_multiturn_flat_response` (`multiturn_flat_reward.py`, default
   config) as `bfcl_conformance.py` runs it for its multi-turn cases; the ClassEval
   pairs by `get_reward_function(ParamCountStrategy(2, seed))` of
   OpenMLRL/LLM_Collab_Code_Completion inside a container of the sandbox's base image (the
   runner of `classeval_conformance.py`: no network, read-only root, unprivileged user); the
   TravelPlanner pairs by `score_single_turn_response` of OpenMLRL/LLM_Collab_Travel (the files
   `travelplanner_conformance.REFERENCE_FILES` names), each query through the reference's own
   row normaliser, with the env's capacity rule.

       python benchmarks/real_output_task_conformance.py runs \\
           --bfcl-reference BFCL_CHECKOUT --classeval-reference CLASSEVAL_CHECKOUT \\
           --travel-reference TRAVEL_CHECKOUT [--data DATA_FOLDER] \\
           [--output tests/data/real_output_task_conformance.json] [--tasks bfclmultiturn]

`--tasks` builds only the parts named (each needs only its own checkout) and keeps the others
from the file as they are; the run is then recorded under the file's `updates`, beside the
`provenance` of the run that built the rest. (The multi-turn part was added so, from a later
folder of its own.)

It also prints how many pairs the env's own recorded reward (the bench's) already matched.
No checkout is imported by collabzoo; they run here only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from collabzoo.bench.results import read_results

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bfcl_conformance
import classeval_conformance
import travelplanner_conformance
from provenance import provenance
from travelplanner_conformance import load_records, tasks_from_records

REPOSITORY = Path(__file__).resolve().parents[1]
OUTPUT = REPOSITORY / "tests" / "data" / "real_output_task_conformance.json"
TOLERANCE = 1e-6
CLASSEVAL_KEYS = (
    "total",
    "level1_syntax",
    "level2_tests",
    "level3_overlap_penalty",
    "syntax_ok",
    "tests_run",
    "passed",
    "timeout",
    "accepted",
    "merged_sha256",
    "failing_count",
)
"""What the file keeps of each ClassEval reference result (the diagnostics text is left out: the
counts it is made of are kept)."""
NATIVE_RUNNER = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from native_parallel.rewards.native_parallel_reward import (
    NativeParallelRewardConfig, score_native_parallel_response)
out = []
for case in json.load(sys.stdin):
    try:
        cfg = NativeParallelRewardConfig(self_duplicate_mode=case["self_duplicate_mode"])
        reward, detail = score_native_parallel_response(
            case["answers"], batch_item=case["row"], config=cfg)
        keep = {k: v for k, v in detail.items() if isinstance(v, (int, float))}
        out.append({"reward": reward, "detail": keep})
    except Exception as error:
        out.append({"raises": f"{type(error).__name__}: {error}"})
json.dump(out, sys.stdout)
"""
"""The native reward alone (`bfcl_conformance.REWARD_RUNNER` also imports the multi-turn one)."""


def runs(folder: Path, env: str, protocols: tuple[str, ...]) -> list[dict[str, Any]]:
    """The results files of `env` under `protocols` in a bench folder."""
    found = []
    for protocol in protocols:
        for path in sorted(folder.glob(f"{env}__{protocol}__*.json")):
            document = read_results(path)
            if document["env"]["name"] == env and document["episodes"]:
                found.append(document)
    return found


def pairs(document: dict[str, Any]) -> list[dict[str, Any]]:
    """Every turn's two answers, in the env's agent order, with the reward the env gave (a
    `single` answer is the combined answer as the protocol split it into the roles' parts)."""
    agents = document["env"]["agents"]
    found = []
    for episode in document["episodes"]:
        for turn in episode["turns"]:
            found.append(
                {
                    "task_id": episode["task_id"],
                    "protocol": document["protocol"]["name"],
                    "episode": episode["index"],
                    "turn": turn["turn"],
                    "answers": [turn["actions"][a] for a in agents],
                    "env_reward": turn["reward"],
                }
            )
    return found


def bench_record(document: dict[str, Any]) -> dict[str, Any]:
    """What the file says about the run the answers came from (no local paths)."""
    return {
        "model": document["team"]["spec"],
        "protocol": document["protocol"]["name"],
        "split": document["split"],
        "episodes": len(document["episodes"]),
        "sampling": document["sampling"],
        "data": document["env"].get("data"),
        "date": document["started"][:10],
    }


def bfcl_cases(folder: Path, data: Path, reference: Path) -> tuple[list[dict], list[dict]]:
    documents = runs(folder, "bfcl", ("parallel",))
    rows = {
        r["id"]: r
        for r in bfcl_conformance.rows_of(
            "bfcl", str(data), categories=bfcl_conformance.NATIVE_CATEGORIES
        )
    }
    cases = [{"id": p["task_id"], **p} for d in documents for p in pairs(d)]
    for case in cases:
        del case["task_id"]
    payload = [
        {
            "variant": "native",
            "answers": c["answers"],
            "row": rows[c["id"]],
            "self_duplicate_mode": "dedupe",
        }
        for c in cases
    ]
    scored = bfcl_conformance.run(sys.executable, NATIVE_RUNNER, str(reference), payload)
    for case, outcome in zip(cases, scored, strict=True):
        if "raises" in outcome:
            case["reference"] = {"raises": outcome["raises"]}
        else:
            detail = outcome["detail"]
            case["reference"] = [
                bfcl_conformance.compact(detail.get(k)) for k in bfcl_conformance.DETAIL_KEYS
            ]
    return cases, [bench_record(d) for d in documents]


def bfclmultiturn_cases(folder: Path, data: Path, reference: Path) -> tuple[list[dict], list[dict]]:
    """BFCL's multi-turn (flat) pairs, scored by the reference's `score_multiturn_flat_response`
    with its default config, as `bfcl_conformance.py` scores its multi-turn cases."""
    documents = runs(folder, "bfclmultiturn", ("parallel",))
    cases, payload = [], []
    for document in documents:
        options = {k: v for k, v in document["env"]["kwargs"].items() if k != "data"}
        rows = {r["id"]: r for r in bfcl_conformance.rows_of("bfclmultiturn", str(data), **options)}
        for p in pairs(document):
            case = {"id": p.pop("task_id"), **p, **({"env_kwargs": options} if options else {})}
            cases.append(case)
            payload.append(
                {"variant": "multiturn", "answers": p["answers"], "row": rows[case["id"]]}
            )
    scored = bfcl_conformance.run(
        sys.executable, bfcl_conformance.REWARD_RUNNER, str(reference), payload
    )
    for case, outcome in zip(cases, scored, strict=True):
        if "raises" in outcome:
            case["reference"] = {"raises": outcome["raises"]}
        else:
            detail = outcome["detail"]
            case["reference"] = [
                bfcl_conformance.compact(detail.get(k)) for k in bfcl_conformance.DETAIL_KEYS
            ]
    return cases, [bench_record(d) for d in documents]


def classeval_cases(folder: Path, data: Path, reference: Path) -> tuple[list[dict], list[dict]]:
    documents = runs(folder, "classeval", ("parallel", "single"))
    rows = json.loads(data.read_text())
    index = {row["task_id"]: n for n, row in enumerate(rows)}
    cases = []
    for document in documents:
        for p in pairs(document):
            cases.append({"task": index[p.pop("task_id")], **p})
    results = classeval_conformance.score_with_reference(reference, rows, cases)
    for case, result in zip(cases, results, strict=True):
        case["reference"] = {k: result[k] for k in CLASSEVAL_KEYS}
        case["machine_dependent"] = case["task"] in classeval_conformance.MACHINE_DEPENDENT
    return cases, [bench_record(d) for d in documents]


def travelplanner_cases(folder: Path, data: Path, reference: Path) -> tuple[list[dict], list[dict]]:
    documents = runs(folder, "travelplanner", ("parallel", "single"))
    score, reference_data, _ = travelplanner_conformance.reference_scorer(reference)
    records = load_records(data / travelplanner_conformance.DATA_FILE)
    tasks = tasks_from_records(records, travelplanner_conformance.DATA_FILE)
    items = {
        task.task_id: reference_data.normalize_travelplanner_row(
            travelplanner_conformance.hub_row(task), index, source_split="train"
        )
        for index, task in enumerate(tasks)
    }
    cases = []
    for document in documents:
        capacity = document["env"]["kwargs"].get("capacity", "reference")
        for p in pairs(document):
            reward, detail = score(p["answers"], items[p["task_id"]], capacity)
            outputs = travelplanner_conformance.reference_outputs(reward, detail)
            cases.append(
                {"task": p.pop("task_id"), **p, "capacity": capacity, "reference": outputs}
            )
    return cases, [bench_record(d) for d in documents]


def agreement(cases: list[dict[str, Any]], total_of: Any) -> tuple[int, int]:
    """(pairs whose recorded env reward equals the reference's, pairs the reference scored)."""
    scored = [c for c in cases if "raises" not in c["reference"]]
    same = sum(abs(c["env_reward"] - total_of(c["reference"])) <= TOLERANCE for c in scored)
    return same, len(scored)


TASKS = ("bfcl", "bfclmultiturn", "classeval", "travelplanner")
"""The file's parts, each built from the bench folder's runs of that env."""


def reference_records(args: argparse.Namespace, tasks: list[str]) -> dict[str, Any]:
    """What each built part's reference is: files, commits, the values kept."""
    records: dict[str, Any] = {}
    if "bfcl" in tasks:
        records["bfcl"] = {
            **{
                k: v
                for k, v in bfcl_conformance.REFERENCE.items()
                if "multiturn" not in k and "later" not in k
            },
            "values": list(bfcl_conformance.DETAIL_KEYS),
            "config": "NativeParallelRewardConfig() (self_duplicate_mode dedupe)",
        }
    if "bfclmultiturn" in tasks:
        records["bfclmultiturn"] = {
            **{
                k: v
                for k, v in bfcl_conformance.REFERENCE.items()
                if "native" not in k and "later" not in k
            },
            "values": list(bfcl_conformance.DETAIL_KEYS),
            "config": "MultiturnFlatRewardConfig() (the reward file's defaults)",
        }
    if "classeval" in tasks:
        classeval_data = args.data / "classeval" / "ClassEval_data.json"
        records["classeval"] = {
            "repository": classeval_conformance.REFERENCE,
            "commit": classeval_conformance.reference_commit(args.classeval_reference),
            "files": list(classeval_conformance.REFERENCE_FILES),
            "image": classeval_conformance.IMAGE,
            "data_sha256": hashlib.sha256(classeval_data.read_bytes()).hexdigest(),
        }
    if "travelplanner" in tasks:
        records["travelplanner"] = {
            **travelplanner_conformance.REFERENCE_FILES,
            "terms": list(travelplanner_conformance.TERMS),
            "details": list(travelplanner_conformance.KEPT_DETAILS),
            "checkout": "the files above as the public code index stores them (no git "
            "snapshot of the repository could be fetched); data.py holds only the row "
            "normaliser the scorer's rows go through",
        }
    return records


def build_task(task: str, args: argparse.Namespace) -> tuple[list[dict], list[dict]]:
    """(pairs, runs) of one part, with what the env's recorded reward already matched printed."""
    if task in ("bfcl", "bfclmultiturn"):
        build = bfcl_cases if task == "bfcl" else bfclmultiturn_cases
        cases, records = build(args.folder, args.data / "bfcl", args.bfcl_reference)
        same, scored = agreement(cases, lambda r: r[0])
    elif task == "classeval":
        data = args.data / "classeval" / "ClassEval_data.json"
        cases, records = classeval_cases(args.folder, data, args.classeval_reference)
        same, scored = agreement(cases, lambda r: r["total"])
    else:
        data = args.data / "travelplanner"
        cases, records = travelplanner_cases(args.folder, data, args.travel_reference)
        same, scored = agreement(cases, lambda r: r["reward"])
    print(f"{task}: {len(cases)} pairs, env reward = reference on {same} of {scored}")
    return cases, records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="a `collabzoo bench --output` folder")
    parser.add_argument("--bfcl-reference", type=Path)
    parser.add_argument("--classeval-reference", type=Path)
    parser.add_argument("--travel-reference", type=Path)
    parser.add_argument("--data", type=Path, default=REPOSITORY.parent / "shared" / "data")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    parser.add_argument(
        "--tasks",
        default=",".join(TASKS),
        help="the parts to build from FOLDER, comma-separated (default: all); the others are "
        "kept from --output as they are, and the run is recorded under `updates`",
    )
    args = parser.parse_args(argv)
    tasks = [t for t in args.tasks.split(",") if t]
    unknown = sorted(set(tasks) - set(TASKS))
    if unknown or not tasks:
        parser.error(f"--tasks: {unknown or 'none'} not among {', '.join(TASKS)}")
    needs = {
        "bfcl_reference": {"bfcl", "bfclmultiturn"},
        "classeval_reference": {"classeval"},
        "travel_reference": {"travelplanner"},
    }
    for option, parts in needs.items():
        if parts & set(tasks) and getattr(args, option) is None:
            flag = "--" + option.replace("_", "-")
            parser.error(f"{flag} is needed to build {', '.join(sorted(parts & set(tasks)))}")
    built = {task: build_task(task, args) for task in tasks}
    partial = set(tasks) != set(TASKS)
    if partial:  # the other parts as the file holds them
        document = json.loads(args.output.read_text(encoding="utf-8"))
    else:
        document = {
            "about": (
                "SmolLM2-135M-Instruct's answers to the envs' own prompts (parallel protocol, "
                "the reference sampling), with the rewards the references' own code gave them; "
                "made by benchmarks/real_output_task_conformance.py (its docstring says how)."
            ),
            "reference": {},
            "runs": {},
            "provenance": provenance(argv),
        }
    document["reference"].update(reference_records(args, tasks))
    for task, (cases, records) in built.items():
        document["runs"][task] = records
        document[task] = cases
    if partial:
        document.setdefault("updates", []).append({"tasks": tasks, **provenance(argv)})
    args.output.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")
    print(f"written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
