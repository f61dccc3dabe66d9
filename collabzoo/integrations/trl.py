"""collabzoo tasks for TRL's single-agent trainers (GRPO): a prompt dataset and a reward function.

One model plays the whole task through the single-agent view (`collabzoo.envs.single`): the
dataset's prompts are the view's first observations, and the reward function plays each
completion as the first turn of the item's episode, on a fresh copy of the env, and returns the
env's team reward. Extra dataset columns (task, split, seed) tell it which episode; TRL passes
them to reward functions by name.

For tasks of several turns, `rollout_func` is TRL's rollout hook (`GRPOTrainer(rollout_func=...)`):
it plays whole episodes with the trainer's model. The completion TRL trains on is the model's
answers with the env's next observations between them; those observation tokens carry
`env_mask` 0, so only the model's own tokens are trained. The episode's return (the sum of the
team rewards) reaches the reward function as the `env_return` column.

    task = from_env("tinycoop")
    trainer = trl.GRPOTrainer(model=model, processing_class=tokenizer, args=GRPOConfig(...),
                              train_dataset=task.dataset, reward_funcs=task.reward_func)
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from collabzoo.envs.single import SingleAgentView


@dataclass
class TrlTask:
    """A task as TRL sees it. `env_steps` counts the completions the reward function scored."""

    view: SingleAgentView
    items: list[dict[str, Any]]
    env_steps: int = 0
    infos: list[dict[str, Any]] = field(default_factory=list, repr=False)

    @property
    def dataset(self) -> Any:
        """The items as a `datasets.Dataset` with a "prompt" column, as TRL's trainers take."""
        import datasets

        return datasets.Dataset.from_list(self.items)

    def play(self, item: dict[str, Any], completion: str) -> tuple[float, dict[str, Any]]:
        """The env's reward and info for one completion answering the item's first turn."""
        view = copy.deepcopy(self.view)
        view.reset(seed=item["seed"], options={"task": item["task"], "split": item["split"]})
        _, reward, _, _, info = view.step(completion)
        return reward, info

    def rollout_func(self, prompts: Sequence[Any], trainer: Any) -> dict[str, list[Any]]:
        """TRL's rollout hook: one whole episode per prompt, sampled with the trainer's model."""
        import torch

        tokenizer = trainer.processing_class
        model = trainer.accelerator.unwrap_model(trainer.model)
        per_turn = max(1, trainer.max_completion_length // self.horizon)
        stop = set(trainer.eos_token_ids)
        out: dict[str, list[Any]] = {
            "prompt_ids": [],
            "completion_ids": [],
            "env_mask": [],
            "env_return": [],
            "task": [],
            "split": [],
            "seed": [],
        }
        for prompt in prompts:
            item = self._item_of(_text(prompt) if not isinstance(prompt, str) else prompt)
            view = copy.deepcopy(self.view)
            observation, _ = view.reset(
                seed=item["seed"], options={"task": item["task"], "split": item["split"]}
            )
            prompt_ids = tokenizer(observation, add_special_tokens=False)["input_ids"]
            completion: list[int] = []
            mask: list[int] = []
            total, done = 0.0, False
            while not done:
                context = torch.tensor([prompt_ids + completion], device=model.device)
                with torch.no_grad():
                    generated = model.generate(
                        input_ids=context,
                        attention_mask=torch.ones_like(context),
                        generation_config=trainer.generation_config,
                        max_new_tokens=per_turn,
                    )[0, context.shape[1] :].tolist()
                answer_ids = [t for t in generated if t not in stop and t != tokenizer.pad_token_id]
                answer = tokenizer.decode(answer_ids, skip_special_tokens=True)
                observation, reward, terminated, truncated, _ = view.step(answer)
                total += reward
                done = terminated or truncated
                completion += answer_ids
                mask += [1] * len(answer_ids)
                if not done:
                    feedback = tokenizer("\n\n" + observation, add_special_tokens=False)[
                        "input_ids"
                    ]
                    completion += feedback
                    mask += [0] * len(feedback)
            self.env_steps += view.env.turn if hasattr(view.env, "turn") else 1
            out["prompt_ids"].append(prompt_ids)
            out["completion_ids"].append(completion or [tokenizer.eos_token_id])
            out["env_mask"].append(mask or [1])
            out["env_return"].append(total)
            for key in ("task", "split", "seed"):
                out[key].append(item[key])
        return {**out, "logprobs": None}  # sampled by transformers: TRL recomputes them

    @staticmethod
    def env_reward(
        completions: Sequence[Any], env_return: Sequence[float], **_: Any
    ) -> list[float]:
        """The reward function that goes with `rollout_func`: each episode's return."""
        return [float(r) for r in env_return]

    @property
    def horizon(self) -> int:
        return int(getattr(self.view.env, "horizon", 1))

    def _item_of(self, prompt: str) -> dict[str, Any]:
        for item in self.items:
            if item["prompt"] == prompt:
                return item
        raise ValueError("rollout_func got a prompt that is not one of this task's items")

    def reward_func(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        task: Sequence[str] | None = None,
        split: Sequence[str] | None = None,
        seed: Sequence[int] | None = None,
        **_: Any,
    ) -> list[float]:
        """TRL's reward-function signature: one env reward per completion."""
        if task is None or split is None or seed is None:
            raise ValueError(
                "the reward function needs the dataset's task, split and seed columns: train on "
                "this task's dataset (TRL passes its extra columns to reward functions)"
            )
        rewards = []
        for k, completion in enumerate(completions):
            item = {"task": task[k], "split": split[k], "seed": seed[k]}
            reward, info = self.play(item, _text(completion))
            self.env_steps += 1
            self.infos.append(info)
            rewards.append(reward)
        return rewards


def _text(completion: Any) -> str:
    """A completion in TRL's standard (str) or conversational ([{"content": ...}]) format."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    raise TypeError(f"a completion is a str or a list of messages, got {type(completion)}")


def from_env(
    env: str,
    *,
    split: str = "train",
    tasks: Iterable[int | str] | None = None,
    seeds: Sequence[int] = (0,),
    **env_kwargs: Any,
) -> TrlTask:
    """The TRL dataset and reward of a collabzoo env name; one item per task and seed."""
    if isinstance(seeds, (int, str)) or not seeds:
        raise ValueError(f"seeds must be a non-empty sequence of ints, got {seeds!r}")
    view = SingleAgentView(env, **env_kwargs)
    chosen = range(len(view.env.items(split))) if tasks is None else list(tasks)
    items = []
    for task in chosen:
        for seed in seeds:
            probe = copy.deepcopy(view)
            prompt, info = probe.reset(seed=seed, options={"task": task, "split": split})
            items.append(
                {"prompt": prompt, "task": info["task_id"], "split": split, "seed": int(seed)}
            )
    return TrlTask(view=view, items=items)
