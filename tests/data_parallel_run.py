"""A MAGRPO or IPPO run on TinyCoop for tests/test_data_parallel.py: launched by torchrun (one
rank per process) or as one process with `--shards N`; rank 0 writes the trained weights (and an
IPPO run's critics) to `--out`."""

from __future__ import annotations

import argparse

import torch

import collabzoo
from collabzoo.algos import (
    IPPOConfig,
    IPPOTrainer,
    LLMPolicy,
    MAGRPOConfig,
    MAGRPOTrainer,
    lora_team,
    tiny_causal_lm,
)

UPDATES = 3


def team(kind: str) -> dict[str, LLMPolicy]:
    torch.manual_seed(0)  # LoRA's A matrices are drawn from torch's RNG
    if kind == "lora":
        return lora_team(*tiny_causal_lm(seed=0), ["alpha", "beta"], rank=4)
    return {a: LLMPolicy(*tiny_causal_lm(seed=i)) for i, a in enumerate(("alpha", "beta"))}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--team", choices=("separate", "lora"), required=True)
    parser.add_argument("--learner", choices=("magrpo", "ippo"), default="magrpo")
    parser.add_argument("--out", required=True)
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--shards", type=int, default=1)
    parser.add_argument("--updates", type=int, default=UPDATES)
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args()
    settings = dict(
        output_dir=args.run_dir,
        max_updates=args.updates,
        resume=args.resume,
        rollout_buffer_size=8,  # 64 one-token joint answers per update: some win
        num_generations=8,
        max_new_tokens=1,
        temperature=1.0,
        top_p=1.0,
        top_k=None,
        rollout_shards=args.shards,
        env_workers=2,
        tensorboard=False,
        progress=False,
        save_steps=0,
        device="cpu",
    )
    if args.learner == "ippo":  # two epochs of one mini-batch, advantages z-scored
        config: object = IPPOConfig(
            actor_learning_rate=1e-2, critic_learning_rate=1e-2, ppo_epochs=2, **settings
        )
        trainer_class: type = IPPOTrainer
    else:
        config, trainer_class = MAGRPOConfig(agent_learning_rate=1e-2, **settings), MAGRPOTrainer
    trainer = trainer_class(lambda: collabzoo.make("tinycoop"), team(args.team), config)
    last = trainer.train()
    if trainer.is_main:
        state = {trainer.policy_name(p): p.trainable_state() for p in trainer.distinct}
        extra = trainer.extra_state()  # an IPPO run's critics: heads and backbones
        for name, heads in extra.get("critic_heads", {}).items():
            state[f"critic-head/{name}"] = heads
        for name, backbone in extra.get("critic_backbones", {}).items():
            state[f"critic/{name}"] = backbone
        world = trainer.parallel.world if trainer.parallel else 1
        torch.save(
            {"state": state, "last": last, "world": world, "update": trainer.update}, args.out
        )
    trainer.close()


if __name__ == "__main__":
    main()
