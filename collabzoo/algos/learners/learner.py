"""The learner base: what every collabzoo learner shares, whatever it learns from.

A `Learner` owns the team of policies, the environment factories, the rollout machinery, the
reward transforms, the training loop (logging, evaluation, checkpoints, resume) and saving.
A subclass supplies `learn(roots)` (advantages from the rollout trees, then the update) and
any extra state (critics, their optimizers) through `extra_state()` / `load_extra_state()`.
The Monte-Carlo learners (`tree_learner`) and the actor-critic learners (`actor_critic`) are
its two families.

Frozen and alternating agents (`trainable_agents`, `alternate_every`; the rule is in
`trained_agents`): `train_step` freezes the update groups of the policies not trained at this
update before it calls `learn`, and fails an update after which a frozen group holds gradients.
A learner builds its batch and every advantage statistic from `self.trained_agents` only
(`trained_only` filters a per-agent mapping), samples and scores with `sampling_of(agent)` and
sets a policy's rate with `learning_rate(policy, field)`.
"""

from __future__ import annotations

import contextlib
import copy
import json
import time
import warnings
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from collabzoo.algos.learners.config import LearnerConfig, update_group
from collabzoo.algos.learners.stats import RunningStats
from collabzoo.algos.learners.trained_agents import check_team, shared_learning_rate
from collabzoo.algos.policies.llm import LLMPolicy
from collabzoo.algos.policies.model_loading import team_policies
from collabzoo.algos.policies.policy import Policy
from collabzoo.algos.policies.sampling import Sampling
from collabzoo.algos.rollout.tree import Node, TreeRollout, expanded_nodes
from collabzoo.algos.runtime.checkpoint import (
    capture_rng,
    latest_checkpoint,
    load_checkpoint,
    restore_rng,
    save_checkpoint,
)
from collabzoo.algos.runtime.data_parallel import DataParallel, shard_seed
from collabzoo.algos.runtime.placement import place_models, resolve_dtype
from collabzoo.algos.runtime.run_log import RunLogger
from collabzoo.algos.runtime.update_groups import UpdateGroup, groups_state, load_groups_state

EVAL_SEED = 10**9
"""Evaluation episodes reset with seeds from here on, and evaluation sampling draws from a
torch RNG seeded EVAL_SEED + config.seed: both apart from training's."""


def env_factory(env: Any) -> Callable[[], Any]:
    """A factory from an env class or function (called), or an env instance (deep-copied)."""
    if isinstance(env, type) or (callable(env) and not hasattr(env, "reset")):
        return env
    return lambda: copy.deepcopy(env)


class Learner:
    """Base trainer: the team, the rollouts, the loop and the state; `learn` is the
    subclass's."""

    algorithm = "learner"

    def __init__(
        self,
        env: Any,
        models: Any,
        args: LearnerConfig,
        *,
        tokenizer: Any = None,
        eval_env: Any = None,
        root_generations: int | None = None,
        deeper_generations: int | None = None,
        joint_mode: str = "aligned",
        record_state: bool = False,
    ) -> None:
        args.validate()  # again: a field may have changed since the config was made
        self.args = args
        torch.manual_seed(args.seed)  # training samples from torch's RNG: a seed repeats a run
        self.sampling = args.sampling()
        self.env_factory = env_factory(env)
        self.eval_env_factory = env_factory(eval_env) if eval_env is not None else self.env_factory
        probe = self.env_factory()
        self.agents = list(probe.possible_agents)
        self.policies = team_policies(models, self.agents, tokenizer)
        self.distinct = list({id(p): p for p in self.policies.values()}.values())
        self.schedule = check_team(args, self.agents, self.policies)  # refuses what it cannot
        self.agent_sampling = {a: args.agent_sampling(a) for a in self.agents}
        """Each agent's sampling distribution (`sampling` unless `per_agent` sets its own)."""
        self.parallel = DataParallel.from_environment()
        """This process's rank in a data-parallel run (torchrun), or None."""
        self._check_sharding()
        place_models(
            self.policies, default=self._device(), per_name=args.agent_devices, dtype=args.dtype
        )
        for policy in self.distinct:
            self.prepare_policy(policy)
        self.generator = self._generator()
        self.executor = ThreadPoolExecutor(max_workers=args.env_workers)
        self.remote = self._remote_steps()
        self.rollout = TreeRollout(
            self.env_factory,
            self.policies,
            self.sampling,
            agent_sampling=self.agent_sampling,
            num_generations=root_generations or args.num_generations,
            deeper_generations=deeper_generations,
            joint_mode=joint_mode,
            max_depth=args.num_turns,
            early_termination_threshold=args.early_termination_threshold,
            reward_transform=self._transform_reward,
            executor=self.executor,
            record_state=record_state,
            generate=self.generator.generate if self.generator else None,
            remote=self.remote,
        )
        self.reward_stats = RunningStats()
        self._env_steps_counted = 0
        """`rollout.env_steps` as of the last update's count (all ranks' steps)."""
        self.update = 0
        self.samples_seen = 0
        self.groups: dict[str, UpdateGroup] = {}
        """Every optimizer of the learner, by name: one per distinct policy (and critic)."""
        self._truncations_logged = 0

    # ----- who trains, and with what --------------------------------------------------------------
    @property
    def trained_agents(self) -> list[str]:
        """The agents trained at this update: the only ones whose samples may enter the batch
        or an advantage statistic."""
        return self.schedule.at(self.update)

    def trained_only(self, per_agent: Mapping[str, Any]) -> dict[str, Any]:
        """The entries of a per-agent mapping for the agents trained at this update."""
        trained = set(self.trained_agents)
        return {agent: value for agent, value in per_agent.items() if agent in trained}

    def apply_schedule(self) -> list[str]:
        """Freeze the update group of every policy none of whose agents trains at this update
        (unfreeze the others); critics' groups are never frozen. Returns the trained agents."""
        trained = self.trained_agents
        for policy in self.distinct:
            group = self.groups.get(self.policy_name(policy))
            if group is not None:
                group.frozen = not any(self.policies[a] is policy for a in trained)
        return trained

    def sampling_of(self, agent: str) -> Sampling:
        """`agent`'s sampling distribution: what its rollouts sample and its losses score."""
        return self.agent_sampling[agent]

    def learning_rate(self, policy: Policy, field: str) -> float:
        """The learning rate of `policy`'s group: config field `field` as its agents have it."""
        return shared_learning_rate(self.args, self.policies, policy, field)

    def add_policy_groups(self, field: str = "agent_learning_rate") -> None:
        """One optimizer group per distinct policy, named for its agents, at their rate."""
        for policy in self.distinct:
            name, rate = self.policy_name(policy), self.learning_rate(policy, field)
            self.groups[name] = update_group(name, policy.trainable_parameters(), rate, self.args)

    def _check_sharding(self) -> None:
        shards = self.args.rollout_shards
        if self.parallel is None:
            return
        if shards not in (1, self.parallel.world):
            raise ValueError(
                f"rollout_shards={shards} under {self.parallel.world} ranks: each rank rolls "
                "out one shard, so leave it at 1 (or set it to the number of ranks)"
            )
        if self.args.reward_normalization:
            raise ValueError(
                "reward_normalization keeps running statistics of the rewards in the order "
                "they arrive, which data-parallel ranks do not share: train in one process, or "
                "scale rewards with reward_shift / reward_scale"
            )

    def _device(self) -> str | None:
        """`device`, with "auto" meaning this rank's own GPU in a data-parallel run."""
        device = self.args.device
        if self.parallel is not None and device == "auto" and torch.cuda.is_available():
            return f"cuda:{self.parallel.local_rank}"
        return device

    @property
    def is_main(self) -> bool:
        """Whether this process writes logs, checkpoints and saved policies (rank 0)."""
        return self.parallel is None or self.parallel.is_main

    def _remote_steps(self) -> Any:
        """The Ray stepper of env_executor="ray", or None (threads)."""
        if self.args.env_executor == "threads":
            return None
        from collabzoo.algos.rollout.ray_rollouts import RayEnvSteps

        return RayEnvSteps(self.args.ray_address)

    def _generator(self) -> Any:
        """The vLLM engines of `generation_backend="vllm"` (built on the first rollout), or
        None: the policies sample themselves."""
        if self.args.generation_backend in ("hf", "hf-compiled"):
            return None
        if not all(isinstance(p, LLMPolicy) for p in self.distinct):
            raise ValueError(
                'generation_backend="vllm" samples Hugging Face causal LMs; another policy (an '
                "MLPPolicy) samples itself: use the hf backend"
            )
        from collabzoo.algos.rollout.vllm_engine import VLLMGenerator

        return VLLMGenerator(
            self.policies,
            max_new_tokens=max(s.max_new_tokens for s in self.agent_sampling.values()),
            seed=self.args.seed,
            dtype=resolve_dtype(self.args.dtype),
            gpu_memory_utilization=self.args.vllm_gpu_memory_utilization,
            sleep_mode=self.args.vllm_enable_sleep_mode,
            engine_kwargs=self.args.vllm_kwargs,
        )

    def weights_changed(self) -> None:
        """Call after changing the policies' weights outside `train_step` (which calls it after
        each update): a vLLM engine syncs before it samples again."""
        if self.generator is not None:
            self.generator.mark_stale()

    def close(self) -> None:
        """Shut down the vLLM engines (if any) and the env worker threads."""
        if self.generator is not None:
            self.generator.close()
        self.executor.shutdown(wait=False)

    def prepare_policy(self, policy: Policy) -> None:
        """Ready a policy (or a critic's backbone) for training: an LLM's chat-template options,
        and float32 master weights computed in the model's own lower precision."""
        if resolve_dtype(self.args.dtype) is not None:
            policy.compute_dtype = None  # the models were turned to this dtype: compute in it
        policy.keep_float32_masters()
        if not isinstance(policy, LLMPolicy):
            return  # what follows are an LLM's sampling and memory settings
        if self.args.chat_template_kwargs is not None:
            policy.chat_template_kwargs = dict(self.args.chat_template_kwargs)
        if policy.keep_generation_config:
            warnings.warn(
                "keep_generation_config=True is switched off for training: the model's "
                "generation_config extras (repetition penalty, min-p, ...) would make the "
                "sampled distribution differ from the one every loss scores",
                stacklevel=3,
            )
            policy.keep_generation_config = False
        policy.generation_batch_size = self.args.generation_batch_size
        policy.compile_generation = self.args.generation_backend == "hf-compiled"
        if self.args.gradient_checkpointing:
            policy.enable_gradient_checkpointing()

    def policy_name(self, policy: Policy) -> str:
        """The agents a policy plays, joined by "+" (its folder and optimizer name)."""
        return "+".join(a for a, p in self.policies.items() if p is policy)

    @property
    def skipped_updates(self) -> int:
        """Optimizer steps skipped so far (per policy or critic) for a non-finite loss."""
        return sum(group.skipped for group in self.groups.values())

    def truncated_prompts(self) -> int:
        """Prompts cut to fit so far, by every policy and critic backbone."""
        owners = {id(p): p for p in self.prompt_encoders()}
        return sum(p.truncated_prompts for p in owners.values())

    def prompt_encoders(self) -> list[Policy]:
        """Everything that encodes text prompts (a subclass adds its critics)."""
        return list(self.distinct)

    # ----- rewards and data order ---------------------------------------------------------------
    def _transform_reward(self, reward: float) -> float:
        shaped = (reward + self.args.reward_shift) * self.args.reward_scale
        if not self.args.reward_normalization:
            return shaped
        self.reward_stats.add(shaped)
        return (shaped - self.reward_stats.mean) / (
            self.reward_stats.std + self.args.reward_norm_eps
        )

    def episode_seeds(self, update: int) -> list[int]:
        """The episodes of an update: a function of the run seed and the update index only, so a
        resumed run sees the same data in the same order."""
        size = self.args.rollout_buffer_size
        return [self.args.seed * 1_000_003 + update * size + j for j in range(size)]

    def learn(self, roots: list[Node]) -> dict[str, float]:
        """Advantages from one update's rollout trees, and the optimizer step(s) on them; returns
        the learner's own metrics (losses, gradient norms, ...)."""
        raise NotImplementedError

    def rollout_update(self) -> list[Node]:
        """This update's rollout trees: all its episodes in one process, or this rank's shard
        of them; in shards, each sampled with its own seeded RNG (see `data_parallel`)."""
        seeds = self.episode_seeds(self.update)
        shards = self.parallel.world if self.parallel else self.args.rollout_shards
        if shards == 1:
            return self.rollout.build(seeds, self.args.discount)
        mine = [self.parallel.rank] if self.parallel else range(shards)
        cuda = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
        roots: list[Node] = []
        for shard in mine:
            with torch.random.fork_rng(devices=cuda):
                torch.manual_seed(shard_seed(self.args.seed, self.update, shard))
                roots += self.rollout.build(seeds[shard::shards], self.args.discount)
        return roots

    def train_step(self) -> dict[str, float]:
        """One update: roll out this update's episodes, learn from them, count and report."""
        started = time.perf_counter()
        for group in self.groups.values():
            group.reducer = self.parallel
        with torch.profiler.record_function("collabzoo.rollout"):
            roots = self.rollout_update()
        if self.generator is not None:
            self.generator.release()  # sleep mode: the engines' memory is the trainer's now
        trained = self.apply_schedule()
        metrics = self.learn(roots)
        for group in self.groups.values():
            group.check_frozen()
        if self.args.trainable_agents is not None or self.args.alternate_every is not None:
            metrics.update({f"trained/{a}": float(a in trained) for a in self.agents})
        self.weights_changed()
        self.update += 1
        metrics.update(self.rollout_metrics(roots, started))
        truncated = self.truncated_prompts()
        metrics["truncated_prompts"] = float(truncated - self._truncations_logged)
        self._truncations_logged = truncated
        return metrics

    def rollout_metrics(self, roots: list[Node], started: float) -> dict[str, float]:
        """Returns, rewards, task metrics and throughput of one update's rollouts; counts the
        update's joint samples (the first turn's joint actions) into `samples_seen`."""
        first = [c for root in roots for c in root.children]
        rewards = [
            c.reward for root in roots for node in expanded_nodes(root) for c in node.children
        ]
        totals = [sum(c.ret for c in first), len(first), sum(rewards), len(rewards)]
        steps = self.rollout.env_steps - self._env_steps_counted
        if self.parallel is not None:  # every rank's share, so rank 0 logs the whole update
            *totals, steps = self.parallel.sum([*totals, steps])
        returns, count, reward_sum, reward_count = totals
        self.rollout.env_steps = self._env_steps_counted = self._env_steps_counted + int(steps)
        self.samples_seen += int(count)
        elapsed = time.perf_counter() - started
        metrics = {
            "mean_return": returns / max(1, count),
            "mean_reward": reward_sum / max(1, reward_count),
            "env_steps": float(self.rollout.env_steps),
            "joint_samples": float(self.samples_seen),
            "joint_samples_per_s": count / elapsed if elapsed > 0 else 0.0,
            "update_seconds": elapsed,
        }
        task_metrics: dict[str, list[float]] = {}
        for child in first:
            for name, value in child.metrics.items():
                task_metrics.setdefault(name, []).append(value)
        metrics.update({f"task/{k}": sum(v) / len(v) for k, v in task_metrics.items()})
        return metrics

    # ----- the loop -------------------------------------------------------------------------------
    def train(self) -> dict[str, float]:
        """Run until `max_updates`, logging every update and checkpointing as configured."""
        output = Path(self.args.output_dir)
        output.mkdir(parents=True, exist_ok=True)
        if self.args.resume:
            self.resume()
        last: dict[str, float] = {}
        main = self.is_main  # in a data-parallel run, rank 0 alone logs and checkpoints
        logger: Any = (
            RunLogger(
                output,
                tensorboard=self.args.tensorboard,
                wandb=self.args.wandb,
                total_updates=self.args.max_updates,
                progress=self.args.progress,
                initial_update=self.update,
            )
            if main
            else contextlib.nullcontext()
        )
        with logger as log:
            while self.update < self.args.max_updates:
                last = self.train_step()
                if not main:
                    continue
                if self.update % max(1, self.args.logging_steps) == 0:
                    log.log(self.update, last)
                if self.args.eval_interval and self.update % self.args.eval_interval == 0:
                    log.log(self.update, {f"eval/{k}": v for k, v in self.evaluate().items()})
                if self.args.save_steps and self.update % self.args.save_steps == 0:
                    self.checkpoint()
            saved_last = self.args.save_steps and self.update % self.args.save_steps == 0
            if main and self.update and not saved_last:
                self.checkpoint()
        return last

    @torch.no_grad()
    def evaluate(self, episodes: int | None = None) -> dict[str, float]:
        """Play whole episodes (one sample per agent per turn) on the eval env factory: the mean
        return, each task metric's mean over every turn ("task/iou") and over the episodes' last
        turns ("final/iou", the turn the bench's table reads).

        Sampling draws from its own seeded RNG stream, restored afterwards: every evaluation
        of the same weights sees the same samples (evaluations compare across updates), and
        evaluating never moves the training run's RNG, so `eval_interval` leaves the training
        trajectory as it was. With `eval_save_episodes` the episodes themselves are saved too.
        """
        count = episodes or self.args.eval_num_samples
        cuda = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
        with torch.random.fork_rng(devices=cuda):
            torch.manual_seed(EVAL_SEED + self.args.seed)
            return self._evaluate(count)

    def _evaluate(self, count: int) -> dict[str, float]:
        rollout = TreeRollout(
            self.eval_env_factory,
            self.policies,
            self.sampling,
            agent_sampling=self.agent_sampling,
            num_generations=1,
            max_depth=self.args.num_turns,
            executor=self.executor,
            generate=self.rollout.generate,
            remote=self.remote,
        )
        seeds = [EVAL_SEED + self.args.seed * 1_000_003 + j for j in range(count)]
        roots = rollout.build(seeds, 1.0)
        task_metrics, final_metrics, episodes = {}, {}, []
        for root in roots:
            total, node, last, turns = 0.0, root, {}, []
            while node is not None and node.children:
                child = node.children[0]
                total += child.reward
                for name, value in child.metrics.items():
                    task_metrics.setdefault(name, []).append(value)
                last = child.metrics
                answers = zip(node.agents, child.joint, strict=True)
                turns.append(
                    {
                        "observations": node.observations,
                        "answers": {agent: node.samples[agent][i].text for agent, i in answers},
                        "reward": child.reward,
                        "metrics": child.metrics,
                    }
                )
                node = child.node
            episodes.append({"seed": root.seed, "return": total, "turns": turns})
            for name, value in last.items():
                final_metrics.setdefault(name, []).append(value)
        if self.args.eval_save_episodes and self.is_main:
            self._save_episodes(episodes)
        returns = [episode["return"] for episode in episodes]
        result = {"mean_return": sum(returns) / max(1, len(returns))}
        result.update({f"task/{k}": sum(v) / len(v) for k, v in task_metrics.items()})
        result.update({f"final/{k}": sum(v) / len(v) for k, v in final_metrics.items()})
        return result

    def _save_episodes(self, episodes: list[dict[str, Any]]) -> Path:
        """One JSON line per episode, written whole or not at all (a numeric env's array
        observations as lists); a second evaluation at the same update replaces the first."""
        folder = Path(self.args.output_dir) / "evaluations"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"update-{self.update:08d}.jsonl"
        lines = [json.dumps(e, default=lambda value: value.tolist()) for e in episodes]
        staging = path.with_suffix(".jsonl.tmp")
        staging.write_text("".join(line + "\n" for line in lines))
        staging.replace(path)
        return path

    # ----- state --------------------------------------------------------------------------------
    def extra_state(self) -> dict[str, Any]:
        """A subclass's own state (critics, their optimizers) for checkpoints."""
        return {}

    def load_extra_state(self, state: Mapping[str, Any]) -> None:
        """Restore what `extra_state` returned."""

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint holds: only what training changes (a LoRA team's adapters, not
        its frozen base), every optimizer, the RNGs and the counters."""
        return {
            "policies": {self.policy_name(p): p.trainable_state() for p in self.distinct},
            "optimizers": groups_state(self.groups),
            "rng": capture_rng(),
            "update": self.update,
            "env_steps": self.rollout.env_steps,
            "samples_seen": self.samples_seen,
            "reward_stats": vars(self.reward_stats).copy(),
            "config": asdict(self.args),
            "extra": self.extra_state(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if "optimizers" not in state:
            raise ValueError(
                "this checkpoint was written by an earlier collabzoo (one optimizer for the "
                "whole team, every weight of the model): it cannot be resumed by this version"
            )
        saved = state["policies"]
        names = [self.policy_name(p) for p in self.distinct]
        if sorted(saved) != sorted(names):
            raise ValueError(
                f"the checkpoint holds policies {sorted(saved)}, this team has {sorted(names)}"
            )
        for policy, name in zip(self.distinct, names, strict=True):
            policy.load_trainable_state(saved[name])
        load_groups_state(self.groups, state["optimizers"])
        restore_rng(state["rng"])
        self.update = state["update"]
        self.rollout.env_steps = self._env_steps_counted = state["env_steps"]
        self.samples_seen = state["samples_seen"]
        vars(self.reward_stats).update(state["reward_stats"])
        self.load_extra_state(state.get("extra", {}))
        self.weights_changed()

    def checkpoint(self) -> Path:
        return save_checkpoint(
            self.args.output_dir, self.update, self.state_dict(), keep=self.args.save_total_limit
        )

    def resume(self) -> bool:
        """Load the latest checkpoint of output_dir, if any; True if one was loaded."""
        path = latest_checkpoint(self.args.output_dir)
        if path is None:
            return False
        self.load_state_dict(load_checkpoint(path))
        return True

    def save(self, path: str | Path) -> Path:
        """The trained policies, one folder per distinct policy (each in its own format)."""
        path = Path(path)
        if not self.is_main:  # every rank holds the same weights: rank 0 writes them
            return path
        path.mkdir(parents=True, exist_ok=True)
        for policy in self.distinct:
            policy.save(path / self.policy_name(policy))
        return path


__all__ = ["EVAL_SEED", "Learner", "env_factory"]
