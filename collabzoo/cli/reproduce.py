"""`collabzoo reproduce`: the poster's table for a model, and any registered learner beside it.

    collabzoo reproduce --model MODEL[,MODEL...] [--tasks TASK,...] [--rows default,LEARNER,...]
                        [--seeds 0,1] [--env-steps N] [--episodes N] [--output DIR]
                        [--dry-run | --report] [--ray [--ray-address ADDR]] [--quick]

Plans every (row, task, seed) run, trains the trained rows, benches every row and writes
OUTPUT/leaderboard.md; finished runs are read back, so the same command resumes a cut run.
`--report` writes the plan and the table of what has finished, running nothing: a budget that
ends before the plan does still gets its table, with the runs left listed as not run.
What runs is `collabzoo.bench.reproduce`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from collabzoo.bench.models import Sampling
from collabzoo.bench.protocols import DEFAULT_ROUNDS
from collabzoo.bench.reproduce import (
    LEADERBOARD,
    POSTER_ROWS,
    ReproduceError,
    Settings,
    dry_run,
    learner_table,
    pending_runs,
    plan,
    poster_tasks,
    render,
    resolve_rows,
    run_local,
    run_on_ray,
)
from collabzoo.bench.runner import BENCH_SPLITS
from collabzoo.cli.bench import _data, _scoped
from collabzoo.cli.config_values import config_settings
from collabzoo.cli.options import (
    nonnegative_float,
    nonnegative_int,
    positive_float,
    positive_int,
    probability,
)
from collabzoo.cli.team import SMALL, check_model_option
from collabzoo.cli.usage import UsageError
from collabzoo.envs import resolve, task_specs

DEFAULT_OUTPUT = "reproduction"
TOKENS_PER_SECOND = 50.0
"""The dry run's assumption: SmolLM2-135M-Instruct sampling 16 rows at once on the project's
2-core CPU at one thread decoded 73 tokens/s after a 21 s prefill of 16 ~400-token prompts
(docs/performance.md, decoding the real model), about 50 generated tokens/s over 256-token
answers."""
QUICK = {
    "model": "tiny",
    "tasks": None,  # the declared smoke tasks (`smoke_tasks`)
    "data": [],  # their offline data
    "env_steps": 4,
    "episodes": 2,
    "max_new_tokens": 4,
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": 0,
    "learning_rate": 1e-2,
}
"""--quick (CI): the byte-level tiny model on the tasks declared `smoke` (TLDR), played on their
shipped tasks, 4 env steps per trained row, 2 bench episodes of 4-token answers; any option
given explicitly wins."""


def smoke_tasks() -> tuple[str, list[str]]:
    """--quick's tasks and data: every declaration marked `smoke`, on its offline tasks."""
    specs = [s for s in task_specs() if s.smoke and s.offline and "data" in s.offline]
    names = ",".join(s.short_name for s in specs)
    return names, [f"{s.short_name}={s.offline['data']}" for s in specs]


FULL = {
    "model": None,
    "tasks": None,
    "data": [],
    "env_steps": 512,
    "episodes": None,
    "max_new_tokens": Sampling.max_new_tokens,
    "temperature": Sampling.temperature,
    "top_p": Sampling.top_p,
    "top_k": Sampling.top_k,
    "learning_rate": 5e-6,
}
"""The defaults otherwise: the reference's sampling and learning rate (learners.md)."""


def _listed(text: str, what: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise UsageError(f"{what} needs at least one name, got {text!r}")
    return items


def _seeds(text: str) -> list[int]:
    try:
        seeds = [int(s) for s in _listed(text, "--seeds")]
    except ValueError:
        raise UsageError(f"--seeds takes integers such as 0,1,2, got {text!r}") from None
    if any(s < 0 for s in seeds) or len(set(seeds)) != len(seeds):
        raise UsageError(f"--seeds takes distinct integers from 0, got {text!r}")
    return seeds


def settings_from(args: argparse.Namespace) -> Settings:
    """The reproduction's settings: what was given, else --quick's or the full defaults."""
    defaults = QUICK if args.quick else FULL
    if args.quick:
        tasks_default, data_default = smoke_tasks()
        defaults = {**QUICK, "tasks": tasks_default, "data": data_default}

    def given(name: str) -> Any:
        value = getattr(args, name)
        return defaults[name] if value is None else value

    model = given("model")
    if model is None:
        raise UsageError("--model is required (or --quick, which uses the tiny model)")
    models = _listed(model, "--model")
    if args.solo_model is not None:
        check_model_option(args.solo_model)
    for name in models:
        check_model_option(name)
        if name == SMALL:
            raise UsageError(
                "--model small learns its tokenizer from a dataset: warm start it with "
                "`collabzoo sft DATASET --model small`, then pass that folder"
            )
    tasks_text = given("tasks")
    try:
        tasks = (
            [resolve(t).short_name for t in _listed(tasks_text, "--tasks")]
            if tasks_text
            else poster_tasks()
        )
    except ValueError as error:
        raise UsageError(f"--tasks: {error}") from None
    tasks = list(dict.fromkeys(tasks))
    kwargs = _scoped(args.env_arg, "--env-arg", tasks)
    own = [p for p in defaults["data"] if p.partition("=")[0] in tasks]  # --quick's, if played
    for task, source in _data([*own, *args.data], tasks).items():
        kwargs.setdefault(task, {})["data"] = source
    env_kwargs = {t: {**kwargs.get(None, {}), **kwargs.get(t, {})} for t in tasks}
    try:
        rows = resolve_rows(_listed(args.rows, "--rows"))
    except ReproduceError as error:
        raise UsageError(str(error)) from None
    learner_settings, learner_overrides = _learner_settings(args.set)
    top_k = given("top_k")
    return Settings(
        models=models,
        solo_model=args.solo_model,
        tasks=tasks,
        rows=rows,
        seeds=_seeds(args.seeds),
        env_steps=given("env_steps"),
        episodes=given("episodes"),
        split=args.split,
        rounds=args.rounds,
        max_new_tokens=given("max_new_tokens"),
        temperature=given("temperature"),
        top_p=given("top_p"),
        top_k=top_k or None,
        learning_rate=given("learning_rate"),
        env_kwargs=env_kwargs,
        learner_settings=learner_settings,
        learner_overrides=learner_overrides,
        cpus=args.cpus,
        gpus=args.gpus,
        device=args.device,
        dtype=args.dtype,
        sandbox=args.sandbox,
    )


def _learner_settings(pairs: list[str]) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """--set FIELD=VALUE, read by the type the field has in the learners' shared config, and
    --set LEARNER:FIELD=VALUE, read by that learner's own config (its rows only)."""
    shared = [p for p in pairs if ":" not in p.partition("=")[0]]
    scoped: dict[str, list[str]] = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        if ":" in key:
            learner, _, name = key.partition(":")
            scoped.setdefault(learner.strip().lower(), []).append(f"{name.strip()}={value}")
    settings: dict[str, Any] = {}
    if shared:
        from collabzoo.algos.learners.config import LearnerConfig

        settings = config_settings(LearnerConfig, shared, "rollout_buffer_size=4")
    overrides: dict[str, dict[str, Any]] = {}
    if scoped:
        try:
            table = learner_table()
        except ReproduceError as error:
            raise UsageError(str(error)) from None
        for learner, own in scoped.items():
            if learner not in table:
                raise UsageError(
                    f"--set {learner}:...: no learner {learner!r}; registered: "
                    f"{', '.join(sorted(table))}"
                )
            overrides[learner] = config_settings(
                table[learner][0], own, f"{learner}:generation_batch_size=32"
            )
    return settings, overrides


def cmd_reproduce(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    output = Path(args.output)
    try:
        runs = plan(settings)
        if args.dry_run:
            sys.stdout.write(dry_run(runs, output, args.tokens_per_second))
            return 0
        pending = pending_runs(runs, output)
    except ReproduceError as error:
        raise UsageError(str(error)) from None
    output.mkdir(parents=True, exist_ok=True)
    (output / "plan.json").write_text(
        json.dumps([{"folder": r.folder, "run": r.spec} for r in runs], indent=1, default=str),
        encoding="utf-8",
    )
    todo = [] if args.report else pending
    print(
        f"{len(runs)} runs planned, {len(runs) - len(pending)} finished already, "
        + (
            f"{len(pending)} not run (--report runs none)"
            if args.report
            else f"{len(todo)} to run" + (" on Ray" if args.ray else "")
        ),
        flush=True,
    )

    def say(line: str) -> None:
        print(line, flush=True)

    if args.ray and todo:
        try:
            failures = run_on_ray(todo, output, say, args.ray_address)
        except ReproduceError as error:
            raise UsageError(str(error)) from None
    else:
        failures = run_local(todo, output, say)
    board = output / LEADERBOARD
    board.write_text(render(runs, output, settings), encoding="utf-8")
    print(f"leaderboard: {board}")
    if failures:
        print(f"collabzoo: {len(failures)} run(s) failed:", file=sys.stderr)
        for line in failures:
            print(f"  {line}", file=sys.stderr)
        return 1
    return 0


def add_commands(commands: Any) -> None:
    """Add `reproduce` to the `collabzoo` subcommands."""
    rows = ", ".join(POSTER_ROWS)
    parser = commands.add_parser(
        "reproduce",
        help="the poster's table (every method row on every task) for a model",
        description="Plan every (row, task, seed) run, train the trained rows on the same "
        "budget of environment steps with the same sampling and learning rate, bench every "
        "row on each task's eval split, and write OUTPUT/leaderboard.md with the published "
        "rows beside the local ones. Each run's folder gets a manifest and, when it finishes, "
        "done.json: the same command again skips the finished runs.",
    )
    parser.add_argument(
        "--model",
        default=None,
        help="a model for every agent (a registry name, hub id or folder, or tiny), or one per "
        "agent, comma-separated; pretrained models train a LoRA adapter per agent",
    )
    parser.add_argument(
        "--solo-model",
        default=None,
        metavar="MODEL",
        help="with one model per agent: the model of the rows one model plays (Raw model, "
        "GRPO and AC as one agent)",
    )
    parser.add_argument(
        "--tasks",
        default=None,
        help="tasks, comma-separated (default: every task with published rows)",
    )
    parser.add_argument(
        "--rows",
        default="default",
        help=f"'default' (the poster's nine: {rows}), short names (raw, grpo, ac, parallel, "
        "pipeline, discussion, magrpo, collm-dc, collm-cc) or any registered learner's name; "
        "comma-separated (%(default)s)",
    )
    parser.add_argument("--seeds", default="0", help="comma-separated (%(default)s)")
    parser.add_argument(
        "--env-steps",
        type=positive_int,
        default=None,
        metavar="N",
        help=f"each trained row's budget in environment steps ({FULL['env_steps']}; --quick: "
        f"{QUICK['env_steps']})",
    )
    parser.add_argument(
        "--episodes",
        type=positive_int,
        default=None,
        help="bench episodes per run (default: every task of the split once)",
    )
    parser.add_argument("--split", choices=BENCH_SPLITS, default="eval", help="(%(default)s)")
    parser.add_argument(
        "--rounds",
        type=positive_int,
        default=DEFAULT_ROUNDS,
        help="the Discussion row's rounds (%(default)s)",
    )
    shared = parser.add_argument_group("sampling and learning rate (every row alike)")
    shared.add_argument("--max-new-tokens", type=positive_int, default=None)
    shared.add_argument("--temperature", type=positive_float, default=None)
    shared.add_argument("--top-p", type=probability, default=None)
    shared.add_argument("--top-k", type=nonnegative_int, default=None, help="0: off")
    shared.add_argument(
        "--learning-rate", type=positive_float, default=None, help="(5e-6; --quick: 1e-2)"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="[LEARNER:]FIELD=VALUE",
        help="a field every learner's config shares, for every trained row (e.g. "
        "rollout_buffer_size=4), or with LEARNER: a field of that learner's config for its rows "
        "only (e.g. madpo-iter:generation_batch_size=32); repeatable",
    )
    parser.add_argument(
        "--data", action="append", default=[], metavar="TASK=SOURCE", help="a task's data"
    )
    parser.add_argument(
        "--env-arg",
        action="append",
        default=[],
        metavar="[TASK:]KEY=VALUE",
        help="an env constructor argument for every task or TASK only; repeatable",
    )
    parser.add_argument("--output", default=DEFAULT_OUTPUT, help="(%(default)s)")
    parser.add_argument(
        "--dry-run", action="store_true", help="print every planned run and its estimate"
    )
    parser.add_argument(
        "--report",
        action="store_true",
        help="run nothing: write OUTPUT/plan.json and the leaderboard of the finished runs (the "
        "others listed as not run)",
    )
    parser.add_argument(
        "--tokens-per-second",
        type=positive_float,
        default=TOKENS_PER_SECOND,
        help="the dry run's assumed sampling throughput (%(default)s: SmolLM2-135M, 16 rows at "
        "a time, on a 2-core CPU); a trained token counts 3 times",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="CI size: tiny model, the smoke tasks' shipped data, 4 env steps, 2 episodes",
    )
    where = parser.add_argument_group("where the runs go")
    where.add_argument(
        "--ray", action="store_true", help="each run a Ray task on the cluster Ray reaches"
    )
    where.add_argument(
        "--ray-address",
        default=None,
        help="ray.init's address: none starts a local cluster; 'auto' or ray://HOST:PORT",
    )
    where.add_argument(
        "--cpus", type=positive_int, default=1, help="threads per run (Ray: num_cpus)"
    )
    where.add_argument(
        "--gpus", type=nonnegative_float, default=0.0, help="Ray: num_gpus per run (%(default)s)"
    )
    where.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    where.add_argument("--dtype", default="auto")
    where.add_argument("--sandbox", choices=("auto", "docker", "process"), default="auto")
    parser.set_defaults(handler=cmd_reproduce)
