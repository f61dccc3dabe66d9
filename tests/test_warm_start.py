"""The supervised warm start: it lowers the token loss and raises the task's reward over the
untrained model, trains each policy on its own agents' rows only (LoRA adapters included),
saves a team the learners and `collabzoo train` load back, and refuses bad input clearly."""

from __future__ import annotations

import json
import math
from pathlib import Path

import datasets
import pytest

from tests.optional import require_module

torch = require_module("torch", "train")

import collabzoo  # noqa: E402
from collabzoo.algos import (  # noqa: E402
    LLMPolicy,
    MAGRPOConfig,
    MAGRPOTrainer,
    Sampling,
    SupervisedConfig,
    SupervisedTrainer,
    lora_team,
)
from collabzoo.algos.learners.supervised import microbatches  # noqa: E402
from collabzoo.algos.policies.model_loading import (  # noqa: E402
    load_saved_team,
    small_causal_lm,
    task_tokenizer,
    team_folders,
)
from collabzoo.bench import replayed_rewards  # noqa: E402
from collabzoo.cli import main  # noqa: E402
from tests.conftest import benchmark_module  # noqa: E402

AGENTS = ("first_builder", "second_builder")
TARGETS = ["I", "L"]
"""Two small words: the quick warm start learns them in a minute on one core."""
SMALL = {"hidden_size": 64, "num_layers": 2, "intermediate_size": 192, "vocab_size": 512}
QUICK = {
    "learning_rate": 1e-2,
    "lr_scheduler_type": "cosine",
    "warmup_steps": 5,
    "max_steps": 60,
    "per_device_train_batch_size": 8,
    "logging_steps": 10,
    "device": "cpu",
}
SAMPLING = Sampling(max_new_tokens=96, temperature=1.0, top_p=1.0, top_k=None)


@pytest.fixture(scope="module")
def demonstrations(tmp_path_factory) -> datasets.Dataset:
    """The noisy oracle's episodes on the two words, as `collabzoo export` writes them."""
    output = tmp_path_factory.mktemp("demonstrations") / "data"
    argv = ["export", "strbuild", "--team", "scripted:noisy", "--episodes", "8"]
    argv += ["--env-arg", f"targets={json.dumps(TARGETS)}", "-o", str(output), "--no-progress"]
    assert main(argv) == 0
    return datasets.load_from_disk(str(output))


def fresh_team(rows: datasets.Dataset, seed: int) -> dict[str, LLMPolicy]:
    texts = [*rows["prompt"], *rows["completion"]]
    return {
        agent: LLMPolicy(
            *small_causal_lm(texts, seed=10 * seed + i, **SMALL), max_prompt_tokens=256
        )
        for i, agent in enumerate(AGENTS)
    }


def team_return(policies: dict[str, LLMPolicy], episodes: int = 8, seed: int = 0) -> float:
    """The mean return of whole StrBuild episodes on the two words, sampled at temperature 1."""
    env = collabzoo.make("strbuild", targets=TARGETS)
    total = 0.0
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        for episode in range(episodes):
            observations, _ = env.reset(seed=episode, options={"task": episode % len(TARGETS)})
            while env.agents:
                answers = {
                    a: policies[a].generate([observations[a]], SAMPLING)[0].text for a in env.agents
                }
                observations, rewards, _, _, _ = env.step(answers)
                total += rewards[AGENTS[0]]
    return total / episodes


WARM_SEEDS = (0, 1)
IMPROVEMENT = 1.5
"""The return the quick warm start must add to the untrained model's, on every seed. Measured
over seeds 0-3 (8 episodes of 4 turns; the return is the sum of the 4 turn rewards, at most 8;
an untrained model's answers are rejected whole, -0.5 a turn for the two missing palettes):

    seed   untrained   warm start   gain    token loss (first, second builder) before -> after
    0      -2.000      1.620        3.62    6.15 -> 0.437   6.22 -> 0.261
    1      -2.000      0.864        2.86    6.14 -> 0.378   6.18 -> 0.321
    2      -2.000      1.263        3.26    6.18 -> 0.321   6.22 -> 0.333
    3      -2.000      1.831        3.83    6.15 -> 0.381   6.23 -> 0.355
                                    3.39 mean, 0.43 sd: the bound is 4 sd under the mean.
The loss falls to at most 0.071 of where it started; the bound is 0.15. About 17 s a seed.
"""
LOSS_RATIO = 0.15


@pytest.mark.parametrize("seed", WARM_SEEDS)
def test_the_warm_start_lowers_the_loss_and_raises_the_return(
    demonstrations: datasets.Dataset, seed: int, tmp_path: Path
) -> None:
    policies = fresh_team(demonstrations, seed)
    untrained = team_return(policies, seed=seed)
    trainer = SupervisedTrainer(
        policies, demonstrations, SupervisedConfig(output_dir=str(tmp_path), seed=seed, **QUICK)
    )
    before = trainer.evaluate_loss()
    trainer.train()
    after = trainer.evaluate_loss()
    for agent in AGENTS:
        assert after[agent] < LOSS_RATIO * before[agent], (before, after)
    warm = team_return(policies, seed=seed)
    assert warm > untrained + IMPROVEMENT, (untrained, warm)
    lines = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [10, 20, 30, 40, 50, 60]
    assert lines[-1]["first_builder/learning_rate"] < 1e-4  # the cosine ran down


def test_each_policy_trains_on_its_own_agents_rows_only(
    demonstrations: datasets.Dataset, tmp_path: Path
) -> None:
    policies = fresh_team(demonstrations, 0)
    trainer = SupervisedTrainer(
        policies, demonstrations, SupervisedConfig(output_dir=str(tmp_path), device="cpu")
    )
    for agent in AGENTS:
        own = [r for r in demonstrations if r["agent"] == agent]
        expected = [trainer.encode(policies[agent], r) for r in own]
        assert trainer.examples[id(policies[agent])] == expected
    # a shared policy sees every row, once
    shared = LLMPolicy(*small_causal_lm(demonstrations["prompt"], **SMALL))
    trainer = SupervisedTrainer(shared, demonstrations, SupervisedConfig(output_dir=str(tmp_path)))
    assert len(trainer.examples[id(shared)]) == len(demonstrations)
    assert trainer.policy_name(shared) == "first_builder+second_builder"


def test_a_lora_team_trains_each_adapter_on_its_rows_and_loads_back(
    demonstrations: datasets.Dataset, tmp_path: Path
) -> None:
    require_module("peft", "train")
    base, tokenizer = small_causal_lm(
        [*demonstrations["prompt"], *demonstrations["completion"]], **SMALL
    )
    base.save_pretrained(tmp_path / "base")
    tokenizer.save_pretrained(tmp_path / "base")
    from collabzoo.algos.policies.model_loading import load_causal_lm

    policies = lora_team(*load_causal_lm(str(tmp_path / "base")), AGENTS, rank=4)
    frozen = {n: p.detach().clone() for n, p in base.named_parameters()}
    adapters = {a: {n: v.clone() for n, v in policies[a].trainable_state().items()} for a in AGENTS}
    config = SupervisedConfig(output_dir=str(tmp_path / "sft"), **{**QUICK, "max_steps": 3})
    trainer = SupervisedTrainer(policies, demonstrations, config)
    trainer.train()
    model = policies[AGENTS[0]].model
    for name, value in model.get_base_model().named_parameters():
        if "lora_" not in name:
            key = name.replace("base_layer.", "")
            assert torch.equal(value, frozen[key]), f"the base weight {name} moved"
    for agent in AGENTS:
        moved = policies[agent].trainable_state()
        assert any(not torch.equal(moved[n], adapters[agent][n]) for n in moved)
    saved = trainer.save(tmp_path / "team")
    assert sorted(p.name for p in team_folders(saved, AGENTS)) == sorted(AGENTS)
    loaded = load_saved_team(saved, AGENTS)
    assert loaded[AGENTS[0]].model is loaded[AGENTS[1]].model  # one base, two adapters
    for agent in AGENTS:
        assert loaded[agent].adapter == agent
        reloaded = loaded[agent].trainable_state()
        trained = policies[agent].trainable_state()
        assert reloaded.keys() == trained.keys()
        assert all(torch.allclose(reloaded[n], trained[n]) for n in trained)


def test_a_saved_warm_start_is_where_a_learner_starts(
    demonstrations: datasets.Dataset, tmp_path: Path
) -> None:
    policies = fresh_team(demonstrations, 0)
    config = SupervisedConfig(output_dir=str(tmp_path), **{**QUICK, "max_steps": 4})
    trainer = SupervisedTrainer(policies, demonstrations, config)
    trainer.train()
    saved = trainer.save()
    assert saved == tmp_path / "final"
    assert json.loads((saved / "supervised_config.json").read_text())["max_steps"] == 4
    loaded = load_saved_team(saved, AGENTS)
    row = demonstrations[0]
    for agent in AGENTS:
        assert (
            loaded[agent].tokenizer(row["prompt"])["input_ids"]
            == policies[agent].tokenizer(row["prompt"])["input_ids"]
        )
        for (name, value), (_, original) in zip(
            loaded[agent].model.named_parameters(),
            policies[agent].model.named_parameters(),
            strict=True,
        ):
            assert torch.equal(value, original), name
    learner = MAGRPOTrainer(
        lambda: collabzoo.make("strbuild", targets=TARGETS),
        loaded,
        MAGRPOConfig(
            output_dir=str(tmp_path / "rl"),
            max_updates=1,
            num_generations=2,
            rollout_buffer_size=1,
            num_turns=2,
            max_new_tokens=32,
            tensorboard=False,
            progress=False,
            device="cpu",
        ),
    )
    metrics = learner.train_step()
    assert math.isfinite(metrics["loss"])
    assert learner.rollout.env_steps == 2 + 4
    # the saved team plays `collabzoo export` too: its episodes become a dataset that replays
    output = tmp_path / "played"
    argv = ["export", "strbuild", "--team", f"hf:{saved}", "--episodes", "2", "-o", str(output)]
    argv += ["--env-arg", f"targets={json.dumps(TARGETS)}", "--max-new-tokens", "48"]
    assert main([*argv, "--device", "cpu", "--no-progress"]) == 0
    played = datasets.load_from_disk(str(output))
    assert len(played) == 2 * 4 * 2 and set(played["team"]) == {f"hf:{saved}"}
    assert replayed_rewards(played) == played["reward"]


def test_the_sft_and_train_commands_chain(
    demonstrations: datasets.Dataset, tmp_path: Path, capsys
) -> None:
    data = tmp_path / "data"
    demonstrations.save_to_disk(str(data))
    argv = ["sft", str(data), "--model", "small", "--output", str(tmp_path / "sft")]
    argv += ["--set", "max_steps=3", "--set", "per_device_train_batch_size=4", "--device", "cpu"]
    argv += ["--max-prompt-tokens", "256"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "first_builder: token loss" in out and "second_builder: token loss" in out
    summary = json.loads((tmp_path / "sft" / "summary.json").read_text())
    assert set(summary["loss_after"]) == set(AGENTS)
    team = tmp_path / "sft" / "final"
    argv = ["train", "magrpo", "--env", "strbuild", "--model", str(team), "--updates", "1"]
    argv += ["--output", str(tmp_path / "rl"), "--eval-episodes", "1", "--device", "cpu"]
    argv += ["--max-prompt-tokens", "256"]
    argv += ["--env-arg", f"targets={json.dumps(TARGETS)}", "--set", "num_generations=2"]
    argv += ["--set", "num_turns=1", "--set", "rollout_buffer_size=1"]
    argv += ["--set", "max_new_tokens=16", "--set", "tensorboard=false"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"model {team} (saved)" in out
    assert (tmp_path / "rl" / "final" / "first_builder").is_dir()
    # a saved team keeps its structure: --team is refused, not silently ignored
    assert main([*argv, "--team", "lora"]) == 2
    assert "is a saved team" in capsys.readouterr().err


def test_bad_input_is_refused_with_what_was_expected(
    demonstrations: datasets.Dataset, tmp_path: Path, capsys
) -> None:
    policies = fresh_team(demonstrations, 0)
    config = SupervisedConfig(output_dir=str(tmp_path))
    with pytest.raises(ValueError, match="needs the columns prompt, completion, agent"):
        SupervisedTrainer(policies, [{"prompt": "p", "completion": "c"}], config)
    with pytest.raises(ValueError, match="the dataset has no rows"):
        SupervisedTrainer(policies, [], config)
    with pytest.raises(ValueError, match=r"rows of agents \['third_builder'\]"):
        SupervisedTrainer(
            policies, [{"prompt": "p", "completion": "c", "agent": "third_builder"}], config
        )
    with pytest.raises(ValueError, match="no row paid at least min_reward=99"):
        SupervisedTrainer(policies, demonstrations, SupervisedConfig(min_reward=99))
    kept = SupervisedTrainer(policies, demonstrations, SupervisedConfig(min_reward=1.5))
    count = sum(len(v) for v in kept.examples.values())
    assert 0 < count == sum(1 for r in demonstrations["reward"] if r >= 1.5) < len(demonstrations)
    for bad, message in [
        ({"learning_rate": 0}, "learning_rate must be positive"),
        ({"lr_scheduler_type": "step"}, "lr_scheduler_type must be one of"),
        ({"per_device_train_batch_size": 0}, "per_device_train_batch_size must be at least 1"),
        ({"warmup_steps": -1}, "must be 0 or more"),
        ({"max_tokens_per_microbatch": 0}, "max_tokens_per_microbatch must be at least 1"),
    ]:
        with pytest.raises(ValueError, match=message):
            SupervisedConfig(**bad)
    assert main(["sft", str(tmp_path / "missing"), "--output", str(tmp_path / "o")]) == 2
    assert "cannot load the dataset" in capsys.readouterr().err
    data = tmp_path / "data"
    demonstrations.save_to_disk(str(data))
    assert main(["sft", str(data), "--output", str(tmp_path / "o"), "--set", "epochs=2"]) == 2
    assert "SupervisedConfig fields:" in capsys.readouterr().err
    argv = ["train", "magrpo", "--env", "strbuild", "--model", "small", "--output", "x"]
    assert main(argv) == 2
    assert "--model small learns its tokenizer from a dataset" in capsys.readouterr().err


def test_max_steps_overrides_the_epochs_and_a_fraction_stops_part_way(
    demonstrations: datasets.Dataset, tmp_path: Path
) -> None:
    policies = fresh_team(demonstrations, 0)
    policy = policies[AGENTS[0]]
    rows = len([r for r in demonstrations["agent"] if r == AGENTS[0]])  # 32

    def plan(**settings) -> tuple[list, list]:
        config = SupervisedConfig(output_dir=str(tmp_path), device="cpu", **settings)
        trainer = SupervisedTrainer(policies, demonstrations, config)
        own = {id(example): k for k, example in enumerate(trainer.examples[id(policy)])}
        batches = trainer._batches(policy)
        return batches, [own[id(example)] for batch in batches for example in batch]

    batches, order = plan(max_steps=9, per_device_train_batch_size=5)  # 45: an epoch and more
    assert [len(b) for b in batches] == [5] * 9
    assert sorted(order[:rows]) == list(range(rows))  # every row once before any twice
    batches, order = plan(num_train_epochs=0.5, per_device_train_batch_size=4)
    assert [len(b) for b in batches] == [4] * 4
    assert len(set(order)) == rows // 2


def test_microbatches_pad_within_their_budget_shortest_first() -> None:
    rows = [([0] * p, [1] * c) for p, c in [(5, 3), (2, 1), (9, 9), (4, 4), (3, 2), (40, 2)]]
    runs = microbatches(rows, 24)
    assert sorted(map(id, (r for run in runs for r in run))) == sorted(map(id, rows))  # each once
    widths = [[len(p) + len(c) for p, c in run] for run in runs]
    assert widths == [[3, 5, 8], [8], [18], [42]]  # 3 x 8 fits 24, 4 x 8 would not; 42 alone
    assert microbatches(rows, None) == [rows]
    assert [len(run) for run in microbatches(rows, 1)] == [1] * len(rows)


def test_a_microbatched_step_has_the_whole_batchs_gradients_and_loss(
    demonstrations: datasets.Dataset, tmp_path: Path
) -> None:
    """The parts of a step are weighted by their completion tokens, so that the gradients (not
    only their direction, which AdamW's first step would hide) are the whole batch's."""
    policies = fresh_team(demonstrations, 0)
    policy = policies[AGENTS[0]]

    def step(budget: int | None) -> tuple[SupervisedTrainer, float, list[torch.Tensor]]:
        config = SupervisedConfig(
            output_dir=str(tmp_path), device="cpu", max_tokens_per_microbatch=budget
        )
        trainer = SupervisedTrainer(policies, demonstrations, config)
        batch = trainer._batches(policy)[0]
        loss = trainer.accumulate(policy, batch)
        grads = [p.grad.clone() for p in policy.trainable_parameters()]
        policy.model.zero_grad(set_to_none=True)
        return trainer, loss, grads

    whole, whole_loss, whole_grads = step(None)
    batch = whole._batches(policy)[0]
    budget = 2 * max(len(p) + len(c) for p, c in batch)  # two rows or one a run: several runs
    assert 2 < len(microbatches(batch, budget)) < len(batch), "the batch was not split: moot"
    split, split_loss, split_grads = step(budget)
    assert split_loss == pytest.approx(whole_loss, rel=1e-5)
    for a, b in zip(whole_grads, split_grads, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-6)
    before, after = whole.evaluate_loss(), split.evaluate_loss()
    assert after == pytest.approx(before, rel=1e-5)


def test_the_learning_rate_schedules() -> None:
    cosine = SupervisedConfig(learning_rate=1.0, lr_scheduler_type="cosine", warmup_steps=4)
    assert [cosine.lr_factor(s, 14) for s in range(4)] == [0.2, 0.4, 0.6, 0.8]
    assert cosine.lr_factor(4, 14) == 1.0
    assert cosine.lr_factor(9, 14) == pytest.approx(0.5)
    assert cosine.lr_factor(14, 14) == pytest.approx(0.0)
    linear = SupervisedConfig(lr_scheduler_type="linear")
    assert [linear.lr_factor(s, 4) for s in range(4)] == [1.0, 0.75, 0.5, 0.25]
    assert SupervisedConfig(lr_scheduler_type="constant").lr_factor(99, 100) == 1.0


def test_the_task_tokenizer_keeps_every_byte() -> None:
    tokenizer = task_tokenizer(["/setblock 1 2 0 stone\n"] * 20, vocab_size=300)
    text = "/setblock 9 9 0 obsidian ünïcode ✓\n"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == text
    assert len(tokenizer("/setblock 1 2 0 stone", add_special_tokens=False)["input_ids"]) < 12
    with pytest.raises(ValueError, match="vocab_size must be at least 260"):
        task_tokenizer(["x"], vocab_size=100)


def test_the_microbatch_benchmark_times_the_same_step_both_ways(tmp_path: Path) -> None:
    """`benchmarks/sft_microbatches.py` on a tiny LoRA team: both ways compute one loss and one
    gradient per batch, and the micro-batches embed fewer positions (the padding they drop)."""
    require_module("peft", "train")
    model, tokenizer = small_causal_lm(
        ["/setblock 1 2 0 stone\n"] * 20, **{**SMALL, "num_layers": 1}
    )
    model.save_pretrained(tmp_path / "tiny")
    tokenizer.save_pretrained(tmp_path / "tiny")
    benchmark_module("learn_building")  # the script imports it as a sibling
    script = benchmark_module("sft_microbatches")
    argv = ["--model", str(tmp_path / "tiny"), "--steps", "2", "--threads", "1"]
    argv += ["--work", str(tmp_path / "work"), "--json", str(tmp_path / "out.json")]
    assert script.main(argv) == 0
    report = json.loads((tmp_path / "out.json").read_text())
    assert report["largest_relative_gradient_difference"] < 1e-4
    whole, split = report["runs"]["whole batch"], report["runs"]["micro-batches"]
    assert len(whole) == len(split) == 2
    for a, b in zip(whole, split, strict=True):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5)
        assert 0 < b["positions"] < a["positions"]
