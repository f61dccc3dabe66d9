"""The layout of `collabzoo.algos`: its public names keep importing from the package itself
whatever subpackage they live in, and no module grows past the size one reads in a sitting."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from tests.optional import require_module

require_module("torch", "train")

import collabzoo.algos as algos  # noqa: E402
from collabzoo.algos.learners.config import ActorCriticRule  # noqa: E402

HOMES = {
    "CentralCriticConfig": "collabzoo.algos.learners.central_critic",
    "CentralCriticTrainer": "collabzoo.algos.learners.central_critic",
    "CoLLMCCConfig": "collabzoo.algos.learners.central_critic",
    "CoLLMCCTrainer": "collabzoo.algos.learners.central_critic",
    "MAACConfig": "collabzoo.algos.learners.central_critic",
    "MAACTrainer": "collabzoo.algos.learners.central_critic",
    "MARLOOConfig": "collabzoo.algos.learners.marloo",
    "MARLOOTrainer": "collabzoo.algos.learners.marloo",
    "MAReMaxConfig": "collabzoo.algos.learners.maremax",
    "MAReMaxTrainer": "collabzoo.algos.learners.maremax",
    "IACConfig": "collabzoo.algos.learners.iac",
    "IACTrainer": "collabzoo.algos.learners.iac",
    "IPPOConfig": "collabzoo.algos.learners.ippo",
    "IPPOTrainer": "collabzoo.algos.learners.ippo",
    "MAGRPOConfig": "collabzoo.algos.learners.magrpo",
    "MAGRPOTrainer": "collabzoo.algos.learners.magrpo",
    "MAREINFORCEConfig": "collabzoo.algos.learners.reinforce",
    "MAREINFORCETrainer": "collabzoo.algos.learners.reinforce",
    "MADPOConfig": "collabzoo.algos.learners.madpo",
    "MADPOTrainer": "collabzoo.algos.learners.madpo",
    "MADPOIterConfig": "collabzoo.algos.learners.madpo",
    "MADPOIterTrainer": "collabzoo.algos.learners.madpo",
    "MARLHFConfig": "collabzoo.algos.learners.marlhf",
    "MARLHFTrainer": "collabzoo.algos.learners.marlhf",
    "MARLHFIterConfig": "collabzoo.algos.learners.marlhf",
    "MARLHFIterTrainer": "collabzoo.algos.learners.marlhf",
    "SupervisedConfig": "collabzoo.algos.learners.supervised",
    "SupervisedTrainer": "collabzoo.algos.learners.supervised",
    "LLMPolicy": "collabzoo.algos.policies.llm",
    "MLPPolicy": "collabzoo.algos.policies.mlp",
    "mlp_team": "collabzoo.algos.policies.mlp",
    "Sampling": "collabzoo.algos.policies.sampling",
    "load_causal_lm": "collabzoo.algos.policies.model_loading",
    "load_saved_team": "collabzoo.algos.policies.model_loading",
    "lora_team": "collabzoo.algos.policies.model_loading",
    "small_causal_lm": "collabzoo.algos.policies.model_loading",
    "tiny_causal_lm": "collabzoo.algos.policies.model_loading",
    "LEARNERS": "collabzoo.algos",
    "LEARNER_ALIASES": "collabzoo.algos",
    "ATGRPOConfig": "collabzoo.algos.learners.atgrpo",
    "ATGRPOTrainer": "collabzoo.algos.learners.atgrpo",
    "JointACConfig": "collabzoo.algos.learners.joint_actor",
    "JointACTrainer": "collabzoo.algos.learners.joint_actor",
    "JointActorConfig": "collabzoo.algos.learners.joint_actor",
    "JointActorTrainer": "collabzoo.algos.learners.joint_actor",
}
MAX_LINES = 550


def test_every_public_name_imports_from_the_package() -> None:
    assert sorted(algos.__all__) == sorted(HOMES), "a public name without a home here, or gone"
    for name in algos.__all__:
        namespace: dict[str, object] = {}
        exec(f"from collabzoo.algos import {name}", namespace)  # the import users write
        assert namespace[name] is getattr(algos, name)


@pytest.mark.parametrize("name", sorted(HOMES))
def test_a_public_name_is_the_object_at_its_home(name: str) -> None:
    assert getattr(algos, name) is getattr(importlib.import_module(HOMES[name]), name)


def test_learners_table_names_the_exported_classes() -> None:
    for config, trainer in algos.LEARNERS.values():
        assert getattr(algos, config.__name__) is config
        assert getattr(algos, trainer.__name__) is trainer


def test_no_module_of_algos_is_over_the_size_limit() -> None:
    root = Path(algos.__file__).parent
    sizes = {p.relative_to(root): len(p.read_text().splitlines()) for p in root.rglob("*.py")}
    assert {p: n for p, n in sizes.items() if n > MAX_LINES} == {}


# ----- one way to configure a learner -------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(algos.LEARNERS))
def test_a_learner_class_adds_nothing_but_its_name_and_default_config(name: str) -> None:
    """What a learner does is its config's fields (and an actor-critic config's `rule()`): the
    trainer class sets no behaviour of its own, by attribute, property or override."""
    _, trainer = algos.LEARNERS[name]
    own = {k for k in vars(trainer) if not k.startswith("__") or k == "__init__"}
    assert own <= {"algorithm", "__init__"}, own
    assert trainer.algorithm == name


def test_each_actor_critic_config_states_its_rule() -> None:
    assert algos.IACConfig(ac_epochs=3).rule() == ActorCriticRule(epochs=3)
    assert algos.IPPOConfig(ppo_epochs=2, gae_lambda=0.9, clip_range=None).rule() == (
        ActorCriticRule(2, 0.9, ratio=True, clip_range=None, clip_every_value=True)
    )
    cc = algos.CentralCriticConfig(critic_type="q").rule()
    assert cc == ActorCriticRule(team_critic="q") and cc.centralized
    assert not algos.IACConfig().rule().centralized


@pytest.mark.parametrize(
    ("name", "field", "bad", "message"),
    [
        ("marloo", "advantage_mode", "max", "MARLOO's baseline is rloo"),
        ("maremax", "advantage_mode", "mean", "MAReMax's baseline is max"),
        ("magrpo", "advantage_normalization", "l2", "one of .'zscore', 'std', 'none'"),
        ("mareinforce", "advantage_group", "team", "advantage_group must be one of"),
        ("marloo", "advantage_group", "agent", "advantage_group='agent'"),
        ("mareinforce", "advantage_mode", "median", "advantage_mode must be one of"),
        ("mareinforce", "advantage_std", "sample", "advantage_std"),
        ("iac", "mini_batch_size", 0, "mini_batch_size"),
        ("iac", "env_executor", "dask", "env_executor"),
        ("ippo", "clip_range", -0.1, "clip_range"),
        ("cc", "ac_epochs", 0, "ac_epochs"),
        ("magrpo", "generation_backend", "sglang", "generation_backend"),
        ("magrpo", "rollout_shards", 0, "rollout_shards"),
    ],
)
def test_bad_settings_are_refused_by_the_config_and_again_by_the_learner(
    name: str, field: str, bad: object, message: str
) -> None:
    config, trainer = algos.LEARNERS[name]
    with pytest.raises(ValueError, match=message):
        config(**{field: bad})
    args = config()
    setattr(args, field, bad)  # changed after the config was made: the learner checks again
    with pytest.raises(ValueError, match=message):
        trainer(None, None, args)  # refused before the env or the models are looked at
