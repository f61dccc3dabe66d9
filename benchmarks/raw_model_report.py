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

    python benchmarks/raw_model_report.py RESULTS_FOLDER
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from collabzoo.bench.results import read_results
from collabzoo.envs import make

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


if __name__ == "__main__":
    for line in report(Path(sys.argv[1])):
        print(line)
