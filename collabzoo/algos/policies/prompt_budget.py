"""Fitting a long prompt into a token budget without losing its structure.

A prompt that is too long is cut inside the text, never from the outside of the chat template
(that would remove the template's header): each cut part keeps its most recent tokens behind a
visible `TRUNCATION_MARK`. A joint state (a centralized critic's view of every agent) names its
parts, the agents' observations, and they share the budget: a part shorter than its equal share
keeps everything and leaves the rest to the others, so no agent is ever dropped whole.
"""

from __future__ import annotations

from collections.abc import Sequence

TRUNCATION_MARK = "[... earlier text cut ...]\n"
"""Put where a part lost its beginning, so the model (and a reader) can see the cut."""


def split_parts(text: str, parts: Sequence[str]) -> list[tuple[str, bool]]:
    """`text` as (segment, shrinkable) pieces: each of `parts` found in order (non-empty ones)
    is shrinkable, the text between them is fixed. Parts not found in order make the whole text
    one shrinkable piece (a state whose layout is unknown is cut as one text)."""
    pieces: list[tuple[str, bool]] = []
    position = 0
    for part in parts:
        if not part:
            continue
        found = text.find(part, position)
        if found < 0:
            return [(text, True)]
        if found > position:
            pieces.append((text[position:found], False))
        pieces.append((part, True))
        position = found + len(part)
    if position < len(text):
        pieces.append((text[position:], False))
    return pieces if any(shrink for _, shrink in pieces) else [(text, True)]


def share_budget(lengths: Sequence[int], budget: int) -> list[int]:
    """Token allowances for parts of the given lengths, summing to at most `budget`: equal
    shares, where a part that needs less than its share keeps its length and the unused rest
    goes to the others (water filling)."""
    if budget < 0:
        raise ValueError(f"budget must be non-negative, got {budget}")
    allowance = [0] * len(lengths)
    open_parts = sorted(range(len(lengths)), key=lambda i: lengths[i])
    left = budget
    while open_parts:
        share = left // len(open_parts)
        smallest = open_parts[0]
        if lengths[smallest] <= share:  # fits whole: frees the rest of its share
            allowance[smallest] = lengths[smallest]
            left -= lengths[smallest]
            open_parts.pop(0)
            continue
        spare = left - share * len(open_parts)
        for rank, index in enumerate(open_parts):  # the longest parts get the odd tokens
            allowance[index] = share + (1 if rank >= len(open_parts) - spare else 0)
        break
    return allowance


__all__ = ["TRUNCATION_MARK", "share_budget", "split_parts"]
