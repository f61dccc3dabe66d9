"""Rollout trees on any PettingZoo ParallelEnv: the data MA-REINFORCE and MAGRPO learn from.

Every node of every tree at one depth is expanded together: each distinct policy gets ONE
generate call covering all nodes and all agents that use it, K samples each. Joint actions are
`aligned` (the k-th sample of every agent: K children) or `cross` (the Cartesian product: K^N
children). Each child steps its own copy of the node's environment (copies are made and stepped
concurrently on worker threads, so slow steps such as sandboxed code run in parallel). An env
that cannot be deep-copied is rebuilt from its factory and re-played from the same seed and
action prefix instead (as is an env whose deep copy would be a fresh env: `EzPickle` ones).
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from gymnasium.utils import EzPickle

from collabzoo.algos.objectives import discounted_return
from collabzoo.algos.policies.llm import encode_rows
from collabzoo.algos.policies.policy import Completion, Policy
from collabzoo.algos.policies.sampling import Sampling

JOINT_MODES = ("aligned", "cross")


@dataclass
class Child:
    """One joint action taken from a node, the team reward it earned, and where it led."""

    joint: tuple[int, ...]
    """Sample index per agent, in the node's agent order."""
    reward: float
    metrics: dict[str, float] = field(default_factory=dict)
    node: Node | None = None
    ret: float = 0.0


@dataclass
class Node:
    """An environment state at some depth, its agents' observations and, once expanded, the
    K samples of each agent and the children."""

    env: Any
    observations: dict[str, str]
    agents: list[str]
    depth: int
    seed: int
    actions: list[dict[str, str]]
    """Joint actions from the root to here (for re-playing an env that cannot be copied)."""
    samples: dict[str, list[Completion]] = field(default_factory=dict)
    children: list[Child] = field(default_factory=list)
    state: Any = None
    """The joint view `env.state()` at this node (recorded for centralized critics only): text,
    or an array on an env with numeric observations."""

    @property
    def k(self) -> int:
        """Samples per agent drawn at this node (0 before it is expanded)."""
        return len(next(iter(self.samples.values()), []))


def team_reward(rewards: dict[str, float], agents: Sequence[str]) -> float:
    """The team's reward of one step: the mean over the agents that acted (identical shared
    rewards, as in every collabzoo task, give that reward)."""
    values = [float(rewards.get(a, 0.0)) for a in agents]
    return sum(values) / len(values) if values else 0.0


def joint_state(env: Any, observations: dict[str, Any], agents: Sequence[str]) -> Any:
    """`env.state()` when the env gives a text state (or a numeric one, on an env whose
    observations are numeric too), else every agent's observation labelled "[agent] ...", one
    after another (the reference's rendering of the joint history)."""
    try:
        state = env.state()
    except (NotImplementedError, AttributeError):
        state = None
    if isinstance(state, str):
        return state
    numeric = not any(isinstance(observations.get(a), str) for a in agents)
    if state is not None and numeric:
        return state
    return "\n\n".join(f"[{agent}] {observations.get(agent, '')}" for agent in agents)


def _numeric_metrics(infos: dict[str, Any]) -> dict[str, float]:
    for info in infos.values():
        metrics = info.get("metrics") if isinstance(info, dict) else None
        if isinstance(metrics, dict):
            return {k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))}
    return {}


def live_agents(env: Any, stepped: tuple[Any, ...]) -> list[str]:
    """The env's agents that neither terminated nor were truncated by this step."""
    _, _, terminations, truncations, _ = stepped
    return [a for a in env.agents if not (terminations.get(a) or truncations.get(a))]


def replayed(env_factory: Callable[[], Any], seed: int, prefix: Sequence[dict[str, str]]) -> Any:
    """A fresh env from the factory, reset with `seed` and stepped through `prefix`: the state
    of an env that cannot be copied (or pickled) with its state."""
    env = env_factory()
    env.reset(seed=seed)
    for actions in prefix:
        env.step(actions)
    return env


def step_env(env: Any, actions: dict[str, str], record_state: bool) -> tuple[Any, list[str], Any]:
    """One joint step: what `step` returned, the agents still live, and the joint state when
    it is recorded and the episode goes on."""
    stepped = env.step(actions)
    live = live_agents(env, stepped)
    state = joint_state(env, stepped[0], live) if record_state and live else None
    return stepped, live, state


def copy_loses_state(env: Any) -> bool:
    """Whether `copy.deepcopy(env)` would rebuild the env from its constructor arguments
    (gymnasium's `EzPickle`, used by most PettingZoo envs) instead of copying its state."""
    seen = 0
    while env is not None and seen < 16:
        if isinstance(env, EzPickle):
            return True
        env = getattr(env, "aec_env", None) or getattr(env, "env", None)
        seen += 1
    return False


Generate = Callable[[Sequence[Policy], Sequence[Any], Sampling], list[Completion]]
"""Samples one completion per observation, row i for policy i (the policies of one call share
one model: one policy, or the agents of one LoRA team)."""


def generate_in_process(
    row_policies: Sequence[Policy], observations: Sequence[Any], sampling: Sampling
) -> list[Completion]:
    """Sampling on the policies' own model (transformers' `generate`): one call, each row with
    its agent's adapter when the rows mix a LoRA team's agents (peft's mixed-adapter batches;
    only the agents of one LoRA team, `LLMPolicy`s, share a call)."""
    policy = row_policies[0]
    if all(p is policy for p in row_policies):
        return policy.generate(list(observations), sampling)
    return policy.generate_ids(
        encode_rows(row_policies, observations),
        sampling,
        adapters=[p.adapter for p in row_policies],
    )


class TreeRollout:
    """Builds rollout trees for a team of policies."""

    def __init__(
        self,
        env_factory: Callable[[], Any],
        policies: dict[str, Policy],
        sampling: Sampling,
        *,
        agent_sampling: Mapping[str, Sampling] | None = None,
        num_generations: int,
        deeper_generations: int | None = None,
        joint_mode: str = "aligned",
        max_depth: int | None = None,
        early_termination_threshold: float | None = None,
        reward_transform: Callable[[float], float] = float,
        executor: ThreadPoolExecutor | None = None,
        record_state: bool = False,
        generate: Generate | None = None,
        remote: Any = None,
    ) -> None:
        if joint_mode not in JOINT_MODES:
            raise ValueError(f"joint_mode must be one of {JOINT_MODES}, got {joint_mode!r}")
        if num_generations < 1:
            raise ValueError(f"num_generations must be at least 1, got {num_generations}")
        if deeper_generations is not None and deeper_generations < 1:
            raise ValueError(f"deeper_generations must be at least 1, got {deeper_generations}")
        self.env_factory = env_factory
        self.policies = policies
        self.sampling = sampling
        self.agent_sampling = dict(agent_sampling or {})
        """Agents that sample with settings of their own (over `sampling`)."""
        self.k = num_generations
        self.deeper_k = deeper_generations or num_generations
        self.record_state = record_state
        self.joint_mode = joint_mode
        self.max_depth = max_depth
        self.threshold = early_termination_threshold
        self.reward_transform = reward_transform
        self.executor = executor or ThreadPoolExecutor(max_workers=8)
        self.generate = generate or generate_in_process
        """Samples the rows of one call: the policies' own `generate` by default, or an engine
        such as `VLLMGenerator.generate`."""
        self.remote = remote
        """Steps every child's env elsewhere (`ray_rollout.RayEnvSteps`); None: on the
        executor's threads."""
        self.env_steps = 0
        self.generate_calls = 0

    # ----- building ---------------------------------------------------------------------------
    def roots(self, seeds: Sequence[int]) -> list[Node]:
        def start(seed: int) -> Node:
            env = self.env_factory()
            observations, _ = env.reset(seed=seed)
            node = Node(env, dict(observations), list(env.agents), 0, seed, [])
            if self.record_state:
                node.state = joint_state(env, node.observations, node.agents)
            return node

        return list(self.executor.map(start, seeds))

    def build(self, seeds: Sequence[int], gamma: float) -> list[Node]:
        """Grow one tree per seed to the end of its episodes, then compute the returns."""
        roots = self.roots(seeds)
        frontier = [n for n in roots if n.agents]
        while frontier:
            frontier = self.expand(frontier)
        for root in roots:
            self.compute_returns(root, gamma)
        return roots

    def samples_at(self, node: Node) -> int:
        """K at this node: `num_generations` at the root, `deeper_generations` below it."""
        return self.k if node.depth == 0 else self.deeper_k

    def sample(self, nodes: Sequence[Node]) -> None:
        """K samples for every (node, agent): one generate call per distinct model and
        sampling setting (the agents of a LoRA team share their base model's call, each row
        with its adapter, unless their sampling differs)."""
        groups: dict[tuple[int, Sampling], list[tuple[Node, str]]] = {}
        for node in nodes:
            for agent in node.agents:
                policy = self.policies[agent]
                shared_base = getattr(policy, "adapter", None) is not None
                key = id(policy.model) if shared_base else id(policy)
                groups.setdefault((key, self.sampling_of(agent)), []).append((node, agent))
        for (_, sampling), members in groups.items():
            rows = [(node, agent) for node, agent in members for _ in range(self.samples_at(node))]
            completions = self.generate(
                [self.policies[agent] for _, agent in rows],
                [node.observations[agent] for node, agent in rows],
                sampling,
            )
            self.generate_calls += 1
            start = 0
            for node, agent in members:
                k = self.samples_at(node)
                node.samples[agent] = completions[start : start + k]
                start += k

    def sampling_of(self, agent: str) -> Sampling:
        return self.agent_sampling.get(agent, self.sampling)

    def joint_actions(self, node: Node) -> list[tuple[int, ...]]:
        k = self.samples_at(node)
        if self.joint_mode == "aligned":
            return [(j,) * len(node.agents) for j in range(k)]
        return list(itertools.product(range(k), repeat=len(node.agents)))

    def expand(self, nodes: Sequence[Node]) -> list[Node]:
        """Sample, step every joint action in its own env copy, and return the new frontier."""
        self.sample(nodes)
        jobs = []
        for node in nodes:
            joints = self.joint_actions(node)
            for position, joint in enumerate(joints):
                jobs.append((node, joint, position == len(joints) - 1))
        if self.remote is not None:  # every step a task on the cluster (see `rollout.ray_rollouts`)
            outcomes = self.remote.step(self, [(node, joint) for node, joint, _ in jobs])
        else:  # two phases: every copy is made before any step runs (one child steps the original)
            envs = list(self.executor.map(lambda job: self._branch(job[0], job[2]), jobs))
            outcomes = list(
                self.executor.map(
                    lambda pair: self._step(pair[0][0], pair[0][1], pair[1]),
                    zip(jobs, envs, strict=True),
                )
            )
        self.env_steps += len(jobs)
        frontier = []
        for (node, _, _), (child, child_node) in zip(jobs, outcomes, strict=True):
            # transformed here, in job order: a stateful transform (running reward statistics)
            # must not depend on which worker thread finished first
            child.reward = self.reward_transform(child.reward)
            node.children.append(child)
            child.node = child_node
        for node in nodes:
            node.env = None  # the children own the states now
            if self.threshold is not None and node.children:
                mean = sum(c.reward for c in node.children) / len(node.children)
                if mean > self.threshold:  # early termination: do not expand further
                    for child in node.children:
                        child.node = None
            frontier += [c.node for c in node.children if c.node is not None]
        return frontier

    def _branch(self, node: Node, reuse: bool) -> Any:
        if reuse:
            return node.env
        try:
            if copy_loses_state(node.env):
                raise TypeError("a deep copy of this env is a fresh env")
            return copy.deepcopy(node.env)
        except Exception:  # not copyable: rebuild and re-play the same prefix
            return replayed(self.env_factory, node.seed, node.actions)

    @staticmethod
    def joint_texts(node: Node, joint: tuple[int, ...]) -> dict[str, str]:
        """The joint action: each agent's sampled text for this child."""
        return {a: node.samples[a][k].text for a, k in zip(node.agents, joint, strict=True)}

    def _step(self, node: Node, joint: tuple[int, ...], env: Any) -> tuple[Child, Node | None]:
        actions = self.joint_texts(node, joint)
        stepped, live, state = step_env(env, actions, self.record_state)
        return self.outcome(node, joint, actions, env, stepped, live, state)

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
        """The child a step made (wherever it ran) and the node it leads to, if any."""
        observations, rewards, _, _, infos = stepped
        child = Child(joint, team_reward(rewards, node.agents), _numeric_metrics(infos))
        depth = node.depth + 1
        if not live or (self.max_depth is not None and depth >= self.max_depth):
            return child, None
        child_node = Node(env, dict(observations), live, depth, node.seed, [*node.actions, actions])
        child_node.state = state
        return child, child_node

    # ----- returns ----------------------------------------------------------------------------
    def compute_returns(self, node: Node, gamma: float) -> None:
        for child in node.children:
            if child.node is not None:
                self.compute_returns(child.node, gamma)
                grandchildren = [c.ret for c in child.node.children]
            else:
                grandchildren = []
            child.ret = discounted_return(child.reward, grandchildren, gamma)


def expanded_nodes(root: Node) -> list[Node]:
    """Every expanded node of a tree (breadth first)."""
    found, queue = [], [root]
    while queue:
        node = queue.pop(0)
        if node.children:
            found.append(node)
            queue += [c.node for c in node.children if c.node is not None]
    return found
