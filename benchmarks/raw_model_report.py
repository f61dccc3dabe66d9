"""What a real model's answers look like to the parsers: one line per results file of a
`collabzoo bench` folder, the share of final turns where each parse-level metric holds.

Writing tasks: both parts have words (`words_1`, `words_2`; in the single protocol the second
part exists only if the answer holds the `[PARAGRAPH_SPLIT]` marker). Code tasks: the aux and
main functions are found (`aux_defined`, `main_defined`), the program compiles (`syntax_ok`),
every test passes (`pass`). Building games: whether anything of the target was built, and the
command lines the parser accepted and rejected, with the commonest reasons (every episode is
replayed through the env, as `collabzoo.bench.rescore` does, and each agent's parsed answer is
read from its info). The single protocol's combined answers also count the roles whose header
was found and the lines outside any role.

    python benchmarks/raw_model_report.py RESULTS_FOLDER [--json [PATH]]

`--json` also writes every file's leaderboard cells (`collabzoo.bench.results.summarize`: the
mean and 95% interval of each column) and the lines above to a results file (alone:
benchmarks/results/raw_model_rows.json), from which `raw_model_table` builds the Performance
page's table of the raw model's rows.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from collabzoo.bench.columns import task_columns
from collabzoo.bench.results import read_results, summarize
from collabzoo.envs import make

sys.path.insert(0, str(Path(__file__).resolve().parent))
from results_table import markdown_table, results_path, write_results

BUILDING = ("strbuild", "housebuild")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_NUMBER = re.compile(r"-?\d+")

CHECKS = {  # label: (the metric it reads, whether the final turn passes)
    "words_1": ("words_1", lambda v: v > 0),
    "words_2": ("words_2", lambda v: v > 0),
    "aux_defined": ("aux_defined", lambda v: v > 0),
    "main_defined": ("main_defined", lambda v: v > 0),
    "syntax_ok": ("syntax_ok", lambda v: v > 0),
    "pass": ("pass", lambda v: v > 0),
    "built (IoU > 0)": ("iou", lambda v: v > 0),
}


def reason_class(reason: str) -> str:
    """A rejection reason with its particulars (quoted text, numbers) blanked, for counting."""
    return _NUMBER.sub("N", _QUOTED.sub("'…'", reason))


def command_lines(document: dict[str, Any]) -> tuple[int, Counter[str]]:
    """(accepted commands, rejected lines by reason class) over every turn of a building game's
    results, replayed through the env its file names."""
    env_record = document["env"]
    env = make(env_record["id"], **env_record["kwargs"])
    accepted, reasons = 0, Counter()
    try:
        for episode in document["episodes"]:
            options = {"task": episode["task"], "split": episode["split"]}
            env.reset(seed=episode["seed"], options=options)
            for turn in episode["turns"]:
                *_, infos = env.step(turn["actions"])
                for info in infos.values():
                    parsed = info["parsed"]
                    accepted += len(parsed["accepted"])
                    reasons.update(reason_class(r["reason"]) for r in parsed["rejected"])
    finally:
        env.close()
    return accepted, reasons


# ----- what the parsers made of each answer: this round's five tasks ----------------------------
def _reasons_bfcl(parsed: dict[str, Any]) -> list[str]:
    found = [reason_class(r["reason"]) for r in parsed["rejected"]]
    return found if parsed["calls"] or found else ["no call in the answer"]


def _reasons_classeval(parsed: dict[str, Any]) -> list[str]:
    found = [f"{reason_class(r['why'])}" for r in parsed["rejected"]]
    found += ["a teammate's method written"] * len(parsed["not_yours"])
    found += ["a helper def (cuts the method above it)"] * len(parsed["other_defs"])
    if parsed.get("format_error"):
        found.append(reason_class(parsed["format_error"]))
    if not parsed["written"]:
        found.append("no block for any method to write")
    elif not parsed["accepted"] and not parsed["rejected"]:
        found.append("only the teammate's methods")
    return found


def _reasons_travelplanner(parsed: dict[str, Any]) -> list[str]:
    found = [reason_class(r["reason"]) for r in parsed["rejected"]]
    found += [f"strict check: {e}" for e in parsed["errors"] if not found]
    found += ["slot not owned"] * len(parsed["not_owned"])
    return found


def _reasons_bridgebuild(parsed: dict[str, Any]) -> list[str]:
    if parsed["found"] == "nothing":
        return ["no JSON object in the answer"]
    if parsed["found"] == "other object":
        return ["a JSON object without the action's keys"]
    found = [reason_class(r["reason"]) for r in parsed["rejected"]]
    found += [f"probe: {reason_class(r['reason'])}" for r in parsed["rejected_probes"]]
    for key in ("path_problem", "message_problem"):
        if parsed[key]:
            found.append(reason_class(parsed[key]))
    return found


def _reasons_resourcegathering(parsed: dict[str, Any]) -> list[str]:
    if not parsed["read"]:
        return [reason_class(parsed["problem"])]
    found = [f"fact: {reason_class(r['reason'])}" for r in parsed["dropped_facts"]]
    found += [reason_class(n) for n in parsed["notes"]]
    if not parsed["path_valid"]:
        found.append("path not valid")
    return found


READERS = {
    "bfcl": _reasons_bfcl,
    "bfclmultiturn": _reasons_bfcl,
    "classeval": _reasons_classeval,
    "travelplanner": _reasons_travelplanner,
    "bridgebuild": _reasons_bridgebuild,
    "resourcegathering": _reasons_resourcegathering,
}
"""Per family: one agent's `infos[agent]["parsed"]` -> the reasons its answer was (partly) not
read, each with its particulars blanked; [] when everything in it was read."""


def _read_something(name: str, parsed: dict[str, Any]) -> bool:
    """Whether anything of the answer reached the game or the scorer."""
    if name in ("bfcl", "bfclmultiturn"):
        return bool(parsed["calls"])
    if name == "classeval":
        return bool(parsed["accepted"])
    if name == "travelplanner":
        return bool(parsed["accepted"])
    if name == "bridgebuild":
        return parsed["found"] == "action object"
    return bool(parsed["read"])


def readings(document: dict[str, Any], sandbox: Any = None) -> dict[str, Any]:
    """Every answer of a results file replayed through its env: how many answers, how many had
    anything read, how many ran to the token limit, and the rejection reasons by class."""
    record = document["env"]
    name = record["name"]
    kwargs = dict(record["kwargs"])
    if sandbox is not None and name == "classeval":
        kwargs["sandbox"] = sandbox
    env = make(record["id"], **kwargs)
    answers = read = 0
    reasons: Counter[str] = Counter()
    try:
        for episode in document["episodes"]:
            options = {"task": episode["task"], "split": episode["split"]}
            env.reset(seed=episode["seed"], options=options)
            for turn in episode["turns"]:
                *_, infos = env.step(turn["actions"])
                for agent in turn["actions"]:
                    parsed = infos[agent]["parsed"]
                    answers += 1
                    read += _read_something(name, parsed)
                    reasons.update(READERS[name](parsed))
    finally:
        env.close()
    length = sum(
        g["finish"] == "length"
        for e in document["episodes"]
        for t in e["turns"]
        for g in t["generations"]
    )
    generations = sum(len(t["generations"]) for e in document["episodes"] for t in e["turns"])
    return {
        "answers": answers,
        "read": read,
        "generations": generations,
        "cut_at_limit": length,
        "reasons": dict(reasons.most_common()),
    }


def report(folder: Path) -> list[str]:
    lines = []
    for path in sorted(folder.glob("*.json")):
        document = read_results(path)
        episodes = document["episodes"]
        if not episodes:
            continue
        finals = [e["final_metrics"] for e in episodes]
        shown = [
            f"{label} {sum(check(m.get(key, 0)) for m in finals)}/{len(finals)}"
            for label, (key, check) in CHECKS.items()
            if any(key in m for m in finals)
        ]
        combined = [
            g
            for e in episodes
            for t in e["turns"]
            for g in t["generations"]
            if g.get("stage") == "combined"
        ]
        if combined:
            headers = sum(len(g.get("headers_found", [])) > 0 for g in combined)
            outside = sum(len(g.get("rejected_lines", [])) for g in combined)
            shown.append(f"headers found {headers}/{len(combined)}, lines outside roles {outside}")
        if document["env"].get("name") in BUILDING:
            accepted, reasons = command_lines(document)
            top = "; ".join(f"{n}x {reason}" for reason, n in reasons.most_common(3))
            shown.append(
                f"commands accepted {accepted}, lines rejected {sum(reasons.values())}"
                + (f" (commonest: {top})" if top else "")
            )
        ended = sum(
            g["finish"] == "length" for e in episodes for t in e["turns"] for g in t["generations"]
        )
        answers = sum(len(t["generations"]) for e in episodes for t in e["turns"])
        shown.append(f"cut at the token limit {ended}/{answers}")
        name = " ".join(path.name.split("__")[:2])  # env and protocol
        lines.append(f"{name}: " + "; ".join(shown))
    return lines


def rows(folder: Path, with_readings: bool = False) -> list[dict[str, Any]]:
    """Each results file's env, protocol, data and leaderboard cells; with `with_readings`, also
    its sampling and what the parsers made of its answers (`readings`)."""
    found = []
    for path in sorted(folder.glob("*.json")):
        document = read_results(path)
        if not document["episodes"]:
            continue
        row = {
            "env": document["env"]["name"],
            "protocol": document["protocol"]["name"],
            "data": document["env"].get("data"),
            "summary": summarize(document),
        }
        if with_readings:
            row["sampling"] = document["sampling"]
            row["split"] = document["split"]
            row["readings"] = readings(document)
        found.append(row)
    return found


# ----- the Performance page's table --------------------------------------------------------------
PUBLISHED = {  # the poster's rows for its own models (docs/performance.md names them)
    ("tldr", "single"): "Score 30.3",
    ("tldr", "parallel"): "Score 22.9",
    ("arxiv", "single"): "Score 44.6",
    ("arxiv", "parallel"): "Score 49.0",
    ("coophumaneval", "single"): "Pass 56.3",
    ("coophumaneval", "parallel"): "Pass 50.0",
    ("strbuild", "single"): "Adj 0.9, IoU 36.6",
    ("strbuild", "parallel"): "Adj 15.7, IoU 5.9",
    ("housebuild", "single"): "HP 99.6, IoU 43.2",
    ("housebuild", "parallel"): "HP 21.8, IoU 46.1",
}
"""Published figures by (env, protocol): the raw model's under `single`, the parallel team's."""


def half_width(cell: dict[str, Any]) -> float | None:
    low, high = cell["ci95"]
    return None if low is None or high is None else (high - low) / 2


def estimate(cell: dict[str, Any], digits: int, always: bool) -> str:
    """`mean ± half-width`; a zero-width interval shown only where `always`."""
    width = half_width(cell)
    text = f"{cell['mean']:.{digits}f}"
    if width is not None and (always or width > 0):
        text += f" ± {width:.{digits}f}"
    return text


def score(row: dict[str, Any]) -> str:
    """The task's columns; one defined in no episode (StrBuild's Adj of an empty wall) says how
    many episodes defined it. A column about a subset of episodes (a BFCL category) shows only
    where the run has such episodes, with how many; a column the results file predates (its
    summary has no such cell, and the file keeps no episodes to recompute it from) reads "–
    (not in this file)", never a value. A pooled column (`Column.pooled_over`, a micro rate)
    whose stored cell predates pooling (no `pooled_over` in it) is shown only over one episode,
    where the mean of the episodes' rates is the pooled rate; over more it reads "– (not pooled
    in this file)"."""
    parts = []
    episodes = row["summary"]["episodes"]
    columns = task_columns(row["env"]).columns
    unrecorded = [c.name for c in columns if c.subset and c.name not in row["summary"]]
    for column in columns:
        cell = row["summary"].get(column.name)
        if cell is None:
            if not column.subset:
                parts.append(f"{column.name} – (not in this file)")
            elif column.name == unrecorded[0]:  # the subsets' columns, named once
                parts.append(f"{' / '.join(unrecorded)} – (not in this file)")
            continue
        if column.subset and not cell["n"]:
            continue
        if column.pooled_over is not None and "pooled_over" not in cell and cell["n"] > 1:
            parts.append(f"{column.name} – (not pooled in this file)")
            continue
        if column.subset and cell["n"] != episodes:
            parts.append(
                f"{column.name} {estimate(cell, 1, always=False)} ({cell['n']} of {episodes})"
            )
        elif cell["mean"] is None or (isinstance(cell["mean"], float) and math.isnan(cell["mean"])):
            parts.append(f"{column.name} – ({cell['n']} of {episodes} defined)")
        else:
            parts.append(f"{column.name} {estimate(cell, 1, always=False)}")
    return ", ".join(parts)


def task_name(row: dict[str, Any]) -> str:
    name = task_columns(row["env"]).title
    return f"{name} (embedded sample)" if row.get("data") == "embedded sample" else name


def raw_model_table(results: dict[str, Any]) -> str:
    cells = []
    for row in results["rows"]:
        published = PUBLISHED.get((row["env"], row["protocol"]), "")
        summary = row["summary"]
        cells.append(
            [
                task_name(row),
                row["protocol"],
                str(summary["episodes"]),
                estimate(summary["Time"], 1, always=True),
                estimate(summary["Cost"], 0, always=True),
                score(row),
                published if row["protocol"] == "single" else "",
                published if row["protocol"] == "parallel" else "",
            ]
        )
    header = [
        "Task",
        "Protocol",
        "Episodes",
        "Time (s)",
        "Cost (tokens)",
        "Score (%)",
        "Published raw model (single)",
        "Published parallel",
    ]
    return markdown_table(header, cells, "llrrrlll")


def sampling_text(sampling: dict[str, Any]) -> str:
    return (
        f"T {sampling['temperature']:g}, top-p {sampling['top_p']:g}, top-k {sampling['top_k']}, "
        f"{sampling['max_new_tokens']} new"
    )


def round_table(results: dict[str, Any]) -> str:
    """The raw model's rows on the five tasks, each at its reference's sampling."""
    cells = []
    for row in results["rows"]:
        summary = row["summary"]
        cells.append(
            [
                task_name(row),
                row["protocol"],
                f"{summary['episodes']} ({row['split']})",
                sampling_text(row["sampling"]),
                estimate(summary["Time"], 1, always=True),
                estimate(summary["Cost"], 0, always=True),
                score(row),
            ]
        )
    header = ["Task", "Protocol", "Episodes", "Sampling", "Time (s)", "Cost (tokens)", "Score (%)"]
    return markdown_table(header, cells, "llllrrl")


def clipped(text: str, limit: int = 110) -> str:
    """A reason as a table cell: at most `limit` characters, Markdown's pipes escaped."""
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return text.replace("|", "\\|")


def rejection_table(results: dict[str, Any], shown: int = 4) -> str:
    """Per results file: the answers, those the parser read something from, those cut at the
    token limit, and the commonest reasons a part of an answer was not read."""
    cells = []
    for row in results["rows"]:
        seen = row["readings"]
        top = list(seen["reasons"].items())[:shown]
        reasons = "; ".join(f"{n}× {clipped(reason)}" for reason, n in top)
        more = len(seen["reasons"]) - shown
        cells.append(
            [
                task_name(row),
                row["protocol"],
                str(seen["answers"]),
                str(seen["read"]),
                f"{seen['cut_at_limit']} of {seen['generations']}",
                (reasons or "none") + (f"; {more} more kinds" if more > 0 else ""),
            ]
        )
    header = [
        "Task",
        "Protocol",
        "Answers",
        "Something read",
        "Cut at the token limit",
        "Commonest reasons a part was not read (count × reason)",
    ]
    return markdown_table(header, cells, "llrrrl")


def headline(results: dict[str, Any]) -> dict[str, Any] | list:
    """The raw model's code pass rates, the one thing a 135M model scores on by itself; none
    (`[]`) for a file without code tasks (its section sits under the one that has them)."""
    passes: dict[str, dict[str, float]] = {}
    for row in results["rows"]:
        if "Pass" in row["summary"]:
            passes.setdefault(task_name(row), {})[row["protocol"]] = row["summary"]["Pass"]["mean"]
    if not passes:
        return []
    shown = ", ".join(
        f"{name} " + " / ".join(f"{rates[p]:.1f}" for p in ("single", "parallel") if p in rates)
        for name, rates in passes.items()
    )
    return {
        "benchmark": "The raw model's rows",
        "figure": f"SmolLM2-135M-Instruct's pass % (single / parallel): {shown}",
        "ratio": None,
        "section": "The raw model's rows: SmolLM2-135M-Instruct on every task",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="a `collabzoo bench --output` folder")
    parser.add_argument(
        "--json",
        nargs="?",
        const=str(results_path("raw_model_rows")),
        help="also write the rows here (alone: benchmarks/results/raw_model_rows.json)",
    )
    parser.add_argument(
        "--readings",
        action="store_true",
        help="also replay every answer through its env and count the rejection reasons",
    )
    args = parser.parse_args(argv)
    lines = report(args.folder)
    for line in lines:
        print(line)
    found = rows(args.folder, with_readings=args.readings)
    for row in found if args.readings else []:
        print(row["env"], row["protocol"], json.dumps(row["readings"], ensure_ascii=False))
    if args.json:
        results = {"rows": found, "report": lines}
        write_results(args.json, {"headline": headline(results), **results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
