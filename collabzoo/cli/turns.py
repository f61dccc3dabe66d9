"""How `collabzoo play` shows a turn in the terminal and reads a typed answer."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TextIO

from collabzoo.cli.tables import fmt

MAX_REJECTED_SHOWN = 10
TURN_HEADER = "=== Turn"


def newest(observation: str) -> str:
    """The newest part of an observation: the text after its last '=== Turn' line."""
    lines = observation.split("\n")
    last = max((i for i, line in enumerate(lines) if line.startswith(TURN_HEADER)), default=-1)
    return "\n".join(lines[last + 1 :]).strip("\n")


def parsed_summary(parsed: Mapping[str, Any], prefix: str = "") -> str:
    """Short fields of an env's `parsed` info (nested dicts flattened; long text left out)."""
    parts = []
    for key, value in parsed.items():
        if isinstance(value, Mapping):
            parts.append(parsed_summary(value, f"{prefix}{key}."))
        elif isinstance(value, (bool, int, float)) or (
            isinstance(value, str) and len(value) < 40 and "\n" not in value
        ):
            parts.append(f"{prefix}{key} {fmt(value)}")
    return ", ".join(p for p in parts if p) or "-"


def read_answer(stream: TextIO, blank_line_ends: bool = True) -> str | None:
    """Lines until a line 'END' (or an empty line, if `blank_line_ends`) or the end of input;
    None when input had ended."""
    lines: list[str] = []
    while True:
        line = stream.readline()
        if not line:
            return "\n".join(lines) if lines else None
        line = line.rstrip("\r\n")
        if line == "END" or (blank_line_ends and line == ""):
            return "\n".join(lines)
        lines.append(line)


def print_step(
    env: Any, rewards: Mapping[str, float], infos: Mapping[str, Mapping[str, Any]], played: int
) -> None:
    """What a turn earned: the team reward, its components and metrics, each agent's parse."""
    agents = list(infos)
    info = infos[agents[0]]
    reward = rewards[agents[0]]
    print(f"\n##### Turn {played + 1} of {env.horizon} played: team reward {fmt(reward)}")
    components = info.get("reward_components", {})
    if components:
        print(
            "reward components: " + ", ".join(f"{k} {fmt(v, True)}" for k, v in components.items())
        )
    metrics = info.get("metrics", {})
    if metrics:
        print("metrics: " + ", ".join(f"{k} {fmt(v)}" for k, v in metrics.items()))
    for agent in agents:
        parsed = infos[agent].get("parsed", {}) or {}
        if "accepted" not in parsed:  # not a command game: show what the answer was read into
            print(f"{agent}: {parsed_summary(parsed)}")
            continue
        accepted = parsed.get("accepted", [])
        rejected = parsed.get("rejected", [])
        print(f"{agent}: {len(accepted)} line(s) accepted, {len(rejected)} rejected")
        for item in rejected[:MAX_REJECTED_SHOWN]:
            print(f"  {item.get('line', '')!r}: {item.get('reason', '')}")
        if len(rejected) > MAX_REJECTED_SHOWN:
            print(f"  ... and {len(rejected) - MAX_REJECTED_SHOWN} more")
    shown = env.render()
    if shown:
        print(shown)
