"""TextArena's games as ParallelEnvs (`collabzoo.integrations.textarena`), and a collabzoo
learner training on one."""

from __future__ import annotations

import copy
import re

import pytest

from collabzoo.integrations.textarena import TextArenaParallelEnv
from tests.optional import require_module


@pytest.fixture(autouse=True)
def textarena():
    """Every test here needs TextArena: a skip outside CI, a failure under CI=true."""
    return require_module("textarena", "interop")


def first_legal_move(observation: str) -> str:
    """A scripted TicTacToe player: the lowest free cell of the newest board."""
    line = [ln for ln in observation.splitlines() if ln.startswith("Available Moves")][-1]
    return re.findall(r"\[\d+\]", line)[0]


def cell_of(text: str) -> str:
    """A move from any text (for byte-level models trained from scratch): its first character."""
    return f"[{ord(text[0]) % 9}]" if text else "[0]"


def test_a_game_against_the_opponent_ends_with_the_librarys_rewards() -> None:
    env = TextArenaParallelEnv("TicTacToe-v0", opponent=first_legal_move)
    observations, _ = env.reset(seed=0)
    assert env.agents == ["player_0"] and "Tic Tac Toe" in observations["player_0"]
    replay = copy.deepcopy(env)
    # Column 2, 5, 8 while the opponent fills 0, 1, 3: player_0 wins on its third move.
    for move in ("[2]", "[5]"):
        observations, rewards, terminations, _, _ = env.step({"player_0": move})
        assert rewards == {"player_0": 0.0} and not terminations["player_0"]
    assert "placed their symbol (X) in cell 1" in observations["player_0"]
    _, rewards, terminations, _, infos = env.step({"player_0": "[8]"})
    assert rewards == {"player_0": 1.0} and terminations["player_0"] and env.agents == []
    assert infos["player_0"]["metrics"]["win"] == 1.0
    # The copy made at the start plays on its own; two invalid moves lose by TextArena's rules.
    assert replay.step({"player_0": "no move"})[1] == {"player_0": 0.0}
    _, rewards, _, _, infos = replay.step({"player_0": "still none"})
    assert rewards == {"player_0": -1.0} and infos["player_0"]["game_info"]["invalid_move"]


def test_without_an_opponent_only_the_player_to_move_acts() -> None:
    env = TextArenaParallelEnv("TicTacToe-v0")
    env.reset(seed=1)
    assert env.possible_agents == ["player_0", "player_1"] and env.agents == ["player_0"]
    env.step({"player_0": "[4]"})
    assert env.agents == ["player_1"]
    with pytest.raises(TypeError, match="only the player to move acts"):
        env.step({"player_0": "[0]"})
    with pytest.raises(ValueError, match="TextArena has no game"):
        TextArenaParallelEnv("NoSuchGame-v0")


def test_magrpo_updates_a_tiny_model_on_tictactoe(tmp_path) -> None:
    torch = require_module("torch", "train")
    from collabzoo.algos import LLMPolicy, MAGRPOConfig, MAGRPOTrainer, tiny_causal_lm

    torch.manual_seed(0)
    policy = LLMPolicy(*tiny_causal_lm(0, max_positions=8192))
    before = [p.detach().clone() for p in policy.model.parameters()]
    games: list[float] = []

    class Counted(TextArenaParallelEnv):
        def step(self, actions):
            result = super().step(actions)
            if not self.agents:
                games.append(result[1]["player_0"])
            return result

    config = MAGRPOConfig(
        output_dir=str(tmp_path),
        max_updates=2,
        save_steps=0,
        rollout_buffer_size=2,
        num_generations=2,
        max_new_tokens=1,
        temperature=1.0,
        top_p=1.0,
        top_k=None,
        agent_learning_rate=1e-2,
        tensorboard=False,
        progress=False,
    )
    env = Counted("TicTacToe-v0", opponent=first_legal_move, action_format=cell_of)
    trainer = MAGRPOTrainer(lambda: copy.deepcopy(env), {"player_0": policy}, config)
    trainer.train()
    assert trainer.update == 2 and trainer.rollout.env_steps > 2 * 2 * 2
    assert games and set(games) <= {-1.0, 0.0, 1.0} and len(set(games)) > 1
    assert any(
        not torch.equal(p, q) for p, q in zip(policy.model.parameters(), before, strict=True)
    )
