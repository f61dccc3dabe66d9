"""The joint actor (`collabzoo train joint`): one policy answering for every agent, checked
against CoMLRL 1.4.3's CentralizedMAGRPO (its tagged adapter's parse, `joint_sequence_log_prob`
and `joint_policy_gradient_loss`), and benched beside the multi-agent teams."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from tests.optional import require_module

torch = require_module("torch", "train")

import collabzoo  # noqa: E402
from collabzoo.algos import (  # noqa: E402
    JointActorConfig,
    JointActorTrainer,
    LLMPolicy,
    tiny_causal_lm,
)
from collabzoo.algos.learners.joint_actor import joint_completion_ids  # noqa: E402
from collabzoo.algos.policies.policy import Completion  # noqa: E402
from collabzoo.algos.policies.sampling import Sampling  # noqa: E402
from collabzoo.algos.rollout.joint_env import JointActionEnv  # noqa: E402
from collabzoo.algos.rollout.tree import Child, Node  # noqa: E402
from collabzoo.joint_sections import (  # noqa: E402
    parse_tagged,
    split_tagged_prompt,
    tagged_answer,
    tagged_prompt,
)
from tests.test_learners import FROM_SCRATCH  # noqa: E402

PLAIN = Sampling(8, 1.0, 1.0, None, True)
"""Temperature 1, no truncation: the distribution the reference scores under."""


def comlrl_parts():
    require_module("comlrl", "interop")
    from comlrl.trainers.preference import centralized, collaboration

    return centralized, collaboration


# ----- parsing --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "completion",
    [
        "<AGENT_0> a </agent_0><agent_1>b</agent_1>",
        "<agent_0>x</agent_0> and nothing for agent 1",
        "< agent_1 >\n two\nlines \n</ AGENT_1 > <agent_0>first</agent_0><agent_0>2</agent_0>",
        "<agent_0>unclosed",
        "no tag at all",
        "",
    ],
)
def test_the_tagged_parse_is_the_references(completion: str) -> None:
    centralized, _ = comlrl_parts()
    adapter = centralized.TaggedCentralizedComparatorAdapter()
    ours = parse_tagged(completion, 2)
    try:
        theirs = list(adapter.parse_completion(completion, {}, 2))
    except centralized.CentralizedComparatorParseError:
        theirs = None
    if theirs is None:
        assert ours.unparsable and ours.answers == ["", ""]
    else:
        assert not ours.unparsable and ours.answers == theirs
    assert tagged_prompt(["p0", "p1"]) == adapter.build_prompt({}, ["p0", "p1"])


def test_the_specs_parse_cases_and_what_is_rejected() -> None:
    assert parse_tagged("<AGENT_0> a </agent_0><agent_1>b</agent_1>", 2).answers == ["a", "b"]
    only = parse_tagged("note <agent_0>x</agent_0> tail", 2)
    assert only.answers == ["x", ""] and only.found == [0] and only.rejected == "note  tail"
    none = parse_tagged("1 2", 2)
    assert none.unparsable and none.answers == ["", ""] and none.rejected == "1 2"
    prompts = ["alpha sees\n\ntwo paragraphs", "beta"]
    assert split_tagged_prompt(tagged_prompt(prompts)) == prompts
    assert parse_tagged(tagged_answer(["1", "2"]), 2).answers == ["1", "2"]


def test_an_unparsable_answer_earns_the_reward_of_empty_answers() -> None:
    joint = JointActionEnv(collabzoo.make("tinycoop"))
    team = collabzoo.make("tinycoop")
    (prompt,), _ = joint.reset(seed=3)[0].values(), None
    observations, _ = team.reset(seed=3)
    assert all(observations[a] in prompt for a in team.possible_agents)
    _, rewards, terminations, _, infos = joint.step({"alpha+beta": "no tags here"})
    _, empty, *_ = team.step({"alpha": "", "beta": ""})
    assert rewards["alpha+beta"] == sum(empty.values()) / 2
    assert infos["alpha+beta"]["metrics"]["joint_unparsable"] == 1.0
    assert infos["alpha+beta"]["answers"] == {"alpha": "", "beta": ""}
    assert terminations["alpha+beta"] and joint.agents == []
    joint.reset(seed=3)
    _, rewards, _, _, infos = joint.step({"alpha+beta": "<agent_0>1</agent_0><agent_1>2</agent_1>"})
    assert infos["alpha+beta"]["metrics"]["joint_unparsable"] == 0.0
    assert infos["alpha+beta"]["answers"] == {"alpha": "1", "beta": "2"}


# ----- scoring and the loss against the reference --------------------------------------------
@pytest.mark.parametrize("pad_is_eos", [False, True], ids=["pad-not-eos", "pad-is-eos"])
def test_the_joint_log_prob_scores_the_tokens_up_to_eos(pad_is_eos: bool) -> None:
    """Completion ids [8, 9, EOS, pad, pad]: the sum over 8, 9 and EOS, by hand, by CoMLRL's
    `joint_sequence_log_prob` and by the joint actor's policy."""
    _, collaboration = comlrl_parts()
    model, tokenizer = tiny_causal_lm(seed=4)
    if pad_is_eos:
        tokenizer.pad_token = tokenizer.eos_token
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    assert (pad == eos) == pad_is_eos
    prompt = [40, 41, 42, 43]
    padded = [8, 9, eos, pad, pad]
    cut = joint_completion_ids(padded, pad, eos)
    assert cut == [8, 9, eos]
    with torch.no_grad():
        logits = model(torch.tensor([prompt + cut[:-1]])).logits[0, len(prompt) - 1 :]
        by_hand = logits.float().log_softmax(-1).gather(1, torch.tensor(cut)[:, None]).sum()
        policy = LLMPolicy(model, tokenizer)
        ours = policy.sequence_log_probs([prompt], [cut], sampling=PLAIN)[0]
        theirs = collaboration.joint_sequence_log_prob(
            model, tokenizer, torch.tensor(prompt), torch.tensor(padded)
        )
    assert ours.item() == pytest.approx(by_hand.item(), abs=1e-5)
    assert theirs.item() == pytest.approx(by_hand.item(), abs=1e-5)


def test_the_loss_on_a_fixed_batch_is_comlrls_joint_policy_gradient_loss(tmp_path) -> None:
    """K = 4 joint completions of one prompt with returns [1, 0, 0.5, 1]: the joint actor's loss
    (and its gradient) equals CoMLRL's `joint_policy_gradient_loss` with MAGRPO's advantage."""
    _, collaboration = comlrl_parts()
    from comlrl.trainers.reinforce.magrpo import MAGRPOTrainer as ComlrlMAGRPO

    model, tokenizer = tiny_causal_lm(seed=5)
    config = JointActorConfig(
        output_dir=str(tmp_path), temperature=1.0, top_p=1.0, top_k=None, num_generations=4,
        tensorboard=False, progress=False,
    )  # fmt: skip
    trainer = JointActorTrainer(
        lambda: collabzoo.make("tinycoop"), LLMPolicy(model, tokenizer), config
    )
    agent = "alpha+beta"
    prompt = [50, 51, 52, 53, 54]
    completions = [[8, 9, 1], [10, 1], [11, 12, 13, 1], [9, 1]]
    returns = [1.0, 0.0, 0.5, 1.0]
    root = Node(None, {agent: "x"}, [agent], 0, 0, [])
    root.samples[agent] = [Completion("", prompt, c) for c in completions]
    root.children = [Child((k,), r, ret=r) for k, r in enumerate(returns)]
    policy = trainer.policies[agent]
    metrics: dict[str, float] = {}
    with policy.mode(train=True):
        assert trainer._policy_loss(agent, trainer.training_batch([root])[agent], metrics)
    ours_grad = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    reference = types.SimpleNamespace(
        args=types.SimpleNamespace(advantage_normalization=True, advantage_mode="mean"),
        advantage_mode="mean",
        tokenizers=[tokenizer],
    )
    reference._compute_advantages = types.MethodType(ComlrlMAGRPO._compute_advantages, reference)
    reference._apply_reference_kl_to_returns = types.MethodType(
        ComlrlMAGRPO._apply_reference_kl_to_returns, reference
    )
    batch = {
        "prompt_input_ids": torch.tensor([prompt]),
        "completion_input_ids": [[torch.tensor(c) for c in completions]],
    }
    loss = collaboration.joint_policy_gradient_loss(reference, model, batch, returns)
    loss.backward()
    assert metrics[f"loss/{agent}"] == pytest.approx(loss.item(), abs=1e-6)
    for mine, theirs in zip(ours_grad, (p.grad for p in model.parameters()), strict=True):
        torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-6)


# ----- training ---------------------------------------------------------------------------------
def test_a_joint_actor_plays_several_turns_as_one_agent(tmp_path) -> None:
    """The multi-turn extension: H = 2, K = 2, aligned: 2 + 4 joint steps per episode, one
    policy, every prompt holding both roles' observations."""
    torch.manual_seed(0)
    config = JointActorConfig(
        output_dir=str(tmp_path), max_updates=2, save_steps=0,
        **{**FROM_SCRATCH, "rollout_buffer_size": 2, "num_generations": 2, "max_new_tokens": 2},
        joint_format="fixed_width",
    )  # fmt: skip
    trainer = JointActorTrainer(
        lambda: collabzoo.make("tinycoop", horizon=2), LLMPolicy(*tiny_causal_lm(seed=0)), config
    )
    assert list(trainer.policies) == ["alpha+beta"] and len(trainer.distinct) == 1
    roots = trainer.rollout.build(trainer.episode_seeds(0), 1.0)
    second = roots[0].children[0].node
    assert second is not None and "alpha r2/2" in second.observations["alpha+beta"]
    assert "beta r2/2" in second.observations["alpha+beta"]
    last = trainer.train()
    assert trainer.rollout.env_steps == 2 * 2 * (2 + 4) + 2 * (2 + 4)  # the build above too
    assert "task/joint_unparsable" in last and last["skipped"] == 0.0


def test_the_ac_row_a_joint_actor_critic_trains_and_saves_one_policy(tmp_path) -> None:
    """`collabzoo train joint-ac`: IAC's loop on the joint agent (one actor, one critic of the
    joint prompt), saved as the one folder the bench's joint protocol loads."""
    out = tmp_path / "ac"
    trained = run_cli(
        "train", "joint-ac", "--env", "tinycoop", "--model", "tiny", "--output", str(out),
        "--updates", "2", "--set", "rollout_buffer_size=2", "--set", "num_generations=2",
        "--set", "joint_format=fixed_width", "--set", "max_new_tokens=2",
        "--set", "progress=false", "--eval-episodes", "2",
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr[-2000:]
    assert "agents alpha+beta" in trained.stdout
    from collabzoo.algos.policies.model_loading import team_folders

    # the actor is the one policy an hf: team of alpha and beta loads (the critic is beside it)
    assert team_folders(out / "final", ["alpha", "beta"]) == {
        out / "final" / "alpha+beta": ["alpha", "beta"]
    }
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["update"] for r in records] == [1, 2]
    assert all("value_loss" in r and "task/joint_unparsable" in r for r in records)


def test_the_joint_prompt_can_be_the_envs_state() -> None:
    env = JointActionEnv(collabzoo.make("tinycoop"), joint_observation="state")
    (prompt,) = env.reset(seed=1)[0].values()
    assert env.env.state() in prompt and "<agent_1>" in prompt
    assert "Agent 0 original prompt" not in prompt

    numeric = JointActionEnv(collabzoo.make("tinycoop"), joint_observation="state")
    numeric.env.state = lambda: [0.0, 1.0]
    with pytest.raises(TypeError, match="needs an env whose state\\(\\) is text"):
        numeric.reset(seed=0)


def test_bad_settings_are_refused_clearly(tmp_path) -> None:
    with pytest.raises(ValueError, match="joint_format must be one of"):
        JointActorConfig(joint_format="xml")
    with pytest.raises(ValueError, match="joint_observation must be one of"):
        JointActorConfig(joint_observation="everything")
    with pytest.raises(ValueError, match="section_width must be at least 1"):
        JointActorConfig(section_width=0)
    with pytest.raises(ValueError, match="nothing to cross"):
        JointActorConfig(joint_mode="cross")
    with pytest.raises(ValueError, match="under 'alpha\\+beta'"):
        env = JointActionEnv(collabzoo.make("tinycoop"))
        env.reset(seed=0)
        env.step({"alpha": "1"})


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "collabzoo.cli", *args], capture_output=True, text=True, timeout=600
    )


@pytest.mark.slow(seconds=120)
def test_a_trained_joint_actor_is_benched_beside_a_team(tmp_path: Path) -> None:
    """`collabzoo train joint` and `collabzoo train magrpo`; then `collabzoo bench` plays the
    joint actor's saved folder and the scripted oracle on the joint protocol and the MAGRPO
    team on parallel, into one folder, and the leaderboard shows the three rows together."""
    small = ["--updates", "1", "--set", "rollout_buffer_size=2", "--set", "num_generations=2"]
    small += ["--set", "progress=false", "--eval-episodes", "0"]
    finals = {}
    for algo in ("joint", "magrpo"):
        out = tmp_path / algo
        trained = run_cli(
            "train", algo, "--env", "tinycoop", "--model", "tiny", "--output", str(out), *small
        )
        assert trained.returncode == 0, trained.stderr[-2000:]
        finals[algo] = out / "final"
    assert [p.name for p in finals["joint"].iterdir()] == ["alpha+beta"]
    bench = tmp_path / "bench"
    common = ["--env", "tinycoop", "--episodes", "4", "--output", str(bench), "--no-progress"]
    played = run_cli(
        "bench", *common, "--team", f"hf:{finals['joint']}", "--team", "scripted:oracle",
        "--protocol", "joint",
    )  # fmt: skip
    assert played.returncode == 0, played.stderr[-2000:]
    team = run_cli("bench", *common, "--team", f"hf:{finals['magrpo']}", "--protocol", "parallel")
    assert team.returncode == 0, team.stderr[-2000:]
    documents = [json.loads(p.read_text()) for p in sorted(bench.glob("*.json"))]
    assert sorted(d["protocol"]["name"] for d in documents) == ["joint", "joint", "parallel"]
    for document in documents:
        if document["protocol"]["name"] != "joint":
            continue
        (generation,) = document["episodes"][0]["turns"][0]["generations"]
        assert generation["stage"] == "joint" and "unparsable" in generation
    oracle = next(d for d in documents if "oracle" in d["team"]["spec"])
    assert all(e["turns"][0]["generations"][0]["unparsable"] is False for e in oracle["episodes"])
    assert oracle["summary"]["Win"]["mean"] == 100.0  # the oracle's answers cross the tags whole
    board = run_cli("leaderboard", str(bench))
    assert board.returncode == 0, board.stderr
    rows = [line for line in board.stdout.splitlines() if line.startswith("|")]
    shown = [
        (f"hf:{finals['joint']}", "joint"),
        ("scripted:oracle", "joint"),
        (f"hf:{finals['magrpo']}", "parallel"),
    ]
    for spec, protocol in shown:
        assert any(spec in row and protocol in row for row in rows), (spec, board.stdout)


LEARNED = 0.10
"""The evaluation return each seed must reach after `collabzoo train joint` on TinyCoop with
fixed-width sections (the command below, 50 updates, 64 evaluation episodes; the tiny model's
start is the CLI's, the seed moves the episodes and the sampling). Measured over seeds 0-3 on
the 2-core CPU, 2026-12-07: 0.281 0.172 0.469 0.484 (mean 0.352, sd 0.148; random play
0.016-0.031). One model writing both answers learns more slowly and less evenly than two
(MAGRPO's team: 0.527, sd 0.036 in test_learners), so the bound is lower: 0.10 is more than
three times random play and 0.07 below the worst seed."""


JOINT_RUN = ["--set", "joint_format=fixed_width", "--set", "max_new_tokens=2"]
"""What the joint actor's learning run adds to tests/test_atgrpo.py's CLI_RUN."""


@pytest.mark.slow(seconds=180)
def test_the_joint_actor_learns_tinycoop_from_the_command_line(tmp_path) -> None:
    from tests.test_atgrpo import cli_learning_run

    for seed in (0, 1):
        after = cli_learning_run("joint", seed, tmp_path / str(seed), *JOINT_RUN)
        assert after >= LEARNED, (seed, after)
