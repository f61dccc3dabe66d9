"""PettingZoo's own test utilities (`pettingzoo.test`) on every registered env and its views.

Every utility that an env with text spaces can pass runs on every env: `parallel_api_test` and
`parallel_seed_test` on the ParallelEnv; `seed_test`, `state_test`, `render_test` and
`performance_benchmark` on its AEC view, made as PettingZoo users make it
(`pettingzoo.make("aec", id)`). `api_test` stops at one check that no env with a
`gymnasium.spaces.Text` space can pass in PettingZoo 1.27 (it reads `.dtype` off the `str`
observation): a minimal AEC env with a plain `Text` space shows the same failure, and the rest of
`api_test` runs with that one check replaced by its `Text` counterpart. The numeric view passes
the whole `api_test`; the single-agent view passes Gymnasium's `check_env` in every render mode.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import gymnasium
import pettingzoo
import pytest
from gymnasium.utils.env_checker import check_env
from pettingzoo import AECEnv, ParallelEnv
from pettingzoo.test import (
    api_test,
    parallel_api_test,
    parallel_seed_test,
    performance_benchmark,
    render_test,
    seed_test,
    state_test,
)
from pettingzoo.utils.conversions import aec_to_parallel, parallel_to_aec
from pettingzoo.utils.wrappers import BaseWrapper

import collabzoo
from collabzoo.envs.single import SingleAgentView
from collabzoo.envs.text_env import RENDER_MODES
from collabzoo.tasks.building.envs.housebuild import HouseBuildEnv
from collabzoo.tasks.building.envs.strbuild import StrBuildEnv
from collabzoo.tasks.building.numeric import BuildingGridEnv
from tests.conftest import require

# The module, not the function of the same name that `pettingzoo.test` exports.
API_TEST = importlib.import_module("pettingzoo.test.api_test")
DTYPE_FAILURE = "'str' object has no attribute 'dtype'"
ORIGINAL_COMPATIBILITY = API_TEST._test_observation_space_compatibility
CYCLES = 10  # every env's horizon is at most 4 turns: 10 cycles cross episode ends

# Envs whose default data comes from the hub get the local reference copy instead.
LOCAL_DATA = {
    "collabzoo/CoopHumanEval-v0": "coophumaneval/CoopHumanEval.json",
    "collabzoo/HumanEval-v0": "humaneval/HumanEval.jsonl.gz",
    "collabzoo/MBPP-v0": "mbpp/MBPP.json",
    "collabzoo/ClassEval-v0": "classeval/ClassEval_data.json",
    "collabzoo/TravelPlanner-v0": "travelplanner/std_travelplanner.jsonl",
    "collabzoo/BFCL-v0": "bfcl",
    "collabzoo/BFCLMultiTurn-v0": "bfcl",
}
# Envs whose default data comes from the hub with an embedded sample: the sample, no network.
EMBEDDED_SAMPLE = {"collabzoo/TLDR-v0", "collabzoo/ArXiv-v0"}


@pytest.fixture(params=collabzoo.names())
def env_id(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def env_kwargs(env_id: str, request: pytest.FixtureRequest) -> dict[str, Any]:
    """What an env needs here: local reference data and the code sandbox, or the sample."""
    kwargs: dict[str, Any] = {}
    if env_id in LOCAL_DATA:
        path = request.getfixturevalue("shared_data") / LOCAL_DATA[env_id]
        kwargs["data"] = str(require(path, env_id))
        if "sandbox" in inspect.signature(collabzoo.envs.resolve(env_id).load()).parameters:
            kwargs["sandbox"] = request.getfixturevalue("code_sandbox")
    if env_id in EMBEDDED_SAMPLE:
        kwargs["data"] = "sample"
    return kwargs


@pytest.fixture
def parallel_env_fn(env_id: str, env_kwargs: dict[str, Any]) -> Callable[..., ParallelEnv]:
    return functools.partial(collabzoo.make, env_id, **env_kwargs)


@pytest.fixture
def aec_env_fn(env_id: str, env_kwargs: dict[str, Any]) -> Callable[..., AECEnv]:
    return functools.partial(pettingzoo.make, "aec", env_id, **env_kwargs)


def text_aware_compatibility(
    expected: gymnasium.spaces.Space, seen: Any, recursed_keys: list[str]
) -> None:
    """`api_test`'s dtype check, with what it means for a `Text` space: the observation is a
    `str` (a `Text` space's dtype is numpy's `<U0`, which no observation carries)."""
    if isinstance(expected, gymnasium.spaces.Text):
        assert isinstance(seen, str), f"a Text space's observation must be a str, got {seen!r}"
        return
    ORIGINAL_COMPATIBILITY(expected, seen, recursed_keys)


@pytest.fixture
def text_aware_api_test(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """`api_test` with its one Text-blind check replaced (PettingZoo's module, patched)."""
    monkeypatch.setattr(API_TEST, "_test_observation_space_compatibility", text_aware_compatibility)
    yield


class PlainTextEnv(AECEnv):
    """The smallest AEC env with a plain `gymnasium.spaces.Text` space: one agent, one turn,
    nothing of collabzoo and no conversion wrapper."""

    metadata = {"name": "plain_text_v0"}  # noqa: RUF012 (PettingZoo's own convention)
    possible_agents = ["player_0"]  # noqa: RUF012
    space = gymnasium.spaces.Text(8)

    def observation_space(self, agent: str) -> gymnasium.spaces.Text:
        return self.space

    def action_space(self, agent: str) -> gymnasium.spaces.Text:
        return self.space

    def observe(self, agent: str) -> str:
        return "hello"

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        self.agents, self.agent_selection = ["player_0"], "player_0"
        self.rewards, self._cumulative_rewards = {"player_0": 0}, {"player_0": 0}
        self.terminations, self.truncations = {"player_0": False}, {"player_0": False}
        self.infos = {"player_0": {}}

    def step(self, action: str | None) -> None:
        if self.terminations["player_0"]:
            self._was_dead_step(action)
        else:
            self.terminations = {"player_0": True}


def failing_function(error: pytest.ExceptionInfo[BaseException]) -> str:
    return error.traceback[-1].name


class Counted(BaseWrapper):
    """Counts the resets and steps that pass through it."""

    def __init__(self, env: AECEnv) -> None:
        super().__init__(env)
        self.resets = self.steps = 0

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        self.resets += 1
        super().reset(seed=seed, options=options)

    def step(self, action: Any) -> None:
        self.steps += 1
        super().step(action)


# ----- the registry's AEC view ------------------------------------------------------------------
def test_pettingzoo_makes_the_aec_view_of_every_env(
    env_id: str, env_kwargs: dict[str, Any]
) -> None:
    aec = pettingzoo.make("aec", env_id, horizon=2, **env_kwargs)
    parallel = collabzoo.make(env_id, **env_kwargs)
    assert isinstance(aec, AECEnv)
    assert type(aec.unwrapped) is type(parallel) and aec.unwrapped.horizon == 2
    assert aec_to_parallel(aec) is aec.unwrapped, "the view is PettingZoo's parallel_to_aec"
    assert pettingzoo.spec("aec", env_id).id == env_id
    short = collabzoo.envs.make_aec(env_id.split("/")[1].split("-")[0].lower(), **env_kwargs)
    assert type(short.unwrapped) is type(parallel)
    aec.reset(seed=0)
    first = aec.agent_selection
    aec.step(aec.action_space(first).sample())
    assert aec.agent_selection != first and aec.unwrapped.turn == 0, "the turn waits for all"


# ----- the utilities that pass as they are --------------------------------------------------------
def test_parallel_api_test(parallel_env_fn: Callable[..., ParallelEnv]) -> None:
    parallel_api_test(parallel_env_fn(), num_cycles=CYCLES)


def test_parallel_seed_test(parallel_env_fn: Callable[..., ParallelEnv]) -> None:
    parallel_seed_test(parallel_env_fn, num_cycles=CYCLES)


def test_seed_test_on_the_aec_view(aec_env_fn: Callable[..., AECEnv]) -> None:
    seed_test(aec_env_fn, num_cycles=CYCLES)


def test_state_test(
    aec_env_fn: Callable[..., AECEnv], parallel_env_fn: Callable[..., ParallelEnv]
) -> None:
    state_test(aec_env_fn(), parallel_env_fn(), num_cycles=CYCLES)


def test_render_test(aec_env_fn: Callable[..., AECEnv], capsys: pytest.CaptureFixture) -> None:
    assert aec_env_fn().metadata["render_modes"] == list(RENDER_MODES)
    render_test(aec_env_fn, custom_tests={"ansi": lambda picture: picture.strip() != ""})
    assert capsys.readouterr().out.strip(), "human mode printed its pictures"


def test_human_mode_prints_what_ansi_returns(
    parallel_env_fn: Callable[..., ParallelEnv], capsys: pytest.CaptureFixture
) -> None:
    ansi = parallel_env_fn(render_mode="ansi")
    human = parallel_env_fn(render_mode="human")
    ansi.reset(seed=3)
    human.reset(seed=3)
    assert capsys.readouterr().out == ansi.render() + "\n", "reset() prints the picture"
    for agent in human.possible_agents:
        human.action_space(agent).seed(3)
    pictures = {ansi.render()}
    while human.agents:
        actions = {a: human.action_space(a).sample() for a in human.agents}
        ansi.step(actions)
        human.step(actions)
        assert capsys.readouterr().out == ansi.render() + "\n", "step() prints the picture"
        pictures.add(ansi.render())
    assert human.render() is None
    assert capsys.readouterr().out == ansi.render() + "\n"
    assert len(pictures) > 1, "the picture follows the episode"


def test_performance_benchmark(
    aec_env_fn: Callable[..., AECEnv], capsys: pytest.CaptureFixture
) -> None:
    """It runs for 5 s whatever the env; what it must get right is restarting each episode."""
    env = Counted(aec_env_fn())
    performance_benchmark(env)
    out = capsys.readouterr().out
    turns, cycles = (
        float(re.search(rf"([\d.]+) {unit} per second", out).group(1))
        for unit in ("turns", "cycles")
    )
    agents = len(env.possible_agents)
    assert turns == pytest.approx(cycles * agents), "every cycle is one turn of every agent"
    per_episode = env.unwrapped.horizon * agents
    assert env.steps >= per_episode, "at least one whole episode"
    assert env.resets == 1 + env.steps // per_episode, "a reset after every episode's end"


# ----- api_test: PettingZoo's limit with Text spaces ----------------------------------------------
def test_api_test_fails_only_at_the_dtype_check_a_plain_text_env_fails_too(
    aec_env_fn: Callable[..., AECEnv],
) -> None:
    """If PettingZoo lifts its limit, this fails: then run `api_test` as it is, and say so in
    docs/envs/api.md."""
    with pytest.raises(AttributeError, match=DTYPE_FAILURE) as plain:
        api_test(PlainTextEnv(), num_cycles=CYCLES)
    with pytest.raises(AttributeError, match=DTYPE_FAILURE) as ours:
        api_test(aec_env_fn(), num_cycles=CYCLES)
    assert failing_function(ours) == failing_function(plain)
    assert failing_function(plain) == "_test_observation_space_compatibility"


@pytest.mark.usefixtures("text_aware_api_test")
def test_the_rest_of_api_test_passes(aec_env_fn: Callable[..., AECEnv]) -> None:
    api_test(PlainTextEnv(), num_cycles=CYCLES)
    api_test(aec_env_fn(), num_cycles=CYCLES)


@pytest.mark.usefixtures("text_aware_api_test")
def test_the_text_aware_check_still_catches_a_wrong_observation() -> None:
    class BytesObservation(PlainTextEnv):
        def observe(self, agent: str) -> bytes:
            return b"hello"

    with pytest.raises(AssertionError):
        api_test(BytesObservation(), num_cycles=CYCLES)


# ----- the numeric view: arrays, so every utility passes as it is -----------------------------
@pytest.mark.parametrize("game", [StrBuildEnv, HouseBuildEnv])
def test_numeric_view_passes_every_utility(game: type, capsys: pytest.CaptureFixture) -> None:
    def aec(**kwargs: Any) -> AECEnv:
        return parallel_to_aec(BuildingGridEnv(game(**kwargs), steps=4))

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        api_test(aec(), num_cycles=CYCLES)
        seed_test(aec, num_cycles=CYCLES)
        parallel_seed_test(lambda: BuildingGridEnv(game(), steps=4), num_cycles=CYCLES)
        state_test(aec(), BuildingGridEnv(game(), steps=4), num_cycles=CYCLES)
        render_test(aec)
    assert "State is not NumPy array" not in {str(w.message) for w in seen}, "arrays checked"
    assert "after turn" in capsys.readouterr().out, "its human mode prints the text game"


# ----- the single-agent view: Gymnasium's check_env in every render mode ------------------------
ALLOWED_CHECK_ENV_WARNINGS = (
    # A text env has no frame rate.
    "No render fps was declared",
    # A view made directly has no spec; the test checks every render mode itself instead.
    "Not able to test alternative render modes",
)


def test_single_agent_view_passes_check_env_in_every_render_mode(
    env_id: str, env_kwargs: dict[str, Any], capsys: pytest.CaptureFixture
) -> None:
    for mode in SingleAgentView.metadata["render_modes"]:
        view = SingleAgentView(env_id, render_mode=mode, **env_kwargs)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            check_env(view)
        unexpected = [
            str(w.message)
            for w in seen
            if not any(allowed in str(w.message) for allowed in ALLOWED_CHECK_ENV_WARNINGS)
        ]
        assert not unexpected, f"{mode}: {unexpected}"
        if mode == "human":
            assert view.render() is None
        else:
            assert isinstance(view.render(), str)
    assert capsys.readouterr().out.strip(), "the human view printed"
