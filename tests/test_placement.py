"""Placement: each agent, critic and reference on the device asked for, in the dtype asked for.

These machines have one device (the CPU), so the tests use a second, real torch device that
needs no hardware: "meta" (tensors with shapes and no data). Moving a model there is the same
`.to(device)` as moving it to a GPU, so every parameter and buffer shows where the placement
logic sent it, and nothing here assumes that a team lives on one device.
"""

from __future__ import annotations

import pytest

from tests.optional import require_module

torch = require_module("torch", "train")

from collabzoo.algos import (  # noqa: E402
    CentralCriticConfig,
    CentralCriticTrainer,
    IACConfig,
    IACTrainer,
    LLMPolicy,
    MAGRPOConfig,
    MAGRPOTrainer,
    lora_team,
    tiny_causal_lm,
)
from collabzoo.algos.runtime.placement import (  # noqa: E402
    parse_device_map,
    resolve_device,
    resolve_dtype,
)
from collabzoo.algos.runtime.update_groups import UpdateGroup  # noqa: E402
from collabzoo.tasks.tinycoop.envs import TinyCoopEnv  # noqa: E402

META, CPU = torch.device("meta"), torch.device("cpu")


def devices_of(model: torch.nn.Module) -> set[torch.device]:
    return {t.device for t in [*model.parameters(), *model.buffers()]}


def team() -> dict[str, LLMPolicy]:
    return {a: LLMPolicy(*tiny_causal_lm(seed=i)) for i, a in enumerate(("alpha", "beta"))}


def quiet(config_class, **settings):
    return config_class(
        output_dir="unused", tensorboard=False, progress=False, max_new_tokens=4, **settings
    )


def test_every_agent_critic_and_head_sits_where_it_was_asked() -> None:
    trainer = IACTrainer(
        TinyCoopEnv,
        team(),
        quiet(
            IACConfig,
            use_separate_critic=True,
            agent_devices={"alpha": "meta"},
            critic_devices={"beta": "meta"},
        ),
    )
    assert devices_of(trainer.policies["alpha"].model) == {META}
    assert devices_of(trainer.policies["beta"].model) == {CPU}
    # alpha's critic follows its actor; beta's critic was sent apart from its actor
    assert devices_of(trainer.critics["alpha"].backbone.model) == {META}
    assert devices_of(trainer.critics["alpha"].head) == {META}
    assert devices_of(trainer.critics["beta"].backbone.model) == {META}
    assert devices_of(trainer.critics["beta"].head) == {META}


def test_a_kl_reference_runs_on_its_policys_device_and_follows_it() -> None:
    trainer = MAGRPOTrainer(
        TinyCoopEnv,
        team(),
        quiet(MAGRPOConfig, reference_kl_enabled=True, agent_devices={"beta": "meta"}),
    )
    for agent, device in (("alpha", CPU), ("beta", META)):
        policy = trainer.policies[agent]
        assert devices_of(policy.model) == {device}
        assert devices_of(trainer.references[id(policy)].model) == {device}


def test_the_centralized_critic_takes_its_own_device() -> None:
    trainer = CentralCriticTrainer(
        TinyCoopEnv, team(), quiet(CentralCriticConfig, critic_devices={"team": "meta"})
    )
    critic = trainer.critics["team"]
    assert devices_of(critic.backbone.model) == devices_of(critic.head) == {META}
    assert all(devices_of(p.model) == {CPU} for p in trainer.policies.values())


def test_a_lora_team_moves_as_one_model_and_its_critics_with_it() -> None:
    policies = lora_team(*tiny_causal_lm(seed=1), ["alpha", "beta"])
    trainer = IACTrainer(
        TinyCoopEnv, policies, quiet(IACConfig, use_separate_critic=True, device="meta")
    )
    base = trainer.policies["alpha"].model
    assert trainer.policies["beta"].model is base and devices_of(base) == {META}
    assert all(devices_of(c.head) == {META} for c in trainer.critics.values())
    with pytest.raises(ValueError, match="share one model"):
        IACTrainer(
            TinyCoopEnv,
            lora_team(*tiny_causal_lm(seed=1), ["alpha", "beta"]),
            quiet(IACConfig, agent_devices={"alpha": "meta", "beta": "cpu"}),
        )
    with pytest.raises(ValueError, match="reads an actor's model"):
        IACTrainer(
            TinyCoopEnv,
            lora_team(*tiny_causal_lm(seed=1), ["alpha", "beta"]),
            quiet(IACConfig, use_separate_critic=True, critic_devices={"alpha": "meta"}),
        )


def test_a_model_moved_after_construction_takes_its_head_and_optimizer_state() -> None:
    trainer = IACTrainer(TinyCoopEnv, team(), quiet(IACConfig, use_separate_critic=True))
    critic = trainer.critics["alpha"]
    critic.backbone.model.to(META)
    critic.follow_backbone()  # what every value read does first
    assert devices_of(critic.head) == {META}
    # AdamW's moments follow their parameters: moments made on the CPU, a parameter on meta
    weight = torch.nn.Parameter(torch.ones(3, device=META))
    group = UpdateGroup("w", [weight], lr=0.1)
    group.optimizer.state[weight] = {
        "step": torch.tensor(1.0),
        "exp_avg": torch.zeros(3),
        "exp_avg_sq": torch.zeros(3),
    }
    group._state_follows_parameters()
    state = group.optimizer.state[weight]
    assert state["exp_avg"].device == state["exp_avg_sq"].device == META
    assert state["step"].device == CPU  # AdamW keeps its step count on the CPU


def test_user_placement_is_honoured_under_auto() -> None:
    """'auto' moves CPU models to CUDA when present, and never moves a model the user placed
    on an accelerator; here (no CUDA) the CPU model stays and a meta model stays too."""
    models = team()
    models["beta"].model.to(META)
    trainer = MAGRPOTrainer(TinyCoopEnv, models, quiet(MAGRPOConfig, device="auto"))
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert {d.type for d in devices_of(trainer.policies["alpha"].model)} == {expected}
    assert devices_of(trainer.policies["beta"].model) == {META}


def test_dtype_sets_compute_precision_and_keeps_float32_masters() -> None:
    policies = lora_team(*tiny_causal_lm(seed=1), ["alpha", "beta"])
    trainer = MAGRPOTrainer(TinyCoopEnv, policies, quiet(MAGRPOConfig, dtype="bfloat16"))
    policy = trainer.policies["alpha"]
    assert policy.compute_dtype == torch.bfloat16
    for name, parameter in policy.model.named_parameters():  # adapters train, the base not
        expected = torch.float32 if "lora_" in name else torch.bfloat16
        assert parameter.dtype == expected, name
    full = MAGRPOTrainer(TinyCoopEnv, team(), quiet(MAGRPOConfig, dtype="float32"))
    assert full.policies["alpha"].compute_dtype is None


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"agent_devices": {"gamma": "cpu"}}, "unknown agents"),
        ({"device": "tpu:3"}, "unknown device"),
        ({"dtype": "float8"}, "unknown dtype"),
        ({"critic_devices": {"nobody": "cpu"}}, "unknown critics"),
    ],
)
def test_bad_placement_is_a_clear_error(setting: dict, message: str) -> None:
    config_class, trainer_class = (
        (IACConfig, IACTrainer) if "critic_devices" in setting else (MAGRPOConfig, MAGRPOTrainer)
    )
    with pytest.raises(ValueError, match=message):
        trainer_class(TinyCoopEnv, team(), quiet(config_class, **setting))


def test_device_and_dtype_settings_parse() -> None:
    assert parse_device_map("aux=cuda:0, main=cuda:1") == {"aux": "cuda:0", "main": "cuda:1"}
    with pytest.raises(ValueError, match="NAME=DEVICE"):
        parse_device_map("aux:cuda:0")
    assert resolve_dtype("bf16") is torch.bfloat16 and resolve_dtype("auto") is None
    assert resolve_device("cpu") == CPU
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA device"):
            resolve_device("cuda:1")


def test_update_group_state_move_is_a_no_op_on_one_device() -> None:
    weight = torch.nn.Parameter(torch.ones(3))
    group = UpdateGroup("w", [weight], lr=0.1)
    weight.grad = torch.ones(3)
    group.step()
    before = {k: v for k, v in group.optimizer.state[weight].items()}
    group._state_follows_parameters()
    assert all(group.optimizer.state[weight][k] is v for k, v in before.items())
