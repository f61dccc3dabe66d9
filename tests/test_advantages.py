"""Returns and advantages of MAGRPO and every MA-REINFORCE baseline on small fixed trees."""

from __future__ import annotations

import math

import pytest

from tests.optional import require_module

require_module("torch", "train")

from collabzoo.algos.objectives import (  # noqa: E402
    discounted_return,
    group_advantages,
    sample_returns,
)
from collabzoo.algos.rollout.tree import Child, Node, TreeRollout  # noqa: E402

G = [1.0, 2.0, 4.0, 5.0]  # mean 3, unbiased std sqrt(10/3)


@pytest.mark.parametrize(
    ("baseline", "expected"),
    [
        ("raw", [1.0, 2.0, 4.0, 5.0]),
        ("mean", [-2.0, -1.0, 1.0, 2.0]),
        ("rloo", [1 - 11 / 3, 2 - 10 / 3, 4 - 8 / 3, 5 - 7 / 3]),
        ("max", [-4.0, -3.0, -1.0, 0.0]),
    ],
)
def test_baselines(baseline: str, expected: list[float]) -> None:
    assert group_advantages(G, baseline) == pytest.approx(expected)
    population = math.sqrt(10 / 4)  # the reference's std: squares / K, not / (K - 1)
    assert group_advantages(G, baseline, normalize=True) == pytest.approx(
        [e / population for e in expected], rel=1e-6
    )
    unbiased = math.sqrt(10 / 3)
    assert group_advantages(G, baseline, normalize=True, std="unbiased") == pytest.approx(
        [e / unbiased for e in expected], rel=1e-6
    )


def test_a_group_of_equal_returns_divides_by_the_reference_floor() -> None:
    """std 0: the reference clamps it at 1e-6, so a group whose returns differ by rounding
    noise only gets advantages of that noise / 1e-6, exactly as CoMLRL computes them."""
    assert group_advantages([2.0, 2.0, 2.0], "mean", normalize=True) == [0.0, 0.0, 0.0]
    noisy = group_advantages([1.0, 1.0 + 2e-7], "mean", normalize=True)
    assert noisy == pytest.approx([-0.1, 0.1], rel=1e-6)
    with pytest.raises(ValueError, match="std must be one of"):
        group_advantages(G, "mean", normalize=True, std="sample")


def test_edge_groups_empty_two_and_one() -> None:
    """An empty group has no advantages under any baseline (max() of nothing, or rloo's
    K >= 2 check, would raise); RLOO works from K = 2, where each sample's baseline is the
    other one's return; K = 1 is refused for RLOO."""
    for baseline in ("raw", "mean", "rloo", "max"):
        assert group_advantages([], baseline) == []
        assert group_advantages([], baseline, normalize=True) == []
    assert group_advantages([1.0, 4.0], "rloo") == [1.0 - 4.0, 4.0 - 1.0]
    with pytest.raises(ValueError, match="at least 2 samples"):
        group_advantages([1.0], "rloo")
    # one sample has no spread to normalise by: it is left as it is
    assert group_advantages([3.0], "raw", normalize=True) == [3.0]


def test_options_read_from_a_config_file_choose_like_literals() -> None:
    """Option names built at run time (as from a JSON config or the command line) are equal
    to the literals but not the same objects: compared with `is`, they would fall through to
    another branch."""
    rloo, mean = "".join(["rl", "oo"]), "".join(["me", "an"])
    unbiased = "".join(["un", "biased"])
    population = "".join(["popu", "lation"])
    assert id(rloo) != id("rloo") and id(population) != id("population")  # not interned
    assert group_advantages(G, rloo) == pytest.approx(
        [1 - 11 / 3, 2 - 10 / 3, 4 - 8 / 3, 5 - 7 / 3]
    )
    centred = [-2.0, -1.0, 1.0, 2.0]
    assert group_advantages(G, mean) == centred
    for std, squares_over in ((population, 4), (unbiased, 3)):
        assert group_advantages(G, "mean", normalize=True, std=std) == pytest.approx(
            [e / math.sqrt(10 / squares_over) for e in centred], rel=1e-6
        )


def test_returns_and_cross_mode_means() -> None:
    assert discounted_return(1.0, [], 0.9) == 1.0
    assert discounted_return(1.0, [2.0, 4.0], 0.9) == pytest.approx(1.0 + 0.9 * 3.0)
    # Cross mode, N = 2 agents, K = 2: children (0,0) (0,1) (1,0) (1,1) with returns 1 2 3 6.
    joints = [(0, 0), (0, 1), (1, 0), (1, 1)]
    returns = [1.0, 2.0, 3.0, 6.0]
    assert sample_returns(joints, returns, agent=0, k=2) == [1.5, 4.5]  # mean, not the sum
    assert sample_returns(joints, returns, agent=1, k=2) == [2.0, 4.0]
    assert group_advantages(sample_returns(joints, returns, 0, 2)) == [-1.5, 1.5]
    # agent 0's sample 1 in no joint action: an error that says so, not a division by zero
    with pytest.raises(ValueError, match="every sample must take part"):
        sample_returns([(0, 0), (0, 1)], [1.0, 2.0], agent=0, k=2)


def hand_tree() -> Node:
    """Two turns, aligned, K = 2. Root children rewards 1 and 0; child 0 has children with
    rewards 1 and 3; child 1 was early-terminated (no children)."""
    grandchild_node = Node(None, {}, ["a", "b"], 1, 0, [])
    grandchild_node.children = [Child((0, 0), 1.0), Child((1, 1), 3.0)]
    root = Node(None, {}, ["a", "b"], 0, 0, [])
    root.children = [Child((0, 0), 1.0, node=grandchild_node), Child((1, 1), 0.0)]
    return root


def test_tree_returns_bottom_up_with_early_termination() -> None:
    root = hand_tree()
    rollout = TreeRollout.__new__(TreeRollout)  # only compute_returns is used
    rollout.compute_returns(root, gamma=0.5)
    # R(child 0) = 1 + 0.5 * mean(1, 3) = 2; R(child 1) = 0 (a leaf)
    assert [c.ret for c in root.children] == [2.0, 0.0]
    assert [c.ret for c in root.children[0].node.children] == [1.0, 3.0]
    # MAGRPO (mean baseline, normalised, population std of (2, 0) = 1):
    advantages = group_advantages(
        sample_returns([(0, 0), (1, 1)], [2.0, 0.0], 0, 2), "mean", normalize=True
    )
    assert advantages == pytest.approx([1.0, -1.0], rel=1e-6)
