"""The `collabzoo bench`, `leaderboard`, `rescore` and `export` commands: their arguments and
dispatch; what they run is `collabzoo.bench`.

    collabzoo bench --env ENV[,ENV...]|all|embedded --team SPEC [--team SPEC ...]
                    [--protocol single,parallel,pipeline,discussion|all] [--rounds R]
                    [--episodes N] [--split eval|train|all] [--output DIR] [--resume]
    collabzoo leaderboard DIR [DIR ...] [--format markdown|csv|json] [--plot PNG]
    collabzoo rescore FILE [FILE ...]
    collabzoo export ENV --team SPEC [--episodes N] -o DIR | export RESULTS [RESULTS ...] -o DIR

`all` is every registered env; pairs that cannot run here (no scripted team of that kind
for the env) are skipped with a note, and so is an env whose data cannot be loaded (one line
saying which `--data ENV=PATH` to pass). `embedded` is every env whose
tasks ship with the package, the writing tasks on their embedded sample: it runs offline.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from collabzoo.bench.columns import COST, TIME, task_columns
from collabzoo.bench.leaderboard import (
    FORMATS,
    find_results,
    plot_score_vs_cost,
    render_csv,
    render_json,
    render_markdown,
)
from collabzoo.bench.models import ModelOptions, Sampling, TeamError
from collabzoo.bench.protocols import DEFAULT_ROUNDS, NAMED_PROTOCOLS, PROTOCOLS
from collabzoo.bench.rescore import rescore
from collabzoo.bench.results import ResultsError
from collabzoo.bench.runner import (
    BENCH_SPLITS,
    BenchError,
    BenchRun,
    DataUnavailable,
    Interrupted,
    NotApplicable,
    RunFailed,
    RunOutcome,
    check_data,
    run_bench,
)
from collabzoo.bench.teams import parse_team
from collabzoo.cli.options import (
    add_device_options,
    add_env_arg,
    add_max_prompt_tokens,
    json_object_option,
    nonnegative_int,
    positive_float,
    positive_int,
    probability,
)
from collabzoo.cli.usage import CommandParser, UsageError
from collabzoo.envs import entries, resolve, task_specs

ENV_GROUPS = ("all", "embedded")
DEFAULT_OUTPUT = "results"
REFERENCE_TOP_K = 50


# ----- reading the arguments ----------------------------------------------------------------
def _value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def select_envs(text: str) -> tuple[list[tuple[str, dict[str, Any]]], bool]:
    """([(env short name, default kwargs)], whether a group was named) from --env."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise UsageError("--env needs env names (collabzoo list), 'all' or 'embedded'")
    chosen: dict[str, dict[str, Any]] = {}
    group = False
    for name in names:
        if name == "all":
            group = True
            for entry in entries():
                chosen.setdefault(entry.short_name, {})
        elif name == "embedded":
            group = True
            for spec in task_specs():  # whose tasks ship with the package (TaskSpec.offline)
                if spec.offline is not None:
                    chosen.setdefault(spec.short_name, dict(spec.offline))
        else:
            try:
                chosen.setdefault(resolve(name).short_name, {})
            except ValueError as error:
                raise UsageError(f"{error}; or a group: {', '.join(ENV_GROUPS)}") from None
    return list(chosen.items()), group


def _scoped(pairs: Sequence[str], option: str, envs: Sequence[str]) -> dict[str | None, dict]:
    """`[ENV:]KEY=VALUE` pairs by env (None: every env)."""
    scoped: dict[str | None, dict[str, Any]] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        scope, colon, key = key.rpartition(":") if ":" in key else ("", "", key)
        key = key.strip()
        if not sep or not key:
            raise UsageError(
                f"{option} takes [ENV:]KEY=VALUE (e.g. ENV:horizon=2 or horizon=2), got {pair!r}"
            )
        env = None
        if colon:
            try:
                env = resolve(scope.strip()).short_name
            except ValueError as error:
                raise UsageError(f"{option} {pair!r}: {error}") from None
            if env not in envs:
                raise UsageError(
                    f"{option} {pair!r} is for {env}, which this run does not play "
                    f"(its envs: {', '.join(envs)})"
                )
        scoped.setdefault(env, {})[key] = _value(raw)
    return scoped


def _data(pairs: Sequence[str], envs: Sequence[str]) -> dict[str, str]:
    data = {}
    for pair in pairs:
        name, sep, source = pair.partition("=")
        if not sep or not name.strip() or not source.strip():
            raise UsageError(
                f"--data takes ENV=SOURCE (a local file or folder, a hub id, or 'sample'), got "
                f"{pair!r}"
            )
        try:
            env = resolve(name.strip()).short_name
        except ValueError as error:
            raise UsageError(f"--data {pair!r}: {error}") from None
        if env not in envs:
            raise UsageError(
                f"--data {pair!r} is for {env}, which this run does not play "
                f"(its envs: {', '.join(envs)})"
            )
        data[env] = source.strip()
    return data


def _protocols(values: Sequence[str]) -> list[str]:
    chosen: list[str] = []
    for value in values or ["parallel"]:
        for name in (v.strip() for v in value.split(",")):
            if not name:
                continue
            if name == "all":
                chosen += [p for p in PROTOCOLS if p not in chosen]
            elif name not in NAMED_PROTOCOLS:
                raise UsageError(
                    f"unknown protocol {name!r}; expected one of {', '.join(NAMED_PROTOCOLS)} "
                    "or all (all: the first four)"
                )
            elif name not in chosen:
                chosen.append(name)
    return chosen


def _summary_line(outcome: RunOutcome) -> str:
    document = outcome.document
    summary = document["summary"]
    env = document["env"]
    parts = [f"{env['name']} | {document['team']['spec']} | {document['protocol']['name']}"]
    parts.append(f"{summary['episodes']} episodes")
    for name in [TIME, COST, *(c.name for c in task_columns(env["name"]).columns)]:
        mean = (summary.get(name) or {}).get("mean")
        if mean is not None and math.isfinite(mean):
            parts.append(f"{name} {mean:.2f}" if name == TIME else f"{name} {mean:.1f}")
    return " | ".join(parts) + f" -> {outcome.path}"


# ----- bench --------------------------------------------------------------------------------
def cmd_bench(args: argparse.Namespace) -> int:
    selected, grouped = select_envs(args.env)
    env_names = [name for name, _ in selected]
    try:
        teams = [parse_team(spec) for spec in args.team]
    except TeamError as error:
        raise UsageError(str(error)) from None
    protocols = _protocols(args.protocol)
    if args.resume and args.overwrite:
        raise UsageError("--resume and --overwrite exclude each other")
    scoped = _scoped(args.env_arg, "--env-arg", env_names)
    data = _data(args.data, env_names)
    options = ModelOptions(
        device=args.device,
        dtype=args.dtype,
        max_prompt_tokens=args.max_prompt_tokens,
        chat_template_kwargs=json_object_option(args.chat_template_kwargs),
        vllm_kwargs=json_object_option(
            args.vllm_kwargs, "--vllm-kwargs", '{"gpu_memory_utilization": 0.8}'
        ),
        concurrency=args.concurrency,
        timeout=args.timeout,
        retries=args.retries,
        api_key_env=args.api_key_env,
        threads=args.threads,
        episodes_at_once=args.episodes_at_once,
    )

    sandboxes: dict[tuple[str, ...], Any] = {}

    def sandbox_factory(packages: tuple[str, ...] = ()) -> Any:
        """One sandbox per package set (a task whose code imports numpy gets the image that
        holds it), shared by every run that needs the same."""
        if packages not in sandboxes:
            from collabzoo.sandbox import get_sandbox

            limits: dict[str, Any] = {"size": args.sandbox_workers} if args.sandbox_workers else {}
            if packages:
                limits["packages"] = packages
            try:
                sandboxes[packages] = get_sandbox(args.sandbox, **limits)
            except Exception as error:
                raise UsageError(f"cannot start the {args.sandbox} sandbox: {error}") from None
        return sandboxes[packages]

    outcomes: list[RunOutcome] = []
    skipped: list[str] = []
    cannot: set[tuple[str, str]] = set()
    previous = _terminate_as_interrupt()
    try:
        for env_name, defaults in selected:
            kwargs = {**defaults, **scoped.get(None, {}), **scoped.get(env_name, {})}
            if env_name in data:
                kwargs["data"] = data[env_name]
            if grouped:  # data that cannot be loaded skips the env: one line, every team
                try:
                    check_data(env_name, kwargs, args.split)
                except DataUnavailable as error:
                    skipped.append(f"{env_name}: {error}")
                    print(f"skipped {skipped[-1]}", file=sys.stderr, flush=True)
                    continue
            for team in teams:
                top_k = args.top_k
                if top_k is None:
                    top_k = None if "openai" in team.kinds else REFERENCE_TOP_K
                sampling = Sampling(
                    max_new_tokens=args.max_new_tokens,
                    temperature=args.temperature,
                    top_p=args.top_p,
                    top_k=top_k or None,
                    greedy=args.greedy,
                )
                for protocol in protocols:
                    if (env_name, team.label) in cannot:
                        continue
                    run = BenchRun(
                        env=env_name,
                        team=team,
                        protocol=protocol,
                        rounds=args.rounds,
                        split=args.split,
                        episodes=args.episodes,
                        seed=args.seed,
                        env_kwargs=kwargs,
                        sampling=sampling,
                        options=options,
                    )
                    try:
                        outcome = run_bench(
                            run,
                            args.output,
                            resume=args.resume,
                            overwrite=args.overwrite,
                            sandbox_factory=sandbox_factory,
                            progress=not args.no_progress,
                            command=["collabzoo", *getattr(args, "argv", [])],
                        )
                    except NotApplicable as error:
                        if not grouped:
                            raise UsageError(f"{env_name}: {error}") from None
                        cannot.add((env_name, team.label))  # for every protocol alike
                        skipped.append(f"{env_name} / {team.label}: {error}")
                        print(f"skipped {skipped[-1]}", file=sys.stderr, flush=True)
                        continue
                    except (BenchError, ResultsError) as error:
                        raise UsageError(str(error)) from None
                    outcomes.append(outcome)
                    print(_summary_line(outcome), flush=True)
    except Interrupted as stop:
        print(
            f"\ncollabzoo: {stop}; run the same command with --resume to finish it",
            file=sys.stderr,
        )
        return 130
    except RunFailed as error:
        print(f"collabzoo: error: {error}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)
        for sandbox in sandboxes.values():
            sandbox.close()
    if not outcomes:
        raise UsageError(
            "nothing ran: every env / team pair was skipped (see above); pick envs the teams "
            "can play"
        )
    print(
        f"{len(outcomes)} run(s) in {args.output}"
        + (f", {len(skipped)} skipped" if skipped else "")
        + f"; the table: collabzoo leaderboard {args.output}"
    )
    return 0


def _terminate_as_interrupt() -> Any:
    """SIGTERM (a job scheduler stopping the run) is handled like Ctrl-C: the finished episodes
    are saved. Returns the handler to restore."""

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, interrupt)


# ----- leaderboard --------------------------------------------------------------------------
def cmd_leaderboard(args: argparse.Namespace) -> int:
    try:
        documents, notes = find_results(args.results)
    except ResultsError as error:
        raise UsageError(str(error)) from None
    for note in notes:
        print(note, file=sys.stderr)
    published = not args.no_published
    render = {"markdown": render_markdown, "csv": render_csv, "json": render_json}[args.format]
    text = render(documents, published)
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as handle:
                handle.write(text)
        except OSError as error:
            raise UsageError(f"cannot write {args.output}: {error}") from None
        print(f"leaderboard written to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    if args.plot:
        try:
            path = plot_score_vs_cost(documents, args.plot, published)
        except ImportError:
            raise UsageError("--plot needs matplotlib: pip install matplotlib") from None
        except (OSError, ValueError) as error:
            raise UsageError(f"cannot plot to {args.plot}: {error}") from None
        print(f"plot written to {path}", file=sys.stderr)
    return 0


# ----- rescore -----------------------------------------------------------------------------
def cmd_rescore(args: argparse.Namespace) -> int:
    """Replay each file's episodes; exit 1 when any turn differs from its record."""
    differ = False
    for name in args.files:
        try:
            report = rescore(name)
        except (ResultsError, ValueError, TypeError, KeyError) as error:
            raise UsageError(f"cannot re-score {name}: {error}") from None
        if report.ok:
            print(f"{name}: {report.episodes} episodes, {report.turns} turns re-scored as recorded")
            continue
        differ = True
        print(f"{name}: {len(report.mismatches)} difference(s) in {report.episodes} episodes")
        for mismatch in report.mismatches[: args.show]:
            print(f"  {mismatch}")
    return 1 if differ else 0


# ----- the parsers --------------------------------------------------------------------------
EXPORT_FORWARDED = {
    "episodes": "--episodes",
    "split": "--split",
    "seed": "--seed",
    "max_new_tokens": "--max-new-tokens",
    "temperature": "--temperature",
    "device": "--device",
    "dtype": "--dtype",
    "sandbox": "--sandbox",
}
"""`collabzoo export` options handed to the bench run that plays the team (same meaning)."""


def cmd_export(args: argparse.Namespace) -> int:
    from collabzoo.bench.export import ExportError, episodes_dataset

    output = Path(args.output)
    if output.is_file() or (output.is_dir() and any(output.iterdir()) and not args.overwrite):
        raise UsageError(f"{output} exists and is not empty: pass --overwrite to replace it")
    sources = list(args.sources)
    if args.team:
        if len(sources) != 1:
            raise UsageError(
                f"with --team, name one env to play (got {len(sources)}: {' '.join(sources)})"
            )
        results = output / "results"
        status = cmd_bench(_bench_arguments(args, sources[0], results))
        if status != 0:
            return status
        sources = [str(results)]
    elif args.episodes is not None or args.seed is not None or args.env_arg or args.greedy:
        raise UsageError("--episodes, --seed, --env-arg and --greedy need --team")
    try:
        dataset = episodes_dataset(sources)
    except (ExportError, ResultsError) as error:
        raise UsageError(str(error)) from None
    import datasets

    datasets.disable_progress_bars()
    for stale in ("state.json", "dataset_info.json", *(p.name for p in output.glob("*.arrow"))):
        (output / stale).unlink(missing_ok=True)
    dataset.save_to_disk(str(output))
    agents = sorted(set(dataset["agent"]))
    columns = (dataset[c] for c in ("env", "team", "split", "episode"))
    episodes = set(zip(*columns, strict=True))
    print(
        f"{len(dataset)} rows ({', '.join(agents)}) of {len(episodes)} episodes in {output}: "
        f"datasets.load_from_disk({str(output)!r})"
    )
    return 0


def _bench_arguments(args: argparse.Namespace, env: str, results: Path) -> argparse.Namespace:
    """The `collabzoo bench` run that plays an export's team into `results`."""
    argv = ["bench", "--env", env, "--output", str(results), "--overwrite"]
    for spec in args.team:
        argv += ["--team", spec]
    for name, flag in EXPORT_FORWARDED.items():
        if getattr(args, name) is not None:
            argv += [flag, str(getattr(args, name))]
    for pair in args.env_arg:
        argv += ["--env-arg", pair]
    if args.greedy:
        argv.append("--greedy")
    if args.no_progress:
        argv.append("--no-progress")
    parser = CommandParser(prog="collabzoo")
    add_commands(parser.add_subparsers())
    bench_args = parser.parse_args(argv)
    bench_args.argv = argv
    return bench_args


def _add_team_specs(parser: argparse.ArgumentParser, *, required: bool) -> None:
    """--team SPEC, repeatable: the teams `bench` plays (and `export` plays through it)."""
    parser.add_argument(
        "--team",
        action="append",
        required=required,
        default=None if required else [],
        metavar="SPEC",
        help="scripted:oracle|naive|heuristic, hf:MODEL (or a `collabzoo train` checkpoint "
        "folder, or MODEL_1,MODEL_2 per agent), openai:http://HOST:PORT/v1/MODEL; repeatable",
    )


def add_commands(commands: Any) -> None:
    """Add `bench`, `leaderboard`, `rescore` and `export` to the `collabzoo` subcommands."""
    bench = commands.add_parser(
        "bench",
        help="benchmark a team on one or more envs into results files",
        description="Play a team (scripted:KIND, hf:MODEL[,MODEL], openai:URL/v1/MODEL) on "
        "envs under collaboration protocols; one results file per env, team and protocol in "
        "--output, with per-episode records and the paper's columns (Time, Cost, scores, "
        "95% intervals). Ctrl-C keeps finished episodes; --resume finishes the run.",
    )
    bench.add_argument(
        "--env",
        required=True,
        help="env names or ids, comma-separated; 'all' (every env; pairs that cannot run are "
        "skipped) or 'embedded' (the envs whose tasks ship with the package; offline)",
    )
    _add_team_specs(bench, required=True)
    bench.add_argument(
        "--protocol",
        action="append",
        default=[],
        help=f"{', '.join(NAMED_PROTOCOLS)}, or all ({', '.join(PROTOCOLS)}); comma-separated or "
        "repeated (default: parallel)",
    )
    bench.add_argument(
        "--rounds",
        type=positive_int,
        default=DEFAULT_ROUNDS,
        help=f"discussion: draft rounds before the answer ({DEFAULT_ROUNDS})",
    )
    bench.add_argument(
        "--episodes",
        type=positive_int,
        default=None,
        help="episodes per run (default: each task once)",
    )
    bench.add_argument(
        "--split",
        choices=BENCH_SPLITS,
        default="eval",
        help="task split: eval (default) or train, the reference slices, or all: every task "
        "in the dataset's order",
    )
    bench.add_argument(
        "--seed",
        type=nonnegative_int,
        default=0,
        help="episode k resets with seed SEED+k (%(default)s)",
    )
    bench.add_argument(
        "--output", default=DEFAULT_OUTPUT, help=f"results folder ({DEFAULT_OUTPUT})"
    )
    bench.add_argument("--resume", action="store_true", help="finish the runs in --output")
    bench.add_argument("--overwrite", action="store_true", help="start the runs again")
    bench.add_argument(
        "--data",
        action="append",
        default=[],
        metavar="ENV=SOURCE",
        help="an env's data: a local file or folder, a hub id, or 'sample'; repeatable",
    )
    add_env_arg(bench, scoped=True)
    sampling = bench.add_argument_group("sampling (reference defaults)")
    sampling.add_argument("--max-new-tokens", type=positive_int, default=Sampling.max_new_tokens)
    sampling.add_argument("--temperature", type=positive_float, default=Sampling.temperature)
    sampling.add_argument("--top-p", type=probability, default=Sampling.top_p)
    sampling.add_argument(
        "--top-k",
        type=nonnegative_int,
        default=None,
        help=f"0: off (default: {REFERENCE_TOP_K}, and off for openai teams)",
    )
    sampling.add_argument("--greedy", action="store_true", help="greedy decoding instead")
    hf = bench.add_argument_group("hf: and vllm: teams")
    add_device_options(hf, device=ModelOptions.device, dtype=ModelOptions.dtype)
    hf.add_argument(
        "--episodes-at-once",
        type=positive_int,
        default=ModelOptions.episodes_at_once,
        metavar="N",
        help="hf, vllm: episodes played at once, their prompts of a turn in one batched "
        "generate; 1: one by one (for hf, a sampled run then repeats exactly; vllm seeds each "
        "row, so its runs repeat either way)",
    )
    add_max_prompt_tokens(hf, default=ModelOptions.max_prompt_tokens)
    hf.add_argument(
        "--chat-template-kwargs",
        default=None,
        metavar="JSON",
        help="options of the chat template, e.g. '{\"enable_thinking\": false}' for Qwen3",
    )
    bench.add_argument_group("vllm: teams (also --dtype, --max-prompt-tokens, ...)").add_argument(
        "--vllm-kwargs",
        default=None,
        metavar="JSON",
        help="settings of vllm.LLM, e.g. '{\"gpu_memory_utilization\": 0.8}'",
    )
    endpoint = bench.add_argument_group("openai: teams")
    endpoint.add_argument(
        "--concurrency",
        type=positive_int,
        default=ModelOptions.concurrency,
        help="requests in flight per endpoint, and episodes played at once",
    )
    endpoint.add_argument(
        "--timeout", type=positive_float, default=ModelOptions.timeout, help="s/request"
    )
    endpoint.add_argument("--retries", type=nonnegative_int, default=ModelOptions.retries)
    endpoint.add_argument(
        "--api-key-env",
        default=ModelOptions.api_key_env,
        help="environment variable with the API key (local servers need none)",
    )
    code = bench.add_argument_group("code tasks")
    code.add_argument("--sandbox", choices=("auto", "docker", "process"), default="auto")
    code.add_argument(
        "--sandbox-workers", type=positive_int, default=None, help="(default: CPU count)"
    )
    bench.add_argument("--no-progress", action="store_true", help="no progress bar")
    bench.set_defaults(handler=cmd_bench)

    board = commands.add_parser(
        "leaderboard",
        help="render the results of `collabzoo bench` as a leaderboard",
        description="One table per task with the paper's columns (Time, Cost, scores; mean "
        "± 95% interval), the published rows beside the local ones; optionally a plot of "
        "score against cost.",
    )
    board.add_argument("results", nargs="+", metavar="DIR", help="results folders or files")
    board.add_argument("--format", choices=FORMATS, default="markdown")
    board.add_argument("--no-published", action="store_true", help="leave the paper's rows out")
    board.add_argument("--output", default=None, metavar="FILE", help="write here, not stdout")
    board.add_argument("--plot", default=None, metavar="PNG", help="also plot score vs cost")
    board.set_defaults(handler=cmd_leaderboard)

    again = commands.add_parser(
        "rescore",
        help="replay the actions in results files and check every recorded reward",
        description="Replay each episode's recorded actions in a fresh env (the recorded id,"
        " arguments, seed and task) and compare every turn's rewards, components and metrics"
        " with the file. Exit status 1 when any differs.",
    )
    again.add_argument("files", nargs="+", metavar="FILE", help="results files")
    again.add_argument(
        "--show",
        type=nonnegative_int,
        default=20,
        help="differences to print per file (%(default)s)",
    )
    again.set_defaults(handler=cmd_rescore)

    export = commands.add_parser(
        "export",
        help="write a team's episodes as a Hugging Face dataset (prompt, completion, reward)",
        description="With --team: play the team on ENV (a `collabzoo bench` run, whose "
        "results file is kept in OUTPUT/results) and write its episodes to OUTPUT. Without: "
        "write the episodes of results files (or folders of them) to OUTPUT. Every episode is "
        "replayed to write back its prompts and check its rewards. One row per agent and "
        "turn; load it with datasets.load_from_disk(OUTPUT); TRL's SFTTrainer takes it as "
        "it is.",
    )
    export.add_argument(
        "sources",
        nargs="+",
        metavar="ENV|RESULTS",
        help="the env to play (with --team), or results files and folders of them",
    )
    export.add_argument("-o", "--output", required=True, help="dataset folder")
    _add_team_specs(export, required=False)
    export.add_argument(
        "--episodes", type=positive_int, default=None, help="(default: each task once)"
    )
    export.add_argument("--split", choices=BENCH_SPLITS, default="train", help="(train)")
    export.add_argument(
        "--seed", type=nonnegative_int, default=None, help="episode k: seed SEED+k (0)"
    )
    add_env_arg(export, scoped=True)
    export.add_argument("--max-new-tokens", type=positive_int, default=None, help="as for bench")
    export.add_argument("--temperature", type=positive_float, default=None, help="as for bench")
    export.add_argument("--greedy", action="store_true", help="as for bench")
    add_device_options(export, device=None, dtype=None, threads=False)
    export.add_argument(
        "--sandbox", choices=("auto", "docker", "process"), default=None, help="as for bench"
    )
    export.add_argument("--overwrite", action="store_true", help="replace OUTPUT")
    export.add_argument("--no-progress", action="store_true", help="as for bench")
    export.set_defaults(handler=cmd_export)
