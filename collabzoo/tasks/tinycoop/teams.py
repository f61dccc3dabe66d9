"""TinyCoop's scripted oracle: every turn won."""

from __future__ import annotations

import re

_TINYCOOP_ROUND = re.compile(r"\b(alpha|beta) r\d+/\d+ s=([01])\b")


def tinycoop_oracle(observation: str) -> str:
    """The roles: alpha answers a character of the signal's parity ("0" even, "1" odd), beta
    one of the other parity, so every turn is won. Reads the newest round line
    ("beta r2/4 s=1") of the observation, so it works with every memory mode."""
    rounds = _TINYCOOP_ROUND.findall(observation)
    if not rounds:
        raise ValueError("no TinyCoop round line ('alpha r1/4 s=1') in the observation")
    agent, signal = rounds[-1]
    return signal if agent == "alpha" else str(1 - int(signal))
