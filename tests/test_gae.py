"""TD targets, GAE and the actor-critic losses against hand-computed values."""

from __future__ import annotations

import pytest

from collabzoo.algos.objectives import (
    advantages_and_targets,
    clipped_policy_loss,
    gae,
    td_errors,
    value_loss,
)
from tests.optional import require_module

torch = require_module("torch", "train")


def test_td_errors_terminal_and_cut_short() -> None:
    rewards, values = [1.0, 0.0, 2.0], [0.5, 0.25, 1.0]
    # terminated: V after the last step is 0
    assert td_errors(rewards, values, 0.0, 0.9) == pytest.approx(
        [1.0 + 0.9 * 0.25 - 0.5, 0.0 + 0.9 * 1.0 - 0.25, 2.0 + 0.0 - 1.0]
    )
    # cut short: bootstrap from V(s_T) = 4
    assert td_errors(rewards, values, 4.0, 0.9)[-1] == pytest.approx(2.0 + 0.9 * 4.0 - 1.0)
    with pytest.raises(ValueError, match="one per step"):
        td_errors([1.0], [0.1, 0.2], 0.0, 0.9)


def test_gae_hand_computed() -> None:
    deltas = [0.725, 0.65, 1.0]
    gamma, lam = 0.9, 0.5
    a2 = 1.0
    a1 = 0.65 + gamma * lam * a2
    a0 = 0.725 + gamma * lam * a1
    assert gae(deltas, gamma, lam) == pytest.approx([a0, a1, a2])
    assert gae(deltas, gamma, 0.0) == pytest.approx(deltas), "lambda 0 is TD(0)"


def test_lambda_one_gives_monte_carlo_return_minus_value() -> None:
    rewards, values, gamma = [1.0, 0.0, 2.0], [0.5, 0.25, 1.0], 0.9
    advantages, targets = advantages_and_targets(rewards, values, 0.0, gamma, 1.0)
    returns = [1.0 + gamma * 0.0 + gamma**2 * 2.0, 0.0 + gamma * 2.0, 2.0]
    assert targets == pytest.approx(returns)
    assert advantages == pytest.approx([g - v for g, v in zip(returns, values, strict=True)])
    # lambda 0: the TD(0) target r + gamma V(s')
    _, td_targets = advantages_and_targets(rewards, values, 0.0, gamma, 0.0)
    assert td_targets == pytest.approx([1.0 + 0.9 * 0.25, 0.0 + 0.9 * 1.0, 2.0])


def test_clipped_surrogate_hand_computed() -> None:
    log_probs = torch.tensor([[0.0, -1.0], [-0.5, 0.0]])
    old = torch.tensor([[-0.5, -1.0], [0.0, 0.0]])
    mask = torch.tensor([[True, True], [True, False]])
    advantages = torch.tensor([2.0, -1.0])
    eps = 0.2
    # row 0: ratios e^0.5 = 1.6487 (clipped to 1.2, A > 0: min -> 1.2 * 2), 1 (-> 2)
    # row 1: ratio e^-0.5 = 0.6065 (A < 0: min(-0.6065, -0.8) = -0.8); token 2 is padding
    expected = -((1.2 * 2.0 + 1.0 * 2.0) + (0.8 * -1.0)) / 2
    loss, clipped = clipped_policy_loss(log_probs, old, advantages, mask, eps)
    assert loss.item() == pytest.approx(expected, abs=1e-6)
    assert clipped.item() == pytest.approx(2 / 3)
    plain, _ = clipped_policy_loss(log_probs, old, advantages, mask, None)
    ratio = torch.exp(torch.tensor([0.5, 0.0, -0.5]))
    assert plain.item() == pytest.approx(
        -((ratio[0] + ratio[1]) * 2.0 + ratio[2] * -1.0).item() / 2, abs=1e-6
    )


def test_clipped_surrogate_gradient_at_ratio_one_is_the_policy_gradient() -> None:
    log_probs = torch.tensor([[-0.3, -1.2], [-0.7, 0.0]], requires_grad=True)
    mask = torch.tensor([[True, True], [True, False]])
    advantages = torch.tensor([1.5, -0.5])
    loss, _ = clipped_policy_loss(log_probs, log_probs.detach(), advantages, mask, 0.2)
    loss.backward()
    expected = -(advantages.unsqueeze(-1) * mask) / 2
    assert torch.allclose(log_probs.grad, expected)


def test_value_loss_with_and_without_clipping() -> None:
    values = torch.tensor([1.0, 0.0])
    old = torch.tensor([0.5, 0.1])
    targets = torch.tensor([2.0, -1.0])
    plain = ((1.0 - 2.0) ** 2 + (0.0 + 1.0) ** 2) / 2
    assert value_loss(values, old, targets, None).item() == pytest.approx(plain)
    # clip 0.2: V1 -> 0.7 (loss 1.69 > 1.0), V2 -> -0.1 (loss 0.81 < 1.0): max of each
    clipped = (max(1.0, 1.69) + max(1.0, 0.81)) / 2
    assert value_loss(values, old, targets, 0.2).item() == pytest.approx(clipped)


def test_tree_estimates_equal_gae_along_each_branch() -> None:
    """A root with 2 branches (K = 2 at the first turn), each then a chain of 2 more turns:
    the tree recursion must give GAE of each branch's own trajectory."""
    from collabzoo.algos.objectives import branch_estimates
    from collabzoo.algos.rollout.tree import Child, Node

    def node(depth: int) -> Node:
        return Node(None, {"a": ""}, ["a"], depth, 0, [])

    root = node(0)
    values = {id(root): 0.4}
    branches = {0: ([1.0, 0.0, 2.0], [0.4, 0.3, 0.9]), 1: ([0.0, 1.0, 0.5], [0.4, -0.2, 0.1])}
    for index, (rewards, branch_values) in branches.items():
        parent, joint = root, (index,)
        for t, reward in enumerate(rewards):
            nxt = node(t + 1) if t < len(rewards) - 1 else None
            parent.children.append(Child(joint, reward, node=nxt))
            if nxt is not None:
                values[id(nxt)] = branch_values[t + 1]
                parent, joint = nxt, (0,)
    out: dict = {}
    gamma, lam = 0.9, 0.7
    branch_estimates(root, lambda n, _i: values[id(n)], "a", gamma, lam, out)
    for index, (rewards, branch_values) in branches.items():
        advantages, targets = advantages_and_targets(rewards, branch_values, 0.0, gamma, lam)
        assert out[(id(root), index)][0] == pytest.approx(advantages[0])
        assert out[(id(root), index)][1] == pytest.approx(targets[0])
        later = root.children[index].node
        assert out[(id(later), 0)][0] == pytest.approx(advantages[1])
        assert out[(id(later.children[0].node), 0)][:2] == pytest.approx(
            (advantages[2], targets[2])
        )


@pytest.mark.parametrize(("rewards", "values"), [(3, 2), (2, 3)])
def test_td_errors_refuse_a_reward_and_value_count_mismatch_either_way(rewards, values) -> None:
    with pytest.raises(ValueError, match=f"{rewards} rewards but {values} values: one per step"):
        td_errors([1.0] * rewards, [0.0] * values, 0.0, 0.9)


def test_a_long_episode_is_not_a_mismatch() -> None:
    """300 steps: lengths compared by value (ints past 256 are distinct objects)."""
    deltas = td_errors([1.0] * 300, [0.0] * 300, 0.0, 1.0)
    assert deltas == [1.0] * 300
