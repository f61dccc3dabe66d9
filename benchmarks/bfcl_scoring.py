"""BFCL scoring speed: collabzoo's BFCL rewards against the reference's own reward code, on the
same answer pairs, side by side in one run.

The pairs are tests/data/bfcl_conformance.json's (generated pairs on the shipped BFCL v4 rows;
the ones on which the reference's parser raises are left out). The reference is imported from a
checkout of OpenMLRL/LLM_Collab_BFCL-v4 (`--reference`): `score_native_parallel_response` and
`score_multiturn_flat_response`, given each pair and its row as the trainer does. collabzoo's are
`score_native` and `score_multiturn` as the env calls them: on the row's `CallTask`, whose gold
calls and schema order are read once per row and kept (a row is scored many times in training),
and with BFCL's AST match computed too, which the reference does not compute. `fresh` is the same
with a new `CallTask` for every pair (nothing kept between pairs). Every pass scores every pair
once; passes of the three alternate, `--rounds` times each, and each reports its median.

    python benchmarks/bfcl_scoring.py --reference CHECKOUT --data BFCL_DATA [--rounds 7] [--json]

`--json` alone writes benchmarks/results/bfcl_scoring.json, from which `bfcl_scoring_table`
builds the Performance page's table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_table import markdown_table, results_path, write_results
from side_by_side import headline_against_reference, medians, speed_rows, time_rounds, timed

import collabzoo
from collabzoo.tasks.bfcl.envs.data import NATIVE_CATEGORIES
from collabzoo.tasks.bfcl.rewards import CallTask, score_multiturn, score_native

REPOSITORY = Path(__file__).resolve().parents[1]
CASES = REPOSITORY / "tests" / "data" / "bfcl_conformance.json"
WAYS = ("reference", "collabzoo", "collabzoo fresh")


def load_pairs(data: str) -> list[dict[str, Any]]:
    """The conformance pairs the reference scores (it raises on the others), with their rows."""
    builds = {
        "native": collabzoo.make("bfcl", data=data, categories=NATIVE_CATEGORIES),
        "multiturn": collabzoo.make("bfclmultiturn", data=data),
        "multiturn_one": collabzoo.make("bfclmultiturn", data=data, min_calls=1),
    }
    rows = {k: {i.row_id: i for i in env.items("all")} for k, env in builds.items()}
    pairs = []
    for case in json.loads(CASES.read_text(encoding="utf-8"))["reward_cases"]:
        if "raises" in case["reference"]:
            continue
        kind = "multiturn_one" if case.get("min_calls") == 1 else case["variant"]
        row = rows[kind][case["id"]]
        pairs.append({"case": case, "row": row, "record": dict(row.record)})
    return pairs


def scorers(reference: str) -> dict[str, Callable[[dict[str, Any]], float]]:
    sys.path.insert(0, reference)
    from multiturn_flat.rewards.multiturn_flat_reward import score_multiturn_flat_response
    from native_parallel.rewards.native_parallel_reward import (
        NativeParallelRewardConfig,
        score_native_parallel_response,
    )

    from collabzoo.tasks.bfcl.rewards import NativeRules

    configs = {m: NativeParallelRewardConfig(self_duplicate_mode=m) for m in ("dedupe", "penalize")}
    rules = {m: NativeRules(self_duplicate_mode=m) for m in ("dedupe", "penalize")}

    def reference_score(pair: dict[str, Any]) -> float:
        case = pair["case"]
        if case["variant"] == "native":
            config = configs[case["mode"]]
            return score_native_parallel_response(
                case["answers"], batch_item=pair["record"], config=config
            )[0]
        return score_multiturn_flat_response(case["answers"], batch_item=pair["record"])[0]

    def ours(pair: dict[str, Any], task: CallTask | None = None) -> float:
        case = pair["case"]
        task = task or pair["row"].task
        if case["variant"] == "native":
            return score_native(case["answers"], task, rules[case["mode"]]).breakdown.total
        return score_multiturn(case["answers"], task).breakdown.total

    def fresh(pair: dict[str, Any]) -> float:
        record = pair["record"]
        task = CallTask(
            tuple(record["function"]),
            tuple(record["ground_truth"]),
            str(record["official_category"]),
        )
        return ours(pair, task)

    return {"reference": reference_score, "collabzoo": ours, "collabzoo fresh": fresh}


def timed_pass(score: Callable[[dict[str, Any]], float], pairs: list[dict[str, Any]]) -> float:
    def one_pass() -> None:
        for pair in pairs:
            score(pair)

    return timed(one_pass)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reference", required=True, help="a LLM_Collab_BFCL-v4 checkout")
    parser.add_argument(
        "--data",
        default=os.path.join(
            os.environ.get("COLLABZOO_SHARED_DATA", str(REPOSITORY.parent / "shared" / "data")),
            "bfcl",
        ),
    )
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--json",
        nargs="?",
        const=str(results_path("bfcl_scoring")),
        help="write the results here (alone: benchmarks/results/bfcl_scoring.json)",
    )
    args = parser.parse_args(argv)
    pairs = load_pairs(args.data)
    ways = scorers(args.reference)
    for pair in pairs:  # the same rewards, before any timing
        want = ways["reference"](pair)
        for way in WAYS[1:]:
            assert abs(ways[way](pair) - want) <= 1e-6, (pair["case"]["id"], way)
    for way in WAYS:  # warm-up: imports, regex caches, the rows' kept gold calls
        timed_pass(ways[way], pairs)
    runs = time_rounds(WAYS, args.rounds, lambda way: timed_pass(ways[way], pairs), "rotate")
    median = medians(runs)
    native = sum(p["case"]["variant"] == "native" for p in pairs)
    multiturn = len(pairs) - native
    print(f"{len(pairs)} pairs ({native} native, {multiturn} multi-turn), {args.rounds} rounds")
    for way in WAYS:
        per_pair = median[way] / len(pairs) * 1e6
        print(f"{way}: {median[way] * 1e3:.1f} ms a pass, {per_pair:.0f} us a pair")
    ratio = median["reference"] / median["collabzoo"]
    fresh = median["reference"] / median["collabzoo fresh"]
    print(f"collabzoo {ratio:.2f}x the reference's speed ({fresh:.2f}x fresh)")
    if args.json:
        report = {
            "pairs": len(pairs),
            "native_pairs": native,
            "rounds": args.rounds,
            "python": platform.python_version(),
            "reference": "OpenMLRL/LLM_Collab_BFCL-v4 native_parallel_reward.py@e233fc1, "
            "multiturn_flat_reward.py@6de881e, parsing.py@178b9dc",
            "seconds": runs,
            "speedup": ratio,
            "speedup_fresh": fresh,
        }
        write_results(args.json, {"headline": headline(report), **report}, argv)
    return 0


# ----- the Performance page's table --------------------------------------------------------------
def bfcl_scoring_table(results: dict[str, Any]) -> str:
    """Each way's median pass over the pairs, per pair, and its speed against the reference's."""
    pairs = results["pairs"]
    cells = speed_rows(
        results["seconds"],
        WAYS,
        lambda median: [f"{median * 1e3:.1f} ms", f"{median / pairs * 1e6:.0f} µs"],
    )
    header = ["scoring", f"{pairs} pairs (median of {results['rounds']})", "a pair", "speed"]
    return markdown_table(header, cells, "lrrr")


def headline(results: dict[str, Any]) -> dict[str, Any]:
    pairs = results["pairs"]
    return headline_against_reference(
        results,
        "BFCL scoring",
        "collabzoo",
        lambda reference, ours: (
            f"{ours / pairs * 1e6:.0f} µs a pair against the reference's "
            f"{reference / pairs * 1e6:.0f} µs, AST match included"
        ),
    )


if __name__ == "__main__":
    raise SystemExit(main())
