"""The group-advantage options of the tree learners: baselines x normalisations (learners-2.md
section 1), the old boolean's meaning, Dr. MAS's grouped standardisation (section 8) as pure
functions and inside the learners, and the learners CoMLRL users look for by name."""

from __future__ import annotations

import math

import pytest

from tests.optional import require_module

require_module("torch", "train")

from collabzoo import algos  # noqa: E402
from collabzoo.algos import (  # noqa: E402
    MAGRPOConfig,
    MAGRPOTrainer,
    MAREINFORCEConfig,
    MAReMaxConfig,
    MARLOOConfig,
)
from collabzoo.algos.objectives import (  # noqa: E402
    StepScore,
    group_advantages,
    grouped_step_advantages,
    standardize_group,
)
from tests.test_learners import ScriptedPolicy, Sum, team  # noqa: E402

R = [1.0, 0.0, 0.0, 0.0]
ZSCORED = [1.7320508, -0.5773503, -0.5773503, -0.5773503]


# ----- baselines x normalisations ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("baseline", "plain"),
    [
        ("mean", [0.75, -0.25, -0.25, -0.25]),
        ("rloo", [1.0, -1 / 3, -1 / 3, -1 / 3]),
        ("max", [0.0, -1.0, -1.0, -1.0]),
        ("raw", [1.0, 0.0, 0.0, 0.0]),
        ("none", [1.0, 0.0, 0.0, 0.0]),
    ],
)
def test_the_spec_hand_case_under_each_normalisation(baseline: str, plain: list[float]) -> None:
    """R = [1, 0, 0, 0]: four different advantages unnormalised, one under z-scoring; 'std'
    divides by the returns' population std (sqrt(3) / 4) and keeps the baseline's shape."""
    assert group_advantages(R, baseline, "none") == pytest.approx(plain)
    assert group_advantages(R, baseline, "zscore") == pytest.approx(ZSCORED, abs=1e-7)
    spread = math.sqrt(3) / 4
    assert group_advantages(R, baseline, "std") == pytest.approx([a / spread for a in plain])


def test_the_old_booleans_keep_their_meaning() -> None:
    """True divided by the group std without re-centring ('std'), False did nothing ('none');
    for MAGRPO's mean baseline 'std' and 'zscore' are the same numbers."""
    for baseline in ("mean", "rloo", "max", "raw"):
        assert group_advantages(R, baseline, True) == group_advantages(R, baseline, "std")
        assert group_advantages(R, baseline, False) == group_advantages(R, baseline, "none")
    assert group_advantages(R, "mean", True) == pytest.approx(group_advantages(R, "mean", "zscore"))
    assert group_advantages(R, "max", True) != pytest.approx(group_advantages(R, "max", "zscore"))
    assert MAGRPOConfig().advantage_normalization == "zscore"
    assert MAGRPOConfig(advantage_normalization=True).advantage_normalization is True
    with pytest.raises(ValueError, match=r"one of \('zscore', 'std', 'none'\).*True is 'std'"):
        MAGRPOConfig(advantage_normalization="z")


def test_unbiased_std_applies_to_zscore_and_std() -> None:
    g = [1.0, 2.0, 4.0, 5.0]  # unbiased std sqrt(10/3)
    unbiased = math.sqrt(10 / 3)
    assert group_advantages(g, "max", "std", std="unbiased") == pytest.approx(
        [(x - 5.0) / unbiased for x in g], rel=1e-6
    )
    assert group_advantages(g, "rloo", "zscore", std="unbiased") == pytest.approx(
        [(x - 3.0) / unbiased for x in g], rel=1e-6
    )


# ----- Dr. MAS ------------------------------------------------------------------------------------
SPEC_STEPS = [  # one prompt: tau1 = (A: 1, B: 1, A: 1), tau2 = (A: 0, B: 0)
    StepScore(1, "A", 1.0),
    StepScore(1, "B", 1.0),
    StepScore(1, "A", 1.0),
    StepScore(2, "A", 0.0),
    StepScore(2, "B", 0.0),
]


def test_dr_mas_spec_hand_cases() -> None:
    vanilla = grouped_step_advantages(SPEC_STEPS, "trajectory")
    assert vanilla == pytest.approx([0.707106, 0.707106, 0.707106, -0.707106, -0.707106], abs=1e-6)
    agent = grouped_step_advantages(SPEC_STEPS, "agent")
    assert agent == pytest.approx([0.577349, 0.707106, 0.577349, -1.154699, -0.707106], abs=1e-6)
    # pooled: mean 0.6, unbiased std sqrt(0.3)
    step = grouped_step_advantages(SPEC_STEPS, "step")
    expected = [(s.score - 0.6) / (math.sqrt(0.3) + 1e-6) for s in SPEC_STEPS]
    assert step == pytest.approx(expected, rel=1e-9)


def test_a_one_member_group_takes_mu_0_sigma_1_and_scale_off_only_centres() -> None:
    assert standardize_group([0.5]) == pytest.approx([0.5 / (1 + 1e-6)], rel=1e-12)
    lone = [StepScore(1, "A", 1.0), StepScore(1, "B", 0.25), StepScore(2, "A", 0.0)]
    assert grouped_step_advantages(lone, "agent")[1] == pytest.approx(0.25 / (1 + 1e-6))
    centred = grouped_step_advantages(SPEC_STEPS, "agent", scale=False)
    assert centred == pytest.approx([1 / 3, 0.5, 1 / 3, -2 / 3, -0.5])
    assert standardize_group([]) == []
    with pytest.raises(ValueError, match="advantage_group must be one of"):
        grouped_step_advantages(SPEC_STEPS, "team")


def sum_tree(group: str, **settings):
    """The scripted Sum game (H = 2, K = 2, aligned): every node's joint actions are (1, 2) ->
    3 and (0, 0) -> 0, so with gamma 0.9 the root's returns are 4.35 and 1.35, the two second
    turns' 3 and 0."""
    config = MAGRPOConfig(
        output_dir="unused",
        num_generations=2,
        advantage_group=group,
        tensorboard=False,
        progress=False,
        **settings,
    )
    trainer = MAGRPOTrainer(Sum, team(("left", "right")), config)
    trainer.rollout.policies = {
        "left": ScriptedPolicy(["1", "0"]),
        "right": ScriptedPolicy(["2", "0"]),
    }
    return trainer, trainer.rollout.build([0], trainer.args.discount)[0]


def test_dr_mas_groups_inside_the_tree_learner() -> None:
    """'node' standardises each node's siblings (+-1 everywhere); 'agent' pools an agent's six
    samples of the episode, [4.35, 1.35, 3, 0, 3, 0]: mean 1.95, unbiased std sqrt(15.93 / 5);
    'step' pools both agents' twelve: the same mean, std sqrt(2 * 15.93 / 11)."""
    scores = [4.35, 1.35, 3.0, 0.0, 3.0, 0.0]
    trainer, root = sum_tree("node")
    node = [a for n in trainer.tree_advantages(root).values() for a in n["left"]]
    assert node == pytest.approx([1.0, -1.0] * 3)
    for group, std in (("agent", math.sqrt(15.93 / 5)), ("step", math.sqrt(2 * 15.93 / 11))):
        trainer, root = sum_tree(group)
        found = trainer.tree_advantages(root)
        expected = [(g - 1.95) / (std + 1e-6) for g in scores]
        for agent in ("left", "right"):
            assert [a for n in found.values() for a in n[agent]] == pytest.approx(expected)
        batch = trainer.training_batch([root])  # what the loss is given
        assert [s.advantage for s in batch["left"]] == pytest.approx(expected)
    trainer, root = sum_tree("agent", advantage_normalization="none")
    centred = [a for n in trainer.tree_advantages(root).values() for a in n["left"]]
    assert centred == pytest.approx([g - 1.95 for g in scores])


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"advantage_group": "agent", "advantage_mode": "max"}, "needs advantage_mode='mean'"),
        ({"advantage_group": "step", "advantage_normalization": "std"}, "'zscore' or 'none'"),
        ({"advantage_group": "trajectory", "joint_mode": "cross"}, "needs joint_mode='aligned'"),
        ({"advantage_group": "prompt"}, r"one of \('node', 'trajectory', 'agent', 'step'\)"),
    ],
)
def test_dr_mas_settings_that_cannot_run_are_refused(settings, message) -> None:
    with pytest.raises(ValueError, match=message):
        MAREINFORCEConfig(**settings)


# ----- the learners by CoMLRL's names -------------------------------------------------------------
def test_named_learners_defaults_and_aliases() -> None:
    assert (MARLOOConfig().advantage_mode, MARLOOConfig().advantage_normalization) == (
        "rloo",
        "none",
    )
    assert (MAReMaxConfig().advantage_mode, MAReMaxConfig().advantage_normalization) == (
        "max",
        "none",
    )
    assert MAREINFORCEConfig().advantage_normalization == "none"
    assert algos.LEARNER_ALIASES == {"maac": "cc"}
    assert algos.MAACTrainer is algos.CentralCriticTrainer
    assert algos.MAACConfig is algos.CentralCriticConfig
    assert set(algos.LEARNER_ALIASES.values()) <= set(algos.LEARNERS)
    assert not set(algos.LEARNER_ALIASES) & set(algos.LEARNERS)


@pytest.mark.parametrize(
    ("algo", "setting", "message"),
    [
        ("marloo", "advantage_mode=max", "MARLOO's baseline is rloo"),
        ("maremax", "advantage_mode=rloo", "MAReMax's baseline is max"),
        ("maremax", "advantage_group=agent", "needs advantage_mode='mean'"),
        ("marloo", "advantage_normalization=l2", "advantage normalization must be one of"),
        ("marloo", "num_generations=1", "needs num_generations of at least 2"),
        ("maac", "critic_type=w", "critic_type must be one of"),
    ],
)
def test_the_command_line_refuses_bad_settings_of_the_named_learners(
    algo, setting, message, tmp_path, capsys
) -> None:
    from collabzoo.cli import main

    command = ["train", algo, "--env", "tinycoop", "--model", "tiny", "--output", str(tmp_path)]
    assert main([*command, "--set", setting]) == 2
    assert message in capsys.readouterr().err


def test_the_command_line_names_the_aliases_among_the_learners(tmp_path, capsys) -> None:
    from collabzoo.cli import main

    command = ["train", "maa", "--env", "tinycoop", "--model", "tiny", "--output", str(tmp_path)]
    assert main(command) == 2
    from collabzoo.algos import LEARNER_ALIASES, LEARNERS

    known = ", ".join(sorted({*LEARNERS, *LEARNER_ALIASES}))
    assert f"known: {known}\n" in capsys.readouterr().err
    assert "maac" in known and "cc" in LEARNERS


def test_set_reads_the_old_boolean_and_the_new_names() -> None:
    """`--set advantage_normalization=true` is still the boolean (so it keeps its meaning);
    `zscore`, `std` and `none` are the names."""
    from collabzoo.cli.config_values import config_settings

    def read(value: str):
        pairs = [f"advantage_normalization={value}"]
        return config_settings(MARLOOConfig, pairs, "x=1")["advantage_normalization"]

    assert read("true") is True and read("false") is False
    assert [read(v) for v in ("zscore", "std", "none")] == ["zscore", "std", "none"]
