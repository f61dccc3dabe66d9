"""The documentation's layout, as a reader at a narrow window sees it, and the env cards' data.

In a real browser (Chromium, through Playwright) at 800 px: nothing wide is cut off (a code
block or a table wider than its box scrolls inside it), no line of code runs under a block's
copy button, and no table header breaks inside a word, on the site test_docs.py builds.
The cards' hook is called directly, on one card, to show that under CI a card without its data
fails the build instead of publishing a notice.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from collabzoo.envs import entries
from tests.optional import require_module
from tests.test_docs import chromium, load_hook, served, site  # noqa: F401 (fixtures)

NARROW = {"width": 800, "height": 900}
"""A narrow window: the theme's layout without side bars, where the wide blocks overflow."""

CLIPPED = """() => {
  const article = document.querySelector("article");
  article.querySelectorAll("details").forEach(d => { d.open = true; });
  const column = document.querySelector(".md-content").getBoundingClientRect().right + 1;
  const scrolls = e => ["auto", "scroll"].includes(getComputedStyle(e).overflowX);
  const name = e => `${e.tagName.toLowerCase()}: ${e.textContent.trim().slice(0, 60)}`;
  const clipped = [];
  let wide = 0;
  for (const box of article.querySelectorAll("pre > code, table")) {
    const rect = box.getBoundingClientRect();
    if (!rect.width) continue;
    // Its content, wider than the box itself: the box must scroll.
    if (box.scrollWidth > box.clientWidth + 1) {
      wide += 1;
      if (!scrolls(box)) clipped.push(`${name(box)}: cut at its own edge`);
    }
    // The box, wider than the nearest ancestor that clips (overflow not visible): that one
    // must scroll and itself fit the page's column; with none, the box must fit the column.
    let holder = box.parentElement;
    const visible = e => getComputedStyle(e).overflowX === "visible";
    while (holder && visible(holder)) holder = holder.parentElement;
    if (holder && holder !== document.documentElement && holder !== document.body) {
      const edge = holder.getBoundingClientRect().left + holder.clientLeft + holder.clientWidth;
      if (rect.right > edge + 1) {
        wide += 1;
        if (!scrolls(holder)) clipped.push(`${name(box)}: cut by a ${holder.className}`);
        else if (holder.getBoundingClientRect().right > column)
          clipped.push(`${name(box)}: its scrolling box runs past the page`);
      }
    } else if (rect.right > column) {
      clipped.push(`${name(box)}: runs past the page (${rect.right} px)`);
    }
  }
  const page = document.documentElement;
  if (page.scrollWidth > window.innerWidth) clipped.push(`the page is ${page.scrollWidth} px wide`);
  return {clipped, wide};
}"""
"""Every code block and table of a page: the wide ones, and those whose overflow is cut."""

UNDER_BUTTON = """() => {
  const article = document.querySelector("article");
  article.querySelectorAll("details").forEach(d => { d.open = true; });
  const overlap = (a, b) =>
    a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  const covered = [];
  let buttons = 0;
  for (const pre of article.querySelectorAll("pre")) {
    const nav = pre.querySelector(":scope > .md-code__nav");
    const code = pre.querySelector(":scope > code");
    if (!nav || !code || !code.getClientRects().length) continue;
    buttons += 1;
    for (const left of [0, code.scrollWidth]) {  // at the start, and scrolled to the end
      code.scrollLeft = left;
      const button = nav.getBoundingClientRect(), shown = code.getBoundingClientRect();
      const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
      for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        for (const word of node.data.matchAll(/\\S+/g)) {
          const range = document.createRange();
          range.setStart(node, word.index);
          range.setEnd(node, word.index + word[0].length);
          for (const r of range.getClientRects()) {
            const seen = {  // the part of the word inside the code's box, not scrolled away
              left: Math.max(r.left, shown.left), right: Math.min(r.right, shown.right),
              top: r.top, bottom: r.bottom,
            };
            if (seen.left < seen.right && overlap(seen, button)) {
              covered.push(`${word[0]} (${pre.id})`);
            }
          }
        }
      }
    }
    code.scrollLeft = 0;
  }
  return {covered: [...new Set(covered)], buttons};
}"""
"""Each code block's words that a reader would see under its copy button, at either end."""

BROKEN_WORDS = """(selector) => {
  const article = document.querySelector("article");
  article.querySelectorAll("details").forEach(d => { d.open = true; });
  const broken = [];
  let words = 0;
  for (const cell of article.querySelectorAll(selector)) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      // A word is what lies between spaces, hyphens and slashes, where a line may break.
      for (const word of node.data.matchAll(/[^\\s\\-\\/]+/g)) {
        const range = document.createRange();
        range.setStart(node, word.index);
        range.setEnd(node, word.index + word[0].length);
        const lines = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
        words += 1;
        if (lines.size > 1) broken.push(`${word[0]} in "${cell.textContent.trim()}"`);
      }
    }
  }
  return {broken, words};
}"""
"""The words of the cells matching a selector that are split over two lines."""


@pytest.fixture(scope="module")
def narrow_page():
    """A Chromium page at the narrow width, for one module's looks."""
    executable = chromium()
    sync_api = require_module("playwright.sync_api", "dev")
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
        yield browser.new_page(viewport=NARROW)
        browser.close()


REWARD_CELLS = "#example-episode ~ * table :is(th, td)"
"""The cells of an env card's example-episode reward tables."""


def site_pages(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("index.html"))


@pytest.fixture(scope="module")
def looks(site: Path, served: str, narrow_page) -> dict[str, dict]:  # noqa: F811
    """Every page of the site at 800 px, with every collapsed block opened, measured once:
    what is cut, what lies under a copy button, which header words and reward-table words
    are broken."""
    measured = {}
    for path in site_pages(site):
        narrow_page.goto(served + path, wait_until="load")
        measured[path] = {
            "cut": narrow_page.evaluate(CLIPPED),
            "under": narrow_page.evaluate(UNDER_BUTTON),
            "headers": narrow_page.evaluate(BROKEN_WORDS, "table th"),
            "rewards": narrow_page.evaluate(BROKEN_WORDS, REWARD_CELLS),
        }
    return measured


@pytest.mark.slow(seconds=90)
def test_nothing_wide_is_cut_and_no_code_runs_under_its_copy_button(looks: dict) -> None:
    """A code block or table wider than its box scrolls inside that box, and no word of code
    sits under the copy button (the button had covered the first line's end, and the text
    ran on beneath it), on every page at 800 px."""
    problems, wide, buttons = [], 0, 0
    for path, shown in looks.items():
        wide += shown["cut"]["wide"]
        buttons += shown["under"]["buttons"]
        problems += [f"{path}: {c}" for c in shown["cut"]["clipped"]]
        problems += [f"{path}: under the copy button: {w}" for w in shown["under"]["covered"][:5]]
    assert not problems, "\n".join(problems)
    # The checks looked at something: at this width many blocks are wider than the page.
    assert wide >= 20 and buttons >= 100, (wide, buttons)


def test_the_button_check_sees_a_covered_line(
    served: str,  # noqa: F811
    narrow_page,
) -> None:
    """The theme's own layout (no gutter for the button) puts a wide block's text under it."""
    narrow_page.goto(served + "guides/benchmarking/index.html", wait_until="load")
    narrow_page.add_style_tag(
        content=".md-typeset pre:has(> .md-code__nav) { padding-right: 0 !important; }"
    )
    assert narrow_page.evaluate(UNDER_BUTTON)["covered"]


def edge_shades(page, selector: str, scroll: str, plain: bool) -> tuple[float, float]:
    """The mean grey of the 4 px strips at the left and right edges of the first element
    matching `selector` that is wider than its box, scrolled to `scroll` ("start" or "end"),
    with its shadows (or `plain`: its background alone)."""
    image = require_module("PIL.Image", "train")
    rule = f"{selector} {{ background: var(--scroll-cover) !important; }}"
    style = page.add_style_tag(content=rule if plain else "/* with its shadows */")
    box = page.evaluate(
        """([selector, scroll]) => {
          const e = [...document.querySelectorAll(selector)]
            .find(e => e.scrollWidth > e.clientWidth + 1);
          e.scrollIntoView({block: "center"});
          e.scrollLeft = scroll === "end" ? e.scrollWidth : 0;
          const r = e.getBoundingClientRect();
          return {x: r.left, y: r.top, width: e.clientWidth, height: e.clientHeight};
        }""",
        [selector, scroll],
    )
    shot = image.open(io.BytesIO(page.screenshot(clip=box))).convert("L")
    width, height = shot.size
    strips = [shot.crop((0, 0, 4, height)), shot.crop((width - 4, 0, width, height))]
    style.evaluate("e => e.remove()")
    stat = require_module("PIL.ImageStat", "train")
    left, right = (stat.Stat(strip).mean[0] for strip in strips)
    return left, right


@pytest.mark.parametrize(
    "path, selector",
    [
        ("guides/benchmarking/index.html", "article pre > code"),
        ("performance/index.html", "article .md-typeset__scrollwrap"),
    ],
    ids=["code", "table"],
)
def test_a_wide_block_shows_a_shadow_where_it_continues(
    served: str,  # noqa: F811
    narrow_page,
    path: str,
    selector: str,
) -> None:
    """A block wider than its box says so: a shadow at the edge where text is hidden (the
    right one at the start, the left one scrolled to the end), none at an edge reached. The
    theme's scrollbar is hidden where the system hides scrollbars, so a block looked cut."""
    narrow_page.goto(served + path, wait_until="load")
    for scroll, hidden in (("start", 1), ("end", 0)):
        shaded = edge_shades(narrow_page, selector, scroll, plain=False)
        plain = edge_shades(narrow_page, selector, scroll, plain=True)
        darker = [p - s for s, p in zip(shaded, plain, strict=True)]  # (left, right)
        assert darker[hidden] > 8, (scroll, shaded, plain)
        assert abs(darker[1 - hidden]) < 2, (scroll, shaded, plain)


def test_no_table_header_breaks_inside_a_word(looks: dict) -> None:
    """Every header of every table, and every cell of the cards' example-episode reward
    tables, at 800 px: a word breaks only where it has a space, a hyphen or a slash (the
    theme let code break anywhere, so a header `aux_defined` read "aux_defin / ed")."""
    problems, words = [], 0
    for path, shown in looks.items():
        words += shown["headers"]["words"]
        problems += [f"{path}: {b}" for b in shown["headers"]["broken"]]
        problems += [f"{path}, reward table: {b}" for b in shown["rewards"]["broken"]]
    assert not problems, "\n".join(problems)
    for entry in entries():  # every card has its reward table, and it was looked at
        rewards = looks[f"envs/{entry.short_name}/index.html"]["rewards"]["words"]
        assert rewards >= 10, (entry.short_name, rewards)
    assert words >= 500, words


def test_the_header_check_sees_a_broken_word(
    served: str,  # noqa: F811
    narrow_page,
) -> None:
    narrow_page.goto(served + "envs/coophumaneval/index.html", wait_until="load")
    narrow_page.add_style_tag(
        content=".md-typeset table th { word-break: break-all !important; max-width: 3em; }"
    )
    assert narrow_page.evaluate(BROKEN_WORDS, "table th")["broken"]


# ----- the cards' data ------------------------------------------------------------------------
CODE_CARD = "coophumaneval"


def code_entry():
    return next(e for e in entries() if e.short_name == CODE_CARD)


@pytest.fixture
def no_data(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty reference data folder, and the hub out of reach."""
    monkeypatch.setenv("COLLABZOO_SHARED_DATA", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("COLLABZOO_DOCS_REQUIRE_DATA", raising=False)
    return tmp_path


@pytest.mark.parametrize("setting", [("CI", "true"), ("COLLABZOO_DOCS_REQUIRE_DATA", "1")])
def test_a_card_without_its_data_fails_the_build_under_ci(
    no_data: Path, monkeypatch: pytest.MonkeyPatch, setting: tuple[str, str]
) -> None:
    cards = load_hook("env_cards")
    errors = require_module("mkdocs.exceptions", "docs")
    monkeypatch.setenv(*setting)
    with pytest.raises(errors.PluginError) as raised:
        cards.build_card(code_entry())
    message = str(raised.value)
    assert "the CoopHumanEval card (envs/coophumaneval.md)" in message
    assert str(no_data / "coophumaneval" / "CoopHumanEval.json") in message
    assert "COLLABZOO_SHARED_DATA" in message


def test_a_card_whose_data_does_not_load_fails_the_build_under_ci(
    no_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cards = load_hook("env_cards")
    errors = require_module("mkdocs.exceptions", "docs")
    (no_data / "coophumaneval").mkdir()
    (no_data / "coophumaneval" / "CoopHumanEval.json").write_text("not the tasks")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(errors.PluginError, match=r"the CoopHumanEval card \(envs/coophumaneval"):
        cards.build_card(code_entry())


def test_outside_ci_a_card_without_its_data_says_how_to_provide_it(no_data: Path) -> None:
    card = load_hook("env_cards").build_card(code_entry())
    notice = card.split('!!! warning "Not loaded for this build"', 1)[1].split("\n\n", 1)[0]
    assert "Set COLLABZOO_SHARED_DATA to a folder holding `coophumaneval/CoopHumanEval.json`" in (
        notice
    )
    assert str(no_data) not in card  # the card names no path of the build machine


def test_under_ci_a_card_with_its_data_is_whole(
    shared_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLLABZOO_SHARED_DATA", str(shared_data))
    monkeypatch.setenv("CI", "true")
    card = load_hook("env_cards").build_card(code_entry())
    assert "Not loaded for this build" not in card and "Not played for this build" not in card
    assert "| part | paid |" in card and "| **team reward** (the parts' sum) |" in card
    assert os.fspath(shared_data) not in card
