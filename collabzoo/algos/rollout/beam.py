"""AT-GRPO's rollout: K aligned joint actions per turn from one state, then one branch goes on.

At every turn of an episode each agent samples K completions from the same state (the K
aligned joint actions), each joint action steps its own copy of the env and earns every agent
its own reward (the env's reward dict); then one branch, the one with the highest team reward
(`greedy_continue`; else branch 0), continues for all K: the next turn's K copies are made
from its env. A beam of width one: K * N * T generations per episode, where MAGRPO's aligned
tree samples K^t at depth t (K + K^2 + ... + K^T per agent).

PettingLLMs picks the branch by the acting role's own reward, because its roles act one after
another; in a ParallelEnv all agents act at once, so the branch is picked by the team reward.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from collabzoo.algos.rollout.tree import Child, Node, TreeRollout, expanded_nodes


@dataclass
class AgentChild(Child):
    """A child that also keeps each acting agent's own reward (AT-GRPO's learning signal)."""

    agent_rewards: dict[str, float] = field(default_factory=dict)


def best_branch(team_rewards: Sequence[float], greedy: bool) -> int:
    """The branch that continues: the first of the highest team rewards, or 0 (not greedy)."""
    if not team_rewards:
        raise ValueError("no branch to continue from")
    if not greedy:
        return 0
    return max(range(len(team_rewards)), key=lambda k: (team_rewards[k], -k))


def tree_generations(roots: Sequence[Node]) -> int:
    """Completions sampled to grow these trees (every agent's samples at every expanded node)."""
    return sum(
        len(samples)
        for root in roots
        for node in expanded_nodes(root)
        for samples in node.samples.values()
    )


class BeamRollout(TreeRollout):
    """`TreeRollout` in aligned mode keeping one branch per turn (see the module docstring)."""

    def __init__(
        self,
        *args: Any,
        greedy_continue: bool = True,
        agent_reward_transform: Callable[[float], float] = float,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        if self.joint_mode != "aligned":
            raise ValueError("AT-GRPO samples aligned joint actions: joint_mode must be 'aligned'")
        self.greedy_continue = greedy_continue
        self.agent_reward_transform = agent_reward_transform

    def outcome(
        self,
        node: Node,
        joint: tuple[int, ...],
        actions: dict[str, str],
        env: Any,
        stepped: tuple[Any, ...],
        live: list[str],
        state: Any,
    ) -> tuple[Child, Node | None]:
        child, child_node = super().outcome(node, joint, actions, env, stepped, live, state)
        rewards = stepped[1]
        own = {agent: float(rewards.get(agent, 0.0)) for agent in node.agents}
        kept = AgentChild(child.joint, child.reward, child.metrics, agent_rewards=own)
        return kept, child_node

    def expand(self, nodes: Sequence[Node]) -> list[Node]:
        super().expand(nodes)  # K children per node, each on its own stepped env copy
        frontier = []
        for node in nodes:
            if not node.children:
                continue
            for child in node.children:  # in job order, as the team rewards are transformed
                child.agent_rewards = {
                    a: self.agent_reward_transform(r) for a, r in child.agent_rewards.items()
                }
            best = best_branch([c.reward for c in node.children], self.greedy_continue)
            for index, child in enumerate(node.children):
                if index != best:
                    child.node = None  # its env copy is dropped: only the best branch goes on
            if node.children[best].node is not None:
                frontier.append(node.children[best].node)
        return frontier


def continued(node: Node) -> Node | None:
    """The node the beam went on to from `node` (None at the episode's end)."""
    return next((c.node for c in node.children if c.node is not None), None)


__all__ = ["AgentChild", "BeamRollout", "best_branch", "continued", "tree_generations"]
