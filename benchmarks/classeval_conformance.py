"""Build ClassEval's conformance set: generated answer pairs with the reference's own rewards.

`tests/test_classeval.py` replays every case of `tests/data/classeval_conformance.json`
through collabzoo's ClassEval reward and asserts that the reward, its three levels, the test
counts, the diagnostics and the merged program (by hash) equal what the reference's own code
gave the same answers. This script made that file:

1. Cases: for each of the 100 tasks its oracle pair (the benchmark's solution split by the
   reference's rule); then, on seeded draws from the train and eval slices, pairs that probe
   the rules: one agent empty, both empty, overlap, methods from the wrong agent, syntax
   errors, fences and prose, a def cut short by a nested or top-level helper, failing methods,
   answers truncated mid-way, a class header or tabs or CRLF, decorators written by the
   agent, stubs, junk, output at import time, SystemExit, and timed-out tests (these with a
   1 s per-test alarm, the reference's constants patched to match).
2. Reference rewards: `get_reward_function(ParamCountStrategy(2, seed))` of
   OpenMLRL/LLM_Collab_Code_Completion (`rewards/CE_reward.py`, with `utils/`,
   `train/strategies.py`, `external/code_feedback.py`), run inside a container of ClassEval's
   sandbox image (the sandbox's Python and the pinned packages ClassEval imports,
   `harness.SANDBOX_PACKAGES`; no network, a read-only root, an unprivileged user), with this
   machine's autopep8 and pycodestyle mounted beside it. The levels and the diagnostics come
   from the same reference functions the reward calls (its test-run cache makes them the same
   run).

       python benchmarks/classeval_conformance.py --reference CHECKOUT \\
           --output tests/data/classeval_conformance.json

Tasks whose tests depend on the machine rather than on the answer (the clock, unseeded
randomness, a test whose run time is close to its alarm) get only their oracle case, marked
`machine_dependent`: the tests compare its static parts (merge, levels 1 and 3) and name it.
The generated cases also leave out the tasks importing third-party modules (they were made
before the image held those modules; the set is kept so that the cases stay the same).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import autopep8
import pycodestyle

from collabzoo.tasks.classeval.rewards import ClassTask
from collabzoo.tasks.classeval.rewards.harness import SANDBOX_PACKAGES
from collabzoo.tasks.classeval.teams import oracle_answers, solution_methods

sys.path.insert(0, str(Path(__file__).resolve().parent))
from provenance import provenance

REPOSITORY = Path(__file__).resolve().parents[1]
DATA = REPOSITORY.parent / "shared" / "data" / "classeval" / "ClassEval_data.json"
REFERENCE = "OpenMLRL/LLM_Collab_Code_Completion"
REFERENCE_FILES = (
    "rewards/CE_reward.py",
    "utils/data.py",
    "utils/merge.py",
    "utils/parse_completion.py",
    "utils/formatting.py",
    "train/strategies.py",
    "external/code_feedback.py",
)
THIRD_PARTY = (28, 30, 34, 38, 44, 45, 48, 51, 52, 57, 59, 69, 93)
"""Tasks importing third-party modules (pandas, numpy, docx, openpyxl, gensim, bs4, PIL,
netifaces, nltk, PyPDF2, reportlab): only their oracle case is generated."""
CLOCK = (0, 17, 20, 36)
"""Tasks whose tests compare with today's date."""
RANDOM = (58,)
"""A task whose tests use unseeded randomness."""
SLOW = (35,)
"""A task with a test that runs for about 26 s of CPU against its 40 s alarm: whether it passes
depends on the machine's speed and load (every case of it is marked)."""
MACHINE_DEPENDENT = frozenset(CLOCK + RANDOM + SLOW)
"""The oracle cases marked `machine_dependent`."""
LEFT_OUT = frozenset(THIRD_PARTY + CLOCK + RANDOM)
"""Tasks the generated (non-oracle) cases leave out."""
SLICE = range(82)
"""The reference's train and eval slices (rows 82..99 are never played)."""
SHORT_TIMEOUT = 1.0
"""The per-test alarm of the timeout cases (the reference's is 40 s)."""
SEED = 64

SCORER = r"""
import hashlib, json, sys
sys.path.insert(0, "/ref")
from LLM_Collab_Code_Completion.rewards import CE_reward
from LLM_Collab_Code_Completion.external import code_feedback
from LLM_Collab_Code_Completion.train.strategies import ParamCountStrategy
from LLM_Collab_Code_Completion.utils.data import extract_class_name, extract_incomplete_methods
from LLM_Collab_Code_Completion.utils.merge import (
    build_method_map_with_syntax_selection, merge_methods_into_skeleton)
from LLM_Collab_Code_Completion.utils.parse_completion import extract_method_snippets

CE_reward.VERBOSE = False
io = json.load(open(sys.argv[1]))
rows = io["rows"]
strategy = ParamCountStrategy(num_agents=2, seed=0)
reward = CE_reward.get_reward_function(strategy, 2)
default = (CE_reward.TEST_TIMEOUT, CE_reward.SUBPROCESS_TIMEOUT)
out = []
for case in io["cases"]:
    row = rows[case["task"]]
    a0, a1 = case["answers"]
    if case.get("test_timeout"):
        t = float(case["test_timeout"])
        CE_reward.TEST_TIMEOUT = t
        CE_reward.SUBPROCESS_TIMEOUT = t * max(1, CE_reward.MAX_TIMEOUTS) + 5.0
    else:
        CE_reward.TEST_TIMEOUT, CE_reward.SUBPROCESS_TIMEOUT = default
    total = reward([a0], [a1], batch_items=[row])[0]
    sk = row["skeleton"]
    names = extract_incomplete_methods(sk)
    part = strategy.partition(row)
    built = build_method_map_with_syntax_selection([a0, a1], names, part, False)
    merged = merge_methods_into_skeleton(sk, extract_class_name(sk) or "", built)
    run = CE_reward.run_unittests_with_details(merged, row["test"])
    sets = [set(extract_method_snippets(a or "", set(names))) for a in (a0, a1)]
    overlap = sum(1 for m in names if sum(m in s for s in sets) > 1)
    v = len(names)
    failing = [r["id"] for r in run.get("test_results") or [] if r.get("outcome") != "passed"]
    out.append({
        "total": total,
        "level1_syntax": 2.0 * len(built) / v if v else 0.0,
        "level2_tests": (4.0 * int(run.get("passed") or 0) / int(run.get("testsRun") or 0))
        if int(run.get("testsRun") or 0) > 0 else 0.0,
        "level3_overlap_penalty": -overlap / v if v else 0.0,
        "syntax_ok": bool(run.get("syntax_ok")),
        "tests_run": int(run.get("testsRun") or 0),
        "passed": int(run.get("passed") or 0),
        "timeout": bool(run.get("timeout")),
        "accepted": sorted(built),
        "merged_sha256": hashlib.sha256(merged.encode("utf-8", "surrogatepass")).hexdigest(),
        "failing_count": len(failing),
        "diagnostics": code_feedback._format_test_summary(run),
    })
json.dump(out, open(sys.argv[2], "w"))
"""


# ----- the cases ---------------------------------------------------------------------------------
def _join(blocks: list[str]) -> str:
    return "\n\n".join(b for b in blocks if b)


def _break_syntax(code: str, rng: random.Random) -> str:
    lines = code.splitlines()
    kind = rng.choice(("colon", "paren", "indent", "keyword"))
    if kind == "colon":
        lines[0] = lines[0].rstrip().rstrip(":")
    elif kind == "paren" and len(lines) > 1:
        at = rng.randrange(1, len(lines))
        lines[at] = lines[at] + " ((("
    elif kind == "indent" and len(lines) > 1:
        at = rng.randrange(1, len(lines))
        lines[at] = "  " + lines[at].lstrip() if lines[at].strip() else "   x = 1"
    else:
        lines.insert(1, "    return return")
    return "\n".join(lines)


def _failing(code: str, rng: random.Random) -> str:
    head = code.splitlines()[0]
    body = rng.choice(("    return None", "    raise ValueError('wrong')", "    return 12345"))
    return f"{head}\n{body}"


def _nested_helper(code: str) -> str:
    lines = code.splitlines()
    helper = ["    def _helper(value):", "        return value"]
    return "\n".join([lines[0], *helper, *lines[1:]])


def _slow(code: str, seconds: str) -> str:
    head = code.splitlines()[0]
    return f"{head}\n    import time\n    time.sleep({seconds})\n    return None"


def _loop(code: str) -> str:
    head = code.splitlines()[0]
    return f"{head}\n    while True:\n        pass"


def make_cases(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conformance cases (deterministic: a seeded generator)."""
    rng = random.Random(SEED)
    tasks = [ClassTask.from_record(r) for r in rows]
    cases: list[dict[str, Any]] = []

    def add(kind: str, task: ClassTask, a0: str, a1: str, **extra: Any) -> None:
        index = int(task.task_id.split("_")[1])
        cases.append({"kind": kind, "task": index, "answers": [a0, a1]})
        if index in SLOW:  # every case of a task whose slow test may pass its alarm
            extra = {**extra, "machine_dependent": True}
        cases[-1].update(extra)

    for task in tasks:
        a0, a1 = oracle_answers(task)
        index = int(task.task_id.split("_")[1])
        add("oracle", task, a0, a1, machine_dependent=index in MACHINE_DEPENDENT)

    usable = [
        t
        for t in tasks
        if int(t.task_id.split("_")[1]) in SLICE
        and int(t.task_id.split("_")[1]) not in LEFT_OUT
        and t.methods
        and solution_methods(t)
    ]
    both = [t for t in usable if t.assigned(0) and t.assigned(1)]

    def pick(pool: list[ClassTask], k: int) -> list[ClassTask]:
        return [rng.choice(pool) for _ in range(k)]

    def own(task: ClassTask, agent: int) -> list[str]:
        found = solution_methods(task)
        return [found[m] for m in task.assigned(agent) if m in found]

    for task in pick(both, 18):
        add("agent_0_empty", task, "", _join(own(task, 1)))
    for task in pick(both, 14):
        add("agent_1_empty", task, _join(own(task, 0)), "")
    for task in pick(usable, 10):
        add("both_empty", task, "", "")
    for task in pick(both, 16):
        everything = _join(own(task, 0) + own(task, 1))
        add("overlap_all", task, everything, everything)
    for task in pick(both, 10):
        extra = rng.choice(own(task, 1))
        add("overlap_one", task, _join([*own(task, 0), extra]), _join(own(task, 1)))
    for task in pick(both, 14):
        add("swapped", task, _join(own(task, 1)), _join(own(task, 0)))
    for task in pick(usable, 24):
        agent = rng.choice([a for a in (0, 1) if own(task, a)])
        mine = own(task, agent)
        at = rng.randrange(len(mine))
        mine[at] = _break_syntax(mine[at], rng)
        pair = [_join(own(task, 0)), _join(own(task, 1))]
        pair[agent] = _join(mine)
        add("syntax_error", task, *pair)
    fence_styles = (
        "```python\n{}\n```",
        "Here is my implementation:\n\n```python\n{}\n```\nThis should pass the tests.",
        "```\n{}\n```",
        "```python\n{}",
        "```python {}",
        "```python\n{}\n```\n\n```python\ndef extra(self):\n    return 1\n```",
        "Sure! ```python\n{}\n``` Done.",
    )
    for task in pick(usable, 28):
        agent = rng.choice([a for a in (0, 1) if own(task, a)])
        pair = [_join(own(task, 0)), _join(own(task, 1))]
        pair[agent] = rng.choice(fence_styles).format(pair[agent])
        add("fences", task, *pair)
    prose_styles = (
        "Here are the methods.\n\n{}",
        "{}\n\nThese methods implement the class as described.",
        "I will implement the methods now.\n{}\nLet me know if you need anything else.",
    )
    for task in pick(usable, 14):
        agent = rng.choice([a for a in (0, 1) if own(task, a)])
        pair = [_join(own(task, 0)), _join(own(task, 1))]
        pair[agent] = rng.choice(prose_styles).format(pair[agent])
        add("prose", task, *pair)
    for task in pick(usable, 10):
        agent = rng.choice([a for a in (0, 1) if own(task, a)])
        mine = own(task, agent)
        at = rng.randrange(len(mine))
        mine[at] = _nested_helper(mine[at])
        pair = [_join(own(task, 0)), _join(own(task, 1))]
        pair[agent] = _join(mine)
        add("nested_def", task, *pair)
    for task in pick(usable, 10):
        agent = rng.choice([a for a in (0, 1) if own(task, a)])
        helper = "def helper(value):\n    return value"
        mine = own(task, agent)
        mine.insert(rng.randrange(len(mine) + 1), helper)
        pair = [_join(own(task, 0)), _join(own(task, 1))]
        pair[agent] = _join(mine)
        add("helper_def", task, *pair)
    for task in pick(usable, 24):
        agent = rng.choice([a for a in (0, 1) if own(task, a)])
        mine = own(task, agent)
        at = rng.randrange(len(mine))
        mine[at] = _failing(mine[at], rng)
        pair = [_join(own(task, 0)), _join(own(task, 1))]
        pair[agent] = _join(mine)
        add("failing_method", task, *pair)
    for task in pick(usable, 24):
        agent = rng.choice([a for a in (0, 1) if own(task, a)])
        pair = [_join(own(task, 0)), _join(own(task, 1))]
        text = pair[agent]
        pair[agent] = text[: rng.randrange(1, max(2, len(text)))]
        add("truncated", task, *pair)
    for task in pick(usable, 6):
        pair = [_join(own(task, 0)), _join(own(task, 1))]
        agent = rng.choice([a for a in (0, 1) if pair[a]])
        indented = "\n".join("    " + x if x else x for x in pair[agent].splitlines())
        pair[agent] = f"class {task.class_name}:\n{indented}"
        add("class_header", task, *pair)
    for task in pick(usable, 5):
        pair = [_join(own(task, 0)), _join(own(task, 1))]
        agent = rng.choice([a for a in (0, 1) if pair[a]])
        pair[agent] = pair[agent].replace("    ", "\t")
        add("tabs", task, *pair)
    for task in pick(usable, 5):
        pair = [_join(own(task, 0)), _join(own(task, 1))]
        agent = rng.choice([a for a in (0, 1) if pair[a]])
        pair[agent] = pair[agent].replace("\n", "\r\n")
        add("crlf", task, *pair)
    decorated = [t for t in usable if "@staticmethod" in t.skeleton or "@classmethod" in t.skeleton]
    for task in pick(decorated, 8):
        pair = [_join(own(task, 0)), _join(own(task, 1))]
        agent = rng.choice([a for a in (0, 1) if pair[a]])
        pair[agent] = _join([f"@staticmethod\n{b}" for b in own(task, agent)])
        add("agent_decorators", task, *pair)
    for task in pick(usable, 8):
        stubs = []
        for agent in (0, 1):
            heads = [
                next(line for line in code.splitlines() if line.startswith("def "))
                for code in own(task, agent)
            ]
            stubs.append(_join([f"{h}\n    pass" for h in heads]))
        add("stubs", task, *stubs)
    junk_styles = (
        "I cannot help with that.",
        "def",
        "```",
        "```python\n```",
        "def (self):\n    return",
        "\x00\x01 binary \ufffd",
        "def unknown_method(self):\n    return 1",
    )
    for task in pick(usable, 8):
        add("junk", task, rng.choice(junk_styles), rng.choice(junk_styles))
    for task in pick(usable, 3):
        pair = [_join(own(task, 0)), _join(own(task, 1))]
        agent = rng.choice([a for a in (0, 1) if pair[a]])
        pair[agent] = pair[agent] + "\nprint('output at import time')"
        add("import_output", task, *pair)
    for task in pick(usable, 2):
        pair = [_join(own(task, 0)), _join(own(task, 1))]
        agent = rng.choice([a for a in (0, 1) if pair[a]])
        pair[agent] = pair[agent] + "\nraise SystemExit(3)"
        add("import_exit", task, *pair)
    slow = [t for t in usable if t.assigned(1)]
    for task in pick(slow, 2):
        mine = own(task, 1)
        mine[0] = _loop(mine[0])
        add("timeout_loop", task, _join(own(task, 0)), _join(mine), test_timeout=SHORT_TIMEOUT)
    for task in pick(slow, 2):
        mine = [_slow(code, "0.9") for code in own(task, 1)]
        add("timeout_run", task, _join(own(task, 0)), _join(mine), test_timeout=SHORT_TIMEOUT)
    return cases


# ----- scoring with the reference ----------------------------------------------------------------
def classeval_image() -> str:
    """ClassEval's sandbox image (the sandbox's Python and `SANDBOX_PACKAGES`), built if
    missing: the reference runs in it too, so both see the same modules."""
    import docker

    from collabzoo.sandbox.image import ensure_image

    return ensure_image(docker.from_env(), packages=SANDBOX_PACKAGES)


def score_with_reference(
    reference: Path, rows: list[dict[str, Any]], cases: list[dict[str, Any]], image: str
) -> list[dict[str, Any]]:
    """The reference's results for `cases`, computed in a container of `image`."""
    return run_in_image(reference, image, SCORER, {"rows": rows, "cases": cases})


def run_in_image(reference: Path, image: str, script: str, given: dict[str, Any]) -> Any:
    """What `script` writes, run with the reference mounted in a hardened, offline container of
    `image` (ClassEval's sandbox image), with autopep8 and pycodestyle beside it as the reference
    imports them: the script gets the JSON of `given` as its first argument's file and writes
    its JSON answer to its second's."""
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        site = work / "site"
        site.mkdir()
        for module in (autopep8, pycodestyle):
            source = Path(module.__file__)
            (site / source.name).write_text(source.read_text())
        (work / "script.py").write_text(script)
        (work / "in.json").write_text(json.dumps(given))
        out = work / "out"
        out.mkdir()
        out.chmod(0o777)
        for path in (work, site, work / "script.py", work / "in.json"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        command = [
            "docker", "run", "--rm", "--network", "none", "--read-only",
            "--tmpfs", "/tmp:size=256m,mode=1777", "--user", "65534:65534",
            "--memory", "2g", "--pids-limit", "256", "--cap-drop", "ALL",
            "--security-opt", "no-new-privileges",
            "-e", "PYTHONPATH=/site", "-e", "PYTHONDONTWRITEBYTECODE=1",
            "-v", f"{reference.resolve()}:/ref/LLM_Collab_Code_Completion:ro",
            "-v", f"{site}:/site:ro", "-v", f"{work}:/io:ro", "-v", f"{out}:/out",
            image, "python3", "/io/script.py", "/io/in.json", "/out/answer.json",
        ]  # fmt: skip
        subprocess.run(command, check=True)
        return json.loads((out / "answer.json").read_text())


def answers_digest(answers: list[str]) -> str:
    """The hash of a case's two answers, as scored (the file gives an oracle answer by name)."""
    return hashlib.sha256(json.dumps(answers).encode()).hexdigest()


def resolve_answers(case: dict[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    """A case's two answers, an `{"oracle": agent}` entry replaced by that agent's oracle
    answer (the benchmark's solution split by the reference's rule)."""
    oracle = None
    answers = []
    for entry in case["answers"]:
        if isinstance(entry, dict):
            oracle = oracle or oracle_answers(ClassTask.from_record(rows[case["task"]]))
            answers.append(oracle[entry["oracle"]])
        else:
            answers.append(entry)
    return answers


def reference_commit(reference: Path) -> str:
    done = subprocess.run(
        ["git", "-C", str(reference), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    return done.stdout.strip() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", type=Path, required=True, help="a checkout of " + REFERENCE)
    parser.add_argument("--data", type=Path, default=DATA, help="ClassEval_data.json")
    parser.add_argument(
        "--output", type=Path, default=REPOSITORY / "tests" / "data" / "classeval_conformance.json"
    )
    args = parser.parse_args()
    rows = json.loads(args.data.read_text())
    cases = make_cases(rows)
    image = classeval_image()
    results = score_with_reference(args.reference, rows, cases, image)
    oracles = [oracle_answers(ClassTask.from_record(r)) for r in rows]
    for case, result in zip(cases, results, strict=True):
        case["reference"] = result
        case["answers_sha256"] = answers_digest(case["answers"])
        case["answers"] = [
            {"oracle": agent} if text == oracles[case["task"]][agent] else text
            for agent, text in enumerate(case["answers"])
        ]
    python = subprocess.run(
        ["docker", "run", "--rm", image, "python3", "-c", "import sys; print(sys.version)"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    document = {
        "about": (
            "Generated ClassEval answer pairs with the rewards the reference's own code gave "
            "them; made by benchmarks/classeval_conformance.py (its docstring says how). "
            "`task` is the row of the ClassEval data (ClassEval_N)."
        ),
        "reference": {
            "repository": REFERENCE,
            "commit": reference_commit(args.reference),
            "files": list(REFERENCE_FILES),
            "python": python.split()[0] if python else "unknown",
            "autopep8": autopep8.__version__,
            "pycodestyle": pycodestyle.__version__,
            "packages": list(SANDBOX_PACKAGES),
            "data": "FudanSELab/ClassEval data/ClassEval_data.json (eaeac44)",
            "data_sha256": hashlib.sha256(args.data.read_bytes()).hexdigest(),
        },
        "provenance": provenance(),
        "cases": cases,
    }
    lines = ",\n".join(json.dumps(case) for case in cases)
    head = json.dumps({k: v for k, v in document.items() if k != "cases"}, indent=1)
    args.output.write_text(head[:-2] + ',\n "cases": [\n' + lines + "\n ]\n}\n")
    kinds: dict[str, int] = {}
    for case in cases:
        kinds[case["kind"]] = kinds.get(case["kind"], 0) + 1
    print(f"{len(cases)} cases: {kinds}")


if __name__ == "__main__":
    main()
