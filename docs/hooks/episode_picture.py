"""The README's picture: one StrBuild turn, played for real, drawn as an SVG.

Both builders' prompts, then two teams on the same task (the scripted oracle and the naive
team): their answers, the wall they built and the reward's parts. Every number and block comes
from the env and its scoring module when this runs:

    python docs/hooks/episode_picture.py      # rewrites docs/assets/episode.svg

As an MkDocs hook it checks at every build that the committed picture is what this draws now,
so a change to the task's prompts or scoring that would make the picture lie fails the build.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import collabzoo
from collabzoo.envs.scripted_teams import scripted_team
from collabzoo.tasks.building.rewards import strbuild as rules

log = logging.getLogger("mkdocs.hooks.episode_picture")

PICTURE = Path(__file__).resolve().parents[1] / "assets" / "episode.svg"
TASK = {"split": "eval", "task": "ICML"}
TEAMS = ("oracle", "naive")
WIDTH = 1000
MONO = "DejaVu Sans Mono, Menlo, Consolas, monospace"
SANS = "DejaVu Sans, Helvetica, Arial, sans-serif"
BLOCK_COLOURS = {
    "oak_planks": "#c89b5c",
    "stone": "#8d8d8d",
    "white_concrete": "#f7f7f7",
    "obsidian": "#35264a",
}
CELL = 13


def play_turn(kind: str) -> dict[str, Any]:
    """One turn of the team `kind` on the task, with what the env and the scorer report."""
    env = collabzoo.make("strbuild")
    observations, _ = env.reset(seed=0, options=TASK)
    answers = scripted_team("strbuild", kind)(observations)
    _, rewards, _, _, infos = env.step(answers)
    info = infos[env.possible_agents[0]]
    outcome = rules.score_strbuild(env.item.target, [answers[a] for a in env.possible_agents])
    if outcome.breakdown.total != rewards[env.possible_agents[0]]:
        raise AssertionError("the picture's own scoring disagrees with the env's reward")
    return {
        "observations": observations,
        "answers": answers,
        "reward": rewards[env.possible_agents[0]],
        "components": info["reward_components"],
        "metrics": info["metrics"],
        "world": outcome.world,
        "target": env.item.target,
        "agents": env.possible_agents,
    }


def text(x: float, y: float, body: str, size: float = 11, **attributes: str) -> str:
    family = attributes.pop("family", MONO)
    extra = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attributes.items())
    return (
        f'<text x="{x:g}" y="{y:g}" font-family="{family}" font-size="{size:g}"{extra}>'
        f"{escape(body)}</text>"
    )


def clip(line: str, width: int) -> str:
    return line if len(line) <= width else line[: width - 1] + "…"


def prompt_excerpt(observation: str) -> list[str]:
    """The prompt's opening, its target picture and its answer format."""
    lines = observation.splitlines()
    keep = [lines[0], lines[1]]
    keep += [line for line in lines if line.startswith("y=")]
    keep += [line for line in lines if line.startswith(("Your blocks", "Answer with"))]
    return keep


def wall(x0: float, y0: float, turn: dict[str, Any]) -> list[str]:
    world, target = turn["world"], turn["target"]
    shapes = []
    for row in range(world.height):
        y = world.height - 1 - row
        for x in range(world.width):
            block = world.blocks[y * world.width + x]
            wanted = target.rows[row][x] == "#"
            left, top = x0 + x * CELL, y0 + row * CELL
            if block == rules.AIR:
                fill, stroke = ("#fde2e2", "#d9534f") if wanted else ("#eef2f6", "#dde3ea")
            else:
                fill, stroke = BLOCK_COLOURS.get(block, "#ff00ff"), "#4a4a4a"
            shapes.append(
                f'<rect x="{left:g}" y="{top:g}" width="{CELL - 1}" height="{CELL - 1}" '
                f'fill="{fill}" stroke="{stroke}" stroke-width="0.6"/>'
            )
            owner = world.owners[y * world.width + x]
            if owner >= 0:
                colour = "#ffffff" if block == "obsidian" else "#222222"
                shapes.append(
                    text(left + 3.2, top + 9.5, str(owner + 1), 8, fill=colour, family=SANS)
                )
    return shapes


def breakdown(x0: float, y0: float, turn: dict[str, Any]) -> list[str]:
    shapes = [text(x0, y0, "reward, part by part", 11, family=SANS, font_weight="bold")]
    scale = 60 / rules.MAX_SCORE
    axis = x0 + 150
    y = y0 + 16
    for name, value in turn["components"].items():
        width = abs(value) * scale
        colour = "#3c9d5d" if value > 0 else "#d9534f"
        left = axis if value >= 0 else axis - width
        shapes.append(text(x0, y + 9, name, 10.5))
        if width:
            shapes.append(
                f'<rect x="{left:g}" y="{y:g}" width="{width:g}" height="11" fill="{colour}"/>'
            )
        shapes.append(text(axis + 66, y + 9, f"{value + 0.0:+.2f}", 10.5))
        y += 17
    shapes.append(
        f'<line x1="{axis:g}" y1="{y0 + 12:g}" x2="{axis:g}" y2="{y - 4:g}" stroke="#555"/>'
    )
    shapes.append(
        text(
            x0,
            y + 12,
            f"team reward {turn['reward']:.2f} of {rules.MAX_SCORE:.1f}",
            11.5,
            family=SANS,
            font_weight="bold",
        )
    )
    metrics = turn["metrics"]
    shapes.append(
        text(x0, y + 28, f"IoU {metrics['iou']:.2f} · adjacency {metrics['adjacency']:.2f}", 10.5)
    )
    return shapes


def render_svg() -> str:
    turns = {kind: play_turn(kind) for kind in TEAMS}
    first = turns[TEAMS[0]]
    agents = first["agents"]
    body = [
        text(
            20,
            30,
            "StrBuild: two builders, one wall, one shared reward",
            18,
            family=SANS,
            font_weight="bold",
        ),
        text(
            20,
            50,
            'collabzoo.make("strbuild") · task "ICML" · turn 1 of 4 · each builder '
            "answers its own prompt with /setblock commands",
            11.5,
            family=SANS,
            fill="#444",
        ),
    ]
    # The two prompts, side by side.
    top = 72
    column = (WIDTH - 60) / 2
    for index, agent in enumerate(agents):
        x = 20 + index * (column + 20)
        lines = prompt_excerpt(first["observations"][agent])
        height = 22 + 13.5 * len(lines)
        body.append(
            f'<rect x="{x:g}" y="{top:g}" width="{column:g}" height="{height:g}" rx="6" '
            'fill="#f4f7fb" stroke="#c5d2e0"/>'
        )
        body.append(
            text(
                x + 10,
                top + 16,
                f"{agent} sees (excerpt)",
                11.5,
                family=SANS,
                font_weight="bold",
                fill="#1f4e79",
            )
        )
        for k, line in enumerate(lines):
            body.append(text(x + 10, top + 33 + 13.5 * k, clip(line, 70), 10))
    top += 22 + 13.5 * len(prompt_excerpt(first["observations"][agents[0]])) + 22
    # One row per team: the answers, the wall, the reward's parts.
    for kind, turn in turns.items():
        body.append(
            f'<rect x="20" y="{top:g}" width="{WIDTH - 40}" height="150" rx="6" fill="#ffffff" '
            'stroke="#d0d7de"/>'
        )
        body.append(
            text(32, top + 20, f"the scripted {kind} team", 12.5, family=SANS, font_weight="bold")
        )
        y = top + 38
        for agent in agents:
            lines = turn["answers"][agent].splitlines()
            body.append(
                text(
                    32, y, f"{agent} answers ({len(lines)} lines):", 10.5, family=SANS, fill="#444"
                )
            )
            for k, line in enumerate(lines[:2]):
                body.append(text(40, y + 14 + 12.5 * k, clip(line, 40), 10))
            body.append(text(40, y + 39, "…", 10))
            y += 55
        body += wall(340, top + 30, turn)
        body.append(
            text(
                340,
                top + 30 + 5 * CELL + 16,
                "digits: which builder placed the block; red: a cell left empty",
                9.5,
                family=SANS,
                fill="#555",
            )
        )
        body += breakdown(715, top + 22, turn)
        top += 166
    legend_x = 20
    for block, colour in BLOCK_COLOURS.items():
        body.append(
            f'<rect x="{legend_x}" y="{top:g}" width="11" height="11" fill="{colour}" '
            'stroke="#4a4a4a" stroke-width="0.6"/>'
        )
        body.append(text(legend_x + 16, top + 10, block, 10.5, family=SANS))
        legend_x += 130
    body.append(
        text(
            legend_x + 10,
            top + 10,
            "(first builder: oak_planks, stone; second: white_concrete, obsidian)",
            10.5,
            family=SANS,
            fill="#555",
        )
    )
    height = top + 24
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:g}" '
        f'viewBox="0 0 {WIDTH} {height:g}">\n'
        f'<rect width="{WIDTH}" height="{height:g}" fill="#ffffff"/>\n'
        + "\n".join(body)
        + "\n</svg>\n"
    )


def on_pre_build(config: Any) -> None:
    if not PICTURE.exists() or PICTURE.read_text() != render_svg():
        log.warning(
            "docs/assets/episode.svg is not what the env plays now: run "
            "python docs/hooks/episode_picture.py and commit the picture"
        )


if __name__ == "__main__":
    PICTURE.write_text(render_svg())
    print(f"wrote {PICTURE.name} ({PICTURE.stat().st_size} bytes)")
