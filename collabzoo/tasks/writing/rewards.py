"""The writing rewards: TLDR summarization and arXiv expansion (tasks.md sections 1-2).

Both rewards (max 3.0) score two texts c1 and c2 through four gated levels; a level is scored
only if the one before let scoring continue, and a stop keeps what was already earned:

1. structure: both texts have a word count (whitespace tokens) in range: +0.5, else 0 and stop.
2. coordination: r = len(c2) / len(c1) in characters, scored by a piecewise-linear band;
   outside the band, stop. (A ratio at a band's outer edge adds 0 and continues.)
3. vocabulary: u = unique words(c2) / unique words(c1), words = `\\b\\w+\\b` of the lower-cased
   text, stopwords included; a band again; outside it, stop.
4. style: 0.4 * T + 0.6 * J, with T from the number k of transition categories present
   (T = 0 if k = 0, else min(1, 0.4 + min(0.05 (k - 1), 0.6))) and J = min(jaccard, cap) / cap,
   the Jaccard similarity of the two word sets with stopwords removed (1.0 if both are empty).

The reference's quirks are the defaults, so scores compare with the published ones: transition
phrases match as plain substrings ("if" inside "different"), stopwords stay in the unique-word
ratio, and arXiv counts transitions in c1 + c2 joined with no separator. `transitions="words"`
(phrases on word boundaries) and `vocabulary_stopwords=False` are the corrected variants.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from collabzoo.rewards.breakdown import RewardBreakdown

MAX_SCORE = 3.0
SPLIT_MARKER = "[PARAGRAPH_SPLIT]"
STRUCTURE_REWARD = 0.5
COORDINATION_REWARD = 1.0
VOCABULARY_REWARD = 0.5
TRANSITION_WEIGHT = 0.4
JACCARD_WEIGHT = 0.6
TRANSITION_MODES = ("substring", "words")
_WORD = re.compile(r"\b\w+\b")
LEXICON_PATH = Path(__file__).with_name("writing_lexicon.json")

Band = Callable[[float], float | None]
"""A level's score for a ratio, or None: outside the band, stop."""


@cache
def lexicon() -> tuple[frozenset[str], dict[str, tuple[str, ...]]]:
    """(stopwords, transition phrases by category) of the reference rewards."""
    data = json.loads(LEXICON_PATH.read_text(encoding="utf-8"))
    categories = {name: tuple(p) for name, p in data["transition_categories"].items()}
    return frozenset(data["stopwords"]), categories


def _tldr_length(r: float) -> float | None:
    if 1.6 <= r <= 3.2:
        return 1.0
    if 1.1 <= r < 1.6:
        return (r - 1.1) / 0.5
    if 3.2 < r <= 5.0:
        return 1.0 - (r - 3.2) / 1.8
    return None


def _tldr_vocabulary(u: float) -> float | None:
    if u >= 2.0:
        return VOCABULARY_REWARD
    if 1.3 <= u < 2.0:
        return VOCABULARY_REWARD * (u - 1.3) / 0.7
    return None


def _arxiv_length(r: float) -> float | None:
    if 1.3 <= r <= 1.6:
        return 1.0
    if 0.8 <= r < 1.3:
        return (r - 0.8) / 0.5
    if 1.6 < r <= 2.0:
        return 1.0 - (r - 1.6) / 0.4
    return None


def _arxiv_vocabulary(u: float) -> float | None:
    if 0.7 <= u <= 1.3:
        return VOCABULARY_REWARD
    if 0.5 <= u < 0.7:
        return VOCABULARY_REWARD * (u - 0.5) / 0.2
    if 1.3 < u <= 1.7:
        return VOCABULARY_REWARD * (1.0 - (u - 1.3) / 0.4)
    return None


@dataclass(frozen=True)
class WritingRules:
    """The constants that tell the two writing rewards apart."""

    words: tuple[int, int]
    length_band: Band
    vocabulary_band: Band
    transitions_in_both: bool
    """False: count categories in c2 only (TLDR); True: in c1 + c2 joined (arXiv)."""
    jaccard_cap: float


TLDR_RULES = WritingRules((8, 256), _tldr_length, _tldr_vocabulary, False, 0.03)
ARXIV_RULES = WritingRules((128, 256), _arxiv_length, _arxiv_vocabulary, True, 0.23)


def word_set(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def transition_categories(text: str, mode: str = "substring") -> int:
    """How many transition categories have a phrase in `text` (lower-cased)."""
    if mode not in TRANSITION_MODES:
        raise ValueError(f"transitions must be one of {TRANSITION_MODES}, got {mode!r}")
    lowered = text.lower()
    _, categories = lexicon()
    if mode == "substring":
        return sum(any(p in lowered for p in phrases) for phrases in categories.values())
    padded = " " + " ".join(_WORD.findall(lowered)) + " "
    return sum(
        any(f" {' '.join(_WORD.findall(p))} " in padded for p in phrases)
        for phrases in categories.values()
    )


def transition_score(k: int) -> float:
    return 0.0 if k == 0 else min(1.0, 0.4 + min(0.05 * (k - 1), 0.6))


def score_writing(
    c1: str,
    c2: str,
    rules: WritingRules,
    *,
    transitions: str = "substring",
    vocabulary_stopwords: bool = True,
) -> RewardBreakdown:
    """The gated reward of two texts under `rules` (see the module docstring)."""
    if not isinstance(c1, str) or not isinstance(c2, str):
        raise TypeError("both texts must be str")
    if transitions not in TRANSITION_MODES:
        raise ValueError(f"transitions must be one of {TRANSITION_MODES}, got {transitions!r}")
    stopwords, _ = lexicon()
    n1, n2 = len(c1.split()), len(c2.split())
    words1, words2 = word_set(c1), word_set(c2)
    if not vocabulary_stopwords:
        words1, words2 = words1 - stopwords, words2 - stopwords
    content1, content2 = word_set(c1) - stopwords, word_set(c2) - stopwords
    union = content1 | content2
    jaccard = len(content1 & content2) / len(union) if union else 1.0
    length_ratio = len(c2) / len(c1) if c1 else 0.0
    unique_ratio = len(words2) / len(words1) if words1 else 0.0
    k = transition_categories(c1 + c2 if rules.transitions_in_both else c2, transitions)

    parts = dict.fromkeys(
        ("structure", "coordination", "vocabulary", "transitions", "jaccard"), 0.0
    )
    level = 0
    low, high = rules.words
    if low <= n1 <= high and low <= n2 <= high:
        parts["structure"] = STRUCTURE_REWARD
        level = 1
        coordination = rules.length_band(length_ratio) if c1 else None
        if coordination is not None:
            parts["coordination"] = COORDINATION_REWARD * coordination
            level = 2
            vocabulary = rules.vocabulary_band(unique_ratio) if words1 else None
            if vocabulary is not None:
                parts["vocabulary"] = vocabulary
                parts["transitions"] = TRANSITION_WEIGHT * transition_score(k)
                parts["jaccard"] = (
                    JACCARD_WEIGHT * min(jaccard, rules.jaccard_cap) / rules.jaccard_cap
                )
                level = 4
    total = sum(parts.values())
    metrics = {
        "score": total / MAX_SCORE,
        "level": float(level),
        "words_1": float(n1),
        "words_2": float(n2),
        "length_ratio": length_ratio,
        "unique_ratio": unique_ratio,
        "transition_categories": float(k),
        "jaccard": jaccard,
    }
    return RewardBreakdown(total, parts, metrics)


def score_tldr(concise: str, detailed: str, **variant: object) -> RewardBreakdown:
    """TLDR reward (max 3.0): a concise summary c1 and a detailed one c2 of the same post."""
    return score_writing(concise, detailed, TLDR_RULES, **variant)  # type: ignore[arg-type]


def score_arxiv(background: str, methodology: str, **variant: object) -> RewardBreakdown:
    """arXiv reward (max 3.0): background/motivation c1 and methodology/implications c2."""
    return score_writing(background, methodology, ARXIV_RULES, **variant)  # type: ignore[arg-type]


def split_single_answer(text: str, marker: str = SPLIT_MARKER) -> tuple[str, str]:
    """The single-agent baseline's answer as its two parts: before and after the first marker
    (stripped). Without a marker, the whole text is part one and part two is empty."""
    first, found, second = text.partition(marker)
    return (first.strip(), second.strip()) if found else (text.strip(), "")
