"""What an actor-critic update trains on: the critics (built, placed, and read without
gradients), their values of every visited state, and per agent the samples with their advantages
and critic targets (`objectives.branch_estimates`). A mixin of `ActorCriticLearner`, apart from
its update so that each part reads on its own."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from collabzoo.algos.learners.config import ActorCriticRule
from collabzoo.algos.objectives import STD_FLOOR, branch_estimates
from collabzoo.algos.policies.critics import Critic, build_critic
from collabzoo.algos.policies.policy import Policy
from collabzoo.algos.rollout.tree import Child, Node, expanded_nodes
from collabzoo.algos.runtime.data_parallel import DataParallel
from collabzoo.algos.runtime.placement import parse_device_map, place_models, resolve_device

TEAM = "team"
"""The name of the centralized critic."""
CRITIC_TYPES = ("v", "q")


@dataclass
class Sample:
    """One agent's completion at one transition, with what its losses need."""

    prompt_ids: list[int]
    completion_ids: list[int]
    advantage: float
    target: float
    old_value: float
    old_log_probs: list[float] | None = field(default=None, repr=False)
    sampler_log_probs: list[float] | None = field(default=None, repr=False)
    """The sampling engine's log-probabilities (vLLM rollouts), for the off-policy weight."""


@dataclass
class CriticSample:
    ids: list[int]
    target: float
    old_value: float


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


class CriticBatches:
    """The critics and the training batch of `ActorCriticLearner` (see its module)."""

    args: Any
    agents: list[str]
    policies: dict[str, Policy]
    distinct: list[Policy]
    parallel: DataParallel | None
    critics: dict[str, Critic]
    rule: ActorCriticRule
    trained_only: Callable[[Mapping[str, Any]], dict[str, Any]]

    def _build_critics(self, given: Any) -> dict[str, Critic]:
        args = self.args
        if self.rule.centralized:
            backbone = given if given is not None else args.critic_model_name_or_path
            first = self.policies[self.agents[0]]
            critic = build_critic(
                first,
                TEAM,
                separate=True,
                head_hidden_dim=args.critic_value_head_hidden_dim,
                backbone=backbone,
            )
            return {TEAM: critic}
        critics = {}
        for agent in self.agents:
            backbone = given.get(agent) if isinstance(given, Mapping) else given
            if backbone is None and args.use_separate_critic:
                backbone = args.critic_model_name_or_path
            separate = args.use_separate_critic or backbone is not None
            critics[agent] = build_critic(
                self.policies[agent],
                agent,
                separate=separate,
                head_hidden_dim=(
                    args.critic_value_head_hidden_dim if separate else args.value_head_hidden_dim
                ),
                backbone=backbone,
            )
        return critics

    def _place_critics(self) -> None:
        """Each critic on its `critic_devices` entry, else on the device of the actor it
        serves; a critic that reads an actor's own model (its features, or an adapter on its
        base) runs where that model runs, and another device for it is an error."""
        devices = parse_device_map(self.args.critic_devices)
        unknown = sorted(set(devices) - set(self.critics))
        if unknown:
            raise ValueError(
                f"critic_devices names unknown critics {unknown}; the critics are "
                f"{sorted(self.critics)}"
            )
        actor_models = {id(p.model) for p in self.distinct}
        for name, critic in self.critics.items():
            actor = self.policies.get(name, self.policies[self.agents[0]])
            asked = devices.get(name)
            if id(critic.backbone.model) in actor_models:
                if asked is not None and resolve_device(asked) != critic.backbone.device:
                    raise ValueError(
                        f"critic {name!r} reads an actor's model, which runs on "
                        f"{critic.backbone.device}; it cannot run on {asked}: place the actor "
                        "(agent_devices) or give the critic a model of its own"
                    )
                critic.backbone.model.to(critic.backbone.device)  # a new adapter: on its base
            else:
                place_models(
                    {name: critic.backbone},
                    default=asked or str(actor.device),
                    dtype=self.args.dtype,
                )
            critic.follow_backbone()

    # ----- values and advantages ----------------------------------------------------------------
    def _critic_text(
        self, node: Node, child: Child | None, agent: str | None
    ) -> tuple[Any, list[str]]:
        """What a critic reads, and the parts of it that share the prompt budget when it is too
        long: every agent's observation and action in a joint view, so none is dropped."""
        if not self.rule.centralized:
            assert agent is not None
            return node.observations[agent], []
        state = node.state if node.state is not None else ""
        if not isinstance(state, str):
            return state, []  # a numeric state (an MLP critic)
        parts = [node.observations[a] for a in node.agents if isinstance(node.observations[a], str)]
        if child is None:
            return state, parts
        answers = [node.samples[a][k].text for a, k in zip(node.agents, child.joint, strict=True)]
        actions = "\n\n".join(f"[{a}] {text}" for a, text in zip(node.agents, answers, strict=True))
        return f"{state}\n\nJoint action:\n{actions}", [*parts, *answers]

    def _critic_ids(
        self, critic: Critic, node: Node, child: Child | None, agent: str | None
    ) -> list[int]:
        if critic.shares_actor and agent is not None:
            return node.samples[agent][0].prompt_ids  # the actor's own encoding of h
        text, parts = self._critic_text(node, child, agent)
        return critic.encode(text, parts)

    @torch.no_grad()
    def _values(self, critic: Critic, inputs: list[list[int]]) -> list[float]:
        chunk = max(1, self.args.logprob_batch_size)
        values: list[float] = []
        with critic.backbone.mode(train=False):
            for start in range(0, len(inputs), chunk):
                values += critic.values(inputs[start : start + chunk]).tolist()
        return values

    def critic_inputs(self, roots: list[Node]) -> dict[str, dict[Hashable, list[int]]]:
        """Per critic: the token ids of every state it values, keyed by id(node); a Q critic's
        state-action inputs are keyed by (id(node), child index), its state-only inputs (the
        V(s) baseline) by ("state", id(node))."""
        inputs: dict[str, dict[Hashable, list[int]]] = {name: {} for name in self.critics}
        for root in roots:
            for node in expanded_nodes(root):
                if self.rule.centralized:
                    critic = self.critics[TEAM]
                    if self.rule.team_critic == "q":
                        for index, child in enumerate(node.children):
                            key = (id(node), index)
                            inputs[TEAM][key] = self._critic_ids(critic, node, child, None)
                        key = ("state", id(node))
                        inputs[TEAM][key] = self._critic_ids(critic, node, None, None)
                    else:
                        inputs[TEAM][id(node)] = self._critic_ids(critic, node, None, None)
                    continue
                for agent in node.agents:
                    critic = self.critics[agent]
                    inputs[agent][id(node)] = self._critic_ids(critic, node, None, agent)
        return inputs

    def _estimates(
        self, roots: list[Node], name: str, values: dict[Hashable, float]
    ) -> dict[Hashable, tuple[float, float, float]]:
        """(A, y, old value) of every transition one critic covers (see `branch_estimates`)."""
        baseline_of = None
        if self.rule.team_critic == "q":

            def value_of(node: Node, index: int) -> float:
                return values[(id(node), index)]

            def baseline_of(node: Node) -> float:
                if len(node.children) >= 2:  # the mean Q over the sampled joint actions
                    return _mean([value_of(node, j) for j in range(len(node.children))])
                return values[("state", id(node))]  # one joint action: V(s)

        else:

            def value_of(node: Node, index: int) -> float:
                return values[id(node)]

        found: dict[Hashable, tuple[float, float, float]] = {}
        agent = None if self.rule.centralized else name
        for root in roots:
            if root.children and (agent is None or agent in root.agents):
                branch_estimates(
                    root,
                    value_of,
                    agent,
                    self.args.discount,
                    self.rule.gae_lambda,
                    found,
                    baseline_of,
                )
        return found

    def training_batch(
        self, roots: list[Node]
    ) -> tuple[dict[str, list[Sample]], dict[str, list[CriticSample]]]:
        """Per agent trained at this update: its samples; per separate critic (whether its
        agent trains or not): its own samples (its inputs and targets), so a critic trains once
        per transition it values. Advantages are normalised over the trained agents' samples
        only."""
        inputs = self.critic_inputs(roots)
        values: dict[str, dict[Hashable, float]] = {}
        for name, keyed in inputs.items():
            found = self._values(self.critics[name], list(keyed.values()))
            values[name] = dict(zip(list(keyed), found, strict=True))
        estimates = {name: self._estimates(roots, name, values[name]) for name in self.critics}

        samples: dict[str, list[Sample]] = {a: [] for a in self.agents}
        critic_samples: dict[str, list[CriticSample]] = {n: [] for n in self.critics}
        for root in roots:
            for node in expanded_nodes(root):
                for index, child in enumerate(node.children):
                    if self.rule.centralized:
                        advantage, target, old = estimates[TEAM][(id(node), index)]
                        team_samples = critic_samples[TEAM]
                        if self.rule.team_critic == "q":
                            key = ("state", id(node))
                            team_samples.append(
                                CriticSample(inputs[TEAM][(id(node), index)], target, old)
                            )
                            team_samples.append(
                                CriticSample(inputs[TEAM][key], target, values[TEAM][key])
                            )
                        else:
                            team_samples.append(CriticSample(inputs[TEAM][id(node)], target, old))
                    for position, agent in enumerate(node.agents):
                        if not self.rule.centralized:
                            advantage, target, old = estimates[agent][(id(node), index)]
                        completion = node.samples[agent][child.joint[position]]
                        sample = Sample(
                            completion.prompt_ids,
                            completion.completion_ids,
                            advantage,
                            target,
                            old,
                            sampler_log_probs=completion.sampler_log_probs,
                        )
                        samples[agent].append(sample)
                        critic = None if self.rule.centralized else self.critics[agent]
                        if critic is not None and not critic.shares_actor:
                            critic_ids = inputs[agent][id(node)]
                            critic_samples[agent].append(CriticSample(critic_ids, target, old))
        samples = self.trained_only(samples)
        if self.args.advantage_normalization:
            if self.parallel is None:
                for agent_samples in samples.values():
                    self._normalise(agent_samples)
            else:
                self._normalise_across_ranks(samples)
        return samples, critic_samples

    def _normalise_across_ranks(self, samples: dict[str, list[Sample]]) -> None:
        """`_normalise` with each agent's mean and population std over every rank's samples
        (data-parallel training): two collectives, whatever the number of agents."""
        assert self.parallel is not None
        agents = list(samples)
        found = [[s.advantage for s in samples[a]] for a in agents]
        totals = self.parallel.sum([x for values in found for x in (len(values), sum(values))])
        counts, sums = totals[0::2], totals[1::2]
        means = [total / max(1.0, count) for total, count in zip(sums, counts, strict=True)]
        squares = self.parallel.sum(
            [sum((v - m) ** 2 for v in values) for values, m in zip(found, means, strict=True)]
        )
        for agent, count, mean, square in zip(agents, counts, means, squares, strict=True):
            if count < 2:
                continue
            std = math.sqrt(square / count)
            for s in samples[agent]:
                s.advantage = (s.advantage - mean) / max(std, STD_FLOOR)

    @staticmethod
    def _normalise(samples: list[Sample]) -> None:
        if len(samples) < 2:
            return
        mean = _mean([s.advantage for s in samples])
        std = math.sqrt(_mean([(s.advantage - mean) ** 2 for s in samples]))
        for s in samples:  # the reference's population std, clamped
            s.advantage = (s.advantage - mean) / max(std, STD_FLOOR)
