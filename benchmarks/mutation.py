"""Mutation testing of the modules where a silent bug costs most: does the suite fail when the
code is wrong? cosmic-ray (`pip install cosmic-ray`) mutates one module at a time (operators
flipped, constants changed, branches removed...) and runs that module's tests against each
mutant; a mutant the tests still pass "survived".

It works on a copy of the checkout, never on the working tree, and is too slow for every CI run
(minutes per module); CI runs the fixed sample in tests/test_mutation_sample.py instead.

    python benchmarks/mutation.py [--only advantages,gae] [--sample N] [--minutes M]
                                  [--json results.json]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Target:
    module: str
    tests: list[str]
    """pytest arguments, fastest first: `-x` stops at the first failure."""
    functions: tuple[str, ...] = ()
    """Mutate only these functions or methods (by name); empty: the whole module."""


QUICK_MUTANTS_KILLED = [
    "tests/test_mutants_killed.py",
    "--deselect",
    "tests/test_mutants_killed.py::test_code_reward_skips_the_remaining_tests_after_three_timeouts",
]

TARGETS: dict[str, Target] = {
    "advantages": Target(
        "collabzoo/algos/objectives.py",
        ["tests/test_advantages.py", "tests/test_learner_maths.py", *QUICK_MUTANTS_KILLED],
        ("discounted_return", "sample_returns", "group_advantages"),
    ),
    "gae": Target(
        "collabzoo/algos/objectives.py",
        ["tests/test_gae.py", "tests/test_learner_maths.py"],
        ("td_errors", "gae", "advantages_and_targets"),
    ),
    "sampling": Target("collabzoo/algos/policies/sampling.py", ["tests/test_sampling.py"]),
    "plain data": Target("collabzoo/sandbox/plain_data.py", ["tests/test_plain_data.py"]),
    "writing rewards": Target(
        "collabzoo/tasks/writing/rewards.py", ["tests/test_writing_rewards.py"]
    ),
    "strbuild rules": Target(
        "collabzoo/tasks/building/rewards/strbuild.py",
        ["tests/test_strbuild_rules.py", "tests/test_game_feedback.py", "tests/test_bad_input.py"],
    ),
    "housebuild rules": Target(
        "collabzoo/tasks/building/rewards/housebuild.py",
        [
            "tests/test_housebuild_rules.py",
            "tests/test_game_feedback.py",
            "tests/test_bad_input.py",
        ],
    ),
    "actor-critic losses": Target(
        "collabzoo/algos/objectives.py",
        [
            "tests/test_learner_maths.py",
            *QUICK_MUTANTS_KILLED,
            "tests/test_gae.py",
            "tests/test_actor_critic.py",
            # the learning runs take minutes per mutant; the maths and mutant tests come first
            "--deselect",
            "tests/test_actor_critic.py::test_actor_critic_learners_raise_the_team_reward",
            "--deselect",
            "tests/test_actor_critic.py::test_long_horizon_sparse_comparison",
        ],
        ("clipped_policy_loss", "value_loss", "_mean", "branch_estimates"),
    ),
    "advantage normalisation": Target(
        "collabzoo/algos/learners/critic_batches.py",
        ["tests/test_learner_maths.py", *QUICK_MUTANTS_KILLED],
        ("_mean", "_normalise"),
    ),
    "code reward": Target(
        "collabzoo/tasks/code/rewards/__init__.py",
        [
            "tests/test_code_rewards.py",
            "tests/test_mutants_killed.py::"
            "test_code_reward_skips_the_remaining_tests_after_three_timeouts",
        ],
        ("_breakdown", "_check_options", "evaluate_code_batch"),
    ),
}

EQUIVALENT_RULES: list[tuple[str, str, str]] = [
    (
        "ReplaceComparisonOperator_Is_Eq|ReplaceComparisonOperator_IsNot_NotEq",
        r"\b(kind|type\([^)]*\)) (==|!=) (?!None)",
        "`is` and `==` agree on builtin type objects (identity is their equality)",
    ),
    (
        "NumberReplacer",
        r"count\[ ?-1\]",
        "the counter is a one-element list: count[0] and count[-1] are the same cell",
    ),
    (
        "ReplaceComparisonOperator_Eq_GtE",
        r'if tag >= "t":|made if tag >= "s"',
        'among the tags that reach it ("t", "s", "fs"), only the one compared is >= it',
    ),
    (
        "ReplaceComparisonOperator_NotEq_|ReplaceOrWithAnd",
        r"if kind is not dict (or|and) len\(data\)",
        "a dict with no key or two keys fails the one-pair unpacking on the next line instead,"
        " with the same ValueError",
    ),
    (
        "ReplaceComparisonOperator_Eq_|ReplaceAndWithOr",
        r"type\(p\) is list (and|or) len\(p\)",
        "a pair of the wrong length fails the `for k, v in body` unpacking instead, with the"
        " same ValueError",
    ),
    (
        "ReplaceComparisonOperator_Eq_GtE|ReplaceComparisonOperator_Eq_LtE",
        r'elif baseline >= "rloo":|if std <= "population":',
        "the name was checked against its list first, and of the names left at that branch only"
        ' the one compared passes the ordering ("max" < "rloo"; "unbiased" > "population")',
    ),
    (
        "ReplaceComparisonOperator_Gt_NotEq|ReplaceComparisonOperator_Eq_GtE|"
        "ReplaceComparisonOperator_Gt_GtE|NumberReplacer",
        r"if passed != 0 and analysis|passed >= n_tests\)|n_tests (>= 0|!= 0|> -1) and passed =="
        r"|if n_tests else -?1\.0",
        "passes are counted over a problem's tests, and a problem has at least one test"
        " (CodeProblem refuses none), so 0 <= passed <= n_tests and n_tests >= 1",
    ),
    (
        "ReplaceTrueWithFalse",
        r"zip\((pairs, analyses|owners, ran|pairs, analyses, results), strict=False\)",
        "the zipped lists are built from the same list, or their lengths were checked on the line"
        " before",
    ),
    (
        "ReplaceComparisonOperator_Eq_Is",
        r'if ch is "#"',
        "one-character strings are cached singletons in CPython: `is` and `==` agree on them",
    ),
    (
        "ReplaceComparisonOperator_NotEq_IsNot",
        r"len\(answers\) is not len\(palettes\)",
        "agent counts are small ints, which CPython caches: `is not` and `!=` agree on them",
    ),
    (
        "NumberReplacer",
        r"return len\(self\.rows\[ ?-1\]\)",
        "every row has the same length, checked when the target is made",
    ),
    (
        "ReplaceComparisonOperator_Lt_NotEq|ReplaceComparisonOperator_Lt_LtE|NumberReplacer",
        r"if 1\.3 <= u != 2\.0:|if 0\.5 <= u <= 0\.7:|if 1\.6 <= r <= 2\.0:|if 2\.2 < r <= 5\.0:",
        "the band's other end was taken by a branch above (u >= 2.0; 0.7 <= u; r <= 1.6;"
        " 1.6 <= r <= 3.2)",
    ),
    (
        "ReplaceBinaryOperator_Sub_Mod",
        r"\([ru] % [0-9.]+\) / [0-9.]+",
        "each band starts at c and ends below 2c, and there x % c is x - c, both exact (fmod"
        " always is; the subtraction by Sterbenz's lemma, c <= x <= 2c)",
    ),
    (
        "ReplaceComparisonOperator_Eq_LtE",
        r'if mode <= "substring":',
        'the mode was checked against ("substring", "words") first, and "words" sorts after',
    ),
    (
        "ReplaceBinaryOperator_BitAnd_Mul",
        r"count_nonzero\(built \* wanted\)",
        "on boolean arrays numpy's * is the logical and, like &",
    ),
    (
        "ReplaceComparisonOperator_Eq_Lt",
        r"\(~removed\)\.sum\(-1\) < k\)",
        "top-k keeps at least k tokens, so the count is never below k: the mutant always takes"
        " the full sort, which is exact in every case (only slower)",
    ),
    (
        "ReplaceComparisonOperator_NotEq_Lt",
        r"if i % w < w - 1 and",
        "i % w lies in 0..w-1, where != w - 1 and < w - 1 agree",
    ),
    (
        "ReplaceComparisonOperator_Eq_Is",
        r'if command\[0\] is "fill":|c\[0\] is "kill" for',
        "the parser builds its command tuples with these very literals, and CPython interns"
        " identical literals, so `is` and `==` agree on them",
    ),
    (
        "ReplaceTrueWithFalse",
        r"zip\(totals, counts, strict=False\)",
        "both lists are made k long two lines above",
    ),
    (
        "ReplaceComparisonOperator_Eq_LtE",
        r"^\s*if k <= 0:",
        "k is a length, never negative",
    ),
    (
        "ReplaceComparisonOperator_Gt_NotEq",
        r"if normalize and k != 1:",
        "k == 0 returned earlier, so k != 1 and k > 1 agree",
    ),
    (
        "ReplaceBinaryOperator_BitOr_BitXor",
        r"return ~\(removed \^ torch\.zeros_like\(removed\)\.scatter\(-1, top_indices, cut\)\)",
        "the cut lands on the top-k indices, which `removed` never holds: the two masks are"
        " disjoint, where ^ and | agree",
    ),
    (
        "NumberReplacer",
        r"return sum\(values\) / len\(values\) if values else -?1\.0",
        "every caller passes a non-empty list: children of a node that has some, two or more"
        " samples, metric lists made by appending, and the old values of an update's samples",
    ),
    (
        "NumberReplacer",
        r"\.masked_fill\(~mask, 1\.0\)\)$",
        "padded positions are masked out of the surrogate and of the clip fraction afterwards,"
        " and a constant there carries no gradient",
    ),
]
"""Survivors judged equivalent (no input can tell them from the original): operator names (a
regex), a regex on the mutated line, and the reason. Each rule was read by hand against the
survivors it covers; see docs/development.md."""


def equivalent(operator: str, diff: str) -> str | None:
    """The reason a mutant is equivalent, if a rule covers it (the rule sees the mutated line)."""
    added = [line[1:] for line in diff.splitlines() if line.startswith("+") and "+++" not in line]
    for operators, pattern, reason in EQUIVALENT_RULES:
        if re.search(operators, operator) and any(re.search(pattern, line) for line in added):
            return reason
    return None


def copy_checkout(into: Path) -> Path:
    """The files git knows (tracked, or new and not ignored), as they are in the working tree."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in listed:
        source = REPOSITORY / name
        if source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    return into


def function_lines(source: str, names: tuple[str, ...]) -> list[str]:
    """The line ranges ("first-last") of every function or method called one of `names`."""
    ranges = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in names:
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            ranges.append((first, node.end_lineno, node.name))
    missing = set(names) - {name for _, _, name in ranges}
    if missing:
        raise SystemExit(f"no function named {sorted(missing)} to mutate")
    return [f"{first}-{last}" for first, last, _ in sorted(ranges)]


ANNOTATION = "inside an annotation, which `from __future__ import annotations` never evaluates"


def annotation_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Where each annotation lies, as ((line, column), (end line, end column))."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.arg | ast.AnnAssign) and node.annotation is not None:
            found.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns:
            found.append(node.returns)
    return [((a.lineno, a.col_offset), (a.end_lineno, a.end_col_offset)) for a in found]


def skip(session: Path, reason: str, choose) -> None:
    """Mark the pending mutants `choose(pending items)` names (job ids) skipped, before any
    runs, with `reason` as their output (cosmic-ray's work database, used directly)."""
    from cosmic_ray.work_db import use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    with use_db(str(session)) as db:
        chosen = list(choose(list(db.pending_work_items)))
        db.set_multiple_results(
            chosen, WorkResult(output=reason, worker_outcome=WorkerOutcome.SKIPPED)
        )


def inside_annotations(source: str):
    """A `choose` for `skip`: the mutants that lie wholly inside annotations, which no input
    can tell from the original under postponed evaluation."""
    spans = annotation_spans(source)

    def choose(items) -> list[str]:
        return [
            item.job_id
            for item in items
            if all(
                any(start <= tuple(m.start_pos) and tuple(m.end_pos) <= end for start, end in spans)
                for m in item.mutations
            )
        ]

    return choose


NOT_SAMPLED = "not in the random sample"


def outside_a_sample(size: int, seed: int):
    """A `choose` for `skip`: all but `size` mutants, drawn at random."""

    def choose(items) -> list[str]:
        pending = sorted(item.job_id for item in items)
        kept = set(random.Random(seed).sample(pending, min(size, len(pending))))
        return [j for j in pending if j not in kept]

    return choose


def run_for(command: list[str], cwd: Path, env: dict, minutes: float | None) -> bool:
    """Run `command`; after `minutes`, stop it and its test processes. True if stopped. The
    mutants cosmic-ray finished are in its database; it runs them in random order, so they
    are a random sample of the target's."""
    process = subprocess.Popen(command, cwd=cwd, env=env, start_new_session=True)
    try:
        code = process.wait(timeout=None if minutes is None else minutes * 60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        return True
    if code != 0:
        raise subprocess.CalledProcessError(code, command)
    return False


def run_target(
    name: str,
    target: Target,
    copy: Path,
    timeout: float,
    sample: int | None = None,
    minutes: float | None = None,
) -> dict:
    module = target.module
    tests = [t for t in target.tests if t.startswith("-") or (copy / t.split("::")[0]).exists()]
    command = f"{sys.executable} -m pytest -x -q -p no:cacheprovider {' '.join(tests)}"
    config = copy / f"mutation-{name.replace(' ', '-')}.toml"
    session = config.with_suffix(".sqlite")
    text = (
        "[cosmic-ray]\n"
        f'module-path = "{module}"\n'
        f"timeout = {timeout}\n"
        "excluded-modules = []\n"
        f'test-command = "{command}"\n\n'
        '[cosmic-ray.distributor]\nname = "local"\n'
    )
    source = (copy / module).read_text()
    if target.functions:
        lines = function_lines(source, target.functions)
        text += "\n[cosmic-ray.filters.line-filter.lines]\n"
        text += f"{json.dumps(module)} = {json.dumps(lines)}\n"
    config.write_text(text)
    env = {**os.environ, "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"}
    env.setdefault("COLLABZOO_SHARED_DATA", str(REPOSITORY.parent / "shared" / "data"))
    baseline = subprocess.run(command.split(), cwd=copy, env=env, capture_output=True, text=True)
    if baseline.returncode != 0:  # else every mutant would count as killed
        failing = baseline.stdout[-2000:]
        raise SystemExit(f"{name}: the tests fail on the unmutated code:\n{failing}")

    def cosmic_ray(*arguments: str) -> None:
        subprocess.run(arguments, cwd=copy, env=env, check=True)

    cosmic_ray("cosmic-ray", "init", str(config), str(session))
    if target.functions:  # the other lines' mutants are marked skipped before any runs
        cosmic_ray("cr-filter-lines", str(session), "--config", str(config))
    skip(session, ANNOTATION, inside_annotations(source))
    if sample is not None:
        skip(session, NOT_SAMPLED, outside_a_sample(sample, seed=0))
    stopped = run_for(["cosmic-ray", "exec", str(config), str(session)], copy, env, minutes)
    if stopped:  # the mutant under test at the stop may still be in the copy
        (copy / module).write_text(source)
    dump = subprocess.run(
        ["cosmic-ray", "dump", str(session)], cwd=copy, capture_output=True, text=True, check=True
    ).stdout
    counts = {"killed": 0, "survived": 0, "equivalent": 0, "incompetent": 0}
    outside = not_sampled = not_run = 0
    survivors = []
    for line in dump.splitlines():
        item, result = json.loads(line)
        if result is None:
            not_run += 1  # pending when the time budget ran out
            continue
        mutation = item["mutations"][0]
        key = f"{module}:{mutation['start_pos'][0]}:{mutation['operator_name']}"
        outcome, worker = result.get("test_outcome"), result.get("worker_outcome")
        if worker == "skipped":
            why = result.get("output")
            if why == ANNOTATION:
                counts["equivalent"] += 1
            elif why == NOT_SAMPLED:
                not_sampled += 1
            else:
                outside += 1  # outside the chosen functions
        elif worker != "normal":
            counts["incompetent"] += 1  # the mutant did not even import or run
        elif outcome == "killed":
            counts["killed"] += 1
        elif equivalent(mutation["operator_name"], result.get("diff", "")):
            counts["equivalent"] += 1
        else:
            counts["survived"] += 1
            survivors.append({"where": key, "diff": result.get("diff", "")[-600:]})
    judged = counts["killed"] + counts["survived"]
    return {
        "module": module + (f" ({', '.join(target.functions)})" if target.functions else ""),
        **counts,
        "outside_functions": outside,
        "not_sampled": not_sampled,
        "not_run": not_run,
        "score": round(counts["killed"] / judged, 3) if judged else None,
        "survivors": survivors,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", help=f"comma-separated targets of: {', '.join(TARGETS)}")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per mutant")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument(
        "--minutes",
        type=float,
        help="stop each target after this many minutes and score the mutants run so far (a"
        " random sample: cosmic-ray runs them in random order)",
    )
    parser.add_argument(
        "--sample",
        type=int,
        help="run only this many mutants per target, drawn at random (seed 0); the score is"
        " then an estimate",
    )
    args = parser.parse_args()
    chosen = args.only.split(",") if args.only else list(TARGETS)
    unknown = [name for name in chosen if name not in TARGETS]
    if unknown:
        parser.error(f"unknown targets {unknown}; choose from {list(TARGETS)}")
    if shutil.which("cosmic-ray") is None:
        parser.error("cosmic-ray is not installed: pip install cosmic-ray")
    rows = []
    with tempfile.TemporaryDirectory(prefix="collabzoo-mutation-") as folder:
        copy = copy_checkout(Path(folder))
        for name in chosen:
            started = time.monotonic()
            row = {
                "target": name,
                **run_target(name, TARGETS[name], copy, args.timeout, args.sample, args.minutes),
            }
            row["seconds"] = round(time.monotonic() - started, 1)
            rows.append(row)
            print(
                f"{name:<18} killed {row['killed']:>4}  survived {row['survived']:>3}  "
                f"equivalent {row['equivalent']:>3}  score {row['score']}  not sampled"
                f" {row['not_sampled']}  not run {row['not_run']}  ({row['seconds']} s)",
                flush=True,
            )
            for survivor in row["survivors"]:
                print(f"    survived: {survivor['where']}\n{survivor['diff']}")
            if args.json:  # after every target, so a long run stopped early keeps its results
                with open(args.json, "w") as f:
                    json.dump({"python": sys.version.split()[0], "results": rows}, f, indent=2)
    killed = sum(r["killed"] for r in rows)
    judged = killed + sum(r["survived"] for r in rows)
    print(f"overall: {killed}/{judged} killed = {killed / max(judged, 1):.1%}")


if __name__ == "__main__":
    main()
