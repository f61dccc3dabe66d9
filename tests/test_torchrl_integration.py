"""TorchRL's PettingZooWrapper driving the numeric view, and one MAPPO loss step on it."""

from __future__ import annotations

import pytest

from tests.optional import require_module

torch = require_module("torch", "train")


def test_torchrl_rolls_out_the_numeric_view_and_takes_a_mappo_step() -> None:
    require_module("torchrl", "interop")
    from collabzoo.integrations.torchrl import (
        GROUP,
        mappo_loss,
        mappo_modules,
        torchrl_env,
        with_agent_done,
    )
    from collabzoo.tasks.building.envs.strbuild import StrBuildEnv
    from collabzoo.tasks.building.numeric import BuildingGridEnv

    torch.manual_seed(0)
    steps = 4
    env = torchrl_env(BuildingGridEnv(StrBuildEnv(targets=["I", "L"]), steps=steps))
    assert env.group_map == {GROUP: ["first_builder", "second_builder"]}
    actor, critic = mappo_modules(env, centralised=True)
    with torch.no_grad():
        batch = env.rollout(3 * steps, policy=actor, break_when_any_done=False)
    assert batch[GROUP, "action"].shape == (3 * steps, 2, 4)
    assert batch["state"].shape[1:] == env.observation_spec["state"].shape
    # the delta rewards of each episode add up to the score of its final build
    rewards = batch["next", GROUP, "reward"][:, 0, 0]
    scores = batch["next", GROUP, "info", "score"][:, 0]
    for end in range(steps - 1, 3 * steps, steps):
        assert bool(batch["next", "done"][end])
        total = rewards[end - steps + 1 : end + 1].sum()
        assert total.item() == pytest.approx(scores[end].item(), abs=1e-5)

    loss = mappo_loss(env, actor, critic)
    batch = with_agent_done(batch)
    with torch.no_grad():
        loss.value_estimator(
            batch,
            params=loss.critic_network_params,
            target_params=loss.target_critic_network_params,
        )
    before = [p.detach().clone() for p in loss.parameters()]
    optimizer = torch.optim.Adam(loss.parameters(), lr=1e-2)
    out = loss(batch)
    total = out["loss_objective"] + out["loss_critic"] + out["loss_entropy"]
    assert torch.isfinite(total)
    assert out["entropy"].item() > 0.0
    total.backward()
    optimizer.step()
    changed = [not torch.equal(a, b) for a, b in zip(before, loss.parameters(), strict=True)]
    assert sum(changed) >= 2  # the actor's and the critic's weights moved


def test_torchrl_helpers_reject_what_they_cannot_drive() -> None:
    require_module("torchrl", "interop")
    from collabzoo.integrations.torchrl import FactoredCategorical, torchrl_env

    with pytest.raises(TypeError, match="ParallelEnv"):
        torchrl_env("strbuild")
    with pytest.raises(ValueError, match="need 7"):
        FactoredCategorical(torch.zeros(2, 5), [3, 4])
    dist = FactoredCategorical(torch.zeros(2, 7), [3, 4])
    action = dist.sample()
    assert action.shape == (2, 2)
    expected = -torch.log(torch.tensor(12.0))
    torch.testing.assert_close(dist.log_prob(action), expected.expand(2))


def test_torchrl_modules_drive_a_discrete_mpe2_env() -> None:
    require_module("torchrl", "interop")
    spread = require_module("mpe2.simple_spread_v3", "interop")
    from collabzoo.integrations.torchrl import GROUP, mappo_modules, torchrl_env

    torch.manual_seed(0)
    env = torchrl_env(spread.parallel_env(max_cycles=5), return_state=False, seed=0)
    actor, critic = mappo_modules(env, centralised=False, share_parameters=False)
    with torch.no_grad():
        batch = critic(env.rollout(5, policy=actor))
    actions = batch[GROUP, "action"]
    assert actions.shape == (5, 3) and actions.min() >= 0 and actions.max() < 5
    assert batch[GROUP, "state_value"].shape == (5, 3, 1)
    assert bool(batch["next", "done"][-1])  # max_cycles=5 ends the episode at the 5th step
