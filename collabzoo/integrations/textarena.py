"""TextArena's turn-based text games as PettingZoo ParallelEnvs, for any collabzoo learner.

TextArena (a third-party suite of text games) plays one player at a time: `get_observation()`
names the player to move, `step(action)` plays its move, `close()` gives the final rewards.
As a ParallelEnv, `env.agents` holds only the player to move, so a learner samples an action
for that player alone; the others are not asked. The episode ends when the game does.

With `opponent=` (a text-in, text-out callable, e.g. a scripted player) the env plays
`player_1` itself and `player_0` is the only agent: one model learns against a fixed opponent,
and its reward is its own game reward (win +1, loss -1, draw 0 in the two-player games).
Without one, each agent's reward is its own; a team learner averages the rewards of the agents
that acted, so for a zero-sum game prefer the opponent mode or a learner per player.

`action_format` turns a completion into the game's move syntax (e.g. "[4]" in TicTacToe);
TextArena's own rules judge the move (an invalid one gets a retry, then loses).

    env = TextArenaParallelEnv("TicTacToe-v0", opponent=first_legal_move)
    observations, infos = env.reset(seed=0)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from pettingzoo import ParallelEnv

from collabzoo.envs.text_space import ACTION_MAX_CHARS, OBSERVATION_MAX_CHARS, LLMText


def _agent(player_id: int) -> str:
    return f"player_{player_id}"


class TextArenaParallelEnv(ParallelEnv):
    """A two-player TextArena game (`env_id`, e.g. "TicTacToe-v0") as a ParallelEnv."""

    metadata: ClassVar[dict[str, Any]] = {"name": "textarena_v0", "is_parallelizable": True}

    def __init__(
        self,
        env_id: str = "TicTacToe-v0",
        *,
        opponent: Callable[[str], str] | None = None,
        action_format: Callable[[str], str] | None = None,
        num_players: int = 2,
    ) -> None:
        import textarena

        if env_id not in textarena.envs.registration.ENV_REGISTRY:
            raise ValueError(f"TextArena has no game {env_id!r} (e.g. 'TicTacToe-v0', 'Nim-v0')")
        if opponent is not None and (num_players != 2 or not callable(opponent)):
            raise ValueError("opponent must be a callable (observation -> move) in a 2-player game")
        if action_format is not None and not callable(action_format):
            raise TypeError(f"action_format must be a callable (text -> move), got {action_format}")
        self.env_id = env_id
        self.opponent = opponent
        self.action_format = action_format
        self.num_players = num_players
        players = [_agent(k) for k in range(num_players)]
        self.possible_agents = players[:1] if opponent is not None else players
        self.agents: list[str] = []
        self.observation_spaces = {a: LLMText(OBSERVATION_MAX_CHARS) for a in self.possible_agents}
        self.action_spaces = {a: LLMText(ACTION_MAX_CHARS) for a in self.possible_agents}
        self.game: Any = None
        self.moves = 0

    def observation_space(self, agent: str) -> LLMText:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> LLMText:
        return self.action_spaces[agent]

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
        import textarena

        self.game = textarena.make(env_id=self.env_id)
        self.game.reset(num_players=self.num_players, seed=seed)
        self.moves = 0
        done, info = self._opponent_moves()
        if done:  # the opponent ended the game before player_0 moved
            raise RuntimeError(f"{self.env_id}: the game ended before player_0 moved: {info}")
        agent, observation = self._mover()
        self.agents = [agent]
        return {agent: observation}, {agent: {"env_id": self.env_id, "turn": 0}}

    def _mover(self) -> tuple[str, str]:
        player_id, observation = self.game.get_observation()
        return _agent(player_id), observation

    def _opponent_moves(self) -> tuple[bool, Any]:
        """Play the opponent's moves until player_0 is to move or the game ends."""
        done, info = False, {}
        while self.opponent is not None and not done:
            player_id, observation = self.game.get_observation()
            if player_id == 0:
                break
            done, info = self.game.step(action=self.opponent(observation))
        return done, info

    def step(
        self, actions: Mapping[str, str]
    ) -> tuple[
        dict[str, str],
        dict[str, float],
        dict[str, bool],
        dict[str, bool],
        dict[str, dict[str, Any]],
    ]:
        if not self.agents:
            raise RuntimeError("the game has ended (or reset() was never called): call reset()")
        (mover,) = self.agents
        if not isinstance(actions, Mapping) or not isinstance(actions.get(mover), str):
            raise TypeError(f"step() takes {{{mover!r}: move text}}: only the player to move acts")
        move = actions[mover]
        done, info = self.game.step(action=self.action_format(move) if self.action_format else move)
        self.moves += 1
        if not done:
            done, info = self._opponent_moves()
        acted = self.possible_agents
        infos = {a: {"env_id": self.env_id, "turn": self.moves, "step_info": info} for a in acted}
        if done:
            game_rewards, game_info = self.game.close()
            rewards = {a: float(game_rewards.get(k, 0.0)) for k, a in enumerate(acted)}
            for k, agent in enumerate(acted):
                infos[agent]["game_info"] = game_info.get(k, {})
                infos[agent]["metrics"] = {"win": float(rewards[agent] > 0)}
            self.agents = []
            return {}, rewards, dict.fromkeys(acted, True), dict.fromkeys(acted, False), infos
        agent, observation = self._mover()
        self.agents = [agent]
        rewards = dict.fromkeys(acted, 0.0)
        return (
            {agent: observation},
            rewards,
            dict.fromkeys(acted, False),
            dict.fromkeys(acted, False),
            infos,
        )

    def close(self) -> None:
        self.game = None
