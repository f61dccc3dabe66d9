"""Text for the Markdown tables and notes the hooks write, as Python-Markdown renders them.

Not a hook itself: `env_cards.py` and `config_tables.py` import it (MkDocs puts this folder on
the import path while it loads a hook). Python-Markdown's tables split a row at every pipe
outside code spans and ignore pipes inside them, and a backslash escapes a pipe only outside
code spans: inside one it is shown as typed. So a pipe is escaped where the table would split
at it, and left bare inside code, where `\\|` would reach the reader as a backslash and a pipe.
"""

from __future__ import annotations

import re

CODE_SPAN = re.compile(r"(?<![`\\])(`+)(?!`)(.+?)(?<!`)\1(?!`)")
"""A code span: a run of backticks, up to the next run of the same length."""
ELLIPSIS = "…"


def cell(text: str) -> str:
    """`text` on one line, with the pipes that would end the table cell escaped."""
    text = text.replace("\n", " ")
    parts, start = [], 0
    for span in CODE_SPAN.finditer(text):
        parts += [text[start : span.start()].replace("|", "\\|"), span.group(0)]
        start = span.end()
    parts.append(text[start:].replace("|", "\\|"))
    return "".join(parts)


def code_cell(text: str) -> str:
    """`text` as one code span in a table cell, shown exactly as it is (pipes included)."""
    text = text.replace("\n", " ")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def shorten(text: str, limit: int) -> str:
    """`text` if it has at most `limit` characters, else its start cut at the last space that
    fits, marked with an ellipsis: a cut word reads like a typo. A word longer than half the
    limit is cut where the limit falls, so that a long path or URL still shows its start."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    room = limit - len(ELLIPSIS)
    cut = text.rfind(" ", 0, room + 1)
    if cut < room // 2:
        cut = room
    return text[:cut].rstrip(" ,;:") + ELLIPSIS
