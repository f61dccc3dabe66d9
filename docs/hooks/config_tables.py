"""MkDocs hook: a learner page's config table, generated from the config dataclass itself.

A page asks for one with `<!-- config-fields: collabzoo.algos.learners.magrpo.MAGRPOConfig -->`. The
fields, their types, defaults and one-line docstrings are read statically with griffe (the
engine mkdocstrings uses), so building the site needs no torch. The table has a section per
class of the config's hierarchy, the learner's own first; a field a subclass re-declares is
shown where its default is set, with the docstring of the class that explains it. A field with
no docstring fails the (strict) build: every setting a user can pass is explained.
"""

from __future__ import annotations

import functools
import logging
import re
from typing import Any

import griffe
from table_cells import cell, code_cell

log = logging.getLogger("mkdocs.hooks.config_tables")

MARKER = re.compile(r"<!-- config-fields: ([\w.]+) -->")


@functools.lru_cache(maxsize=1)
def package() -> Any:
    return griffe.load("collabzoo", search_paths=["."], resolve_aliases=False)


def config_fields(path: str) -> list[tuple[str, list[tuple[str, str, str, str]]]]:
    """[(defining class, [(field, type, default, docstring)])], the config's own class first."""
    cls = package()[path.removeprefix("collabzoo.")]
    lineage = [cls, *cls.mro()]
    # The class where each field's default is set: the most derived one declaring it.
    declared: dict[str, Any] = {}
    for owner in reversed(lineage):
        for name, member in owner.members.items():
            if member.is_attribute and "instance-attribute" in member.labels:
                declared[name] = owner
    docs: dict[str, str] = {}
    for owner in reversed(lineage):  # a re-declaration without a docstring keeps the base's
        for name, member in owner.members.items():
            if name in declared and member.docstring:
                docs[name] = " ".join(member.docstring.value.split())
    sections = []
    for owner in lineage:
        rows = []
        for name in declared:
            if declared[name] is not owner or name.startswith("_"):
                continue
            member = owner.members[name]
            if name not in docs:
                log.warning("%s.%s has no docstring: say what the field does", owner.path, name)
            rows.append((name, str(member.annotation), str(member.value), docs.get(name, "")))
        if rows:
            sections.append((owner.name, rows))
    return sections


def table(path: str) -> str:
    parts = []
    for number, (owner, rows) in enumerate(config_fields(path)):
        title = "Its own fields" if number == 0 else f"From `{owner}`"
        lines = ["| field | type | default | what it does |", "|---|---|---|---|"]
        for name, annotation, default, doc in rows:
            lines.append(
                f"| `{name}` | {code_cell(annotation)} | {code_cell(default)} | {cell(doc)} |"
            )
        parts.append(f"**{title}** ({len(rows)})\n\n" + "\n".join(lines))
    return "\n\n".join(parts)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return MARKER.sub(lambda match: table(match.group(1)), markdown)
