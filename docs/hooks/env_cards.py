"""MkDocs hook: an env card per registered environment, and the catalogue, at every build.

Everything on a card is read from the code when the site is built: the registry entry, the
env class (agents, spaces, horizon, constructor arguments from its signature and docstring), the
scoring module the env imports (its rules and constants), the published rows of the bench, and
an example episode played on the spot by the package's scripted team. A newly registered env
therefore gets a card with no edit here, and a card cannot describe rules the code no longer has.

The code tasks' data comes from COLLABZOO_SHARED_DATA (or `shared/data` beside the checkout,
as for the tests), else from the Hugging Face hub; without either, their cards say so in place
of the example episode. Under CI (CI=true) or with COLLABZOO_DOCS_REQUIRE_DATA=1 the local data
is required instead: a card without its data, or whose tasks or episode fail, fails the build.
Their example programs are the dataset's own reference solutions or a trivial placeholder, so
they run on the process sandbox and the build needs no Docker.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import re
import textwrap
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from table_cells import cell, code_cell, shorten

from collabzoo.bench.published import SOURCE, models, published
from collabzoo.bench.teams import NoScriptedTeam, scripted_policy
from collabzoo.envs import entries, task_spec
from collabzoo.envs.family import load
from collabzoo.envs.records import SPLITS
from collabzoo.envs.registry import EnvEntry
from collabzoo.tasks.code.envs import CodeEnv

log = logging.getLogger("mkdocs.hooks.env_cards")

REPOSITORY = Path(__file__).resolve().parents[2]
CARDS_DIR = "envs"
CATALOGUE_MARKER = "<!-- env-catalogue -->"
EXAMPLE_TEAMS = ("oracle", "heuristic")
"""The scripted teams tried for the example episode, best first."""
EXAMPLE = {"seed": 0, "split": "eval", "task": 0}
ERROR_LIMIT = 300
"""Characters of an error a card quotes where its tasks or its example episode failed."""
PICTURE_CLASS = "episode-state"
"""The class of a task's state drawing on its card, for its size in extra.css."""
CATALOGUE_CLASS = "env-catalogue"
"""The class of the block around the catalogue, for its column styles in extra.css."""
REQUIRE_DATA = "COLLABZOO_DOCS_REQUIRE_DATA"
"""Set to 1 to fail the build on a card without its data, as CI=true does."""


# ----- where a card's data comes from ---------------------------------------------------------
def shared_data_dir() -> Path:
    """The reference data folder the tests use: COLLABZOO_SHARED_DATA, else `shared/data` beside
    the checkout."""
    configured = os.environ.get("COLLABZOO_SHARED_DATA")
    return Path(configured) if configured else REPOSITORY.parent / "shared" / "data"


def data_required() -> bool:
    """Whether a card must be built on its reference data: a notice in place of the tasks would
    otherwise pass a strict build unseen and be published."""
    return os.environ.get("CI") == "true" or os.environ.get(REQUIRE_DATA) == "1"


def data_file(entry: EnvEntry, env_class: type) -> str:
    """Where in the reference data folder the card's tasks are: the env's `local_data` (a file or
    folder, for envs that share one), else `<short name>/<local_file>`; "" for tasks that ship."""
    explicit = getattr(env_class, "local_data", "")
    if explicit:
        return explicit
    local_file = getattr(env_class, "local_file", "")
    return f"{entry.short_name}/{local_file}" if local_file else ""


def incomplete_card(entry: EnvEntry, what: str) -> PluginError:
    """The build's error for a card that would otherwise show a notice in place of its data."""
    return PluginError(
        f"the {entry.name} card ({card_path(entry)}): {what}. Under CI=true or {REQUIRE_DATA}=1 "
        "every card is built whole, on the reference data: set COLLABZOO_SHARED_DATA to the "
        "folder holding it (humaneval/, coophumaneval/, mbpp/, strbuild/, housebuild/), or put "
        "it at shared/data beside the checkout"
    )


def data_kwargs(entry: EnvEntry, env_class: type) -> tuple[dict[str, Any], str]:
    """The `data` argument of every env the hook makes (a code env reads its tasks when made),
    and a sentence on the data it plays."""
    relative = data_file(entry, env_class)
    if relative:
        path = shared_data_dir() / relative
        if path.exists():
            return {"data": str(path)}, f"a local copy of `{env_class.hub_id}`, the hub dataset"
        if data_required():
            raise incomplete_card(entry, f"its data file {path} does not exist")
        return {}, f"`{env_class.hub_id}` from the Hugging Face hub"
    if getattr(env_class, "sample_file", ""):
        return {"data": "sample"}, "the embedded sample (offline; not the benchmark's texts)"
    return {}, "the tasks that ship with the package"


def env_data_note(env: Any, fallback: str) -> str:
    """The env's own sentence on the rows it plays (`data_description`), where it has one: an
    offline build or a partial copy is not the hub dataset, whatever folder it was read from."""
    try:
        described = getattr(env, "data_description", None)
    except Exception:  # the tasks did not load: the splits section says so
        return fallback
    return described if isinstance(described, str) and described else fallback


def example_kwargs(entry: EnvEntry, env_class: type) -> tuple[dict[str, Any], str]:
    """Constructor arguments for the card's env, and a sentence on the data it plays."""
    kwargs: dict[str, Any] = {"render_mode": "ansi"}
    parameters = inspect.signature(env_class).parameters
    if "sandbox" in parameters:
        from collabzoo.sandbox import get_sandbox

        kwargs["sandbox"] = _process_sandbox(get_sandbox)
    data, note = data_kwargs(entry, env_class)
    return {**kwargs, **data}, note


_sandboxes: dict[str, Any] = {}


def _process_sandbox(get_sandbox: Callable[..., Any]) -> Any:
    """One process-backend pool for every card: the only programs the cards run are reference
    solutions and a placeholder, never a model's."""
    if "process" not in _sandboxes:
        _sandboxes["process"] = get_sandbox("process", size=1)
    return _sandboxes["process"]


# ----- the example episode --------------------------------------------------------------------
@dataclass
class Turn:
    observations: dict[str, str]
    actions: dict[str, str]
    reward: float
    components: dict[str, float]
    metrics: dict[str, float]
    parsed: dict[str, Any]
    render: str | None
    picture: str | None = None
    """The task's own drawing of the state after the turn (`TaskSpec.picture`), an SVG."""


@dataclass
class Episode:
    team: str
    task_id: str
    language: str
    """How the answers are highlighted: "python" for code tasks, else "text"."""
    turns: list[Turn] = field(default_factory=list)
    start_picture: str | None = None
    """The drawing of the state before the first turn."""


def placeholder_code_team(env: Any) -> Callable[[Mapping[str, str]], dict[str, str]]:
    """For code tasks without reference solutions: aux returns its argument and main returns
    aux of its first parameter, which parses and calls aux but solves nothing, so the card
    shows every reward level and the turn-2 feedback."""
    import ast

    def act(observations: Mapping[str, str]) -> dict[str, str]:
        problem = env.item
        tree = ast.parse(problem.prompt)
        function = next(
            node
            for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name == problem.entry_point
        )
        parameters = [a.arg for a in function.args.args] or ["x"]
        main = (
            f"def {problem.entry_point}({', '.join(parameters)}):\n    return aux({parameters[0]})"
        )
        return {"aux": "def aux(x):\n    return x", "main": main}

    return act


def example_team(entry: EnvEntry, env: Any) -> tuple[str, Callable[[Mapping[str, str]], Any]]:
    """(label, team) for the example episode: the best scripted team the package has."""
    for kind in EXAMPLE_TEAMS:
        try:
            policy = scripted_policy(kind, entry.short_name, env)
        except NoScriptedTeam:
            continue
        return f"the scripted `{kind}` team", lambda obs, p=policy: {
            a: p(o) for a, o in obs.items()
        }
    if isinstance(env, CodeEnv):
        return (
            "a placeholder team (the dataset publishes no reference solutions, so the package "
            "has no scripted solver for it): `aux` returns its argument, `main` returns "
            "`aux(first parameter)`",
            placeholder_code_team(env),
        )
    raise LookupError(f"no scripted team plays {entry.id}: its card has no example episode")


def play_example(entry: EnvEntry, env: Any) -> Episode:
    label, team = example_team(entry, env)
    observations, infos = env.reset(
        seed=EXAMPLE["seed"], options={"split": EXAMPLE["split"], "task": EXAMPLE["task"]}
    )
    first = env.possible_agents[0]
    language = "python" if isinstance(env, CodeEnv) else "text"
    spec = task_spec(entry.id)
    draw = load(spec.picture) if spec.picture is not None else (lambda _env: None)
    episode = Episode(label, str(infos[first]["task_id"]), language, start_picture=draw(env))
    while env.agents:
        actions = team(observations)
        shown = dict(observations)
        observations, rewards, _, _, infos = env.step(actions)
        info = infos[first]
        episode.turns.append(
            Turn(
                shown,
                dict(actions),
                float(rewards[first]),
                dict(info["reward_components"]),
                dict(info["metrics"]),
                {agent: infos[agent].get("parsed") for agent in actions},
                env.render(),
                draw(env),
            )
        )
    return episode


# ----- reading the code -----------------------------------------------------------------------
def docstring_args(doc: str) -> dict[str, str]:
    """The `Args:` section of a Google-style docstring: name -> description (one line)."""
    lines = doc.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == "Args:"), None)
    if start is None:
        return {}
    base = len(lines[start]) - len(lines[start].lstrip())
    described: dict[str, str] = {}
    name = None
    for line in lines[start + 1 :]:
        depth = len(line) - len(line.lstrip())
        if line.strip() and depth <= base:
            break
        match = re.match(r"\s*(\w+): ?(.*)", line)
        if match and depth == base + 4:
            name = match.group(1)
            described[name] = match.group(2).strip()
        elif name and line.strip():
            described[name] += " " + line.strip()
    return described


def docstring_summary(doc: str) -> str:
    """A docstring without its `Args:` section."""
    return re.split(r"\n\s*Args:\s*\n", doc, maxsplit=1)[0].strip()


def scoring_module(env_class: type) -> types.ModuleType | None:
    """The rewards module of its family (`collabzoo.tasks.<family>.rewards...`) that the env's
    own module imports for its scoring."""
    import sys

    module = sys.modules[env_class.__module__]
    family = ".".join(env_class.__module__.split(".")[:3])
    found = {
        value
        for value in vars(module).values()
        if isinstance(value, types.ModuleType)
        and (value.__name__ + ".").startswith(f"{family}.rewards.")
    }
    if not found and f"{family}.rewards" in sys.modules:  # names imported from the rewards
        found = {sys.modules[f"{family}.rewards"]}
    return found.pop() if len(found) == 1 else None


def module_constants(module: types.ModuleType) -> list[tuple[str, str]]:
    """The scoring module's public constants with a plain value, as `repr` shows them."""
    constants = []
    for name, value in vars(module).items():
        if not re.fullmatch(r"[A-Z][A-Z0-9_]*", name):
            continue
        if not isinstance(value, (int, float, str, tuple, frozenset, dict)):
            continue  # paths, patterns and rule objects: their docstrings say what they hold
        shown = repr(value)
        if " at 0x" in shown or len(shown) > 240:
            continue
        constants.append((name, shown))
    return constants


# ----- writing markdown -----------------------------------------------------------------------
def fenced(text: str, language: str = "text", indent: str = "") -> str:
    """`text` in a code fence longer than any backtick run inside it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    body = "\n".join(f"{indent}{line}" if line else "" for line in text.splitlines())
    return f"{indent}{fence}{language}\n{body}\n{indent}{fence}"


def number(value: float) -> str:
    """A value as a card shows it; a penalty of nothing reads 0, not -0."""
    return f"{value + 0.0:.4g}" if isinstance(value, float) else str(value)


def card_title(entry: EnvEntry) -> str:
    return entry.name


def card_path(entry: EnvEntry) -> str:
    return f"{CARDS_DIR}/{entry.short_name}.md"


def build_card(entry: EnvEntry) -> str:
    env_class = entry.load()
    doc = inspect.getdoc(env_class) or ""
    described = docstring_args(doc)
    kwargs, data_note = example_kwargs(entry, env_class)
    try:
        env = env_class(**kwargs)
    except Exception as error:  # a code env reads its tasks when made
        if data_required():
            raise incomplete_card(entry, f"its env could not be made ({error!r})") from error
        notice = not_loaded(error, data_file(entry, env_class))
        return "\n\n".join([*card_head(entry, env_class), notice]) + "\n"
    episode: Episode | Exception
    try:
        episode = play_example(entry, env)
    except Exception as error:  # shown on the card; the tests require an episode on every card
        if data_required():
            raise incomplete_card(entry, f"its example episode failed ({error!r})") from error
        episode = error
    parts = [
        *card_head(entry, env_class),
        fenced(
            f'import collabzoo\n\nenv = collabzoo.make("{entry.short_name}")\n'
            f'# or: pettingzoo.make("parallel", "{entry.id}")',
            "python",
        ),
        "## At a glance",
        glance_table(entry, env),
        "## Arguments",
        arguments_table(entry, env_class, described),
    ]
    module = scoring_module(env_class)
    parts += ["## Reward"]
    if module is None:
        log.warning("%s: no rewards module of its family found for its card", entry.id)
    else:
        parts += [
            f"Scored by `{module.__name__}`. Every step pays the whole team one reward; "
            "`infos[agent]['reward_components']` holds its signed parts (they add up to it) "
            "and `infos[agent]['metrics']` the task's metrics.",
            textwrap.dedent(inspect.getdoc(module) or ""),
            reward_parts(episode),
            "### Constants",
            "| name | value |\n|---|---|\n"
            + "\n".join(f"| `{n}` | {code_cell(v)} |" for n, v in module_constants(module)),
        ]
    required_by = entry if data_required() else None
    data_note = env_data_note(env, data_note)
    splits = splits_section(env, data_note, data_file(entry, env_class), required_by)
    parts += ["## Splits and data", splits]
    parts += ["## Published scores", published_section(entry)]
    parts += ["## Example episode", episode_section(episode)]
    return "\n\n".join(p for p in parts if p) + "\n"


def card_head(entry: EnvEntry, env_class: type) -> list[str]:
    """The card's title, names, description and the class's summary: what needs no env."""
    return [
        f"# {card_title(entry)}",
        f"`{entry.id}` · short name `{entry.short_name}` · "
        f"`{env_class.__module__}.{env_class.__qualname__}`",
        f"**{entry.description}**",
        docstring_summary(inspect.getdoc(env_class) or ""),
    ]


def not_loaded(error: Exception, expected: str) -> str:
    """The notice in place of tasks that did not load, saying how to provide them (`expected`:
    their place in the reference data folder)."""
    holding = f"`{expected}`" if expected else "the reference data"
    return (
        f'!!! warning "Not loaded for this build"\n    The tasks could not be loaded '
        f"here ({type(error).__name__}: {cell(shorten(str(error), ERROR_LIMIT))}). Set "
        f"COLLABZOO_SHARED_DATA to a folder holding {holding}, or build with the "
        "Hugging Face hub in reach."
    )


def glance_table(entry: EnvEntry, env: Any) -> str:
    agents = env.possible_agents
    rows = [
        ("Agents, in play order", ", ".join(f"`{a}`" for a in agents)),
        ("Horizon", horizon_text(env)),
        ("Observation space", f"`{env.observation_space(agents[0])!r}`: the agent's prompt"),
        ("Action space", f"`{env.action_space(agents[0])!r}`: one whole completion per turn"),
        ("State", f"`env.state()`, `{env.state_space!r}`: every agent's observation, labelled"),
        ("Team reward per turn", f"at most {float(env.max_reward)!r}"),
        ("Render modes", ", ".join(f'`"{m}"`' for m in env.metadata["render_modes"])),
        (
            "Single-agent view",
            f'`gymnasium.make("{entry.id.rpartition("-v")[0]}-single-v{entry.version}")`',
        ),
    ]
    return "| property | value |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in rows)


def horizon_text(env: Any) -> str:
    """The horizon as a count of turns, and the argument that sets it where the env has one
    (a bare "(`horizon=`)" read like a value missing from the card)."""
    turns = f"{env.horizon} turn" + ("" if env.horizon == 1 else "s")
    if "horizon" in inspect.signature(type(env)).parameters:
        return f"{turns} (set with `horizon=`)"
    return turns


def arguments_table(entry: EnvEntry, env_class: type, described: Mapping[str, str]) -> str:
    rows = []
    for name, parameter in inspect.signature(env_class).parameters.items():
        meaning = described.get(name)
        if meaning is None:
            log.warning(
                "%s: constructor argument %r is not described in %s's docstring (Args:)",
                entry.id,
                name,
                env_class.__qualname__,
            )
            meaning = ""
        default = "" if parameter.default is inspect.Parameter.empty else repr(parameter.default)
        rows.append(f"| `{name}` | {code_cell(default) if default else ''} | {cell(meaning)} |")
    return "| argument | default | meaning |\n|---|---|---|\n" + "\n".join(rows)


def splits_section(
    env: Any, data_note: str, expected: str = "", required_by: EnvEntry | None = None
) -> str:
    """The splits' sizes and first task ids, or a notice saying how to provide the data that
    did not load (`expected`: its place in the data folder); with `required_by`, the card the
    build requires data for, a failure to load raises instead."""
    rows = []
    for split in SPLITS:
        try:
            items = env.items(split)
        except Exception as error:
            if required_by is not None:
                raise incomplete_card(required_by, f"its tasks did not load ({error!r})") from error
            return not_loaded(error, expected)
        ids = []
        for index in range(min(3, len(items))):
            _, infos = env.reset(options={"split": split, "task": index})
            ids.append(str(infos[env.possible_agents[0]]["task_id"]))
        more = ", ..." if len(items) > len(ids) else ""
        rows.append(f"| `{split}` | {len(items)} | {', '.join(f'`{i}`' for i in ids)}{more} |")
    return (
        f"This card's numbers come from {data_note}.\n\n"
        "| split | tasks | first task ids |\n|---|---|---|\n" + "\n".join(rows)
    )


def published_section(entry: EnvEntry) -> str:
    rows = published().get(entry.short_name)
    if not rows:
        return "No published rows for this task."
    names = list(rows[0].scores)
    units = {c.name: c.unit for c in task_spec(entry.id).columns.columns}
    header = "| method | protocol | Time (s) | Cost (tokens) | " + " | ".join(
        f"{n} {units.get(n, '%')}".rstrip() for n in names
    )
    lines = [header + " |", "|---|---|---:|---:|" + "---:|" * len(names)]
    for row in rows:
        scores = " | ".join(number(row.scores[n]) for n in names)
        lines.append(f"| {row.method} | {row.protocol} | {row.time} | {row.cost:.0f} | {scores} |")
    return (
        f"From the {SOURCE}, on the benchmark data with {models()[entry.short_name]}. "
        "`collabzoo leaderboard` prints them beside local rows.\n\n" + "\n".join(lines)
    )


def reward_parts(episode: Episode | Exception) -> str:
    """The names of the reward's parts and of the metrics, as the example episode reported."""
    if isinstance(episode, Exception):
        return ""
    last = episode.turns[-1]
    return (
        "Reward components (`infos[agent]['reward_components']`): "
        + ", ".join(f"`{name}`" for name in last.components)
        + ". Metrics (`infos[agent]['metrics']`): "
        + ", ".join(f"`{name}`" for name in last.metrics)
        + "."
    )


def episode_section(episode: Episode | Exception) -> str:
    if isinstance(episode, Exception):
        return (
            f'!!! warning "Not played for this build"\n    The example episode could not be '
            f"played here ({type(episode).__name__}: {cell(shorten(str(episode), ERROR_LIMIT))})."
        )
    lines = [
        f"{episode.team.capitalize()}, on task `{episode.task_id}` of split "
        f"`{EXAMPLE['split']}`, `reset(seed={EXAMPLE['seed']})`: each agent's observation "
        "(click to open), its answer, and what the turn paid.",
    ]
    if episode.start_picture:
        lines.append(picture_block(episode.start_picture, "before the first turn"))
    for number_, turn in enumerate(episode.turns, start=1):
        lines.append(f"### Turn {number_}")
        for agent, observation in turn.observations.items():
            lines.append(
                f'??? note "{agent}: observation"\n\n' + fenced(observation, indent="    ")
            )
            answer = turn.actions[agent]
            if number_ > 1 and answer == episode.turns[number_ - 2].actions[agent]:
                lines.append(f"**{agent} answers** as at turn {number_ - 1}.")
            else:
                lines.append(f"**{agent} answers:**\n\n" + fenced(answer, episode.language))
            if turn.parsed.get(agent) is not None:
                parsed = json.dumps(turn.parsed[agent], indent=1, ensure_ascii=False)
                lines.append(
                    f"??? info \"{agent}: how its answer was read (`infos['{agent}']['parsed']`)\""
                    "\n\n" + fenced(parsed, "json", indent="    ")
                )
        lines.append(reward_table(turn))
        lines.append(
            "Metrics: " + ", ".join(f"`{k}` = {number(float(v))}" for k, v in turn.metrics.items())
        )
        if turn.picture:
            lines.append(picture_block(turn.picture, f"after turn {number_}"))
        if turn.render:
            lines.append(
                f'??? abstract "render() after turn {number_}"\n\n'
                + fenced(turn.render, indent="    ")
            )
    return "\n\n".join(lines)


def picture_block(svg: str, when: str) -> str:
    """The task's drawing of its state, inline, with a caption (raw HTML: one line per tag, no
    blank line inside, so Markdown leaves it alone)."""
    body = "\n".join(line for line in svg.strip().splitlines() if line.strip())
    if not body.startswith("<svg"):
        raise PluginError(f"a task's picture must be an SVG document, got {body[:40]!r}")
    return (
        f'<figure class="{PICTURE_CLASS}">\n{body}\n'
        f"<figcaption>The state {when}.</figcaption>\n</figure>"
    )


def reward_table(turn: Turn) -> str:
    """What a turn paid, a row per part: a column per part made a row of unbreakable names
    (up to ten on the code tasks) wider than the page."""
    rows = [f"| **team reward** (the parts' sum) | **{number(turn.reward)}** |"]
    rows += [f"| `{name}` | {number(value)} |" for name, value in turn.components.items()]
    return "| part | paid |\n|---|---:|\n" + "\n".join(rows)


def catalogue() -> str:
    """One row per registered env: the table of envs/index.md. An env made with its defaults
    gives the agents and horizon (some set their roles per instance), on the cards' data (a code
    env reads its tasks when made; without them, outside CI, its row says so). The table sits
    in a block of its own class, so that extra.css can keep its names unbroken (the theme lets
    code break anywhere, so a narrow column split a short name mid-word)."""
    rows = []
    for entry in entries():
        env_class = entry.load()
        link = f"| [{card_title(entry)}]({entry.short_name}.md) | `{entry.short_name}` |"
        try:
            env = env_class(**data_kwargs(entry, env_class)[0])
        except Exception as error:
            if data_required():
                raise incomplete_card(entry, f"its env could not be made ({error!r})") from error
            rows.append(
                f"{link} its tasks did not load for this build | | | {cell(entry.description)} |"
            )
            continue
        rows.append(
            f"{link} {', '.join(f'`{a}`' for a in env.possible_agents)} | {env.horizon} | "
            f"{float(env.max_reward)!r} | {cell(entry.description)} |"
        )
    table = (
        "| env | short name | agents, in play order | H | max reward per turn | "
        "what the team does |\n|---|---|---|---:|---:|---|\n" + "\n".join(rows)
    )
    return f'<div class="{CATALOGUE_CLASS}" markdown>\n\n{table}\n\n</div>'


# ----- the hooks ------------------------------------------------------------------------------
def on_config(config: Any) -> Any:
    """Put a card per registered env into the nav, after the Environments section's pages."""
    for item in config["nav"] or []:
        if isinstance(item, dict) and "Environments" in item:
            item["Environments"] += [{card_title(e): card_path(e)} for e in entries()]
    return config


def on_files(files: Files, config: Any) -> Files:
    for entry in entries():
        files.append(File.generated(config, card_path(entry), content=build_card(entry)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    if CATALOGUE_MARKER in markdown:
        markdown = markdown.replace(CATALOGUE_MARKER, catalogue())
    return markdown
