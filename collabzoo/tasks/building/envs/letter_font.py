"""A 5x5 bitmap font for the capital letters A-Z.

The StrBuild game asks agents to build a word out of blocks; the font below is what turns
a word into its target picture. Each glyph is five rows (top first) of five characters,
``#`` for a block and ``.`` for air. Four glyphs (C, I, L, M) are fixed so that the
targets of the published benchmark words are reproduced exactly; the rest are drawn for
this project. Only the capital letters A-Z exist: there is no lower case, digit or space.
"""

from __future__ import annotations

LETTER_HEIGHT = 5
LETTER_WIDTH = 5
LETTER_GAP = 2

BLOCK = "#"
AIR = "."

Glyph = tuple[str, str, str, str, str]

GLYPHS: dict[str, Glyph] = {
    "A": (".###.", "#...#", "#####", "#...#", "#...#"),
    "B": ("####.", "#...#", "####.", "#...#", "####."),
    "C": (".####", "#....", "#....", "#....", ".####"),
    "D": ("####.", "#...#", "#...#", "#...#", "####."),
    "E": ("#####", "#....", "####.", "#....", "#####"),
    "F": ("#####", "#....", "####.", "#....", "#...."),
    "G": (".####", "#....", "#..##", "#...#", ".####"),
    "H": ("#...#", "#...#", "#####", "#...#", "#...#"),
    "I": ("#####", "..#..", "..#..", "..#..", "#####"),
    "J": ("#####", "...#.", "...#.", "#..#.", ".##.."),
    "K": ("#...#", "#..#.", "###..", "#..#.", "#...#"),
    "L": ("#....", "#....", "#....", "#....", "#####"),
    "M": ("#...#", "##.##", "#.#.#", "#...#", "#...#"),
    "N": ("#...#", "##..#", "#.#.#", "#..##", "#...#"),
    "O": (".###.", "#...#", "#...#", "#...#", ".###."),
    "P": ("####.", "#...#", "####.", "#....", "#...."),
    "Q": (".###.", "#...#", "#.#.#", "#..#.", ".##.#"),
    "R": ("####.", "#...#", "####.", "#..#.", "#...#"),
    "S": (".####", "#....", ".###.", "....#", "####."),
    "T": ("#####", "..#..", "..#..", "..#..", "..#.."),
    "U": ("#...#", "#...#", "#...#", "#...#", ".###."),
    "V": ("#...#", "#...#", "#...#", ".#.#.", "..#.."),
    "W": ("#...#", "#...#", "#.#.#", "##.##", "#...#"),
    "X": ("#...#", ".#.#.", "..#..", ".#.#.", "#...#"),
    "Y": ("#...#", ".#.#.", "..#..", "..#..", "..#.."),
    "Z": ("#####", "...#.", "..#..", ".#...", "#####"),
}

_ACCEPTED = "only the capital letters A-Z are accepted"


def render_text(text: str) -> tuple[str, ...]:
    """Draw ``text`` with :data:`GLYPHS` and return its five rows, top row first.

    Letters are separated by :data:`LETTER_GAP` columns of air, so a word of ``n`` letters
    is ``5 * n + 2 * (n - 1)`` characters wide.

    Raises:
        ValueError: if ``text`` is not a non-empty string made only of A-Z. Lower case is
            rejected rather than upper-cased, so that a typo in a task name cannot silently
            turn into a different target.
    """
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__} {text!r}; {_ACCEPTED}")
    if not text:
        raise ValueError(f"text must not be empty; {_ACCEPTED}")
    bad = list(dict.fromkeys(ch for ch in text if ch not in GLYPHS))
    if bad:
        shown = ", ".join(repr(ch) for ch in bad)
        raise ValueError(f"text {text!r} contains unsupported characters {shown}; {_ACCEPTED}")
    gap = AIR * LETTER_GAP
    return tuple(gap.join(GLYPHS[letter][row] for letter in text) for row in range(LETTER_HEIGHT))
