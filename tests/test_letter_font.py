"""Tests for the StrBuild bitmap font."""

from __future__ import annotations

import string

import pytest

from collabzoo.tasks.building.envs.letter_font import (
    GLYPHS,
    LETTER_GAP,
    LETTER_HEIGHT,
    LETTER_WIDTH,
    render_text,
)

FIXED = {
    "I": ("#####", "..#..", "..#..", "..#..", "#####"),
    "C": (".####", "#....", "#....", "#....", ".####"),
    "M": ("#...#", "##.##", "#.#.#", "#...#", "#...#"),
    "L": ("#....", "#....", "#....", "#....", "#####"),
}


def test_constants() -> None:
    assert (LETTER_HEIGHT, LETTER_WIDTH, LETTER_GAP) == (5, 5, 2)


@pytest.mark.parametrize("letter", sorted(FIXED))
def test_benchmark_glyphs_are_exact(letter: str) -> None:
    assert GLYPHS[letter] == FIXED[letter]


def test_font_covers_exactly_the_capitals() -> None:
    assert sorted(GLYPHS) == list(string.ascii_uppercase)


@pytest.mark.parametrize("letter", list(string.ascii_uppercase))
def test_glyph_shape(letter: str) -> None:
    glyph = GLYPHS[letter]
    assert isinstance(glyph, tuple)
    assert len(glyph) == LETTER_HEIGHT
    for row in glyph:
        assert len(row) == LETTER_WIDTH
        assert set(row) <= {"#", "."}
    assert all("#" in row for row in glyph), f"{letter} leaves a row empty"
    used_columns = sum(any(row[c] == "#" for row in glyph) for c in range(LETTER_WIDTH))
    assert used_columns >= 4, f"{letter} uses only {used_columns} columns"


def test_glyphs_are_distinct() -> None:
    assert len(set(GLYPHS.values())) == len(GLYPHS)


def test_single_letter_is_its_glyph() -> None:
    for letter, glyph in GLYPHS.items():
        assert render_text(letter) == glyph


@pytest.mark.parametrize("text", ["A", "ICML", "HELLO", "WXYZ", "MM", string.ascii_uppercase])
def test_render_layout(text: str) -> None:
    rows = render_text(text)
    n = len(text)
    step = LETTER_WIDTH + LETTER_GAP
    assert isinstance(rows, tuple)
    assert len(rows) == LETTER_HEIGHT
    assert {len(row) for row in rows} == {5 * n + 2 * (n - 1)}
    for i, letter in enumerate(text):
        start = i * step
        assert tuple(row[start : start + LETTER_WIDTH] for row in rows) == GLYPHS[letter]
        if i < n - 1:
            gap = slice(start + LETTER_WIDTH, start + step)
            assert all(row[gap] == "." * LETTER_GAP for row in rows)


def test_render_icml_matches_the_benchmark_picture() -> None:
    assert render_text("ICML") == (
        "#####...####..#...#..#....",
        "..#....#......##.##..#....",
        "..#....#......#.#.#..#....",
        "..#....#......#...#..#....",
        "#####...####..#...#..#####",
    )


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("icml", ["'i'", "'c'", "'m'", "'l'"]),
        ("ICmL", ["'m'"]),
        ("A B", ["' '"]),
        ("A1", ["'1'"]),
        ("ÄB", ["'Ä'"]),
        ("", ["empty"]),
        (42, ["int", "42"]),
        (None, ["NoneType"]),
        (b"AB", ["bytes"]),
    ],
)
def test_render_rejects_bad_text(text: object, shown: list[str]) -> None:
    with pytest.raises(ValueError) as info:
        render_text(text)  # type: ignore[arg-type]
    message = str(info.value)
    assert "A-Z" in message
    for part in shown:
        assert part in message


@pytest.mark.parametrize("letter", list(string.ascii_lowercase))
def test_render_does_not_upper_case(letter: str) -> None:
    with pytest.raises(ValueError, match=f"'{letter}'"):
        render_text(letter)
