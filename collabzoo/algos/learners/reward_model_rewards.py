"""The reward model standing in for the task's reward, as one part every user of it calls: the
RL phase of MARLHF with either backend (the rollout-tree learner, or the actor-critic learner it
builds) and MARLHFIter's scoring of an iteration's candidates (`preference_scoring_reward`).

A joint answer's reward is s(x, a) = the reward model's score of `joint_text(x, a)`, raw (the
reference's), or z-scored over one update's answers in RL with `reward_model_normalization`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import torch

from collabzoo.algos.policies.reward_model import JointRewardModel, joint_text
from collabzoo.algos.preference_objectives import zscore
from collabzoo.algos.rollout.tree import Node, TreeRollout, expanded_nodes


class RewardModelRewards:
    """Scores of joint answers by the current reward model (`model_of()`: the one the learner
    holds now, which a new iteration replaces), `chunk` texts per forward pass."""

    def __init__(
        self,
        model_of: Callable[[], JointRewardModel | None],
        agents: Sequence[str],
        *,
        chunk: int,
        normalize: bool,
    ) -> None:
        self.model_of = model_of
        self.agents = list(agents)
        self.chunk = max(1, chunk)
        self.normalize = normalize

    @property
    def model(self) -> JointRewardModel:
        model = self.model_of()
        if model is None:
            raise RuntimeError("no reward model has been trained yet to score joint answers")
        return model

    @torch.no_grad()
    def scores(
        self, prompts: Sequence[Mapping[str, str]], answers: Sequence[Mapping[str, str]]
    ) -> list[float]:
        """The raw score of each joint answer (`answers[k]` to `prompts[k]`)."""
        texts = [joint_text(p, a, self.agents) for p, a in zip(prompts, answers, strict=True)]
        model = self.model
        return [
            float(s)
            for start in range(0, len(texts), self.chunk)
            for s in model.score_texts(texts[start : start + self.chunk]).tolist()
        ]

    def rescore(self, roots: list[Node], rollout: TreeRollout, discount: float) -> None:
        """Every child's reward becomes its joint answer's score (the env's kept as the metric
        `env_reward`; z-scored over these trees with `normalize`), and the returns are
        recomputed."""
        children, prompts, answers = [], [], []
        for root in roots:
            for node in expanded_nodes(root):
                for child in node.children:
                    children.append(child)
                    prompts.append({a: str(node.observations[a]) for a in node.agents})
                    answers.append(TreeRollout.joint_texts(node, child.joint))
        found = self.scores(prompts, answers) if children else []
        if self.normalize and found:
            found = zscore(torch.tensor(found)).tolist()
        for child, score in zip(children, found, strict=True):
            child.metrics["env_reward"] = child.reward
            child.reward = float(score)
        for root in roots:
            rollout.compute_returns(root, discount)


__all__ = ["RewardModelRewards"]
