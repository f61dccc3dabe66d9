"""Mutation testing of the modules where a silent bug costs most: does the suite fail when the
code is wrong? cosmic-ray (`pip install cosmic-ray`) mutates one module at a time (operators
flipped, constants changed, branches removed...) and runs that module's tests against each
mutant; a mutant the tests still pass "survived".

It works on a copy of the checkout, never on the working tree, and is too slow for every CI run
(minutes per module); CI runs the fixed sample in tests/test_mutation_sample.py instead.

    python benchmarks/mutation.py [--only advantages,gae] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]

TARGETS: dict[str, tuple[str, list[str]]] = {
    "advantages": (
        "collabzoo/algos/advantages.py",
        ["tests/test_advantages.py", "tests/test_mutants_killed.py", "tests/test_learner_maths.py"],
    ),
    "gae": ("collabzoo/algos/gae.py", ["tests/test_gae.py", "tests/test_learner_maths.py"]),
    "sampling": ("collabzoo/algos/sampling.py", ["tests/test_sampling.py"]),
    "plain data": ("collabzoo/sandbox/plain_data.py", ["tests/test_plain_data.py"]),
    "writing rewards": (
        "collabzoo/rewards/writing.py",
        ["tests/test_writing_rewards.py", "tests/test_mutants_killed.py"],
    ),
    "strbuild rules": ("collabzoo/rewards/strbuild.py", ["tests/test_strbuild_rules.py"]),
    "housebuild rules": ("collabzoo/rewards/housebuild.py", ["tests/test_housebuild_rules.py"]),
}

EQUIVALENT_RULES: list[tuple[str, str, str]] = [
    (
        "ReplaceComparisonOperator_Is_Eq|ReplaceComparisonOperator_IsNot_NotEq",
        r"\b(kind|type\([^)]*\)) (==|!=) (?!None)",
        "`is` and `==` agree on builtin type objects (identity is their equality)",
    ),
    (
        "ReplaceBinaryOperator_BitOr_",
        r"^\s*def .*: list \S+ None",
        "inside an annotation, which `from __future__ import annotations` never evaluates",
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
]
"""Survivors judged equivalent (no input can tell them from the original): operator names (a
regex), a regex on the mutated line, and the reason. Each rule was read by hand against the
survivors it covers; see the README."""


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


def run_target(name: str, module: str, tests: list[str], copy: Path, timeout: float) -> dict:
    existing = [t for t in tests if (copy / t).exists()]
    command = f"{sys.executable} -m pytest -x -q -p no:cacheprovider {' '.join(existing)}"
    config = copy / f"mutation-{name.replace(' ', '-')}.toml"
    session = config.with_suffix(".sqlite")
    config.write_text(
        "[cosmic-ray]\n"
        f'module-path = "{module}"\n'
        f"timeout = {timeout}\n"
        "excluded-modules = []\n"
        f'test-command = "{command}"\n\n'
        '[cosmic-ray.distributor]\nname = "local"\n'
    )
    env = {**os.environ, "PYTHONPATH": str(copy), "PYTHONDONTWRITEBYTECODE": "1"}
    env.setdefault("COLLABZOO_SHARED_DATA", str(REPOSITORY.parent / "shared" / "data"))
    baseline = subprocess.run(command.split(), cwd=copy, env=env, capture_output=True, text=True)
    if baseline.returncode != 0:  # else every mutant would count as killed
        failing = baseline.stdout[-2000:]
        raise SystemExit(f"{name}: the tests fail on the unmutated code:\n{failing}")
    for step in (["init"], ["exec"]):
        subprocess.run(
            ["cosmic-ray", *step, str(config), str(session)], cwd=copy, env=env, check=True
        )
    dump = subprocess.run(
        ["cosmic-ray", "dump", str(session)], cwd=copy, capture_output=True, text=True, check=True
    ).stdout
    counts = {"killed": 0, "survived": 0, "equivalent": 0, "incompetent": 0}
    survivors = []
    for line in dump.splitlines():
        item, result = json.loads(line)
        if result is None:
            continue
        mutation = item["mutations"][0]
        key = f"{module}:{mutation['start_pos'][0]}:{mutation['operator_name']}"
        outcome = result.get("test_outcome")
        if result.get("worker_outcome") != "normal":
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
        "module": module,
        **counts,
        "score": round(counts["killed"] / judged, 3) if judged else None,
        "survivors": survivors,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", help=f"comma-separated targets of: {', '.join(TARGETS)}")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per mutant")
    parser.add_argument("--json", help="also write the results to this file")
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
            row = {"target": name, **run_target(name, *TARGETS[name], copy, args.timeout)}
            row["seconds"] = round(time.monotonic() - started, 1)
            rows.append(row)
            print(
                f"{name:<18} killed {row['killed']:>4}  survived {row['survived']:>3}  "
                f"equivalent {row['equivalent']:>3}  score {row['score']}  ({row['seconds']} s)",
                flush=True,
            )
            for survivor in row["survivors"]:
                print(f"    survived: {survivor['where']}\n{survivor['diff']}")
    killed = sum(r["killed"] for r in rows)
    judged = killed + sum(r["survived"] for r in rows)
    print(f"overall: {killed}/{judged} killed = {killed / max(judged, 1):.1%}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"python": sys.version.split()[0], "results": rows}, f, indent=2)


if __name__ == "__main__":
    main()
