"""`collabzoo train`: a team of LLMs trained by a collabzoo learner on an environment."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from collabzoo.cli.config_defaults import DefaultHelp, field_default, learners_default
from collabzoo.cli.config_values import config_settings
from collabzoo.cli.generation import add_generation, generation_settings
from collabzoo.cli.options import (
    add_config_set,
    add_env_arg,
    add_max_prompt_tokens,
    add_placement,
    add_team_layout,
    key_values,
    placement_settings,
    positive_int,
)
from collabzoo.cli.tables import fmt
from collabzoo.cli.team import SMALL, TINY, check_model_option, team_models
from collabzoo.cli.usage import UsageError, checked
from collabzoo.envs import make, resolve

TINY_MODEL_DEFAULTS = {
    "agent_learning_rate": 1e-2,
    "actor_learning_rate": 1e-2,
    "critic_learning_rate": 1e-2,
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": None,
    "max_new_tokens": 4,
}
"""`--model tiny` trains from scratch: a large learning rate and plain sampling, unless --set."""


def cmd_train(args: argparse.Namespace) -> int:
    check_model_option(args.model)  # a mistyped name: refused before anything loads
    try:
        from collabzoo.algos import LEARNER_ALIASES, LEARNERS
    except ImportError as error:
        raise UsageError(
            f"training needs the train extra ({error}): pip install 'collabzoo[train]'"
        ) from None
    if args.algo not in LEARNERS and args.algo not in LEARNER_ALIASES:
        known = ", ".join(sorted([*LEARNERS, *LEARNER_ALIASES]))
        raise UsageError(f"unknown learner {args.algo!r}; known: {known}")
    if args.eval_episodes < 0:
        raise UsageError(
            f"--eval-episodes must be 0 (no final eval) or more, got {args.eval_episodes}"
        )
    config_class, trainer_class = LEARNERS[LEARNER_ALIASES.get(args.algo, args.algo)]
    given = config_settings(config_class, args.set, "num_generations=8")
    entry = checked(resolve, args.env)
    env_kwargs = key_values(args.env_arg)
    probe = checked(make, entry.id, **env_kwargs)
    checked(probe.items)  # the tasks load (or say what data to pass) before any model does
    agents = list(probe.possible_agents)
    policy_agents = getattr(trainer_class, "policy_agents", None)  # the joint actor's one agent
    if policy_agents is not None:
        agents = checked(policy_agents, probe)
    fields = config_class.__dataclass_fields__
    from_scratch = args.model in (TINY, SMALL)
    settings = {k: v for k, v in TINY_MODEL_DEFAULTS.items() if k in fields} if from_scratch else {}
    settings.update(given)
    # --updates, given or not, is the update count: over a --set max_updates too.
    updates = field_default(config_class, "max_updates") if args.updates is None else args.updates
    settings.update(output_dir=args.output, max_updates=updates, resume=args.resume)
    try:
        settings.update(placement_settings(args, fields))
    except ValueError as error:
        raise UsageError(str(error)) from None
    settings.update(generation_settings(args))
    try:
        config = config_class(**settings)
    except TypeError as error:
        known = ", ".join(sorted(fields))
        raise UsageError(f"{error}; {config_class.__name__} fields: {known}") from None
    except ValueError as error:
        raise UsageError(str(error)) from None
    from collabzoo.algos.learners.trained_agents import unknown_agents

    named = unknown_agents(config, agents)  # before any model loads
    if named:
        raise UsageError(named)
    models, team = team_models(args, agents, settings.get("dtype", "auto"))
    try:
        trainer = trainer_class(lambda: make(entry.id, **env_kwargs), models, config)
    except (ValueError, ImportError) as error:  # settings the learner refuses, no vLLM, ...
        raise UsageError(str(error)) from None
    placed = ", ".join(f"{a} on {p.device}" for a, p in trainer.policies.items())
    ranks = f", {trainer.parallel.world} ranks" if trainer.parallel else ""
    if trainer.is_main:
        print(
            f"{args.algo} on {entry.id}: agents {', '.join(agents)}, model {args.model} "
            f"({team}), {placed}{ranks}, {config.max_updates} updates -> {args.output}",
            flush=True,
        )
    try:
        last = trainer.train()
        if not trainer.is_main:  # torchrun: rank 0 evaluates, saves and reports
            return 0
        evaluation = trainer.evaluate(args.eval_episodes) if args.eval_episodes > 0 else {}
        saved = trainer.save(f"{args.output}/final")
    finally:
        trainer.close()
    summary = {"updates": trainer.update, "train": last, "eval": evaluation, "saved": str(saved)}
    with open(f"{args.output}/summary.json", "w") as f:
        json.dump(summary, f, indent=2, default=float)
    evaluated = (
        f"eval over {args.eval_episodes} episodes: {fmt(evaluation['mean_return'])}"
        if evaluation
        else "no final eval (--eval-episodes 0)"
    )
    print(f"final mean return (train batch): {fmt(last.get('mean_return', math.nan))}; {evaluated}")
    print(f"metrics: {args.output}/metrics.jsonl; policies: {saved}")
    return 0


def add_commands(commands: Any) -> None:
    """Add `train` to the `collabzoo` subcommands."""
    train = commands.add_parser(
        "train",
        help="train a team of LLMs on an environment",
        description="Train with a collabzoo learner; metrics go to OUTPUT/metrics.jsonl (one "
        "JSON object per update), TensorBoard logs and checkpoints to OUTPUT.",
    )
    train.add_argument(
        "algo",
        metavar="ALGO",
        help="magrpo, mareinforce, marloo, maremax, iac, ippo, cc (CoLLM-CC; also maac), atgrpo, "
        "joint (one policy for the whole team, CentralizedMAGRPO), joint-ac (the same trained "
        "by IAC), madpo, madpo-iter, marlhf or marlhf-iter (from preference pairs)",
    )
    train.add_argument("--env", required=True, help="env name or id (collabzoo list names them)")
    train.add_argument(
        "--model",
        default=TINY,
        help="'tiny' (a byte-level model trained from scratch, no download), any Hugging Face "
        "causal LM id or path, or a saved team folder: OUTPUT/final of an earlier `collabzoo "
        "train` or `collabzoo sft`, one subfolder per policy named by its agents; each agent "
        "goes on from its own saved policy (no --team)",
    )
    train.add_argument("--output", required=True, help="run directory")
    train.add_argument(
        "--updates",
        type=positive_int,
        default=None,
        help=DefaultHelp("optimizer updates (%(config_default)s)", learners_default("max_updates")),
    )
    add_team_layout(train, from_scratch="tiny")
    add_config_set(
        train, "learner config", "num_generations=8", learners_default("num_generations")
    )
    add_env_arg(train)
    add_placement(train)
    add_generation(train)
    add_max_prompt_tokens(train)
    train.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    train.add_argument(
        "--eval-episodes", type=int, default=16, help="episodes of the final eval (0: none)"
    )
    train.set_defaults(handler=cmd_train)
