"""TinyCoop-v0: a cooperative parity game for checking that a learner learns at all.

Built for byte-level language models of 0.1-1M parameters trained from scratch on a CPU: the
observations are a few dozen characters, a random policy already wins about half the turns
(a dense signal), and the best behaviour is one simple convention. The scoring lives in
`collabzoo.tasks.tinycoop.rewards`; this env only deals the signals and writes the prompts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from collabzoo.envs.text_env import TextCollabEnv, TurnResult
from collabzoo.tasks.tinycoop import rewards as rules

MAX_ITEMS = 64


def signals_of(item: int, horizon: int) -> tuple[int, ...]:
    """The signal of each turn: bit t of the item is the signal of turn t."""
    return tuple((item >> t) & 1 for t in range(horizon))


class TinyCoopEnv(TextCollabEnv[int]):
    """Agents `alpha` and `beta` each answer one text per turn; only the parity of its first
    character counts. The team wins a turn (reward 1.0) iff alpha's parity equals the turn's
    signal bit, which both agents see, and beta's parity differs from it.

    Task items are the signal sequences: the integers 0 .. min(2**H, 64) - 1, whose H low bits
    are the signals of turns 0 .. H-1 (so from H = 7 on, the signals of turns 6 and later are
    always 0). The task id is the signals in turn order, e.g. "0110". The task is synthetic, so
    the "train", "eval" and "all" splits all hold every item.

    Observations are tiny: "tinycoop alpha r1/4 s=1 >" at the first turn, then
    "alpha r2/4 s=0 last=win >" (agent, round, signal, the last turn's outcome), and after the
    last turn "alpha done 3/4 last=win >" (turns won). With the default memory "none" nothing
    else is shown besides the base env's turn header.

    Args:
        split: default split for `reset` ("train", "eval" or "all"; they hold the same items).
        memory: how much of its own history an agent sees: "none" (this env's default),
            "last" or "full".
        horizon: turns per episode (default 1).
        sparse: pay 0.0 on every turn but the last, which pays the fraction of turns won
            (for credit-assignment experiments); default False (each turn pays its own win).
        render_mode: "ansi" makes `render()` return a text picture of the episode so far;
            "human" prints it at every reset and step; None (default) leaves rendering off.
    """

    metadata: ClassVar[dict[str, Any]] = {
        "name": "tinycoop_v0",
        "render_modes": ["ansi", "human"],
        "is_parallelizable": True,
    }
    roles = ("alpha", "beta")
    default_horizon = 1
    max_reward = rules.MAX_SCORE

    def __init__(
        self,
        *,
        split: str = "train",
        memory: str = "none",
        horizon: int | None = None,
        sparse: bool = False,
        render_mode: str | None = None,
    ) -> None:
        super().__init__(split=split, memory=memory, horizon=horizon, render_mode=render_mode)
        if not isinstance(sparse, bool):
            raise ValueError(f"sparse must be True or False, got {sparse!r}")
        self.sparse = sparse
        self._signals: tuple[int, ...] = ()
        self._played: list[tuple[str, str, bool]] = []

    # ----- task items -----------------------------------------------------------------------
    def _load_items(self, split: str) -> Sequence[int]:
        return list(range(min(2**self.horizon, MAX_ITEMS)))

    def _item_id(self, item: int) -> str:
        return "".join(str(s) for s in signals_of(item, self.horizon))

    def _begin_episode(self, item: int, options: Mapping[str, Any]) -> dict[str, Any]:
        self._signals = signals_of(item, self.horizon)
        self._played = []
        return {}

    # ----- prompts --------------------------------------------------------------------------
    def _round(self, agent: str, turn: int) -> str:
        return f"{agent} r{turn + 1}/{self.horizon} s={self._signals[turn]}"

    def _role_prompt(self, agent: str) -> str:
        return f"tinycoop {self._round(agent, 0)} >"

    def _feedback(self, agent: str, won: bool) -> str:
        last = "win" if won else "lose"
        nxt = len(self._played)
        if nxt < self.horizon:
            return f"{self._round(agent, nxt)} last={last} >"
        wins = sum(w for *_, w in self._played)
        return f"{agent} done {wins}/{self.horizon} last={last} >"

    # ----- a turn ---------------------------------------------------------------------------
    def _play_turn(self, answers: Mapping[str, str]) -> TurnResult:
        alpha, beta = answers["alpha"], answers["beta"]
        turn = rules.score_tinycoop(alpha, beta, self._signals[self.turn])
        won = turn.total > 0
        self._played.append((rules.first_char(alpha), rules.first_char(beta), won))
        wins = sum(w for *_, w in self._played)
        breakdown = rules.tinycoop_reward(
            turn, wins, len(self._played), self.horizon, sparse=self.sparse
        )
        return TurnResult(
            breakdown=breakdown,
            parsed={
                agent: {"first_char": rules.first_char(text), "parity": rules.parity(text)}
                for agent, text in answers.items()
            },
            feedback={agent: self._feedback(agent, won) for agent in self.possible_agents},
        )

    def _render_ansi(self) -> str:
        mode = ", sparse" if self.sparse else ""
        lines = [
            f"TinyCoop {self._item_id(self.item)!r}, after turn {self.turn} of "
            f"{self.horizon}{mode}",
            "turn  s  alpha   beta    win",
        ]
        for t, (a, b, won) in enumerate(self._played):
            lines.append(
                f"{t + 1:<4}  {self._signals[t]}  {a!r:<6}  {b!r:<6}  {'yes' if won else 'no'}"
            )
        wins = sum(w for *_, w in self._played)
        lines.append(f"won {wins} of {len(self._played)}")
        if len(self._played) < self.horizon:
            lines.append(f"next signal: s={self._signals[len(self._played)]}")
        return "\n".join(lines)
