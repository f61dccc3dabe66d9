"""The joint actor: one policy writes every agent's answer (CoMLRL's CentralizedMAGRPO).

The team's env is wrapped in `JointActionEnv`: one agent, named after the roles joined by "+",
observes the joint prompt (every role's observation, or `env.state()`) and answers with one
completion holding a tagged section per role, which is cut into the roles' actions. The update
is MAGRPO with N = 1: K joint completions c_k per state, the team reward, the group baseline and
normalisation,

    A_k = (R_k - mean(R)) / max(std_pop(R), 1e-6),   loss = -(1/K) sum_k A_k log pi(c_k | x),

log pi(c | x) the sum over every completion token (the stop token included, padding never).
More than one turn is a collabzoo extension (the reference refuses it): the joint actor then
plays every turn of the episode on a rollout tree, as MAGRPO's agents do. With the single-agent
view of the task, this is the papers' one-model "GRPO" baseline row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from collabzoo.algos.learners.actor_critic import ActorCriticLearner
from collabzoo.algos.learners.iac import IACConfig
from collabzoo.algos.learners.learner import env_factory
from collabzoo.algos.learners.magrpo import MAGRPOConfig
from collabzoo.algos.learners.tree_learner import TreeLearner
from collabzoo.algos.rollout.joint_env import JOINT_OBSERVATIONS, JointActionEnv
from collabzoo.joint_sections import JOINT_FORMATS


def joint_completion_ids(ids: Sequence[int], pad_id: int | None, eos_id: int | None) -> list[int]:
    """The tokens of a joint completion that are scored: up to the first pad token, which is
    kept when it is also the EOS token (the reference's `joint_sequence_log_prob` cut). A
    completion collabzoo sampled already ends at its stop token; this cut is for ids from
    elsewhere (a reference batch, padded rows)."""
    ids = list(ids)
    if pad_id is None or pad_id not in ids:
        return ids
    end = ids.index(pad_id)
    return ids[: end + 1] if pad_id == eos_id else ids[:end]


@dataclass
class JointSettings:
    """How a joint actor's prompt and answer look (mixed into the joint learners' configs)."""

    joint_format: str = "tagged"
    """How the completion is cut into the roles' answers: 'tagged' (the reference's
    `<agent_i>...</agent_i>` sections) or 'fixed_width' (consecutive runs of `section_width`
    characters: for byte-level models trained from scratch, which never write a tag by chance)."""
    joint_observation: str = "observations"
    """What the joint prompt shows: 'observations' (every role's own prompt, as the
    reference's adapter) or 'state' (the env's text `state()`)."""
    section_width: int = 1
    """Characters per role's answer when joint_format='fixed_width'."""

    def validate(self) -> None:
        super().validate()  # type: ignore[misc]  # the learner config it is mixed into
        if self.joint_format not in JOINT_FORMATS:
            raise ValueError(
                f"joint_format must be one of {JOINT_FORMATS}, got {self.joint_format!r}"
            )
        if self.joint_observation not in JOINT_OBSERVATIONS:
            raise ValueError(
                f"joint_observation must be one of {JOINT_OBSERVATIONS}, "
                f"got {self.joint_observation!r}"
            )
        if isinstance(self.section_width, bool) or not isinstance(self.section_width, int):
            raise TypeError(f"section_width must be an int, got {self.section_width!r}")
        if self.section_width < 1:
            raise ValueError(f"section_width must be at least 1, got {self.section_width}")
        if getattr(self, "joint_mode", "aligned") != "aligned":
            raise ValueError(
                "a joint actor is one agent: joint_mode='cross' has nothing to cross (keep "
                "'aligned')"
            )


@dataclass
class JointActorConfig(JointSettings, MAGRPOConfig):
    """The joint actor's settings: MAGRPO's, and how the joint prompt and answer look."""

    output_dir: str = "runs/joint"


@dataclass
class JointACConfig(JointSettings, IACConfig):
    """The joint actor-critic's settings: IAC's (one actor, one critic of the joint prompt),
    and how the joint prompt and answer look."""

    output_dir: str = "runs/joint-ac"


def joint_env_factory(env: Any, args: JointSettings) -> Callable[[], JointActionEnv]:
    """A factory of the wrapped env from an env class, function or instance."""
    make = env_factory(env)

    def wrapped() -> JointActionEnv:
        inner = make()
        if isinstance(inner, JointActionEnv):
            return inner
        return JointActionEnv(
            inner,
            joint_format=args.joint_format,
            joint_observation=args.joint_observation,
            section_width=args.section_width,
        )

    return wrapped


class JointEnvLearner:
    """Mixed into a learner: the team's env is wrapped for one joint agent (`JointActionEnv`),
    so the learner's own loop trains the joint actor."""

    def __init__(self, env: Any, models: Any, args: Any, **kwargs: Any) -> None:
        if not isinstance(args, JointSettings):
            raise TypeError(
                f"a joint learner takes a JointActorConfig or JointACConfig, got "
                f"{type(args).__name__}"
            )
        eval_env = kwargs.pop("eval_env", None)
        if eval_env is not None:
            eval_env = joint_env_factory(eval_env, args)
        super().__init__(joint_env_factory(env, args), models, args, eval_env=eval_env, **kwargs)

    @staticmethod
    def policy_agents(env: Any) -> list[str]:
        """The agents a team for this learner needs models for: the one joint agent."""
        return list(JointActionEnv(env).possible_agents)


class JointActorLearner(JointEnvLearner, TreeLearner):
    """MAGRPO's loop on the joint agent: CoMLRL's CentralizedMAGRPO."""

    algorithm = "joint_actor"


class JointACLearner(JointEnvLearner, ActorCriticLearner):
    """IAC's loop on the joint agent: the papers' single-agent actor-critic ("AC") row."""

    algorithm = "joint_actor_critic"


class JointActorTrainer(JointActorLearner):
    """`JointActorTrainer(env=..., models=one model, args=JointActorConfig(...)).train()`:
    `env` is the team's ParallelEnv (its class, a factory or an instance); `models` one policy
    (or {"alpha+beta": policy})."""

    algorithm = "joint"

    def __init__(self, env, models, args: JointActorConfig | None = None, **kwargs) -> None:
        super().__init__(env, models, args or JointActorConfig(), **kwargs)


class JointACTrainer(JointACLearner):
    """`JointACTrainer(env=..., models=one model, args=JointACConfig(...)).train()`: one
    actor and its critic over the joint prompt, trained by IAC's TD(0) actor-critic."""

    algorithm = "joint-ac"

    def __init__(self, env, models, args: JointACConfig | None = None, **kwargs) -> None:
        super().__init__(env, models, args or JointACConfig(), **kwargs)


__all__ = [
    "JointACConfig",
    "JointACLearner",
    "JointACTrainer",
    "JointActorConfig",
    "JointActorLearner",
    "JointActorTrainer",
    "JointEnvLearner",
    "JointSettings",
    "joint_completion_ids",
    "joint_env_factory",
]
