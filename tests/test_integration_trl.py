"""TRL's own GRPOTrainer on collabzoo tasks through `collabzoo.integrations.trl`."""

from __future__ import annotations

import pytest

from tests.optional import require_module

torch = require_module("torch", "train")

from collabzoo.algos import tiny_causal_lm  # noqa: E402
from collabzoo.envs.scripted_teams import tinycoop_oracle  # noqa: E402
from collabzoo.envs.single import SingleAgentView  # noqa: E402
from collabzoo.integrations.trl import from_env  # noqa: E402

STEPS, BATCH = 3, 4


@pytest.fixture(autouse=True)
def trl():
    """Every test here needs TRL: a skip outside CI, a failure under CI=true."""
    return require_module("trl", "interop")


def grpo(task, tmp_path, **hooks):
    from trl import GRPOConfig, GRPOTrainer

    model, tokenizer = tiny_causal_lm(0)
    tokenizer.padding_side = "left"
    before = [p.detach().clone() for p in model.parameters()]
    args = GRPOConfig(
        output_dir=str(tmp_path),
        use_cpu=True,
        report_to="none",
        bf16=False,
        seed=0,
        max_steps=STEPS,
        per_device_train_batch_size=BATCH,
        num_generations=BATCH,
        max_completion_length=8,
        learning_rate=1e-2,
        temperature=1.0,
        top_p=1.0,
        top_k=0,
        logging_steps=1,
        save_strategy="no",
    )
    trainer = GRPOTrainer(
        model=model, processing_class=tokenizer, args=args, train_dataset=task.dataset, **hooks
    )
    trainer.train()
    changed = any(not torch.equal(p, q) for p, q in zip(model.parameters(), before, strict=True))
    logged = [e["reward"] for e in trainer.state.log_history if "reward" in e]
    return trainer, changed, logged


def test_the_reward_function_is_the_envs_and_names_missing_columns() -> None:
    task = from_env("tinycoop", role="alpha", partners={"beta": tinycoop_oracle})
    assert [i["task"] for i in task.items] == ["0", "1"]
    assert (
        task.items[1]["prompt"]
        == SingleAgentView("tinycoop").env.reset(options={"task": "1"})[0]["alpha"]
    )
    # Signal 1: alpha wins with an odd first character (beta, the oracle, answers even).
    rewards = task.reward_func(
        [task.items[1]["prompt"]] * 2, ["1", "2"], task=["1", "1"], split=["train"] * 2, seed=[0, 0]
    )
    assert rewards == [1.0, 0.0]
    with pytest.raises(ValueError, match="task, split and seed columns"):
        task.reward_func(["p"], ["1"])


def test_grpo_updates_one_role_of_tinycoop_with_the_envs_rewards(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    task = from_env("tinycoop", role="alpha", partners={"beta": tinycoop_oracle})
    _, changed, logged = grpo(task, tmp_path, reward_funcs=task.reward_func)
    assert changed and task.env_steps == STEPS * BATCH
    wins = [info["metrics"]["win"] for info in task.infos]
    assert logged == pytest.approx(
        [sum(wins[k : k + BATCH]) / BATCH for k in range(0, len(wins), BATCH)]
    )


def test_grpo_rollout_hook_plays_whole_multi_turn_episodes(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is experimental in TRL
    task = from_env("tinycoop", horizon=2, role="alpha", partners={"beta": tinycoop_oracle})
    trainer, changed, logged = grpo(
        task, tmp_path, reward_funcs=task.env_reward, rollout_func=task.rollout_func
    )
    assert changed and task.env_steps == STEPS * BATCH * 2
    assert all(0.0 <= r <= 2.0 for r in logged)
    out = task.rollout_func([task.items[0]["prompt"]], trainer)
    ids, mask = out["completion_ids"][0], out["env_mask"][0]
    assert 0 in mask and 1 in mask and len(ids) == len(mask)
    feedback = trainer.processing_class.decode(
        [t for t, m in zip(ids, mask, strict=True) if m == 0]
    )
    assert "alpha r2/2" in feedback and out["env_return"][0] in (0.0, 1.0, 2.0)
