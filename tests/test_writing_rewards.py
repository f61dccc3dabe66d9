"""Hand-worked writing rewards: every level and boundary of tasks.md sections 1-2.

Texts are built from filler tokens (`q0`, `z17`, ...) that contain no transition phrase and are
no stopwords, padded with digits to exact character lengths, so each quantity is known exactly.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collabzoo.tasks.writing.rewards import (
    TLDR_RULES,
    score_arxiv,
    score_tldr,
    score_writing,
    split_single_answer,
    transition_categories,
)


def text(tokens: list[str], length: int | None = None, pad: int = -1) -> str:
    """Tokens joined by spaces; token `pad` padded with zeros to reach `length` characters."""
    tokens = list(tokens)
    if length is not None:
        missing = length - len(" ".join(tokens))
        assert missing >= 0, (length, missing)
        tokens[pad] += "0" * missing
    return " ".join(tokens)


def tokens(prefix: str, n: int, start: int = 0) -> list[str]:
    return [f"{prefix}{i}" for i in range(start, start + n)]


C1 = text(tokens("q", 10), 40)  # 10 words, 10 unique, 40 characters


# ----- TLDR ------------------------------------------------------------------------------------
def test_tldr_hand_worked_total() -> None:
    # c2: 24 unique words, 100 characters; shares q0 with c1; "however" (contrast and
    # concession), "moreover" (elaboration), "therefore" (cause_effect): k = 4.
    c2 = text(["q0", *tokens("z", 19, 1), "however", "moreover", "therefore", "z99"])
    assert len(c2) == 100
    b = score_tldr(C1, c2)
    assert b.components == pytest.approx(
        {
            "structure": 0.5,
            "coordination": 1.0,  # r = 100 / 40 = 2.5
            "vocabulary": 0.5,  # u = 24 / 10 = 2.4
            "transitions": 0.4 * (0.4 + 0.05 * 3),  # k = 4
            "jaccard": 0.6,  # 1 / 33 >= 0.03
        }
    )
    assert b.total == pytest.approx(2.82)
    assert b.metrics["score"] == pytest.approx(2.82 / 3)
    assert b.metrics["level"] == 4 and b.metrics["transition_categories"] == 4
    assert b.metrics["jaccard"] == pytest.approx(1 / 33)


@pytest.mark.parametrize(
    ("n1", "n2", "passes"),
    [
        (7, 20, False),
        (8, 20, True),
        (20, 7, False),
        (20, 256, True),
        (20, 257, False),
        (256, 20, True),
        (257, 20, False),
        (256, 300, False),
    ],
)
def test_tldr_word_count_gate(n1: int, n2: int, passes: bool) -> None:
    b = score_tldr(text(tokens("q", n1)), text(tokens("z", n2)))
    assert b.components["structure"] == (0.5 if passes else 0.0)
    if not passes:
        assert b.total == 0.0 and b.metrics["level"] == 0


# c2: 14 unique two-character words (41 characters), u = 1.4 -> vocabulary 0.5 * 0.1 / 0.7.
C2_WORDS = ["q0", *tokens("z", 9, 1), *tokens("y", 4, 1)]


@pytest.mark.parametrize(
    ("length", "coordination", "level"),
    [
        (43, None, 1),  # r = 1.075 < 1.1: stop with 0.5
        (44, 0.0, 4),  # r = 1.1: adds 0 but continues
        (54, 0.5, 4),  # r = 1.35
        (64, 1.0, 4),  # r = 1.6
        (128, 1.0, 4),  # r = 3.2
        (164, 0.5, 4),  # r = 4.1
        (200, 0.0, 4),  # r = 5.0: adds 0 but continues
        (201, None, 1),  # r = 5.025: stop
    ],
)
def test_tldr_length_ratio_band(length: int, coordination: float | None, level: int) -> None:
    b = score_tldr(C1, text(C2_WORDS, length))
    assert b.metrics["length_ratio"] == pytest.approx(length / 40)
    assert b.metrics["level"] == level
    if coordination is None:
        assert b.total == 0.5 and b.components["coordination"] == 0.0
    else:
        assert b.components["coordination"] == pytest.approx(coordination)
        assert b.components["vocabulary"] == pytest.approx(0.5 * 0.1 / 0.7)


@pytest.mark.parametrize(
    ("unique", "vocabulary", "level"),
    [(12, None, 2), (13, 0.0, 4), (16, 0.5 * 0.3 / 0.7, 4), (20, 0.5, 4), (25, 0.5, 4)],
)
def test_tldr_unique_word_band(unique: int, vocabulary: float | None, level: int) -> None:
    c2 = text(["q0", *tokens("z", unique - 1, 1)], 100)  # r = 2.5
    b = score_tldr(C1, c2)
    assert b.metrics["unique_ratio"] == pytest.approx(unique / 10)
    assert b.metrics["level"] == level
    if vocabulary is None:
        assert b.total == pytest.approx(1.5)
    else:
        assert b.components["vocabulary"] == pytest.approx(vocabulary)


def test_tldr_counts_stopwords_in_the_unique_ratio_unless_asked() -> None:
    # 10 filler words + 5 stopwords: 15 unique with stopwords (u = 1.5), 10 without (stop).
    c2 = text([*tokens("z", 10), "the", "and", "of", "to", "with"], 100)
    assert score_tldr(C1, c2).components["vocabulary"] == pytest.approx(0.5 * 0.2 / 0.7)
    strict = score_tldr(C1, c2, vocabulary_stopwords=False)
    assert strict.metrics["level"] == 2 and strict.components["vocabulary"] == 0.0


def test_tldr_transitions_quirks() -> None:
    base = ["q0", *tokens("z", 19, 1)]
    none = score_tldr(C1, text(base, 100))
    assert none.metrics["transition_categories"] == 0 and none.components["transitions"] == 0.0
    # "different" holds "if" (condition) as a plain substring: the reference counts it.
    quirk = score_tldr(C1, text([*base, "different"], 100))
    assert quirk.metrics["transition_categories"] == 1
    assert quirk.components["transitions"] == pytest.approx(0.4 * 0.4)
    words = score_tldr(C1, text([*base, "different"], 100), transitions="words")
    assert words.components["transitions"] == 0.0
    # TLDR counts c2 only.
    in_c1 = score_tldr(text([*tokens("q", 9), "however"], 40), text(base, 100))
    assert in_c1.metrics["transition_categories"] == 0
    # Twelve categories at most: T tops out at 0.4 + 0.05 * 11 = 0.95.
    everything = " ".join(
        [
            "however",
            "moreover",
            "therefore",
            "for example",
            "that is",
            "next",
            "indeed",
            "in summary",
            "similarly",
            "if",
            "when",
        ]
    )
    assert transition_categories(everything) == 12


def test_tldr_jaccard_cap_and_empty_sets() -> None:
    disjoint = score_tldr(C1, text(tokens("z", 24), 100))
    assert disjoint.metrics["jaccard"] == 0.0 and disjoint.components["jaccard"] == 0.0
    # 1 shared of 40 in the union: 0.025 < 0.03 -> J = 0.025 / 0.03.
    c2 = text(["q0", *tokens("z", 30, 1)], 120)
    b = score_tldr(C1, c2)
    assert b.metrics["jaccard"] == pytest.approx(1 / 40)
    assert b.components["jaccard"] == pytest.approx(0.6 * (1 / 40) / 0.03)
    # Only stopwords on both sides: the content sets are empty and Jaccard counts as 1.0.
    stop1 = "the and of to with a an in"
    stop2 = "the and of to with a an in on at by for from is was were be been"
    assert score_tldr(stop1, stop2).metrics["jaccard"] == 1.0


def test_tldr_empty_and_wordless_texts() -> None:
    empty = score_tldr("", "")
    assert empty.total == 0.0 and empty.metrics["length_ratio"] == 0.0
    # Eight whitespace tokens but no \w word in c1: level 1 passes, level 3 has no words: stop.
    b = score_tldr("! ! ! ! ! ! ! !", text(tokens("z", 8), 30))
    assert b.metrics["level"] == 2 and b.total == pytest.approx(1.5)


def test_unicode_and_very_long_texts() -> None:
    c1 = "café naïve 日本 über straße ζωή мир ﬁn"
    c2 = " ".join(
        [
            "café",
            "naïve",
            "日本",
            "über",
            "straße",
            "ζωή",
            "мир",
            "ﬁn",
            "ça",
            "déjà",
            "vu",
            "ñandú",
            "øre",
            "ångström",
            "ıi",
            "ǆ",
            "中文",
        ]
    )
    b = score_tldr(c1, c2)
    assert b.metrics["words_1"] == 8 and b.metrics["unique_ratio"] == pytest.approx(17 / 8)
    assert b.metrics["level"] >= 2
    huge = score_tldr(C1, "word " * 200_000)
    assert huge.total == 0.0 and huge.metrics["words_2"] == 200_000


@settings(max_examples=200, deadline=None)
@given(st.text(), st.text())
def test_any_text_scores_within_range(c1: str, c2: str) -> None:
    for score in (score_tldr, score_arxiv):
        b = score(c1, c2)
        assert 0.0 <= b.total <= 3.0
        assert b.total == pytest.approx(sum(b.components.values()))


# ----- arXiv -----------------------------------------------------------------------------------
A1 = text(tokens("q", 128), 1000)  # 128 words, all unique, 1000 characters


@pytest.mark.parametrize(
    ("length", "coordination", "level"),
    [
        (799, None, 1),
        (800, 0.0, 4),  # r = 0.8: adds 0, continues
        (1050, 0.5, 4),
        (1300, 1.0, 4),
        (1600, 1.0, 4),
        (1800, 0.5, 4),
        (2000, 0.0, 4),  # r = 2.0: adds 0, continues
        (2001, None, 1),
    ],
)
def test_arxiv_length_ratio_band(length: int, coordination: float | None, level: int) -> None:
    b = score_arxiv(A1, text(tokens("z", 128), length))
    assert b.metrics["level"] == level
    if coordination is None:
        assert b.total == 0.5
    else:
        assert b.components["coordination"] == pytest.approx(coordination)
        assert b.components["vocabulary"] == 0.5  # u = 1.0


@pytest.mark.parametrize(
    ("n1", "n2", "passes"),
    [(127, 128, False), (128, 256, True), (256, 257, False), (128, 127, False)],
)
def test_arxiv_word_count_gate(n1: int, n2: int, passes: bool) -> None:
    b = score_arxiv(text(tokens("q", n1)), text(tokens("z", n2)))
    assert b.components["structure"] == (0.5 if passes else 0.0)


# c1: 140 words, 100 unique, 1000 characters; c2: 1400 characters (r = 1.4).
A1_REPEATS = text([*["q0"] * 40, *tokens("q", 100)], 1000)


@pytest.mark.parametrize(
    ("unique", "vocabulary", "level"),
    [
        (49, None, 2),
        (50, 0.0, 4),  # u = 0.5: adds 0, continues
        (60, 0.25, 4),
        (70, 0.5, 4),
        (130, 0.5, 4),
        (131, 0.5 * (1 - 0.01 / 0.4), 4),
        (170, 0.0, 4),  # u = 1.7: adds 0, continues
        (171, None, 2),
    ],
)
def test_arxiv_unique_word_band(unique: int, vocabulary: float | None, level: int) -> None:
    words = tokens("z", unique)
    c2 = text([*["z0"] * max(0, 130 - unique), *words], 1400)
    b = score_arxiv(A1_REPEATS, c2)
    assert b.metrics["unique_ratio"] == pytest.approx(unique / 100)
    assert b.metrics["level"] == level
    if vocabulary is None:
        assert b.total == pytest.approx(1.5)
    else:
        assert b.components["vocabulary"] == pytest.approx(vocabulary)


def test_arxiv_transitions_use_the_plain_concatenation() -> None:
    # "wh" ending c1 and "en" starting c2 join into "when" (time) in c1 + c2.
    c1 = text([*tokens("q", 127), "qwh"], 1000, pad=0)
    c2 = text(["enq", *tokens("z", 127)], 1400)
    assert score_arxiv(c1, c2).metrics["transition_categories"] == 1
    assert score_arxiv(c1, c2, transitions="words").metrics["transition_categories"] == 0
    # A phrase in c1 counts for arXiv (not for TLDR).
    c1 = text([*tokens("q", 127), "moreover"], 1000)
    assert score_arxiv(c1, text(tokens("z", 128), 1400)).metrics["transition_categories"] == 1


def test_arxiv_hand_worked_total_with_the_jaccard_cap() -> None:
    # c1: 100 unique content words; c2: 70 unique, 32 of them shared: 32 / 138 >= 0.23 -> J = 1.
    c2 = text([*["z0"] * 60, *tokens("q", 32), *tokens("z", 38)], 1400)
    b = score_arxiv(A1_REPEATS, c2)
    assert b.metrics["jaccard"] == pytest.approx(32 / 138)
    assert b.components == pytest.approx(
        {
            "structure": 0.5,
            "coordination": 1.0,
            "vocabulary": 0.5,
            "transitions": 0.0,
            "jaccard": 0.6,
        }
    )
    # 20 shared: 20 / 150 < 0.23 -> J = (20 / 150) / 0.23.
    c2 = text([*["z0"] * 60, *tokens("q", 20), *tokens("z", 50)], 1400)
    assert score_arxiv(A1_REPEATS, c2).components["jaccard"] == pytest.approx(
        0.6 * (20 / 150) / 0.23
    )


def test_single_agent_split_marker() -> None:
    assert split_single_answer(" intro [PARAGRAPH_SPLIT] method ") == ("intro", "method")
    assert split_single_answer("a [PARAGRAPH_SPLIT] b [PARAGRAPH_SPLIT] c") == (
        "a",
        "b [PARAGRAPH_SPLIT] c",
    )
    assert split_single_answer("no marker here") == ("no marker here", "")
    with pytest.raises(TypeError):
        score_tldr(None, "x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="transitions must be one of"):
        score_tldr("a", "b", transitions="fuzzy")


# ----- a mutant that once survived: word sets are case-insensitive --------------------------
CONCISE = "Heavy storms closed the OAKTON bridge for two days."
DETAILED = (
    "The Oakton crossing reopened Monday after engineers inspected its steel supports, "
    "and OAKTON commuters welcomed shorter trips."
)


def test_writing_word_sets_ignore_case() -> None:
    """Mutant: word sets of the text as written, not lower-cased (tasks.md: `\\b\\w+\\b` of the
    lower-cased text). By hand: 9 and 17 words (structure +0.5); 126 / 51 = 2.47 characters
    (coordination +1.0). Unique words: c1 9, c2 16 (Oakton and OAKTON are one word), so
    u = 16/9 and vocabulary = 0.5 * (16/9 - 1.3) / 0.7 (case-sensitive: 17/9). Content words
    (stopwords the, for, its, and removed): c1 7, c2 13, shared only "oakton": Jaccard 1/19 >=
    0.03, so +0.6 (case-sensitive: OAKTON != Oakton, Jaccard 0, +0)."""
    scored = score_tldr(CONCISE, DETAILED)
    lowered = score_tldr(CONCISE.lower(), DETAILED.lower())
    assert (len(CONCISE), len(DETAILED)) == (51, 126)
    assert scored.components["structure"] == 0.5
    assert scored.components["coordination"] == 1.0
    assert scored.metrics["unique_ratio"] == pytest.approx(16 / 9)
    assert scored.components["vocabulary"] == pytest.approx(0.5 * (16 / 9 - 1.3) / 0.7)
    assert scored.metrics["jaccard"] == pytest.approx(1 / 19)
    assert scored.components["jaccard"] == pytest.approx(0.6)
    assert scored.total == pytest.approx(lowered.total)
    assert scored.components == pytest.approx(lowered.components)


def test_score_writing_takes_its_texts_and_rules_by_name() -> None:
    by_name = score_writing(c1=C1, c2=C1 + " " + C1, rules=TLDR_RULES, transitions="words")
    assert by_name == score_writing(C1, C1 + " " + C1, TLDR_RULES, transitions="words")


def test_an_unknown_transition_mode_is_refused() -> None:
    assert transition_categories("however, so", mode="words") == transition_categories(
        "however, so"
    )
    with pytest.raises(ValueError, match="transitions must be one of"):
        transition_categories("however", mode="whole-words")
