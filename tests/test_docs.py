"""The documentation: every example runs, the site builds strictly, every env has its card and
every public name its API entry, and the pages look right in a real browser.

The examples are the fenced `python` and `bash` blocks of the README and of docs/. A page's
runnable blocks run in order in one process (a shared namespace for Python, the same working
directory for both), offline, with the reference data in the working directory under its own
file names. A block with a `title` cannot run offline and says why there; it is parsed: Python
with `ast`, shell with `bash -n`, and every `collabzoo` command in it by the CLI's own parser.
"""

from __future__ import annotations

import ast
import functools
import http.server
import importlib
import importlib.util
import inspect
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

from collabzoo.envs import entries
from tests.conftest import REPOSITORY, _shared_data_dir, require
from tests.optional import require_module

README = REPOSITORY / "README.md"
DOCS = REPOSITORY / "docs"
PAGES = [README, *sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.parts)]
RUNNABLE = ("python", "bash")
DATA_FILES = {
    "CoopHumanEval.json": "coophumaneval/CoopHumanEval.json",
    "HumanEval.jsonl.gz": "humaneval/HumanEval.jsonl.gz",
    "MBPP.json": "mbpp/MBPP.json",
    "houses.json": "housebuild/houses.json",
    "targets.csv": "strbuild/targets.csv",
}
"""The reference data as the examples name it, and where the shared data folder holds it."""
OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "WANDB_MODE": "disabled",
    "MPLBACKEND": "Agg",
    "OMP_NUM_THREADS": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "NO_MKDOCS_2_WARNING": "1",
}


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    language: str
    title: str | None
    code: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPOSITORY)}:{self.line}"

    @property
    def runnable(self) -> bool:
        return self.language in RUNNABLE and self.title is None


_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")


def fenced_blocks(page: Path) -> list[Block]:
    """Every fenced block of a Markdown page, in order, with its language and title."""
    blocks, lines = [], page.read_text().splitlines()
    k = 0
    while k < len(lines):
        opening = _FENCE.match(lines[k])
        if not opening:
            k += 1
            continue
        indent, fence, info = opening.group("indent", "fence", "info")
        body, j = [], k + 1
        while j < len(lines):
            closing = lines[j].strip()
            if closing.startswith(fence[0] * len(fence)) and not closing.strip(fence[0]):
                break
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j])
            j += 1
        words = info.strip().split(maxsplit=1)
        title = re.search(r'title="([^"]*)"', info)
        blocks.append(
            Block(
                page,
                k + 1,
                words[0].lstrip("{.") if words else "",
                title.group(1) if title else None,
                "\n".join(body) + "\n",
            )
        )
        k = j + 1
    return blocks


def all_blocks() -> list[Block]:
    return [block for page in PAGES for block in fenced_blocks(page)]


# ----- every fence says what it holds ---------------------------------------------------------
def test_every_code_block_names_its_language() -> None:
    unnamed = [b.where for b in all_blocks() if not b.language]
    assert not unnamed, f"fences without a language (python, bash, text, json, ...): {unnamed}"


def test_the_readme_is_a_front_page() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, f"the README has {len(lines)} lines: move detail into docs/"
    for target in re.findall(r"\]\(((?:docs/)[^)#]+)", README.read_text()):
        assert (REPOSITORY / target).exists(), f"the README links to {target}, which is missing"


def made_on_its_data(entry):
    """The env as its card makes it: a code env reads its tasks when it is made, so it gets the
    reference data's copy (the hook's own choice of `data`)."""
    env_class = entry.load()
    kwargs, _ = load_hook("env_cards").data_kwargs(entry, env_class)
    return env_class(**kwargs)


def test_the_readmes_env_table_is_the_registry() -> None:
    """Every registered env has a row, with its agents in play order and its horizon."""
    text = README.read_text()
    table = text.split("## Environments", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in table.splitlines():
        cells = [c.strip().strip("`") for c in line.strip("|").split("|")]
        if line.startswith("| `"):
            rows[cells[0]] = ([a.strip().strip("`") for a in cells[1].split(",")], int(cells[2]))
    expected = {}
    for entry in entries():
        env = made_on_its_data(entry)
        expected[entry.short_name] = (list(env.possible_agents), env.horizon)
    assert rows == expected


# ----- the examples run ----------------------------------------------------------------------
def example_workdir(tmp_path: Path) -> Path:
    """A working directory holding the reference data under the examples' file names."""
    shared = _shared_data_dir()
    for name, relative in DATA_FILES.items():
        source = require(shared / relative, f"the reference data file {relative}")
        (tmp_path / name).symlink_to(source)
    return tmp_path


def example_environment() -> dict[str, str]:
    environment = {**os.environ, **OFFLINE, "COLLABZOO_SHARED_DATA": str(_shared_data_dir())}
    environment["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{environment['PATH']}"
    environment["PYTHONPATH"] = str(REPOSITORY)
    return environment


DRIVER = """
import subprocess, sys
namespace = {"__name__": "__main__"}
for where, language, code in BLOCKS:
    print(f"----- {where} ({language})", flush=True)
    if language == "python":
        exec(compile(code, where, "exec"), namespace)
    else:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", code])
        if done.returncode:
            sys.exit(f"{where}: the bash block exited with {done.returncode}")
"""


def pages_with_examples() -> list[Path]:
    return [page for page in PAGES if any(b.runnable for b in fenced_blocks(page))]


@pytest.mark.parametrize(
    "page", pages_with_examples(), ids=lambda p: str(p.relative_to(REPOSITORY))
)
def test_the_examples_of_a_page_run(page: Path, tmp_path: Path) -> None:
    blocks = [b for b in fenced_blocks(page) if b.runnable]
    workdir = example_workdir(tmp_path)
    driver = workdir / "run_examples.py"
    driver.write_text(f"BLOCKS = {[(b.where, b.language, b.code) for b in blocks]!r}\n" + DRIVER)
    done = subprocess.run(
        [sys.executable, str(driver)],
        cwd=workdir,
        env=example_environment(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, (
        f"an example of {page.name} failed:\n{done.stdout[-6000:]}\n{done.stderr[-6000:]}"
    )
    for block in blocks:
        assert f"----- {block.where}" in done.stdout


def collabzoo_commands(code: str) -> list[list[str]]:
    """The argument lists of the `collabzoo` commands in a shell block (also through
    `torchrun ... -m collabzoo.cli`)."""
    joined = re.sub(r"\\\n", " ", code)
    commands = []
    for line in joined.splitlines():
        for part in re.split(r"&&|;|\|\|", line):
            words = shlex.split(part, comments=True)
            if words[:1] == ["collabzoo"]:
                commands.append(words[1:])
            elif "collabzoo.cli" in words and words[words.index("collabzoo.cli") - 1] == "-m":
                commands.append(words[words.index("collabzoo.cli") + 1 :])
    return commands


def test_every_example_at_least_parses() -> None:
    from collabzoo.cli import build_parser

    problems, commands = [], 0
    for block in all_blocks():
        if block.language == "python":
            try:
                ast.parse(block.code)
            except SyntaxError as error:
                problems.append(f"{block.where}: {error}")
        elif block.language == "bash":
            done = subprocess.run(["bash", "-n"], input=block.code, capture_output=True, text=True)
            if done.returncode:
                problems.append(f"{block.where}: bash -n: {done.stderr.strip()}")
            for arguments in collabzoo_commands(block.code):
                commands += 1
                try:
                    build_parser().parse_args(arguments)
                except SystemExit:
                    problems.append(
                        f"{block.where}: collabzoo {' '.join(arguments)} does not parse"
                    )
    assert not problems, "\n".join(problems)
    assert commands >= 10  # the parser check did look at the shell blocks


def test_the_parse_check_would_catch_a_wrong_flag(capsys) -> None:
    from collabzoo.cli import build_parser

    (arguments,) = collabzoo_commands(
        "collabzoo train magrpo --env tinycoop --output runs/x --no-such-flag 1\n"
    )
    with pytest.raises(SystemExit):
        build_parser().parse_args(arguments)
    assert "unrecognized arguments: --no-such-flag" in capsys.readouterr().err


def test_the_readme_quickstart_prints_what_the_readme_shows(tmp_path: Path) -> None:
    """The set-up command's leaderboard round, as the README gives it (less its pip install,
    which CI has done), prints every row of the README's expected output; only the Time
    column, the wall clock, may differ."""
    text = README.read_text()
    command = next(
        line for line in text.splitlines() if line.startswith("python3 -m pip install . &&")
    )
    run = command.split("&&", 1)[1].strip()
    blocks = fenced_blocks(README)
    expected = next(b for b in blocks if b.language == "text" and "| Method |" in b.code).code
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", run],
        cwd=tmp_path,
        env=example_environment(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    header = next(line for line in expected.splitlines() if line.startswith("| Method |"))
    time_column = [c.strip() for c in header.split("|")].index("Time (s)")

    def cells(line: str) -> list[str]:
        parts = [c.strip() for c in line.split("|")]
        parts[time_column] = "TIME"
        return parts

    printed = [cells(line) for line in done.stdout.splitlines() if line.startswith("| ")]
    rows = [line for line in expected.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) >= 5
    for row in rows:
        assert cells(row) in printed, f"the README shows a row the command does not print:\n{row}"


# ----- the hooks' Markdown -------------------------------------------------------------------
@functools.cache
def load_hook(name: str) -> types.ModuleType:
    """A module of docs/hooks, imported as MkDocs imports a hook: registered under its name
    (its dataclasses look their module up) with its folder on the import path (the hooks'
    shared helpers import from there)."""
    require_module("mkdocs", "docs")
    spec = importlib.util.spec_from_file_location(name, DOCS / "hooks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(DOCS / "hooks"))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(DOCS / "hooks"))
    return module


def rendered(markdown_text: str) -> str:
    """HTML as the site renders Markdown tables (Python-Markdown's tables extension)."""
    markdown = require_module("markdown", "docs")
    return markdown.markdown(markdown_text, extensions=["tables"])


def test_config_tables_show_pipes_as_typed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Python-Markdown shows a backslash inside a code span as typed, so a type written
    `int \\| None` reached the reader with its backslash; outside code a pipe must still be
    escaped, or it would split the cell."""
    require_module("griffe", "docs")
    monkeypatch.chdir(REPOSITORY)  # the hook reads the package from where MkDocs runs
    tables = load_hook("config_tables")
    pages = "".join(page.read_text() for page in (DOCS / "learners").glob("*.md"))
    configs = tables.MARKER.findall(pages)
    assert len(configs) >= 5
    html = "".join(rendered(tables.table(config)) for config in configs)
    assert "\\|" not in html
    assert "<code>int | None</code>" in html
    cells = load_hook("table_cells")
    row = rendered(f"| a | b |\n|---|---|\n| {cells.cell('x | y `p | q`')} | z |")
    assert "<td>x | y <code>p | q</code></td>" in row and "<td>z</td>" in row


def test_card_errors_are_cut_at_a_word_with_an_ellipsis() -> None:
    cards = load_hook("env_cards")
    words = " ".join(f"word{i}" for i in range(200))
    note = cards.episode_section(RuntimeError(words))
    quoted = note.split("RuntimeError: ", 1)[1].rsplit(").", 1)[0]
    assert quoted.endswith("…") and len(quoted) <= cards.ERROR_LIMIT
    shown = quoted.removesuffix("…")
    assert words.startswith(shown) and words[len(shown)] == " "  # cut between two words
    short = cards.splits_section(NoItems(), "")
    assert "(ValueError: no tasks | here). Set" in short.replace("\\|", "|")
    assert "…" not in short


class NoItems:
    """An env whose tasks do not load, for the card's note."""

    def items(self, split: str) -> list[str]:
        raise ValueError("no tasks | here")


def test_the_horizon_reads_as_a_count_of_turns() -> None:
    cards = load_hook("env_cards")
    glance = {
        entry.short_name: cards.glance_table(entry, made_on_its_data(entry)) for entry in entries()
    }
    assert "| Horizon | 4 turns (set with `horizon=`) |" in glance["strbuild"]
    assert "| Horizon | 1 turn (set with `horizon=`) |" in glance["tinycoop"]
    assert all("turn(s)" not in text for text in glance.values())


# ----- the site --------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once in strict mode: any warning (a broken link, an unresolved API
    name, an undocumented setting, a stale picture) fails it."""
    require_module("mkdocs", "docs")
    require(_shared_data_dir(), "the reference data folder")  # the code tasks' cards need it
    output = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(output)],
        cwd=REPOSITORY,
        env=example_environment(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-8000:]}"
    return output


def test_every_registered_env_has_a_complete_card(site: Path) -> None:
    for entry in entries():
        card = site / "envs" / entry.short_name / "index.html"
        assert card.exists(), f"{entry.id} is registered but the site has no card for it"
        html = card.read_text()
        env_class = entry.load()
        for section in ("At a glance", "Arguments", "Reward", "Splits and data", "Example episode"):
            assert f">{section}<" in html, f"{entry.id}'s card lacks its {section} section"
        assert "Not played for this build" not in html, f"{entry.id}: no example episode"
        assert "Not loaded for this build" not in html, f"{entry.id}: its tasks did not load"
        for argument in inspect.signature(env_class).parameters:
            assert f"<code>{argument}</code>" in html, f"{entry.id}: argument {argument} missing"
        agents = made_on_its_data(entry).possible_agents  # some envs set roles per instance
        assert agents
        for agent in agents:
            assert f"{agent}: observation" in html, f"{entry.id}: no observation of {agent}"
        index = (site / "envs" / "index.html").read_text()
        assert f'href="{entry.short_name}/"' in index, f"{entry.id} is not in the catalogue"


def test_offline_data_is_named_as_such_on_its_card(site: Path) -> None:
    """BFCL and TravelPlanner play offline builds of the benchmark's own files here, not the
    reference's hub sets: their cards say so (the env's own description), and BFCL's carries
    its reward's reference quirks as the other cards do."""
    cards = {
        name: (site / "envs" / name / "index.html").read_text()
        for name in ("bfcl", "bfclmultiturn", "travelplanner")
    }
    for name, html in cards.items():
        splits = html.split(">Splits and data<", 1)[1].split("</p>", 1)[0]
        assert "a local copy of" not in splits, f"{name}'s card calls its data the hub's"
        assert "not the reference" in splits, f"{name}'s card does not name its data offline"
    assert "offline split, not OpenMLRL" in cards["bfcl"]
    assert "the first 80% train and the last 20% eval" in cards["bfcl"]
    assert "multi-turn steps base, long_context, miss_func, miss_param" in cards["bfclmultiturn"]
    assert "45 train queries" in cards["travelplanner"]
    assert "offline variant" in cards["travelplanner"]
    for name in ("bfcl", "bfclmultiturn"):
        assert "Reference quirks kept" in cards[name] and "lower-cased keys" in cards[name]


def test_every_public_name_has_an_api_entry(site: Path) -> None:
    anchors = set()
    for page in (site / "reference").rglob("*.html"):
        anchors |= set(re.findall(r'id="(collabzoo\.[\w.]+)"', page.read_text()))

    def resolve(path: str) -> object:
        module, _, name = path.rpartition(".")
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            return resolve(module).__dict__.get(name) if "." in module else None

    missing = []
    for package in (
        "collabzoo",
        "collabzoo.envs",
        "collabzoo.rewards",
        "collabzoo.sandbox",
        "collabzoo.algos",
        "collabzoo.bench",
    ):
        module = importlib.import_module(package)
        for name in module.__all__:
            if name.startswith("__"):
                continue
            target = getattr(module, name)
            if not any(a.rsplit(".", 1)[1] == name and resolve(a) is target for a in anchors):
                missing.append(f"{package}.{name}")
    assert not missing, f"public names with no API reference entry: {missing}"


def test_the_generated_tables_show_pipes_as_typed(site: Path) -> None:
    """The learners' settings and the env cards, with the site's own Markdown extensions: a
    type such as `int | None` shows its pipe, and no escaping backslash shows anywhere."""
    pages = [*(site / "learners").rglob("*.html"), *(site / "envs").rglob("*.html")]
    for page in pages:
        assert "\\|" not in page.read_text(), f"{page.relative_to(site)} shows a backslash-pipe"
    assert "<code>int | None</code>" in (site / "learners" / "magrpo" / "index.html").read_text()


def test_the_site_names_no_path_of_the_build_machine(site: Path) -> None:
    forbidden = [str(REPOSITORY), str(_shared_data_dir().resolve()), str(Path.home())]
    for page in site.rglob("*.html"):
        html = page.read_text()
        for path in forbidden:
            assert path not in html, f"{page.relative_to(site)} shows the local path {path}"


def test_the_readme_picture_is_what_the_env_plays_now() -> None:
    spec = importlib.util.spec_from_file_location(
        "episode_picture", DOCS / "hooks" / "episode_picture.py"
    )
    picture = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(picture)
    assert picture.PICTURE.read_text() == picture.render_svg(), (
        "docs/assets/episode.svg is stale: run python docs/hooks/episode_picture.py"
    )
    assert "docs/assets/episode.svg" in README.read_text()


# ----- a reader's look, in a real browser ------------------------------------------------------
LOOKED_AT = {
    "index.html": {"images": 1},
    "envs/strbuild/index.html": {"tables": 5},
    "envs/index.html": {
        "tables": 2,
        "whole": ".env-catalogue td:is(:nth-child(2), :nth-child(3)) code",
    },
    "learners/magrpo/index.html": {"math": 5, "images": 1},
    "learners/index.html": {"math": 1, "images": 2},
    "performance/index.html": {"images": 3, "tables": 12},
    "reference/algos/index.html": {},
    "guides/sandbox/index.html": {},
}
"""Pages to render, and what each must show at least (images loaded, formulas, tables), and
which elements must each sit on one line ("whole": a CSS selector)."""


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path:
        return path
    reason = "Chromium is not installed: apt-get install chromium to render the site's pages"
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def served(site: Path):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


def test_the_pages_render_in_a_browser(served: str, tmp_path: Path) -> None:
    executable = chromium()
    sync_api = require_module("playwright.sync_api", "dev")
    image = require_module("PIL.Image", "train")
    problems = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        failed: list[str] = []
        page.on("response", lambda r: failed.append(r.url) if r.status >= 400 else None)
        # The site loads nothing from elsewhere: any failed request (a CDN, a font) counts.
        page.on("requestfailed", lambda r: failed.append(f"{r.url}: {r.failure}"))
        page.on("pageerror", lambda error: failed.append(f"script error: {error}"))
        for path, wants in LOOKED_AT.items():
            failed.clear()
            page.goto(served + path, wait_until="load")
            shown = page.evaluate(
                """(whole) => {
                const article = document.querySelector("article");
                const lines = e => new Set([...e.getClientRects()].map(r => Math.round(r.top)));
                const images = [...article.querySelectorAll("img")];
                const maths = [...article.querySelectorAll("math")];
                return {
                  text: article.innerText.length,
                  images: images.length,
                  broken: images.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src),
                  math: maths.length,
                  flat: maths.filter(m => {
                    const r = m.getBoundingClientRect(); return !(r.width > 0 && r.height > 0);
                  }).length,
                  tex: /\\\\(frac|sum|mathcal|gamma)|\\$\\$/.test(article.innerText),
                  tables: article.querySelectorAll("table").length,
                  whole: whole ? article.querySelectorAll(whole).length : 0,
                  split: whole ? [...article.querySelectorAll(whole)]
                    .filter(e => lines(e).size > 1).map(e => e.textContent) : [],
                };
            }""",
                wants.get("whole", ""),
            )
            shot = tmp_path / (path.replace("/", "_") + ".png")
            page.screenshot(path=str(shot), full_page=False)
            pixels = image.open(shot).convert("L")
            histogram = pixels.histogram()
            inked = 1 - max(histogram) / sum(histogram)  # share of pixels off the background
            if shown["text"] < 300:
                problems.append(f"{path}: almost empty ({shown['text']} characters)")
            if shown["broken"]:
                problems.append(f"{path}: images not loaded: {shown['broken']}")
            if shown["images"] < wants.get("images", 0):
                problems.append(f"{path}: {shown['images']} images, expected {wants['images']}")
            if shown["math"] < wants.get("math", 0) or shown["flat"] or shown["tex"]:
                problems.append(f"{path}: formulas not rendered: {shown}")
            if shown["tables"] < wants.get("tables", 0):
                problems.append(f"{path}: {shown['tables']} tables, expected {wants['tables']}")
            if "whole" in wants and not shown["whole"]:
                problems.append(f"{path}: nothing matches {wants['whole']}")
            if shown["split"]:
                problems.append(f"{path}: broken over lines: {shown['split']}")
            if inked < 0.02:
                problems.append(f"{path}: the screenshot is blank ({inked:.3f} inked)")
            if failed:
                problems.append(f"{path}: failed requests or script errors: {failed}")
        svg = page.goto(served + "assets/episode.svg")
        assert svg is not None and svg.ok
        browser.close()
    assert not problems, "\n".join(problems)


def test_the_examples_are_counted() -> None:
    """The site promises that every example runs or parses: a change that hid the blocks from
    the parser (a new fence style, say) would make the other tests pass vacuously."""
    blocks = all_blocks()
    runnable = [b for b in blocks if b.runnable]
    assert len(runnable) >= 25 and len(blocks) >= 45, (len(runnable), len(blocks))
    assert {b.page for b in runnable} >= {README, DOCS / "index.md", DOCS / "envs" / "api.md"}
