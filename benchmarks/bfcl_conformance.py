"""Build the BFCL conformance set: generated answer pairs scored by the reference's own reward code,
and the teams' calls checked by BFCL's own AST checker.

tests/test_bfcl.py replays `tests/data/bfcl_conformance.json` through collabzoo's BFCL rewards and
asserts the reference's rewards and terms (within 1e-6) and bfcl-eval's verdicts. This script made
that file:

1. Rows: collabzoo's offline builds of the shipped BFCL v4 files (`--data`, BFCL's
   `bfcl_eval/data/` folder): the 440 native rows of the four parallel categories, and the
   multi-turn steps (two or more gold calls; a few one-call steps too).
2. Answer pairs, seeded (`--seed`): for each row one kind of pair, cycling through `KINDS`
   (oracle splits, overlaps, an idle agent, extra calls, wrong values, omitted optional
   arguments, malformed JSON, string-valued JSON arguments, JSON and positional forms, fences and
   prose, self-duplicates, truncation, random mixtures).
3. Reference rewards: each pair is scored in a fresh interpreter inside a checkout of
   OpenMLRL/LLM_Collab_BFCL-v4 (`--reference`) by `score_native_parallel_response`
   (`native_parallel/rewards/native_parallel_reward.py`) or `score_multiturn_flat_response`
   (`multiturn_flat/rewards/multiturn_flat_reward.py`), with the parser beside them. Where that
   parser raises (string-valued arguments), the pair is scored again in `--later-reference`, a
   checkout whose parser is the reference's later one (`multiturn_flat/parsing.py@9979b13`, which
   reads such strings), and both outcomes are kept.
4. BFCL's verdicts: the team's calls as the reference merges them (its `combined_calls`), and
   for every native row its possible answers written as calls, and for every other row one
   perturbation of them,
   checked by `ast_checker` of the `bfcl-eval` package in the interpreter `--bfcl-python` (a
   separate environment: bfcl-eval pins numpy 1.26.4, networkx 3.3 and filelock 3.20.0), with
   the row's BFCL category and a model whose names keep their dots (gorilla-openfunctions-v2).
   Multi-turn steps have no AST check in BFCL: their calls are checked position by position with
   its `simple_function_checker`.
5. Prompts: for a sample of rows, the SHA-256 of the reference formatters' prompts
   (`native_parallel/formatting.py`, `multiturn_flat/formatting.py`) for every role mode and
   both agents, joined by NUL characters in the order of `ROLE_MODES` then agents.

    python benchmarks/bfcl_conformance.py --data BFCL_DATA --reference CHECKOUT \\
        --later-reference LATER_CHECKOUT --bfcl-python BFCL_VENV/bin/python \\
        --output tests/data/bfcl_conformance.json
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import collabzoo
from collabzoo.tasks.bfcl.envs.data import NATIVE_CATEGORIES
from collabzoo.tasks.bfcl.teams import call_source, shares

REFERENCE = {
    "repo": "OpenMLRL/LLM_Collab_BFCL-v4",
    "native_reward": "native_parallel/rewards/native_parallel_reward.py@e233fc1a8cfb",
    "multiturn_reward": "multiturn_flat/rewards/multiturn_flat_reward.py@6de881e07574",
    "parser": "multiturn_flat/parsing.py@178b9dc4494c, also as native_parallel/parsing.py (that "
    "file's own text could not be read; the spec gives the two variants one parser)",
    "checkout": "the files above as the public code index stores them (no git snapshot of the "
    "repository could be fetched)",
    "later_parser": "multiturn_flat/parsing.py@9979b138dd3d",
}
DETAIL_KEYS = (
    "reward",
    "exact_match",
    "parse_success",
    "function_f1",
    "argument_match",
    "matched_calls",
    "exact_calls",
    "pred_call_count",
    "raw_call_count",
    "gold_call_count",
    "count_score",
    "balance_score",
    "overlap_count",
    "overlap_rate",
    "lazy_agents",
    "lazy_rate",
    "extra_call_rate",
    "self_duplicate_count",
    "self_duplicate_rate",
    "sequence_score",
    "prefix_score",
)
MODEL = "gorilla-openfunctions-v2"
MAX_GOLD_CHARS = 600
"""Multi-turn steps whose gold calls are longer (long-context contents) are left out: size."""

REWARD_RUNNER = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from native_parallel.rewards.native_parallel_reward import (
    NativeParallelRewardConfig, score_native_parallel_response)
from multiturn_flat.rewards.multiturn_flat_reward import score_multiturn_flat_response
out = []
for case in json.load(sys.stdin):
    try:
        if case["variant"] == "native":
            cfg = NativeParallelRewardConfig(self_duplicate_mode=case["self_duplicate_mode"])
            reward, detail = score_native_parallel_response(
                case["answers"], batch_item=case["row"], config=cfg)
        else:
            reward, detail = score_multiturn_flat_response(case["answers"], batch_item=case["row"])
        keep = {k: v for k, v in detail.items() if isinstance(v, (int, float))}
        out.append({"reward": reward, "detail": keep, "combined_calls": detail["combined_calls"]})
    except Exception as error:
        out.append({"raises": f"{type(error).__name__}: {error}"})
json.dump(out, sys.stdout)
"""

PROMPT_RUNNER = r"""
import hashlib, json, sys
sys.path.insert(0, sys.argv[1])
from native_parallel.formatting import build_native_parallel_formatter
from multiturn_flat.formatting import build_multiturn_flat_formatter
out = []
for case in json.load(sys.stdin):
    build = (build_native_parallel_formatter if case["variant"] == "native"
             else build_multiturn_flat_formatter)
    texts = [build(agent, num_agents=2, role_mode=mode)(case["row"])
             for mode in case["modes"] for agent in (0, 1)]
    out.append(hashlib.sha256("\0".join(texts).encode("utf-8")).hexdigest())
json.dump(out, sys.stdout)
"""
ROLE_MODES = ("self_select", "same_prompt", "odd_even", "split_by_order")

AST_RUNNER = r"""
import json, sys
from bfcl_eval.constants.enums import Language
from bfcl_eval.eval_checker.ast_eval.ast_checker import (
    ast_checker, find_description, simple_function_checker)
from importlib.metadata import version
model = sys.argv[1]
out = []
for case in json.load(sys.stdin):
    try:
        if case["ordered"]:
            result = {"valid": True}
            if len(case["output"]) != len(case["answer"]):
                result = {"valid": False, "error_type": "ordered:wrong_count"}
            else:
                for call, gold in zip(case["output"], case["answer"]):
                    schema = find_description(case["functions"], next(iter(gold)))
                    if schema is None:
                        result = {"valid": False, "error_type": "ordered:unknown_function"}
                        break
                    result = simple_function_checker(schema, call, gold, Language.PYTHON, model)
                    if not result["valid"]:
                        break
        else:
            result = ast_checker(case["functions"], case["output"], case["answer"],
                                 Language.PYTHON, case["category"], model)
        valid = bool(result["valid"])  # a passing check may still carry an error_type
        out.append({"valid": valid, "error_type": "" if valid else result["error_type"]})
    except Exception as error:
        out.append({"raises": f"{type(error).__name__}: {error}"})
json.dump({"version": version("bfcl-eval"), "verdicts": out}, sys.stdout)
"""


# ----- answers -------------------------------------------------------------------------------
def gold_calls(row: dict) -> list[str]:
    return [call_source(a, row["function"]) for a in row["ground_truth"]]


def split_calls(calls: list[str]) -> tuple[list[str], list[str]]:
    first, second = shares(len(calls), "split_by_order")
    return [calls[i] for i in first], [calls[i] for i in second]


def _first_value(accepted: Any) -> Any:
    values = [v for v in (accepted if isinstance(accepted, list) else [accepted]) if v != ""]
    return values[0] if values else None


def concrete(answer: dict) -> tuple[str, dict]:
    """(name, arguments) of a possible answer, first accepted values, optional-only ones out."""
    name, accepted = next(iter(answer.items()))
    arguments = {}
    for parameter, values in accepted.items():
        value = _first_value(values)
        if value is not None:
            arguments[parameter] = value
    return name, arguments


def wrong(value: Any, rng: random.Random) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + rng.choice([1, 2, 10])
    if isinstance(value, str):
        return value + rng.choice([" extra", "x", " 2"])
    if isinstance(value, list):
        return value[:-1] if value else [1]
    if isinstance(value, dict):
        return {k: wrong(v, rng) for k, v in value.items()}
    return "changed"


def source(name: str, arguments: dict) -> str:
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in arguments.items())})"


def json_calls(calls: Sequence[tuple[str, dict]], form: str) -> str:
    if form == "one_key":
        return json.dumps([{name: args} for name, args in calls])
    if form == "string_arguments":
        return json.dumps([{"name": n, "arguments": json.dumps(a)} for n, a in calls])
    if form == "function_key":
        return json.dumps([{"function": n, "parameters": a} for n, a in calls])
    return json.dumps([{"name": n, "arguments": a} for n, a in calls])


def positional(name: str, arguments: dict, row: dict) -> str:
    schema = next((f for f in row["function"] if f["name"] == name), None)
    if schema is None:
        return source(name, arguments)
    parameters = schema["parameters"]
    order = list(dict.fromkeys([*parameters.get("required", []), *parameters["properties"]]))
    head = []
    for parameter in order:
        if parameter not in arguments:
            break
        head.append(repr(arguments[parameter]))
    rest = {k: v for k, v in arguments.items() if k not in order[: len(head)]}
    parts = head + [f"{k}={v!r}" for k, v in rest.items()]
    return f"{name}({', '.join(parts)})"


def _lines(calls: Sequence[str]) -> str:
    return "\n".join(calls) or "[]"


def make_pair(kind: str, row: dict, rng: random.Random) -> tuple[list[str], str]:
    """Two answers of a kind for a row (and the self-duplicate mode to score them with)."""
    gold = gold_calls(row)
    structured = [concrete(a) for a in row["ground_truth"]]
    first, second = split_calls(gold)
    mode = "dedupe"
    if kind == "oracle_split":
        pair = [_lines(first), _lines(second)]
    elif kind == "oracle_odd_even":
        pair = [_lines(gold[0::2]), _lines(gold[1::2])]
    elif kind == "overlap":
        extra = rng.sample(second, min(len(second), rng.randint(1, 2))) if second else []
        pair = [_lines(first + extra), _lines(second)]
    elif kind == "both_everything":
        pair = [_lines(gold), _lines(gold)]
    elif kind == "idle_agent":
        pair = [_lines(gold), rng.choice(["[]", "", "   "])]
        if rng.random() < 0.5:
            pair.reverse()
    elif kind == "extra_calls":
        name, arguments = rng.choice(structured)
        bogus = source(name, {k: wrong(v, rng) for k, v in arguments.items()})
        pair = [_lines([*first, bogus]), _lines([*second, "unknown_function(x=1)"])]
    elif kind == "wrong_values":
        calls = list(structured)
        k = rng.randrange(len(calls))
        name, arguments = calls[k]
        if arguments:
            key = rng.choice(sorted(arguments))
            arguments = {**arguments, key: wrong(arguments[key], rng)}
        calls[k] = (name, arguments)
        texts = [source(n, a) for n, a in calls]
        a, b = split_calls(texts)
        pair = [_lines(a), _lines(b)]
    elif kind == "omitted_optional":
        texts = []
        for answer in row["ground_truth"]:
            name, accepted = next(iter(answer.items()))
            kept = {p: _first_value(v) for p, v in accepted.items() if "" not in v}
            texts.append(source(name, {k: v for k, v in kept.items() if v is not None}))
        a, b = split_calls(texts)
        pair = [_lines(a), _lines(b)]
    elif kind == "malformed_json":
        a, b = split_calls([json.dumps({"name": n, "arguments": x}) for n, x in structured])
        broken = "[" + ", ".join(a)  # no closing bracket
        if rng.random() < 0.5:
            broken = broken.replace('"', "'", 2)
        pair = [broken, "[" + ", ".join(b) + ",]"]
    elif kind == "string_arguments":
        a, b = split_calls(structured)
        pair = [json_calls(a, "string_arguments"), json_calls(b, rng.choice(["plain", "one_key"]))]
    elif kind == "json_forms":
        a, b = split_calls(structured)
        pair = [
            json_calls(a, rng.choice(["plain", "one_key", "function_key"])),
            "```json\n" + json_calls(b, "plain") + "\n```",
        ]
    elif kind == "positional":
        a, b = split_calls([positional(n, x, row) for n, x in structured])
        pair = [_lines(a), _lines(b)]
    elif kind == "fences_and_prose":
        pair = [
            "```python\n" + _lines(first) + "\n```",
            f"Sure! Here are my calls:\n{_lines(second)}\nLet me know if you need more.",
        ]
    elif kind == "numbered_lines":
        pair = [
            "\n".join(f"{i + 1}. {c}" for i, c in enumerate(first)),
            "\n".join(f"- {c}" for c in second),
        ]
    elif kind == "self_duplicates":
        pair = [_lines(first + first[:1]), _lines(second + second)]
        mode = rng.choice(["dedupe", "penalize"])
    elif kind == "truncated":
        a, b = _lines(first), _lines(second)
        pair = [a[: max(1, int(len(a) * rng.uniform(0.4, 0.95)))], b]
    elif kind == "case_variants":
        pair = [_lines(first).upper(), _lines(second)]
    else:  # random: any gold calls, a wrong one, repeats, in any order, to either agent
        pool = gold + [
            source(n, {k: wrong(v, rng) for k, v in x.items()}) for n, x in structured[:2]
        ]
        a = [c for c in pool if rng.random() < 0.5]
        b = [c for c in pool if rng.random() < 0.5]
        rng.shuffle(a)
        rng.shuffle(b)
        pair = [_lines(a), _lines(b)]
        mode = rng.choice(["dedupe", "penalize"])
    return pair, mode


KINDS = (
    "oracle_split",
    "overlap",
    "idle_agent",
    "extra_calls",
    "wrong_values",
    "omitted_optional",
    "malformed_json",
    "string_arguments",
    "json_forms",
    "positional",
    "fences_and_prose",
    "self_duplicates",
    "truncated",
    "random",
    "oracle_odd_even",
    "both_everything",
    "numbered_lines",
    "case_variants",
)


def perturbed_output(row: dict, rng: random.Random) -> list[dict]:
    """The possible answers as decoded calls, with one change BFCL should notice (or not)."""
    calls = [dict([concrete(a)]) for a in row["ground_truth"]]
    change = rng.choice(["value", "drop_call", "drop_arg", "extra_arg", "case", "int_float"])
    k = rng.randrange(len(calls))
    name, arguments = next(iter(calls[k].items()))
    arguments = dict(arguments)
    if change == "drop_call":
        del calls[k]
        return calls
    if change == "value" and arguments:
        key = rng.choice(sorted(arguments))
        arguments[key] = wrong(arguments[key], rng)
    elif change == "drop_arg" and arguments:
        del arguments[rng.choice(sorted(arguments))]
    elif change == "extra_arg":
        arguments["unexpected"] = 1
    elif change == "case":
        arguments = {
            key: v.upper() + " " if isinstance(v, str) else v for key, v in arguments.items()
        }
    elif change == "int_float":
        arguments = {
            key: float(v) if type(v) is int else int(v) if type(v) is float else v
            for key, v in arguments.items()
        }
    calls[k] = {name: arguments}
    rng.shuffle(calls)
    return calls


def compact(value: Any) -> Any:
    """A number as short as it stays exact to 1e-9 (None where the detail lacks it)."""
    if value is None:
        return None
    value = round(float(value), 10)
    return int(value) if value.is_integer() else value


# ----- running the references ------------------------------------------------------------------
def run(python: str, code: str, argument: str, payload: Any) -> Any:
    done = subprocess.run(
        [python, "-c", code, argument],
        input=json.dumps(payload),
        text=True,
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout)


def rows_of(name: str, data: str, **kwargs: Any) -> list[dict]:
    env = collabzoo.make(name, data=data, split="all", **kwargs)
    return [dict(item.record) for item in env.items("all")]


def build(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    native = rows_of("bfcl", args.data, categories=NATIVE_CATEGORIES)
    steps = rows_of("bfclmultiturn", args.data)
    single_call_steps = [r for r in rows_of("bfclmultiturn", args.data, min_calls=1)]
    single_call_steps = [r for r in single_call_steps if len(r["ground_truth"]) == 1]
    short = [r for r in steps if len("".join(gold_calls(r))) <= MAX_GOLD_CHARS]
    single_call_steps = [r for r in single_call_steps if len("".join(gold_calls(r))) <= 300]
    chosen_steps = rng.sample(short, args.multiturn_cases) + rng.sample(single_call_steps, 10)
    cases: list[dict[str, Any]] = []
    for index, row in enumerate(native):
        kind = KINDS[index % len(KINDS)]
        answers, mode = make_pair(kind, row, rng)
        cases.append(dict(variant="native", id=row["id"], kind=kind, answers=answers, mode=mode))
    for index, row in enumerate(chosen_steps):
        kind = KINDS[index % len(KINDS)]
        answers, _ = make_pair(kind, row, rng)
        one_call = len(row["ground_truth"]) == 1
        cases.append(
            dict(variant="multiturn", id=row["id"], kind=kind, answers=answers, min_calls=1)
            if one_call
            else dict(variant="multiturn", id=row["id"], kind=kind, answers=answers)
        )
    by_id = {("native", r["id"]): r for r in native}
    by_id |= {("multiturn", r["id"]): r for r in [*steps, *single_call_steps]}

    def payload(case: dict) -> dict:
        return {
            "variant": case["variant"],
            "answers": case["answers"],
            "row": by_id[(case["variant"], case["id"])],
            "self_duplicate_mode": case.get("mode", "dedupe"),
        }

    scored = run(sys.executable, REWARD_RUNNER, args.reference, [payload(c) for c in cases])
    raised = [i for i, s in enumerate(scored) if "raises" in s]
    later = run(
        sys.executable, REWARD_RUNNER, args.later_reference, [payload(cases[i]) for i in raised]
    )
    for case, outcome in zip(cases, scored, strict=True):
        case["reference"] = outcome
    for i, outcome in zip(raised, later, strict=True):
        cases[i]["later_reference"] = outcome

    ast_cases: list[dict[str, Any]] = []
    team_cases = []
    for case in cases:
        outcome = case.get("later_reference", case["reference"])
        if "raises" in outcome:
            continue
        output = [{c["name"]: c["arguments"]} for c in outcome["combined_calls"]]
        team_cases.append(case)
        ast_cases.append(dict(variant=case["variant"], id=case["id"], output=output, of="team"))
    for index, row in enumerate(native):
        ast_cases.append(dict(variant="native", id=row["id"], output=None, of="answers"))
        if index % 2 == 0:
            output = perturbed_output(row, rng)
            ast_cases.append(dict(variant="native", id=row["id"], output=output, of="perturbed"))
    for case in ast_cases:
        if case["output"] is None:
            row = by_id[("native", case["id"])]
            case["output"] = [dict([concrete(a)]) for a in row["ground_truth"]]

    def ast_payload(case: dict) -> dict:
        row = by_id[(case["variant"], case["id"])]
        return {
            "functions": row["function"],
            "output": case["output"],
            "answer": row["ground_truth"],
            "category": row["official_category"],
            "ordered": case["variant"] == "multiturn",
        }

    checked = run(args.bfcl_python, AST_RUNNER, MODEL, [ast_payload(c) for c in ast_cases])
    for case, verdict in zip(ast_cases, checked["verdicts"], strict=True):
        case["bfcl"] = verdict
    for case, ast_case in zip(team_cases, ast_cases, strict=False):
        case["bfcl"] = ast_case["bfcl"]  # on the team's calls as the reference merges them
    ast_cases = [c for c in ast_cases if c["of"] != "team"]
    for case in cases:
        for key in ("reference", "later_reference"):
            if key in case and "detail" in case[key]:
                detail = case[key]["detail"]
                case[key] = [compact(detail.get(k)) for k in DETAIL_KEYS]
    for case in ast_cases:
        if case["of"] == "answers":
            del case["output"]  # rebuilt by the test: see the provenance's `ast_answers`
        del case["of"]
    prompt_cases = [
        dict(variant=variant, id=row["id"])
        for variant, rows in (
            ("native", rng.sample(native, 40)),
            ("multiturn", rng.sample(steps, 20)),
        )
        for row in rows
    ]
    hashes = run(
        sys.executable,
        PROMPT_RUNNER,
        args.reference,
        [{**c, "row": by_id[(c["variant"], c["id"])], "modes": ROLE_MODES} for c in prompt_cases],
    )
    for case, digest in zip(prompt_cases, hashes, strict=True):
        case["sha256"] = digest
    return {
        "provenance": {
            "reference": REFERENCE,
            "bfcl_eval": {"package": "bfcl-eval", "version": checked["version"], "model": MODEL},
            "data": "ShishirPatil/gorilla@6ea5797 berkeley-function-call-leaderboard/bfcl_eval/"
            "data (BFCL v4), collabzoo's offline builds of it",
            "script": "benchmarks/bfcl_conformance.py",
            "seed": args.seed,
            "reference_values": list(DETAIL_KEYS),
            "ast_answers": "an AST case without `output` checks the row's possible answers as "
            "calls: each parameter's first accepted value other than '', parameters with no "
            "other value left out",
        },
        "reward_cases": cases,
        "ast_cases": ast_cases,
        "prompt_cases": prompt_cases,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, help="BFCL's data folder (bfcl_eval/data)")
    parser.add_argument("--reference", required=True, help="a LLM_Collab_BFCL-v4 checkout")
    parser.add_argument(
        "--later-reference", required=True, help="a checkout with the later parser (9979b13)"
    )
    parser.add_argument("--bfcl-python", required=True, help="an interpreter with bfcl-eval")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--multiturn-cases", type=int, default=110)
    parser.add_argument("--output", default="tests/data/bfcl_conformance.json")
    args = parser.parse_args(argv)
    record = build(args)
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
    Path(args.output).write_text(text + "\n", encoding="utf-8")
    reward_cases, ast_cases = record["reward_cases"], record["ast_cases"]
    raised = sum("raises" in c["reference"] for c in reward_cases)
    print(
        f"{len(reward_cases)} reward cases ({raised} where the reference raises), "
        f"{len(ast_cases)} AST cases, {len(text) // 1024} KiB -> {args.output}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
