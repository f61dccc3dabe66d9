"""Reading an LLM's answer into command lines, as the reference building games do.

An answer is free text. If it holds at least one complete markdown fence, only the first fenced
block is read (a one-word language tag on its first line is dropped); otherwise the whole text
is. Each line is stripped, empty lines are skipped and a leading list marker is removed. Each
game then validates the lines it got; a line it cannot use becomes a `Rejection`, never an error.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

FENCE = "```"
# int() of the coordinates answers hold most, looked up: the same values, faster than int().
SMALL_INTS = {str(i): i for i in range(-9, 100)}
_LANGUAGE_TAG = re.compile(r"[A-Za-z0-9_-]+")
_LIST_MARKER = re.compile(r"^\s*(?:[-*]+|\d+[.)])\s*")


@dataclass(frozen=True, slots=True)
class Rejection:
    """One answer line a game could not use, and why."""

    line: str
    reason: str


@dataclass(slots=True)
class ParsedAnswer:
    """What one agent's answer was read into: the commands kept, in order, and the lines not."""

    accepted: list[tuple] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)

    def report(self) -> dict[str, object]:
        """A JSON-friendly view for `infos`: accepted commands as canonical text, rejections."""
        return {
            "accepted": list(map(_command_text_cached, self.accepted)),
            "rejected": [{"line": r.line, "reason": r.reason} for r in self.rejected],
        }


def command_text(command: tuple) -> str:
    """Canonical text of a parsed command tuple such as ("setblock", 1, 2, 0, "stone")."""
    return "/" + " ".join(map(str, command))


# Every step reports each accepted command as text, and accepted commands come from a small set
# (coordinates inside the build area, blocks of the palette), so their texts are kept.
_command_text_cached = functools.lru_cache(maxsize=8192)(command_text)


def answer_body(text: str) -> str:
    """The part of an answer that holds commands: the first fenced block, else all of it."""
    raw = text.strip()
    if FENCE not in raw:
        return raw
    parts = raw.split(FENCE)
    if len(parts) < 3:
        return raw
    inner = parts[1].strip()
    first, newline, rest = inner.partition("\n")
    if newline and _LANGUAGE_TAG.fullmatch(first.rstrip()):
        inner = rest
    return inner.strip()


def command_lines(text: str) -> list[str]:
    """Non-empty lines of the answer body with list markers (`-`, `*`, `1.`, `1)`) removed."""
    lines = []
    for line in answer_body(text).splitlines():
        line = line.strip()
        if not line:
            continue
        if line[0] in "-*0123456789" or not line[0].isascii():
            line = _LIST_MARKER.sub("", line).strip()
            if not line:
                continue
        lines.append(line)
    return lines


def split_command(line: str) -> list[str]:
    """Whitespace tokens of a command line, the optional leading `/` removed, name lower-cased."""
    if line.startswith("/"):
        line = line[1:]
    tokens = line.split()
    if tokens:
        tokens[0] = tokens[0].lower()
    return tokens


def commands_under_cap(
    text: str, parsed: ParsedAnswer, max_commands: int
) -> Iterator[tuple[str, list[str]]]:
    """(line, tokens) of each command line while fewer than `max_commands` were accepted.

    The cap counts accepted commands only (the caller appends to `parsed.accepted` before the
    next line is read); every line after it, and every empty command, is rejected here. The
    games' parsers inline this loop for speed; it stays as the plain statement they are tested
    against.
    """
    for line in command_lines(text):
        if len(parsed.accepted) >= max_commands:
            parsed.rejected.append(
                Rejection(line, f"over the cap of {max_commands} commands per agent")
            )
            continue
        tokens = split_command(line)
        if not tokens:
            parsed.rejected.append(Rejection(line, "empty command"))
            continue
        yield line, tokens


def block_id(token: str) -> str:
    """A block id with an optional `minecraft:` namespace dropped; otherwise case-sensitive."""
    return token[10:] if token.startswith("minecraft:") else token
