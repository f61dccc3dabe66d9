"""The poster's table for your own model: plan every (method row, task, seed) run, train the
trained rows, bench every row on each task's eval split, and write the leaderboard with the
published rows beside it (`collabzoo reproduce`).

A run is one row on one task under one seed. Its folder, `OUTPUT/runs/TASK/ROW/seed-S/`, holds
`manifest.json` (the run's settings, written when it starts), `train/` (a trained row's
learner output: metrics.jsonl, checkpoints, `final/`), `bench/` (the results file) and, written
last, `done.json`: the completion marker, with the results file and the training's env steps.
A run whose `done.json` holds the same settings is read back, never redone, so a cut
reproduction resumes where it stopped; a marker with other settings is refused.

Every trained row gets the same budget in environment steps (joint actions stepped, as the
learners count them in metrics.jsonl), the same sampling and the same learning rate; each
learner keeps its own K and episodes per update, and its update count is the budget over its
env steps per update (`steps_per_update`).

The rows: the poster's nine by their names (`POSTER_ROWS`), or any learner of
`collabzoo.algos.LEARNERS` by its key, resolved when the plan is made, so a learner registered
later is a row with no change here.

GRPO and AC "as one agent" are the papers' one-model baselines, and a task decides how they are
trained (`MethodRow.on_task`): where the task has a one-model mode of its own (the writing and
code tasks, `single_agent=True`: the reference's own single-agent baseline, the more faithful
one), MAGRPO and IAC train that env's one agent, benched under `single`; elsewhere (the games)
the joint learners train one policy that writes every role's tagged section from the joint
prompt (`joint`: CoMLRL's CentralizedMAGRPO, and `joint-ac`: IAC's loop on the same agent),
benched under the `joint` protocol, which asks it the prompt it was trained on.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import math
import os
import shutil
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from collabzoo.bench.columns import board_order
from collabzoo.bench.leaderboard import leaderboard, markdown_table
from collabzoo.bench.models import ModelOptions, Sampling
from collabzoo.bench.protocols import DEFAULT_ROUNDS
from collabzoo.bench.published import SOURCE
from collabzoo.bench.published import models as published_models
from collabzoo.bench.results import ResultsError, read_results, summarize
from collabzoo.bench.runner import BenchRun, run_bench
from collabzoo.bench.seed_effects import Effect, effects, effects_table
from collabzoo.bench.teams import parse_team, slug
from collabzoo.envs import declared, make, resolve
from collabzoo.envs.family import POSTER_METHODS
from collabzoo.envs.single import supports_single_agent

MANIFEST = "manifest.json"
DONE = "done.json"
FAILED = "failed.json"
"""A failed run's error, kept for the table's list of unfinished runs; removed when it finishes."""
CLAIM = "running.json"
"""A local run's claim: locked (`flock`) by the process running it and naming it, so a
second process on the folder skips the run."""
LEADERBOARD = "leaderboard.md"
JOINT_LEARNERS = {"magrpo": "joint", "iac": "joint-ac"}
"""A one-agent row's learner -> the joint learner that trains the row on a task with no
one-model mode of its own (benched with the `joint` protocol)."""
MEMORY_SETTINGS = frozenset({"logprob_batch_size", "gradient_checkpointing"})
"""Learner config fields that bound memory and leave the loss as it is: a run finished with
other values of these is the same run (a reproduction may rerun one seed in smaller scoring
passes after the kernel stopped it, and still be one command)."""
TRAINING_COST = 3.0
"""Assumed cost of a trained generation against a sampled one: the sampling, plus the scoring
forward and backward passes of the loss (about twice a forward)."""


class ReproduceError(ValueError):
    """A plan that cannot be made or run as asked; the message says what was expected."""


@dataclass(frozen=True)
class MethodRow:
    """One method of the table: how its team is made and which protocol benches it."""

    name: str
    protocol: str
    learner: str | None = None
    """A key of `collabzoo.algos.LEARNERS`; None: the model as it is."""
    one_agent: bool = False
    """Trained as one agent that plays the whole task: the env's own one-model mode where the
    task has one, else the joint learner (`on_task`)."""

    @property
    def trained(self) -> bool:
        return self.learner is not None

    @property
    def solo(self) -> bool:
        """Played by one model: the `single` and `joint` protocols, and the rows trained as
        one agent."""
        return self.one_agent or self.protocol in ("single", "joint")

    def on_task(self, single_agent: bool) -> MethodRow:
        """The row as a task plays it. A one-agent row keeps its learner on the env's own
        one-model mode (`single_agent`: the reference's baseline); on a task without one, its
        joint learner trains one policy for every role, benched under `joint`."""
        if not self.one_agent or single_agent:
            return self
        joint = JOINT_LEARNERS.get(self.learner or "")
        if joint is None:
            raise ReproduceError(
                f"row {self.name!r} plays one agent, and its learner {self.learner!r} has no "
                f"joint learner for a task without a one-model mode (known: "
                f"{', '.join(JOINT_LEARNERS)})"
            )
        return MethodRow(self.name, "joint", joint)


POSTER_ROWS: dict[str, MethodRow] = {
    "Raw model": MethodRow("Raw model", "single"),
    "GRPO (1 agent)": MethodRow("GRPO (1 agent)", "single", "magrpo", one_agent=True),
    "AC (1 agent)": MethodRow("AC (1 agent)", "single", "iac", one_agent=True),
    "Parallel": MethodRow("Parallel", "parallel"),
    "Pipeline": MethodRow("Pipeline", "pipeline"),
    "Discussion": MethodRow("Discussion", "discussion"),
    "MAGRPO": MethodRow("MAGRPO", "parallel", "magrpo"),
    "CoLLM-DC (IAC)": MethodRow("CoLLM-DC (IAC)", "parallel", "iac"),
    "CoLLM-CC": MethodRow("CoLLM-CC", "parallel", "cc"),
}
"""The poster's methods in its order (the names of `POSTER_METHODS`, so that each local row
stands beside its published one). GRPO and AC as one agent are MAGRPO and IAC on the env's
own one-model mode where the task has one, else the joint learners `joint` and `joint-ac`
(`MethodRow.on_task`, `JOINT_LEARNERS`)."""
assert list(POSTER_ROWS) == list(POSTER_METHODS), "the rows follow the poster's methods"

ALIASES = {
    "raw": "Raw model",
    "grpo": "GRPO (1 agent)",
    "ac": "AC (1 agent)",
    "parallel": "Parallel",
    "pipeline": "Pipeline",
    "discussion": "Discussion",
    "collm-dc": "CoLLM-DC (IAC)",
    "collm-cc": "CoLLM-CC",
}
"""Short names of the poster's rows on the command line (a learner's key names its own row)."""


def learner_table() -> Mapping[str, tuple[type, type]]:
    """`collabzoo.algos.LEARNERS`, read when asked: whatever learners are registered now."""
    try:
        from collabzoo.algos import LEARNERS
    except ImportError as error:
        raise ReproduceError(
            f"the trained rows need the train extra ({error}): pip install 'collabzoo[train]'"
        ) from None
    return LEARNERS


def resolve_rows(
    names: Sequence[str], learners: Mapping[str, Any] | None = None
) -> list[MethodRow]:
    """The rows named: "default" (the poster's nine), a poster row's name or short name, or a
    learner's key (its own row: that learner trained on the team, benched in parallel, or
    under `joint` for a joint learner)."""
    rows: list[MethodRow] = []
    by_name = {n.lower(): n for n in POSTER_ROWS}
    for raw in names:
        name = raw.strip()
        if not name:
            continue
        key = name.lower()
        if key == "default":
            found = list(POSTER_ROWS.values())
        elif key in by_name or key in ALIASES:
            found = [POSTER_ROWS[by_name.get(key) or ALIASES[key]]]
        else:
            table = learner_table() if learners is None else learners
            if key not in table:
                known = ", ".join([*ALIASES, *sorted(table)])
                raise ReproduceError(
                    f"unknown row {name!r}: expected 'default', a poster row ({known}) or a "
                    "registered learner"
                )
            standing = [r for r in POSTER_ROWS.values() if r.learner == key and not r.one_agent]
            # A joint learner's one model writes every role: benched under `joint`.
            protocol = "joint" if key in JOINT_LEARNERS.values() else "parallel"
            found = standing or [MethodRow(key.upper(), protocol, key)]
        rows += [r for r in found if r not in rows]
    if not rows:
        raise ReproduceError("no rows: name 'default' or rows such as magrpo,parallel")
    return rows


def poster_tasks() -> list[str]:
    """The tasks with published rows, in the table's order: the default task set."""
    return [n for n in board_order() if (s := declared(n)) is not None and s.published]


# ----- the settings and the plan --------------------------------------------------------------
@dataclass
class Settings:
    """What every run of a reproduction shares (stated in each manifest and the leaderboard)."""

    models: list[str]
    """One model for every agent, or one per agent in play order."""
    tasks: list[str]
    rows: list[MethodRow]
    solo_model: str | None = None
    """With one model per agent: the model of the rows one model plays (Raw model, GRPO and AC
    as one agent)."""
    seeds: list[int] = field(default_factory=lambda: [0])
    env_steps: int = 512
    """Every trained row's budget in environment steps."""
    episodes: int | None = None
    """Bench episodes per run; None: every task of the eval split once."""
    split: str = "eval"
    rounds: int = DEFAULT_ROUNDS
    max_new_tokens: int = Sampling.max_new_tokens
    temperature: float = Sampling.temperature
    top_p: float = Sampling.top_p
    top_k: int | None = Sampling.top_k
    learning_rate: float = 5e-6
    """Every learning rate of every learner (agents', actors', critics')."""
    env_kwargs: dict[str, dict[str, Any]] = field(default_factory=dict)
    """By task: constructor arguments (data=..., horizon=...)."""
    learner_settings: dict[str, Any] = field(default_factory=dict)
    """More learner config fields, for every learner that has them."""
    learner_overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    """By learner key: more config fields for that learner's rows only, over `learner_settings`
    (e.g. a smaller `generation_batch_size` for the learner whose many candidates would not
    fit in memory, leaving every other row as it was)."""
    cpus: int = 1
    """Per run: CPU threads (and a Ray task's num_cpus)."""
    gpus: float = 0.0
    """Per run: a Ray task's num_gpus; a run with a GPU trains and benches on it."""
    device: str = "auto"
    dtype: str = "auto"
    sandbox: str = "auto"

    def sampling(self) -> Sampling:
        return Sampling(self.max_new_tokens, self.temperature, self.top_p, self.top_k)


@dataclass(frozen=True)
class PlannedRun:
    row: MethodRow
    task: str
    seed: int
    spec: dict[str, Any]
    """Everything the run does, as plain JSON: what `execute_run` reads and `done.json` keeps."""

    @property
    def folder(self) -> str:
        return f"runs/{self.task}/{slug(self.row.name)}/seed-{self.seed}"


def _probe(task: str, kwargs: Mapping[str, Any]) -> Any:
    try:
        return make(resolve(task).id, **kwargs)
    except Exception as error:
        raise ReproduceError(f"{task}: cannot make the env ({error})") from None


def plan(settings: Settings) -> list[PlannedRun]:
    """Every run, tasks outermost, then rows in order, then seeds."""
    if not settings.models:
        raise ReproduceError("name a model (or one per agent)")
    runs = []
    for task in settings.tasks:
        try:
            short = resolve(task).short_name
        except ValueError as error:
            raise ReproduceError(str(error)) from None
        kwargs = dict(settings.env_kwargs.get(short, {}))
        probe = _probe(short, kwargs)
        agents = list(probe.possible_agents)
        single_agent = supports_single_agent(resolve(short).load())
        if len(settings.models) not in (1, len(agents)):
            raise ReproduceError(
                f"{short} has {len(agents)} agents ({', '.join(agents)}): give one model, or one "
                f"per agent, got {len(settings.models)}"
            )
        for row in (r.on_task(single_agent) for r in settings.rows):
            models = list(settings.models)
            if row.solo and len(set(models)) > 1:
                if settings.solo_model is None:
                    raise ReproduceError(
                        f"the {row.name} row plays one model for the whole task, and --model "
                        f"names {len(models)}: name its model with --solo-model, or leave the "
                        "row out of --rows"
                    )
                models = [settings.solo_model]
            for seed in settings.seeds:
                spec = _run_spec(settings, row, short, kwargs, agents, seed, probe, models)
                runs.append(PlannedRun(row, short, seed, spec))
    return runs


def _run_spec(
    settings: Settings,
    row: MethodRow,
    task: str,
    kwargs: Mapping[str, Any],
    agents: Sequence[str],
    seed: int,
    probe: Any,
    models: Sequence[str],
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "row": asdict(row),
        "task": task,
        "seed": seed,
        "models": list(models),
        "env_kwargs": dict(kwargs),
        "agents": list(agents),
        "bench": {
            "protocol": row.protocol,
            "rounds": settings.rounds,
            "split": settings.split,
            "episodes": settings.episodes,
            "sampling": settings.sampling().as_dict(),
        },
        "cpus": settings.cpus,
        "gpus": settings.gpus,
        "device": settings.device,
        "dtype": settings.dtype,
        "sandbox": settings.sandbox,
        "horizon": int(getattr(probe, "horizon", 1) or 1),
    }
    if row.learner is not None:
        table = learner_table()
        if row.learner not in table:
            raise ReproduceError(
                f"row {row.name!r} needs the learner {row.learner!r}, which is not registered "
                f"(known: {', '.join(sorted(table))})"
            )
        config_class = table[row.learner][0]
        config = _learner_config(config_class, settings, seed, row.learner)
        fields = _learner_fields(config_class, settings, seed, row.learner)
        offline = offline_preference_plan(config, spec["horizon"], settings.env_steps)
        if offline is not None:
            for key, value in offline.pop("config").items():
                if key in fields and fields[key] != value:
                    raise ReproduceError(
                        f"{row.learner}'s {key} follows from the budget ({value} here, "
                        f"--env-steps // preference_num_candidates), so it cannot be set "
                        f"({fields[key]!r} was)"
                    )
                fields[key] = value
            spec["train"] = {"learner": row.learner, "env_steps": settings.env_steps, **offline}
            spec["train"]["config"] = fields
            return spec
        per_update = steps_per_update(config, spec["horizon"])
        updates = max(1, math.ceil(settings.env_steps / per_update))
        spec["train"] = {
            "learner": row.learner,
            "env_steps": settings.env_steps,
            "steps_per_update": per_update,
            "updates": updates,
            "config": fields,
        }
    return spec


def _learner_fields(
    config_class: type, settings: Settings, seed: int, learner: str
) -> dict[str, Any]:
    """The config fields a reproduction sets: the shared sampling and learning rate (on every
    policy and critic `*learning_rate` field the learner has; a learned reward model's keeps
    its own), the seed, then `learner_settings`, then this learner's own
    `learner_overrides`. Checkpoints as the learner's own
    `save_steps` says, so a run cut in training resumes from its last one."""
    fields = config_class.__dataclass_fields__
    values: dict[str, Any] = {
        "seed": seed,
        "max_new_tokens": settings.max_new_tokens,
        "temperature": settings.temperature,
        "top_p": settings.top_p,
        "top_k": settings.top_k,
        "tensorboard": False,
        "progress": False,
    }
    rates = [n for n in fields if n.endswith("learning_rate") and not n.startswith("reward")]
    values.update(dict.fromkeys(rates, settings.learning_rate))
    values.update({k: v for k, v in settings.learner_settings.items() if k in fields})
    values.update(settings.learner_overrides.get(learner, {}))
    return {k: v for k, v in values.items() if k in fields}


def _learner_config(config_class: type, settings: Settings, seed: int, learner: str):
    values = _learner_fields(config_class, settings, seed, learner)
    try:
        return config_class(**values, max_updates=0, output_dir="")
    except (TypeError, ValueError) as error:
        raise ReproduceError(f"{config_class.__name__}: {error}") from None


def steps_per_update(config: Any, horizon: int, *, rl_only: bool = False) -> int:
    """Environment steps of one update at most (turns that end early step less): an actor-critic
    learner branches K ways at the first turn only (`rollout_buffer_size * K * H`); a tree
    learner branches K ways at every turn (`rollout_buffer_size * (K + K^2 + ... + K^H)`); an
    online preference learner's iteration samples C candidates and C' comparator candidates on
    each of its episodes (`preference_num_items * (C + C')`, single-turn), and MARLHFIter then
    runs `num_train_epochs` tree updates against its reward model. `rl_only`: an offline
    MARLHF's RL update alone (its pair set is planned apart, `offline_preference_plan`)."""
    from collabzoo.algos.learners.actor_critic import ActorCriticConfig
    from collabzoo.algos.learners.preference_config import (
        OnlinePreferenceConfig,
        PreferenceConfig,
    )
    from collabzoo.algos.learners.tree_learner import TreeLearnerConfig

    k, episodes = config.num_generations, config.rollout_buffer_size
    turns = min(horizon, config.num_turns or horizon)
    if isinstance(config, OnlinePreferenceConfig):
        c = config.preference_num_candidates
        steps = config.preference_num_items * (c + (config.comparator_num_candidates or c))
        if isinstance(config, TreeLearnerConfig):
            steps += config.num_train_epochs * episodes * k
        return steps
    if isinstance(config, PreferenceConfig) and not rl_only:
        raise ReproduceError(
            f"{type(config).__name__} samples its whole pair set before its first update, so "
            "an environment-step budget per update does not apply: `offline_preference_plan` "
            "plans it"
        )
    if isinstance(config, ActorCriticConfig) or getattr(config, "rl_algorithm", "") in (
        "maac",
        "iac",
    ):  # MARLHF's actor-critic backends step as the actor-critic learners
        return episodes * k * turns
    return episodes * sum(k**depth for depth in range(1, turns + 1))


def offline_preference_plan(config: Any, horizon: int, budget: int) -> dict[str, Any] | None:
    """How an offline preference learner spends the budget, or None for any other learner.

    Its first update samples the whole pair set (C candidates on each of
    `preference_num_items` episodes, one env step each), so the budget buys that set. MADPO
    then has nothing else to step: its episodes are `budget // C`, and its updates (optimizer
    steps) are one pass over the most pairs they can give. MARLHF keeps its configured pair set
    (and `reward_heldout_items` more episodes for the held-out accuracy), and the rest of the
    budget goes to its RL updates against the reward model, each a tree update's steps; the
    first update both samples and takes the first RL step."""
    from collabzoo.algos.learners.preference_config import (
        OnlinePreferenceConfig,
        PreferenceConfig,
    )
    from collabzoo.algos.learners.tree_learner import TreeLearnerConfig

    if not isinstance(config, PreferenceConfig) or isinstance(config, OnlinePreferenceConfig):
        return None
    name, c = type(config).__name__, config.preference_num_candidates
    if config.preference_data is not None:
        raise ReproduceError(
            f"{name} with preference_data trains on a file's pairs, which no env-step budget "
            "counts: the table compares rows on the same budget, so leave it out here"
        )
    if not isinstance(config, TreeLearnerConfig):
        items = budget // c
        if items < 1:
            raise ReproduceError(
                f"{name} samples {c} candidates an episode (preference_num_candidates), more "
                f"than the budget of {budget} environment steps: lower it or raise --env-steps"
            )
        most = c * (c - 1) // 2
        per_episode = min(config.preference_pairs_per_sample or most, most)
        updates = max(1, math.ceil(items * per_episode / config.train_batch_size))
        return {
            "steps_per_update": 0,
            "updates": updates,
            "pair_set_env_steps": items * c,
            "config": {"preference_num_items": items},
        }
    pair_steps = (config.preference_num_items + config.reward_heldout_items) * c
    per_update = steps_per_update(config, horizon, rl_only=True)
    left = budget - pair_steps
    if left < per_update:
        raise ReproduceError(
            f"{name}'s pair set takes {pair_steps} environment steps "
            f"((preference_num_items {config.preference_num_items} + reward_heldout_items "
            f"{config.reward_heldout_items}) x {c} candidates), leaving {max(left, 0)} of the "
            f"budget of {budget} for its RL updates, which take {per_update} each: set "
            f"{name.removesuffix('Config').lower()}:preference_num_items (and "
            "reward_heldout_items, preference_num_candidates) smaller, or raise --env-steps"
        )
    return {
        "steps_per_update": per_update,
        "updates": max(1, math.ceil(left / per_update)),
        "pair_set_env_steps": pair_steps,
        "config": {},
    }


# ----- the estimate ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Estimate:
    env_steps: int
    train_generations: int
    bench_episodes: int | None
    bench_generations: int | None
    seconds: float | None


def bench_generations_per_turn(protocol: str, agents: int, rounds: int) -> int:
    """Generations a protocol makes per env turn (what Cost counts)."""
    if protocol in ("single", "joint"):
        return 1
    if protocol == "discussion":
        return agents * (rounds + 1)
    return agents


def estimate(run: PlannedRun, tokens_per_second: float) -> Estimate:
    """Env steps, generations and seconds of a run: each generation is taken at its full
    `max_new_tokens`, sampled at `tokens_per_second`, and a trained one at `TRAINING_COST`
    times that."""
    spec = run.spec
    agents = 1 if run.row.solo else len(spec["agents"])
    tokens = spec["bench"]["sampling"]["max_new_tokens"]
    steps = train_generations = 0
    if "train" in spec:
        steps = spec["train"]["updates"] * spec["train"]["steps_per_update"]
        steps += spec["train"].get("pair_set_env_steps", 0)
        train_generations = steps * agents
    episodes = spec["bench"]["episodes"]
    if episodes is None:
        episodes = _eval_tasks(run)
    bench = None
    if episodes is not None:
        per_turn = bench_generations_per_turn(
            run.row.protocol, len(spec["agents"]), spec["bench"]["rounds"]
        )
        bench = episodes * spec["horizon"] * per_turn
    seconds = None
    if bench is not None:
        seconds = (bench + TRAINING_COST * train_generations) * tokens / tokens_per_second
    return Estimate(steps, train_generations, episodes, bench, seconds)


def _eval_tasks(run: PlannedRun) -> int | None:
    """The split's task count, or None when its data cannot be loaded here."""
    return split_tasks(run.task, json.dumps(run.spec["env_kwargs"]), run.spec["bench"]["split"])[0]


@functools.cache
def split_tasks(task: str, kwargs: str, split: str) -> tuple[int | None, tuple[str, ...]]:
    """(the split's task count or None, what loading it warned of: the data it fell back to)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            env = make(resolve(task).id, **json.loads(kwargs))
            count: int | None = len(env.items(split))
        except Exception:
            count = None
    said = (". ".join(str(w.message).split(". ")[:2]).rstrip(".") + "." for w in caught)
    return count, tuple(dict.fromkeys(said))


# ----- one run --------------------------------------------------------------------------------
def _train(spec: Mapping[str, Any], folder: Path) -> tuple[str, dict[str, Any]]:
    """Train the row's learner; (the bench team spec of its saved policies, what it did)."""
    import torch

    from collabzoo.algos import LLMPolicy, load_causal_lm, load_saved_team, lora_team

    row, train = spec["row"], spec["train"]
    task, kwargs = spec["task"], spec["env_kwargs"]
    config_class, trainer_class = learner_table()[train["learner"]]
    output = folder / "train"
    settings = dict(train["config"])
    device = spec["device"]
    config = config_class(
        **settings,
        max_updates=train["updates"],
        output_dir=str(output),
        resume=True,
        device=device,
        dtype=spec["dtype"],
    )

    def make_env() -> Any:  # a joint learner wraps the team's env itself
        if row["one_agent"]:  # the env's own one-model mode (`MethodRow.on_task`)
            return make(resolve(task).id, **kwargs, single_agent=True)
        return make(resolve(task).id, **kwargs)

    agents = list(make_env().possible_agents)
    policy_agents = getattr(trainer_class, "policy_agents", None)  # a joint learner's one agent
    if policy_agents is not None:
        agents = list(policy_agents(make_env()))
    torch.manual_seed(spec["seed"])
    models = spec["models"]
    dtype = None if spec["dtype"] == "auto" else spec["dtype"]
    saved_team = load_saved_team(models[0], agents, dtype=dtype) if len(models) == 1 else None
    if saved_team is not None:  # a warm start (`collabzoo sft`): each agent from its policy
        team: Any = saved_team
    elif len(models) == 1 and models[0] != "tiny":  # pretrained: a LoRA adapter per agent
        team = lora_team(*load_causal_lm(models[0], seed=0, dtype=dtype), agents)
    else:
        named = models if len(models) == len(agents) else models * len(agents)
        team = {
            a: LLMPolicy(*load_causal_lm(named[i], seed=i, dtype=dtype))
            for i, a in enumerate(agents)
        }
    trainer = trainer_class(make_env, team, config)
    try:
        last = trainer.train()
        saved = trainer.save(output / "final")
        # A preference learner counts the env steps of its candidates apart from its rollout's.
        steps = int(trainer.rollout.env_steps) + int(getattr(trainer, "preference_env_steps", 0))
    finally:
        trainer.close()
    # One agent: its own folder, which plays every role (a critic, if any, stays beside it).
    # A joint actor's `final/` loads as one model for every role, as the `joint` protocol asks.
    target = saved / agents[0] if row["one_agent"] and (saved / agents[0]).is_dir() else saved
    done = {"updates": trainer.update, "env_steps": steps, "last": last}
    return f"hf:{target}", done


def execute_run(spec: Mapping[str, Any], folder: str | os.PathLike[str]) -> dict[str, Any]:
    """One run into `folder`: train (if the row is trained), bench, and the completion marker.
    A plain function of plain data, so that it runs alike here and as a Ray task."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    started = time.time()
    (folder / MANIFEST).write_text(
        json.dumps({"run": spec, "started": started}, indent=1, default=str), encoding="utf-8"
    )
    try:  # the runs' own threads; no progress bars of model saving and loading in the log
        import torch
        import transformers

        torch.set_num_threads(int(spec["cpus"]))
        transformers.utils.logging.disable_progress_bar()
    except ImportError:
        pass
    training: dict[str, Any] = {}
    if spec.get("train"):
        team, training = _train(spec, folder)
    else:
        team = "hf:" + ",".join(spec["models"])
    bench = spec["bench"]
    sampling = Sampling(**bench["sampling"])
    options = ModelOptions(device=spec["device"], dtype=spec["dtype"], threads=int(spec["cpus"]))
    run = BenchRun(
        env=spec["task"],
        team=parse_team(team),
        protocol=bench["protocol"],
        rounds=bench["rounds"],
        split=bench["split"],
        episodes=bench["episodes"],
        seed=spec["seed"],
        env_kwargs=dict(spec["env_kwargs"]),
        sampling=sampling,
        options=options,
    )
    sandboxes: list[Any] = []

    def sandbox_factory() -> Any:
        from collabzoo.sandbox import get_sandbox

        sandboxes.append(get_sandbox(spec["sandbox"]))
        return sandboxes[-1]

    try:
        outcome = run_bench(
            run, folder / "bench", resume=True, sandbox_factory=sandbox_factory, progress=False
        )
    finally:
        for sandbox in sandboxes:
            sandbox.close()
    marker = {
        "run": spec,
        "results": str(outcome.path.relative_to(folder)),
        "train": training,
        "seconds": time.time() - started,
        "finished": time.time(),
    }
    write_marker(folder, json.dumps(marker, indent=1, default=float).encode())
    (folder / FAILED).unlink(missing_ok=True)
    return marker


def write_marker(folder: Path, content: bytes) -> None:
    """`done.json`, written aside then renamed: a marker is whole or absent, even when the
    process is killed while writing it."""
    partial = folder / f".{DONE}.partial"
    partial.write_bytes(content)
    partial.replace(folder / DONE)


def record_failure(folder: Path, error: str) -> None:
    """Keep a failed run's error beside it, for the table's list of unfinished runs."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / FAILED).write_text(json.dumps({"error": error}), encoding="utf-8")


def finished(folder: Path, spec: Mapping[str, Any]) -> bool:
    """Whether the run in `folder` is done with these settings (ReproduceError: with others)."""
    marker = folder / DONE
    if not marker.is_file():
        return False
    try:
        done = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return False  # a marker cut short: the run is redone
    if _same_result(json.loads(json.dumps(spec, default=str))) != _same_result(done.get("run")):
        raise ReproduceError(
            f"{folder} finished with other settings than this plan's: use another --output, "
            "or delete that run's folder to redo it"
        )
    return True


def _same_result(spec: Any) -> Any:
    """A run's settings less its `MEMORY_SETTINGS`: what decides whether two runs are one."""
    if not isinstance(spec, dict) or not isinstance(spec.get("train"), dict):
        return spec
    config = {k: v for k, v in spec["train"].get("config", {}).items() if k not in MEMORY_SETTINGS}
    return {**spec, "train": {**spec["train"], "config": config}}


# ----- the whole reproduction -----------------------------------------------------------------
@contextlib.contextmanager
def claimed(folder: Path) -> Iterator[str | None]:
    """Hold `folder`'s run for this process while the block runs: yields None when this process
    holds it, else who does ("pid N on HOST"). The hold is an exclusive `flock` on the claim
    file, which the kernel drops when its process dies, so a killed run's claim lapses by
    itself and two processes can never both take it over (as removing a dead pid's file could
    let them). The file names the holder for the others' message and goes when the block ends."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / CLAIM
    while True:
        handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115 (held across the yield)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            text = handle.read()
            handle.close()
            try:
                holder = json.loads(text)
                who = f"pid {holder['pid']} on {holder['host']}"
            except (ValueError, TypeError, KeyError):  # locked, not yet written
                who = "its pid not yet written"
            yield who
            return
        try:  # the lock is ours; but if its holder finished meanwhile, on a removed file
            current = os.path.samestat(os.fstat(handle.fileno()), os.stat(path))
        except FileNotFoundError:
            current = False
        if current:
            break
        handle.close()
    try:
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"pid": os.getpid(), "host": os.uname().nodename}))
        handle.flush()
        yield None
    finally:
        path.unlink(missing_ok=True)  # still locked: nobody takes the removed file
        handle.close()


def run_local(runs: Sequence[PlannedRun], output: Path, say: Callable[[str], None]) -> list[str]:
    """Run the unfinished runs here, one after another; the failures, one line each. Each run
    is claimed while it runs (`claimed`) and checked again once claimed, so processes given the
    same folder (different or overlapping --rows and --seeds) skip what another has finished or
    is running."""
    failures = []
    for k, run in enumerate(runs, start=1):
        folder = output / run.folder
        name = f"[{k}/{len(runs)}] {run.task} | {run.row.name} | seed {run.seed}"
        if finished(folder, run.spec):
            say(f"{name}: finished already")
            continue
        with claimed(folder) as holder:
            if holder is not None:
                say(f"{name}: running in another process ({holder}); skipped")
                continue
            if finished(folder, run.spec):  # by the process that held it until just now
                say(f"{name}: finished already")
                continue
            say(name)
            try:
                execute_run(run.spec, folder)
            except Exception as error:
                failures.append(f"{run.folder}: {type(error).__name__}: {error}")
                record_failure(folder, f"{type(error).__name__}: {error}")
                say(f"  failed: {failures[-1]}")
    return failures


GATHERED = (MANIFEST, DONE, "bench/", "train/metrics.jsonl")
"""What a Ray task sends back of its run folder (the trained weights stay on the worker)."""


def _remote_run(spec: dict[str, Any]) -> dict[str, bytes]:
    """A Ray task: the run in a folder of the worker, its gathered files returned as bytes."""
    with tempfile.TemporaryDirectory(prefix="collabzoo-run-") as scratch:
        execute_run(spec, scratch)
        root = Path(scratch)
        files = {}
        for path in root.rglob("*"):
            relative = path.relative_to(root).as_posix()
            if path.is_file() and any(relative == g or relative.startswith(g) for g in GATHERED):
                files[relative] = path.read_bytes()
        return files


def run_on_ray(
    runs: Sequence[PlannedRun],
    output: Path,
    say: Callable[[str], None],
    address: str | None = None,
) -> list[str]:
    """Each run a Ray task with its resources, on the cluster `address` reaches (None: a local
    one, or the one this process joined already); each result written into `output` as it
    arrives, the completion marker last."""
    try:
        import ray
    except ImportError as error:
        raise ReproduceError(
            f"--ray needs Ray ({error}): pip install 'collabzoo[distributed]'"
        ) from None
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    pending = {}
    for run in runs:
        task = ray.remote(_remote_run).options(
            num_cpus=run.spec["cpus"], num_gpus=run.spec["gpus"], max_retries=0
        )
        pending[task.remote(run.spec)] = run
    failures = []
    done = 0
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        run = pending.pop(ready[0])
        done += 1
        try:
            files = ray.get(ready[0])
        except Exception as error:
            failures.append(f"{run.folder}: {type(error).__name__}: {error}")
            record_failure(output / run.folder, f"{type(error).__name__}: {error}")
            say(f"[{done}/{len(runs)}] {run.folder} failed: {failures[-1]}")
            continue
        folder = output / run.folder
        if folder.exists():
            shutil.rmtree(folder)
        for relative, content in files.items():
            if relative != DONE:
                path = folder / relative
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(content)
        write_marker(folder, files[DONE])  # the marker last
        say(f"[{done}/{len(runs)}] {run.task} | {run.row.name} | seed {run.seed} gathered")
    return failures


def pending_runs(runs: Sequence[PlannedRun], output: Path) -> list[PlannedRun]:
    return [r for r in runs if not finished(output / r.folder, r.spec)]


# ----- the leaderboard ------------------------------------------------------------------------
def finished_documents(
    runs: Sequence[PlannedRun], output: Path
) -> dict[tuple[str, str], dict[int, dict[str, Any]]]:
    """(task, row name) -> seed -> the results document of every finished run."""
    found: dict[tuple[str, str], dict[int, dict[str, Any]]] = {}
    for run in runs:
        folder = output / run.folder
        marker = folder / DONE
        if not marker.is_file():
            continue
        done = json.loads(marker.read_text(encoding="utf-8"))
        path = folder / done["results"]
        try:
            document = read_results(path)
        except ResultsError:
            continue
        document["_path"] = str(path)
        document["_done"] = done
        found.setdefault((run.task, run.row.name), {})[run.seed] = document
    return found


def row_effects(runs: Sequence[PlannedRun], output: Path) -> list[Effect]:
    """Each trained row against the untrained row of its protocol, over seeds (`seed_effects`)."""
    rows = list(dict.fromkeys((r.task, r.row.name, r.row.protocol, r.row.trained) for r in runs))
    return effects(finished_documents(runs, output), rows)


def render(runs: Sequence[PlannedRun], output: Path, settings: Settings) -> str:
    """The table of the finished runs (rows in the plan's order, the published rows after
    them), with the shared settings stated; then which trained rows moved each metric beyond
    the seeds' spread, every row's wall time, and the runs that have not finished (with the
    error of those that failed). Over several seeds a row pools the episodes of its finished
    seeds (its label names them)."""
    finished_runs = finished_documents(runs, output)
    documents, labels = [], {}
    order = {r.name: k for k, r in enumerate(settings.rows)}
    for (_, name), by_seed in finished_runs.items():
        seeded = sorted(by_seed.items())
        document = seeded[0][1]
        label = name
        if len(settings.seeds) > 1:
            document = pooled([d for _, d in seeded])
            label = f"{name} (seed{'s' if len(seeded) > 1 else ''} "
            label += f"{', '.join(str(s) for s, _ in seeded)})"
        labels[document["_path"]] = (order.get(name, len(order)), label)
        documents.append(document)
    sampling = settings.sampling()
    lines = [
        "# Reproduction",
        "",
        f"Model: {', '.join(settings.models)}. Trained rows: {settings.env_steps} environment "
        f"steps each (rounded up to whole updates), learning rate {settings.learning_rate:g}. "
        f"Sampling, training and bench alike: temperature {sampling.temperature:g}, top-p "
        f"{sampling.top_p:g}, top-k {sampling.top_k}, at most {sampling.max_new_tokens} new "
        f"tokens. Seeds: {', '.join(map(str, settings.seeds))}. Bench: the {settings.split} "
        "split. Cells: mean ± half-width of the 95% t-interval over episodes; Time in seconds "
        "and Cost in generated tokens per episode.",
        "",
        f"Rows marked (published) are from the {SOURCE}, on the benchmark data with the models "
        "named under each table.",
        "",
    ]
    for task, columns, rows in leaderboard(documents, published=True):
        local = sorted((r for r in rows if not r.published), key=lambda r: labels[r.source][0])
        for row in local:
            row.method = labels[row.source][1]
        ordered = [*local, *(r for r in rows if r.published)]
        lines += [f"## {columns.title}", "", *markdown_table(ordered, columns)]
        if task in published_models():
            lines += ["", f"Published models: {published_models()[task]}."]
        lines.append("")
    found = row_effects(runs, output)
    if found:
        lines += [
            "## Which trained rows moved the metric",
            "",
            "Each trained row against the untrained row benched under the same protocol. A "
            "cell is the mean over seeds of each seed's mean over its episodes, ± the seeds' "
            "standard deviation. Moved: the difference is larger than the two standard "
            "deviations together (a coarse screen over few seeds, not a significance test).",
            "",
            *effects_table(found),
            "",
        ]
    lines += [*_wall_times(runs, finished_runs), *_unfinished(runs, output)]
    return "\n".join(lines)


def _wall_times(
    runs: Sequence[PlannedRun], found: Mapping[tuple[str, str], Mapping[int, dict[str, Any]]]
) -> list[str]:
    """Each row's wall time per run (training and bench, mean over its finished seeds)."""
    lines = ["## Wall time", "", "| Task | Row | Runs | Env steps | Seconds per run |"]
    lines.append("|---|---|---:|---:|---:|")
    for task, name in dict.fromkeys((r.task, r.row.name) for r in runs):
        dones = [d["_done"] for d in found.get((task, name), {}).values()]
        if not dones:
            continue
        seconds = statistics.fmean(float(d.get("seconds", math.nan)) for d in dones)
        steps = {int((d.get("train") or {}).get("env_steps", 0)) for d in dones}
        shown = ", ".join(str(s) for s in sorted(steps)) if steps != {0} else "-"
        lines.append(f"| {task} | {name} | {len(dones)} | {shown} | {seconds:.0f} |")
    return [*lines, ""]


def _unfinished(runs: Sequence[PlannedRun], output: Path) -> list[str]:
    """The planned runs with no completion marker, with the error of those that failed."""
    missing = [r for r in runs if not (output / r.folder / DONE).is_file()]
    if not missing:
        return []
    lines = ["## Runs not finished", ""]
    for run in missing:
        failure = output / run.folder / FAILED
        reason = "not run yet (the same command runs it)"
        if failure.is_file():
            reason = "failed: " + json.loads(failure.read_text(encoding="utf-8"))["error"]
        lines.append(f"- {run.task} | {run.row.name} | seed {run.seed}: {reason}")
    return [*lines, ""]


def pooled(documents: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One row's seeds as one results document: their episodes together, the summary
    recomputed over all of them (the interval is then over episodes of every seed)."""
    if len(documents) == 1:
        return documents[0]
    merged = dict(documents[0])
    merged["episodes"] = [e for d in documents for e in d["episodes"]]
    merged["episodes_planned"] = sum(int(d.get("episodes_planned") or 0) for d in documents)
    merged["_path"] = "+".join(d["_path"] for d in documents)
    merged["summary"] = summarize(merged)
    return merged


def describe(run: PlannedRun, guess: Estimate) -> list[str]:
    """A dry run's cells for one run."""

    def count(value: int | None) -> str:
        return "?" if value is None else str(value)

    train = run.spec.get("train")
    return [
        run.task,
        run.row.name,
        str(run.seed),
        run.row.protocol,
        f"{train['learner']} × {train['updates']} updates" if train else "-",
        str(guess.env_steps) if train else "-",
        str(guess.train_generations) if train else "-",
        count(guess.bench_episodes),
        count(guess.bench_generations),
        "?" if guess.seconds is None else _duration(guess.seconds),
    ]


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def dry_run(runs: Sequence[PlannedRun], output: Path, tokens_per_second: float) -> str:
    headers = [
        "Task", "Row", "Seed", "Protocol", "Training", "Env steps", "Train gens",
        "Episodes", "Bench gens", "Time (est.)", "State",
    ]  # fmt: skip
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    total = 0.0
    unknown = []
    for run in runs:
        guess = estimate(run, tokens_per_second)
        done = finished(output / run.folder, run.spec)
        lines.append(
            "| " + " | ".join([*describe(run, guess), "done" if done else "to run"]) + " |"
        )
        if guess.seconds is None:
            unknown.append(run.task)
        elif not done:
            total += guess.seconds
    todo = len(pending_runs(runs, output))
    tokens = runs[0].spec["bench"]["sampling"]["max_new_tokens"] if runs else 0
    lines += [
        "",
        f"{len(runs)} runs, {todo} to run; estimated {_duration(total)} of compute in one "
        f"process, assuming every generation reaches its {tokens} new tokens, sampled at "
        f"{tokens_per_second:g} tokens/s, and a trained generation costs {TRAINING_COST:g} "
        "times a sampled one (sampling, then the loss's forward and backward).",
    ]
    for task in dict.fromkeys(r.task for r in runs):
        first = next(r for r in runs if r.task == task)
        kwargs = json.dumps(first.spec["env_kwargs"])
        for note in split_tasks(task, kwargs, first.spec["bench"]["split"])[1]:
            lines.append(f"{task}: {note}")
        joint = [r.row.name for r in runs if r.task == task and r.row.protocol == "joint"]
        if joint:
            lines.append(
                f"{task}: no one-model mode of its own, so {' and '.join(dict.fromkeys(joint))} "
                "train a joint learner (one policy writing every role's section), benched "
                "under `joint`."
            )
    if unknown:
        missing = ", ".join(sorted(set(unknown)))
        lines.append(
            f"Not counted: the bench of {missing}, whose eval split cannot be loaded here (pass "
            "--data TASK=SOURCE or --episodes N)."
        )
    return "\n".join(lines) + "\n"


__all__ = [
    "ALIASES",
    "DONE",
    "JOINT_LEARNERS",
    "MANIFEST",
    "POSTER_ROWS",
    "Estimate",
    "MethodRow",
    "PlannedRun",
    "ReproduceError",
    "Settings",
    "dry_run",
    "estimate",
    "execute_run",
    "finished",
    "pending_runs",
    "plan",
    "render",
    "resolve_rows",
    "run_local",
    "run_on_ray",
    "steps_per_update",
]
