"""The single-agent Gymnasium view of every collabzoo env (`collabzoo/<Name>-single-v0`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

import collabzoo
from collabzoo.envs.scripted_teams import strbuild_oracle
from collabzoo.envs.single import SingleAgentView, combined_answer, single_agent_id
from tests.conftest import require


def test_every_env_has_a_registered_single_agent_id_and_importing_stays_torch_free() -> None:
    ids = [single_agent_id(name) for name in collabzoo.names()]
    assert "collabzoo/CoopHumanEval-single-v0" in ids
    assert all(i in gymnasium.registry for i in ids)
    code = "import sys, gymnasium, collabzoo; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_games_take_a_combined_answer_and_score_it_as_the_team() -> None:
    view = gymnasium.make("collabzoo/StrBuild-single-v0")
    team = collabzoo.make("strbuild")
    prompt, info = view.reset(seed=3, options={"task": "LLM"})
    observations, _ = team.reset(seed=3, options={"task": "LLM"})
    assert all(observations[role] in prompt for role in team.possible_agents)
    answers = {role: strbuild_oracle(observations[role]) for role in team.possible_agents}
    _, reward, terminated, truncated, info = view.step(combined_answer(answers))
    _, rewards, *_ = team.step(answers)
    assert reward == rewards["first_builder"] > 0 and not terminated and not truncated
    assert info["headers_found"] == ["first_builder", "second_builder"]
    # Without headers the whole answer is the first role's; the second answers nothing.
    _, _, _, _, info = view.step(answers["first_builder"])
    assert info["headers_found"] == [] and info["roles"]["second_builder"]["parsed"]


def test_code_and_writing_use_their_own_single_agent_mode(shared_data: Path) -> None:
    data = require(shared_data / "coophumaneval" / "CoopHumanEval.json", "CoopHumanEval")
    code = gymnasium.make("collabzoo/CoopHumanEval-single-v0", data=str(data))
    assert code.unwrapped.roles == ["solver"]
    prompt, info = code.reset(seed=0)
    assert prompt == code.unwrapped.env.observe("solver") and info["task_id"]
    writing = gymnasium.make("collabzoo/TLDR-single-v0", data="sample")
    prompt, _ = writing.reset(seed=0)
    assert writing.unwrapped.roles == ["writer"] and "---" in prompt


def test_gymnasium_accepts_the_view_and_bad_input_is_named() -> None:
    check_env(SingleAgentView("tinycoop", horizon=3), skip_render_check=True)
    view = SingleAgentView("tinycoop")
    view.reset(seed=0)
    with pytest.raises(TypeError, match="one whole completion"):
        view.step(["1", "2"])
    with pytest.raises(TypeError, match="accepts"):
        SingleAgentView("tinycoop", colour="red")
    with pytest.raises(TypeError, match="made already"):
        SingleAgentView(collabzoo.make("tinycoop"), horizon=2)


def test_one_role_against_partners() -> None:
    from collabzoo.envs.scripted_teams import tinycoop_oracle

    view = gymnasium.make(
        "collabzoo/TinyCoop-single-v0", role="alpha", partners={"beta": tinycoop_oracle}
    )
    prompt, _ = view.reset(seed=0, options={"task": "1"})
    assert prompt.startswith("tinycoop alpha") and "beta" not in prompt
    assert view.step("1")[1] == 1.0  # signal 1: odd alpha, the oracle answers an even beta
    view.reset(seed=0, options={"task": "1"})
    assert view.step("2")[1] == 0.0
    with pytest.raises(ValueError, match="partners must map each other role"):
        SingleAgentView("tinycoop", role="alpha")
    with pytest.raises(ValueError, match="role must be one of"):
        SingleAgentView("tinycoop", role="gamma", partners={"beta": tinycoop_oracle})
    with pytest.raises(ValueError, match="partners need role="):
        SingleAgentView("tinycoop", partners={"beta": tinycoop_oracle})
