"""The same MPE simple_spread task trained by TorchRL's own multi-agent PPO recipe (MAPPO, or
IPPO with --ippo): an independent reproduction to set collabzoo's IPPO figure against.

It uses collabzoo's TorchRL adapter (`torchrl_env`, `mappo_modules`, `mappo_loss`), a
`Collector`, and evaluates on the same episode seeds and team return as
`ippo_mpe_spread.py` (sampled actions, and greedy).

    python benchmarks/torchrl_mappo_mpe_spread.py [--ippo]   # 120k steps
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from tensordict import TensorDict
from tensordict.nn import InteractionType, set_interaction_type
from torchrl.collectors import Collector
from torchrl.data import LazyTensorStorage, ReplayBuffer
from torchrl.data.replay_buffers.samplers import SamplerWithoutReplacement

from collabzoo.integrations.torchrl import GROUP, mappo_loss, mappo_modules, torchrl_env

sys.path.insert(0, str(Path(__file__).parent))
from ippo_mpe_spread import MAX_CYCLES, make_env, team_return


def evaluate(actor, seeds: list[int], greedy: bool) -> float:
    mode = InteractionType.DETERMINISTIC if greedy else InteractionType.RANDOM

    @torch.no_grad()
    def act(observations: dict[str, np.ndarray]) -> dict[str, int]:
        agents = list(observations)
        stacked = torch.tensor(np.stack([observations[a] for a in agents]), dtype=torch.float32)
        with set_interaction_type(mode):
            out = actor(TensorDict({(GROUP, "observation"): stacked[None]}, [1]))
        return {a: int(p) for a, p in zip(agents, out[GROUP, "action"][0], strict=True)}

    return float(np.mean([team_return(act, s) for s in seeds]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=120_000, help="env steps in all")
    parser.add_argument("--frames-per-batch", type=int, default=800)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ippo", action="store_true", help="per-agent critics (IPPO)")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--eval-episodes", type=int, default=100)
    options = parser.parse_args()
    torch.manual_seed(options.seed)
    eval_seeds = [10_000 + i for i in range(options.eval_episodes)]
    env = torchrl_env(make_env(), return_state=False, seed=options.seed)
    actor, critic = mappo_modules(env, centralised=not options.ippo)
    loss = mappo_loss(env, actor, critic, gamma=0.99, lmbda=0.95, entropy_coeff=0.01)
    optimizer = torch.optim.Adam(loss.parameters(), lr=options.lr)
    collector = Collector(
        env,
        actor,
        frames_per_batch=options.frames_per_batch,
        total_frames=options.frames,
    )
    buffer = ReplayBuffer(
        storage=LazyTensorStorage(options.frames_per_batch),
        sampler=SamplerWithoutReplacement(),
        batch_size=options.frames_per_batch // 4,
    )
    started, curve = time.perf_counter(), []
    batches = options.frames // options.frames_per_batch
    for index, batch in enumerate(collector):
        shape = batch.get(("next", GROUP, "reward")).shape
        for key in ("done", "terminated"):
            batch.set(("next", GROUP, key), batch.get(("next", key)).unsqueeze(-1).expand(shape))
        batch.set(("next", GROUP, "reward"), batch.get(("next", GROUP, "reward")) * 0.1)
        with torch.no_grad():
            loss.value_estimator(
                batch,
                params=loss.critic_network_params,
                target_params=loss.target_critic_network_params,
            )
        buffer.extend(batch.reshape(-1))
        for _ in range(4):  # epochs
            for _ in range(4):  # mini-batches
                part = buffer.sample()
                out = loss(part)
                total = out["loss_objective"] + out["loss_critic"] + out["loss_entropy"]
                optimizer.zero_grad()
                total.backward()
                torch.nn.utils.clip_grad_norm_(loss.parameters(), 0.5)
                optimizer.step()
        collector.update_policy_weights_()
        if (index + 1) % max(1, batches // 20) == 0:
            curve.append((index + 1, round(evaluate(actor, eval_seeds[:20], False), 2)))
            print(f"batch {index + 1}: return {curve[-1][1]}", flush=True)
    report = {
        "recipe": "ippo" if options.ippo else "mappo",
        "seed": options.seed,
        "env_steps": options.frames,
        "episode_steps": MAX_CYCLES,
        "seconds": round(time.perf_counter() - started, 1),
        "sampled": round(evaluate(actor, eval_seeds, False), 2),
        "greedy": round(evaluate(actor, eval_seeds, True), 2),
        "curve": curve,
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
