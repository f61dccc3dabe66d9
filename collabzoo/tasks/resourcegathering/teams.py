"""ResourceGathering's scripted teams: text policies that read only their observation.

The oracle reads the newest prompt (any memory mode), tells its partner every resource of the
partner's kind in view, and walks to where its known resources (in view or reported) let it
extract the most of what the team still needs; with nothing known it heads for the middle of
the map. The naive team stays put, sends nothing and extracts the nearest resource cells it
sees, whatever they hold.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass, field

RESOURCES = ("wood", "stone", "iron")
TOOLS = {"A": (0,), "B": (1, 2)}
_HEADER = "# ResourceGathering: turn "
_CELL_LINE = re.compile(r"^\s+\((\d+),(\d+)\): (.+)$")
_AMOUNT = re.compile(r"(wood|stone|iron) (\d+)")
_FACT = re.compile(r"(wood|stone|iron) (\d+) at \((\d+),(\d+)\)")


@dataclass
class View:
    """What a prompt says, as the scripted teams need it."""

    letter: str
    position: tuple[int, int]
    width: int
    height: int
    needed: tuple[int, int, int]
    view: int
    reach: int
    limit: int
    moves: int
    seen: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    told: dict[tuple[int, int], list[int]] = field(default_factory=dict)


def _number(pattern: str, text: str, default: int) -> int:
    found = re.search(pattern, text)
    return int(found.group(1)) if found else default


def read_prompt(observation: str) -> View:
    """The newest ResourceGathering prompt of an observation, read."""
    start = observation.rfind(_HEADER)
    if start < 0:
        raise ValueError("no ResourceGathering prompt ('# ResourceGathering: turn') in view")
    text = observation[start:]
    letter = re.search(r"You are worker ([AB])", text).group(1)  # type: ignore[union-attr]
    x, z = re.search(r"Your position: \((\d+),(\d+)\)", text).groups()  # type: ignore[union-attr]
    size = re.search(r"Map: (\d+) x (\d+) cells", text)
    needed = re.search(r"Still needed: wood (\d+), stone (\d+), iron (\d+)", text)
    found = View(
        letter=letter,
        position=(int(x), int(z)),
        width=int(size.group(1)),  # type: ignore[union-attr]
        height=int(size.group(2)),  # type: ignore[union-attr]
        needed=tuple(int(n) for n in needed.groups()),  # type: ignore[union-attr,arg-type]
        view=_number(r"every cell within (\d+) steps", text, 2),
        reach=_number(r"Manhattan distance <= (\d+)", text, 2),
        limit=_number(r"target cells \[x, z\]; the first (\d+) count", text, 2),
        moves=_number(r"At most (\d+) moves count", text, 4),
    )
    section = text.split("Resource cells in view:\n", 1)[1].split("\nIn reach", 1)[0]
    for line in section.splitlines():
        match = _CELL_LINE.match(line)
        if match:
            counts = [0, 0, 0]
            for name, n in _AMOUNT.findall(match.group(3)):
                counts[RESOURCES.index(name)] = int(n)
            found.seen[(int(match.group(1)), int(match.group(2)))] = counts
    inbox = text.split("Messages from your teammate, all so far:\n", 1)[1].split("\n\n", 1)[0]
    for name, n, fx, fz in _FACT.findall(inbox):
        found.told.setdefault((int(fx), int(fz)), [0, 0, 0])[RESOURCES.index(name)] = int(n)
    return found


def _answer(comm: dict, cmds: list, path: list) -> str:
    return json.dumps({"comm": comm, "probe": [], "cmds": cmds, "path": path})


def _walk(start: tuple[int, int], goal: tuple[int, int], moves: int) -> list[list[int]]:
    """The cells of a straight 8-connected walk from `start` toward `goal`, `moves` at most."""
    path = [list(start)]
    x, z = start
    for _ in range(moves):
        if (x, z) == goal:
            break
        x += (goal[0] > x) - (goal[0] < x)
        z += (goal[1] > z) - (goal[1] < z)
        path.append([x, z])
    return path


def _manhattan(a: tuple[int, int], b: tuple[int, int]) -> int:
    return abs(a[0] - b[0]) + abs(a[1] - b[1])


def resourcegathering_oracle(observation: str) -> str:
    """Report the partner's resources in view; go where the most needed resources can be taken."""
    view = read_prompt(observation)
    mine = TOOLS[view.letter]
    theirs = TOOLS["B" if view.letter == "A" else "A"]
    facts = [
        {"x": x, "z": z, "type": RESOURCES[k], "count": counts[k]}
        for (x, z), counts in sorted(view.seen.items(), key=lambda c: (c[0][1], c[0][0]))
        for k in theirs
        if counts[k] > 0
    ]
    comm = {"resource_facts": facts} if facts else {}
    here = view.position
    wanted = [k for k in mine if view.needed[k] > 0]
    # What is known of my resources: what I see, else what I was told. A told cell near enough
    # to be in view but not listed as seen holds nothing any more.
    known = {
        cell: counts
        for cell, counts in view.told.items()
        if max(abs(cell[0] - here[0]), abs(cell[1] - here[1])) > view.view
    }
    known.update(view.seen)
    targets = {c: v for c, v in known.items() if any(v[k] > 0 for k in wanted)}
    if not wanted:
        return _answer(comm, [], [list(here)])

    def value(cells: tuple[tuple[int, int], ...]) -> int:
        return sum(min(view.needed[k], sum(targets[c][k] for c in cells)) for k in wanted)

    best: tuple[int, int, tuple[int, int], tuple[tuple[int, int], ...]] | None = None
    for x in range(max(0, here[0] - view.moves), min(view.width, here[0] + view.moves + 1)):
        for z in range(max(0, here[1] - view.moves), min(view.height, here[1] + view.moves + 1)):
            near = [c for c in targets if _manhattan((x, z), c) <= view.reach]
            size = min(view.limit, len(near))
            for cells in itertools.combinations(sorted(near), size) if size else ():
                steps = max(abs(x - here[0]), abs(z - here[1]))
                key = (value(cells), -steps, (x, z), cells)
                if best is None or key[:2] > best[:2]:
                    best = key
    if best is not None and best[0] > 0:
        _, _, stand, cells = best
        return _answer(comm, [list(c) for c in cells], _walk(here, stand, view.moves))
    if targets:
        goal = min(targets, key=lambda c: (_manhattan(here, c), c[1], c[0]))
    else:
        goal = ((view.width - 1) // 2, (view.height - 1) // 2)
    return _answer(comm, [], _walk(here, goal, view.moves))


def resourcegathering_naive(observation: str) -> str:
    """Stay, say nothing, and extract the two nearest resource cells in view, whatever they hold."""
    view = read_prompt(observation)
    here = view.position
    nearest = sorted(view.seen, key=lambda c: (_manhattan(here, c), c[1], c[0]))
    return _answer({}, [list(c) for c in nearest[: view.limit]], [list(here)])
