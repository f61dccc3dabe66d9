"""The writing tasks' scripted teams: a heuristic built to score near the maximum of the writing
rewards (see `tldr_heuristic_texts` and `arxiv_heuristic_texts`), and naive writers that both
copy the first sentences of the source. Each reads only its observation.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from collabzoo.tasks.writing.rewards import SPLIT_MARKER, word_set

_SOURCE_BLOCK = re.compile(
    r"^--- (post|abstract) ---\n(.*?)\n--- end of \1 ---$", re.MULTILINE | re.DOTALL
)
_PART_LINE = re.compile(r"Your part: ([^.]+)\.")
_SENTENCE_BREAK = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')\]]))\s+")
_WRITING_PARTS = ("concise", "detailed", "background", "methodology")


def _writing_source(observation: str) -> str:
    """The source text (post or abstract) of the first source block in the observation."""
    match = _SOURCE_BLOCK.search(observation)
    if match is None:
        raise ValueError("no '--- post ---' or '--- abstract ---' block in the observation")
    return match.group(2)


def _writing_part(observation: str) -> str:
    """Which text this agent writes: a role name, or "both" for the single writer."""
    match = _PART_LINE.search(observation)
    if match is None:
        raise ValueError("no 'Your part: ...' line in the observation")
    phrase = match.group(1)
    if phrase.startswith("both"):
        return "both"
    for part in _WRITING_PARTS:
        if part in phrase:
            return part
    raise ValueError(f"unknown writing part {phrase!r}")


def _sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_BREAK.split(" ".join(text.split())) if s]


def _post_sentences(source: str) -> list[str]:
    """Sentences of a TLDR post's body: the text after 'POST:', or the whole source where
    there is no such label or the body is under 30 words."""
    _, found, body = source.partition("POST:")
    return _sentences(body if found and len(body.split()) >= 30 else source)


def _as_sentence(words: Iterable[str]) -> str:
    return " ".join(words).rstrip(" ,;:-.!?") + "."


def _joined(*parts: str) -> str:
    return " ".join(p for p in parts if p)


TLDR_CLOSING = (
    "In fact, the poster first wants to know what to do next. However, if nothing changes, "
    "the problem will likewise persist, for example as tension grows; as a result, overall, "
    "a clear plan matters."
)
"""The detailed summary's last sentences: a phrase from each of the 12 transition categories."""


def tldr_heuristic_texts(source: str) -> tuple[str, str]:
    """(concise, detailed) summaries of a post, built to score near the TLDR maximum.

    Both agents run this same function on the same post, so each knows the other's text
    exactly and returns its own half. Level by level:
    1. The concise summary is the post's first whole sentences, at least 14 words and 110
       characters (up to 36 words, else cut at 28); the detailed one is 50-100 words. Both
       are in 8..256.
    2. The detailed summary restates the concise one ("In short, ..."), adds the post's next
       whole sentences while it stays under 2.9 times the concise length, and ends with
       `TLDR_CLOSING`; the 110-character floor keeps the ratio under 3.2 even with no middle.
    3. The closing adds about 30 distinct words, so the detailed summary has at least twice
       the distinct words; if not, the concise one loses words from its end until it does.
    4. `TLDR_CLOSING` holds a phrase of every one of the 12 transition categories (T = 0.95,
       the most 12 categories can earn: 1.0 would need 13), and restating the concise summary
       shares all of its content words (Jaccard far above 0.03).
    The best total is 0.5 + 1.0 + 0.5 + 0.4 * 0.95 + 0.6 = 2.98.
    """
    sentences = _post_sentences(source)
    words = " ".join(sentences).split()
    if not words:
        return "", ""
    taken, count = 0, 0
    while taken < len(sentences) and (count < 14 or len(" ".join(words[:count])) < 110):
        count += len(sentences[taken].split())
        taken += 1
    if count > 36:  # a long sentence: cut it
        count = 28
    while True:
        concise = _as_sentence(words[:count])
        core = concise[:-1]
        if not (core[:2] in ("I ", "I'") or core.split()[0].isupper()):
            core = core[:1].lower() + core[1:]
        middle: list[str] = []
        for sentence in sentences[taken:]:
            trial = _joined(f"In short, {core}.", *middle, sentence, TLDR_CLOSING)
            if len(trial) > 2.9 * len(concise):
                break
            middle.append(sentence)
        detailed = _joined(f"In short, {core}.", *middle, TLDR_CLOSING)
        if count <= 10 or len(word_set(detailed)) >= 2.05 * len(word_set(concise)):
            return concise, detailed
        count -= 1


ARXIV_BACKGROUND_OPEN = (
    "To begin with, this work addresses a question that matters in practice, and in particular "
    "one that earlier approaches leave open."
)
ARXIV_BACKGROUND_CLOSE = (
    "Therefore, a clearer account is needed; however, the difficulty is not only a matter of "
    "data, since related settings, such as larger ones, share it."
)
ARXIV_BACKGROUND_EXTRA = (
    "Earlier studies have approached this question from several directions, yet their "
    "conclusions do not agree, and the reasons for the disagreement remain unclear."
)
ARXIV_METHOD_OPEN = "Specifically, the work proceeds in several steps."
ARXIV_METHOD_CLOSE = (
    "In summary, the results matter beyond this study: similarly, if they hold in other "
    "settings, they could guide later work, although further tests are still needed. Overall, "
    "the approach is, indeed, a useful step."
)
ARXIV_METHOD_EXTRA = (
    "Each step is checked against the earlier ones, so that the results can be compared directly."
)


def _grow(parts: list[str], pool: Iterable[str], close: str, too_long: Callable[[str], bool]):
    """Append whole sentences of `pool` to `parts` while the text (with `close`) fits."""
    for sentence in pool:
        if too_long(_joined(*parts, sentence, close)):
            return False
        parts.append(sentence)
    return True


def _grow_words(parts: list[str], sentence: str, close: str, too_long: Callable[[str], bool]):
    """Append the longest start of `sentence` that fits, as a sentence."""
    words = sentence.split()
    while words and too_long(_joined(*parts, _as_sentence(words), close)):
        words.pop()
    if words:
        parts.append(_as_sentence(words))


def arxiv_heuristic_texts(source: str) -> tuple[str, str]:
    """(background, methodology) parts from an abstract, built to score near the arXiv maximum.

    Both agents run this same function on the same abstract, so each knows the other's text
    exactly and returns its own half. Level by level:
    1. The background is a fixed opening, the abstract's first sentences up to 160 words in
       all (whole sentences; the start of one more, or fixed filler, if it would stay under
       140) and a fixed closing. The methodology stays under 250 words. Both are in 128..256.
    2. The methodology (a fixed opening, sentences, a fixed closing) is grown to 1.40-1.52
       times the background's length in characters, inside the full-credit band 1.3-1.6.
    3. Its sentences are the abstract's, in order, while the distinct-word ratio stays at most
       1.2; otherwise it restates a sentence the background already used ("As noted above,
       ..."), which adds length but few new words, so the ratio stays inside 0.7-1.3.
    4. The four fixed sentences together hold a phrase of all 12 transition categories
       (T = 0.95, the most there is), and both parts quote the same abstract sentences, so the
       Jaccard similarity of their content words is about 0.5, above the 0.23 cap.
    The best total is 0.5 + 1.0 + 0.5 + 0.4 * 0.95 + 0.6 = 2.98.
    """
    sentences = _sentences(source)
    parts = [ARXIV_BACKGROUND_OPEN]
    close = ARXIV_BACKGROUND_CLOSE

    def background_too_long(text: str) -> bool:
        return len(text.split()) > 160

    all_fit = _grow(parts, sentences, close, background_too_long)
    if not all_fit and len(_joined(*parts, close).split()) < 140:
        _grow_words(parts, sentences[len(parts) - 1], close, background_too_long)
    used = parts[1:]
    _grow(parts, [ARXIV_BACKGROUND_EXTRA] * 4, close, lambda t: len(t.split()) > 150)
    background = _joined(*parts, close)
    distinct = len(word_set(background))

    def method_too_long(text: str) -> bool:
        return len(text) > 1.52 * len(background) or len(text.split()) > 250

    fresh = list(sentences)
    recaps = [f"As noted above, {s[:1].lower()}{s[1:]}" for s in used]
    parts = [ARXIV_METHOD_OPEN]
    close = ARXIV_METHOD_CLOSE
    extras = [ARXIV_METHOD_EXTRA] * 4
    while len(_joined(*parts, close)) < 1.40 * len(background):
        if fresh and (
            not recaps or len(word_set(_joined(*parts, fresh[0], close))) <= 1.2 * distinct
        ):
            sentence = fresh.pop(0)
        elif recaps or extras:
            sentence = (recaps or extras).pop(0)
        else:
            break
        if method_too_long(_joined(*parts, sentence, close)):
            _grow_words(parts, sentence, close, method_too_long)
            break
        parts.append(sentence)
    return background, _joined(*parts, close)


def _writing_answer(observation: str, texts: Callable[[str], tuple[str, str]]) -> str:
    source = _writing_source(observation)
    first, second = texts(source)
    part = _writing_part(observation)
    if part == "both":
        return f"{first}\n{SPLIT_MARKER}\n{second}"
    return first if part in ("concise", "background") else second


def tldr_heuristic(observation: str) -> str:
    return _writing_answer(observation, tldr_heuristic_texts)


def arxiv_heuristic(observation: str) -> str:
    return _writing_answer(observation, arxiv_heuristic_texts)


def _first_sentences(observation: str, sentences: Callable[[str], list[str]]) -> str:
    """The first three sentences of the source; the single writer gives them as both parts."""
    copied = " ".join(sentences(_writing_source(observation))[:3])
    if _writing_part(observation) == "both":
        return f"{copied}\n{SPLIT_MARKER}\n{copied}"
    return copied


def tldr_naive(observation: str) -> str:
    """The post's first three sentences, whatever the role."""
    return _first_sentences(observation, _post_sentences)


def arxiv_naive(observation: str) -> str:
    """The abstract's first three sentences, whatever the role."""
    return _first_sentences(observation, _sentences)
