"""TinyCoop: a two-agent parity game small enough for byte-level models trained from scratch.

Each turn has a signal bit k in {0, 1}. Each agent's answer counts only by the parity of its
first character (`ord(first) % 2`, the Unicode code point: for ASCII that is the byte). The
team wins the turn iff both answers have a first character and

    parity(alpha) == k  and  parity(beta) != k                            (win: 1.0, else 0.0)

A random pair of answers wins a quarter of the turns; neither agent can win alone (a correct
answer still loses with a wrong partner); each agent must learn its own role from the signal.
(An XOR rule, where the team must first agree on a convention, was tried first: independent
learners fall into the signal-blind convention that wins exactly half the turns and stay there,
a fine research problem but no good test that a learner learns.)
"""

from __future__ import annotations

from collabzoo.rewards.breakdown import RewardBreakdown

MAX_SCORE = 1.0
NO_PARITY = -1.0
"""The parity metric of an empty answer (it has no first character, so no parity)."""


def first_char(answer: str) -> str:
    """The first character of an answer, or "" for an empty one. Nothing is stripped."""
    return answer[:1]


def parity(answer: str) -> int | None:
    """`ord % 2` of the answer's first character; None for an empty answer."""
    return ord(answer[0]) % 2 if answer else None


def score_tinycoop(alpha_answer: str, beta_answer: str, signal: int) -> RewardBreakdown:
    """One turn: 1.0 iff alpha's parity equals `signal` and beta's parity differs from it.

    Component `win` (the whole reward); metrics `win`, `alpha_parity`, `beta_parity` (0.0 or
    1.0, or -1.0 for an empty answer) and `has_both` (1.0 iff neither answer is empty).
    """
    if isinstance(signal, bool) or signal not in (0, 1):
        raise ValueError(f"signal must be 0 or 1, got {signal!r}")
    a, b = parity(alpha_answer), parity(beta_answer)
    has_both = a is not None and b is not None
    win = 1.0 if has_both and a == signal and b != signal else 0.0
    return RewardBreakdown(
        total=win,
        components={"win": win},
        metrics={
            "win": win,
            "alpha_parity": NO_PARITY if a is None else float(a),
            "beta_parity": NO_PARITY if b is None else float(b),
            "has_both": 1.0 if has_both else 0.0,
        },
    )


def tinycoop_reward(
    turn: RewardBreakdown, wins: int, played: int, horizon: int, *, sparse: bool
) -> RewardBreakdown:
    """The reward an env pays for a scored turn, `played` turns into a `horizon`-turn episode
    in which `wins` turns (this one included) were won.

    Dense (the default): the turn's own score. Sparse: 0.0 on every turn but the last, which
    pays `wins / horizon`; its one component is `win_fraction`. Both add metric `win_rate`, the
    fraction of the turns played so far that were won.
    """
    if not 1 <= played <= horizon or not 0 <= wins <= played:
        raise ValueError(f"need 0 <= wins <= played <= horizon, got {wins}, {played}, {horizon}")
    metrics = {**turn.metrics, "win_rate": wins / played}
    if not sparse:
        return RewardBreakdown(turn.total, dict(turn.components), metrics)
    paid = wins / horizon if played == horizon else 0.0
    return RewardBreakdown(paid, {"win_fraction": paid}, metrics)
