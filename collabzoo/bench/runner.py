"""Play a team on an env under a protocol, episode by episode, into a results file.

Episodes are planned up front, so every run of the same settings plays the same episodes:
episode k plays task k of the split's task list (for split "all", every task of the env in
its dataset's order: HumanEval's 164), wrapping around with fresh seeds when more episodes than
tasks are asked for, and resets with seed `seed + k`; model calls are seeded from the episode
seed and the call number. A resumed run plays exactly the episodes that are missing.

Time is each episode's wall clock from reset to its last step (generation, env steps and
sandboxed tests). With several episodes in flight at once (an endpoint team's concurrency) it
is each episode's own latency, which includes waiting for the endpoint, not throughput.
"""

from __future__ import annotations

import itertools
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collabzoo.bench.columns import COST, task_columns
from collabzoo.bench.daemon_pool import DaemonPool
from collabzoo.bench.models import CallSeeds, ModelOptions, Sampling, TeamError
from collabzoo.bench.protocols import DEFAULT_ROUNDS, TeamProtocol, make_protocol
from collabzoo.bench.results import (
    FORMAT,
    ResultsError,
    ResultsFile,
    hardware,
    now,
    software_versions,
    summarize,
)
from collabzoo.bench.teams import NoScriptedTeam, Team, slug
from collabzoo.envs import declared, make, resolve
from collabzoo.envs.hub import DatasetUnavailable
from collabzoo.envs.records import SPLITS
from collabzoo.sandbox import default_sandbox

BENCH_SPLITS = SPLITS
"""eval (the default), train, or all: the env's own splits."""


class BenchError(ValueError):
    """A run that cannot start as asked (the message says what was wrong and what is expected)."""


class NotApplicable(BenchError):
    """This team cannot play this env, or the env's data cannot be loaded here: `--env all`
    skips such a pair and says why; a named env makes it an error."""


class DataUnavailable(NotApplicable):
    """The env's data cannot be loaded here (the hub out of reach, say): the message says which
    `--data ENV=PATH` to pass instead."""


class Interrupted(Exception):
    """Ctrl-C: the finished episodes are in the results file."""

    def __init__(self, path: Path, done: int, planned: int) -> None:
        super().__init__(f"interrupted: {done} of {planned} episodes kept in {path}")
        self.path, self.done, self.planned = path, done, planned


class RunFailed(RuntimeError):
    """An episode raised (a model endpoint down for good, say); finished episodes are kept."""


@dataclass(frozen=True)
class EpisodePlan:
    index: int
    split: str
    task: int
    seed: int


@dataclass
class BenchRun:
    """What to run: one env, one team, one protocol."""

    env: str
    team: Any
    """A `TeamSpec` (from `parse_team`) or a `PolicyTeam`."""
    protocol: str = "parallel"
    rounds: int = DEFAULT_ROUNDS
    split: str = "eval"
    episodes: int | None = None
    """None: every task of the split once."""
    seed: int = 0
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    sampling: Sampling = field(default_factory=Sampling)
    options: ModelOptions = field(default_factory=ModelOptions)


@dataclass
class RunOutcome:
    path: Path
    document: dict[str, Any]

    @property
    def summary(self) -> dict[str, Any]:
        return self.document["summary"]


def results_path(output: str | os.PathLike[str], short_name: str, run: BenchRun) -> Path:
    """`OUTPUT/ENV__PROTOCOL__TEAM__SPLIT.json`: one file per run, found again by --resume."""
    protocol = run.protocol if run.protocol != "discussion" else f"discussion{run.rounds}"
    name = f"{short_name}__{protocol}__{slug(run.team.label)}__{run.split}.json"
    return Path(output) / name


def plan_episodes(
    env: Any, split: str, episodes: int | None, seed: int, short_name: str | None = None
) -> list[EpisodePlan]:
    if split not in BENCH_SPLITS:
        raise BenchError(f"split must be one of {', '.join(BENCH_SPLITS)}, got {split!r}")
    try:
        tasks = [(split, k) for k in range(len(env.items(split)))]
    except DatasetUnavailable as error:  # the hub out of reach and no local copy
        name = short_name or "ENV"
        raise DataUnavailable(error.hint(f"--data {name}=PATH")) from None
    except Exception as error:  # a bad local copy, say: the env's message says what to do
        raise NotApplicable(f"cannot load the tasks: {error}") from None
    count = len(tasks) if episodes is None else episodes
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise BenchError(f"--episodes must be a positive number, got {episodes!r}")
    return [EpisodePlan(k, *tasks[k % len(tasks)], seed=seed + k) for k in range(count)]


def check_data(env: str, env_kwargs: Mapping[str, Any], split: str) -> None:
    """Raise DataUnavailable when the tasks of `env` cannot be loaded here: `--env all` asks
    once per env, before any team, so a skipped env gets one line, not one per team. Any other
    problem is left for `run_bench` to report."""
    try:
        entry = resolve(env)
        probe = make(entry.id, **env_kwargs)
    except DatasetUnavailable as error:  # a code env offline without a local copy: at make
        raise DataUnavailable(error.hint(f"--data {entry.short_name}=PATH")) from None
    except Exception:
        return
    try:
        plan_episodes(probe, split, None, 0, entry.short_name)
    except DataUnavailable:
        raise
    except Exception:
        return


def data_label(env: Any, short_name: str, kwargs: Mapping[str, Any], reset_info: Mapping) -> str:
    """Which data the episodes came from, for the leaderboard's Data column: the dataset an
    episode reports, else the data= given, else the env's hub dataset, else its built-in
    tasks."""
    dataset = reset_info.get("dataset")
    if dataset == "sample":
        return "embedded sample"
    source = dataset or kwargs.get("data") or getattr(env, "hub_id", None)
    if source:
        text = str(source)
        return Path(text).name if os.path.exists(text) else text
    spec = declared(short_name)  # what it plays with no data= (TaskSpec.default_data)
    return spec.default_data if spec is not None else "default"


def agent_info(infos: Mapping[str, Any], agent: str) -> Mapping[str, Any]:
    """The turn's info of `agent`, or of any agent still reporting (the first may have left)."""
    return infos.get(agent) or next(iter(infos.values()), {})


def turn_scores(rewards: Mapping[str, float], info: Mapping[str, Any]) -> dict[str, Any]:
    """What a results file records of a turn's outcome: the team reward (the agents' common
    reward, or their mean when they differ, and then each agent's), and the first agent's
    reward components and numeric metrics."""
    values = [float(r) for r in rewards.values()]
    scores: dict[str, Any] = {
        "reward": values[0] if len(set(values)) == 1 else math.fsum(values) / len(values),
        "components": dict(info.get("reward_components", {})),
        "metrics": {
            k: v for k, v in info.get("metrics", {}).items() if isinstance(v, (int, float))
        },
    }
    if len(set(values)) > 1:
        scores["rewards"] = {a: float(r) for a, r in rewards.items()}
    return scores


def play_episode(
    env: Any, team: Team, protocol: TeamProtocol, plan: EpisodePlan, sampling: Sampling
) -> dict[str, Any]:
    """One whole episode; its record for the results file."""
    started = time.perf_counter()
    options = {"task": plan.task, "split": plan.split}
    observations, infos = env.reset(seed=plan.seed, options=options)
    first = env.possible_agents[0]
    record: dict[str, Any] = {
        "index": plan.index,
        "split": plan.split,
        "task": plan.task,
        "task_id": str(infos[first].get("task_id", plan.task)),
        "seed": plan.seed,
    }
    seeds = CallSeeds(plan.seed)
    turns = []
    total, cost = 0.0, 0
    reward, metrics = math.nan, {}
    while env.agents:
        play = protocol.play_turn({a: observations[a] for a in env.agents}, team, sampling, seeds)
        observations, rewards, _, _, infos = env.step(play.actions)
        info = agent_info(infos, first)
        scores = turn_scores(rewards, info)
        reward, metrics = scores["reward"], scores["metrics"]
        turn = {
            "turn": info.get("turn", len(turns)),
            **scores,
            "actions": dict(play.actions),
            "generations": play.generations,
            "tokens": play.tokens,
        }
        turns.append(turn)
        total += reward
        cost += play.tokens
    record.update(
        time_s=time.perf_counter() - started,
        cost=cost,
        final_reward=reward,
        final_metrics=metrics,
        total_reward=total,
        turns=turns,
    )
    return record


class Progress:
    """A tqdm bar with running means when tqdm is installed; else a line now and then."""

    def __init__(self, total: int, done: int, label: str, enabled: bool) -> None:
        self.total, self.done, self.label, self.enabled = total, done, label, enabled
        self._bar = None
        self._last_line = 0.0
        if enabled:
            try:
                from tqdm import tqdm

                self._bar = tqdm(total=total, initial=done, desc=label, unit="ep", file=sys.stderr)
            except ImportError:
                pass

    def update(self, running: Mapping[str, float]) -> None:
        self.done += 1
        if not self.enabled:
            return
        shown = ", ".join(f"{k} {v:.1f}" for k, v in running.items() if math.isfinite(v))
        if self._bar is not None:
            self._bar.set_postfix_str(shown, refresh=False)
            self._bar.update(1)
        elif time.monotonic() - self._last_line > 1.0 or self.done == self.total:
            print(f"{self.label}: {self.done}/{self.total} {shown}", file=sys.stderr, flush=True)
            self._last_line = time.monotonic()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def _running_means(results: ResultsFile, shown: list[str]) -> dict[str, float]:
    """The shown columns' means so far, as the summary computes them (a pooled column pooled)."""
    summary = summarize({**results.document, "episodes": results.episodes})
    means = {name: (summary.get(name) or {}).get("mean") for name in shown}
    return {name: math.nan if mean is None else float(mean) for name, mean in means.items()}


def task_sandbox(short_name: str, factory: Callable[..., Any] | None = None) -> Any:
    """The sandbox for a task's code: `factory()` (default: the process-wide sandbox), or,
    for a task whose declaration names third-party packages, `factory(packages)`, whose image
    must hold them (ClassEval's tests import numpy, pandas, ...)."""
    spec = declared(short_name)
    packages = spec.packages() if spec is not None else ()
    if factory is None:
        return default_sandbox(packages)
    return factory(packages) if packages else factory()


def run_bench(
    run: BenchRun,
    output: str | os.PathLike[str],
    *,
    resume: bool = False,
    overwrite: bool = False,
    sandbox_factory: Callable[..., Any] | None = None,
    progress: bool = True,
    command: list[str] | None = None,
) -> RunOutcome:
    """Run (or with `resume`, finish) one benchmark into `output`; returns the results.

    `sandbox_factory` makes the sandbox for envs that run code (the caller's, so runs share
    one; default: the process-wide sandbox); it is called only once the run is sure to go
    ahead, with the task's pinned packages where its declaration names some (see
    `task_sandbox`).
    Raises BenchError / NotApplicable before anything runs, Interrupted on Ctrl-C and
    RunFailed when an episode fails; in the last two cases the finished episodes are saved."""
    try:
        entry = resolve(run.env)
    except (ValueError, TypeError) as error:
        raise BenchError(str(error)) from None
    short = entry.short_name
    try:
        protocol = make_protocol(run.protocol, run.rounds)
    except ValueError as error:
        raise BenchError(str(error)) from None
    env_class = entry.load()
    kwargs = {**run.env_kwargs, **protocol.env_kwargs(env_class)}
    sandbox = kwargs.pop("sandbox", None)  # given in Python: described, not recorded as is
    path = results_path(output, short, run)
    identity = {
        "env": {"id": entry.id, "kwargs": kwargs},
        "team": {"spec": run.team.label},
        "protocol": protocol.settings(),
        "split": run.split,
        "seed": run.seed,
        "sampling": run.sampling.as_dict(),
    }
    try:  # before any model loads: a clash with an earlier run is found at once
        ResultsFile.check(path, identity, resume=resume, overwrite=overwrite)
    except ResultsError as error:
        raise BenchError(str(error)) from None
    made_with = dict(kwargs, **({"sandbox": sandbox} if sandbox is not None else {}))
    try:
        probe = make(entry.id, **made_with)
    except DatasetUnavailable as error:  # the hub out of reach and no local copy
        raise DataUnavailable(error.hint(f"--data {short}=PATH")) from None
    except (ValueError, TypeError, KeyError, OSError) as error:
        message = error.args[0] if isinstance(error, KeyError) and error.args else error
        raise BenchError(f"{entry.id}: {message}") from None
    try:
        run.team.check(short)
        plan = plan_episodes(probe, run.split, run.episodes, run.seed, short)
        agents = list(probe.possible_agents)
        team = run.team.build(probe, short, agents, run.options)
    except NoScriptedTeam as error:
        raise NotApplicable(str(error)) from None
    except TeamError as error:
        raise BenchError(str(error)) from None
    if protocol.name in ("single", "joint"):  # both play one model for every agent
        try:
            team.solo()
        except TeamError as error:
            raise BenchError(str(error)) from None
    first = plan[0]
    _, first_info = probe.reset(seed=first.seed, options={"task": first.task, "split": first.split})
    spare = [probe]
    if sandbox is None and _accepts(env_class, "sandbox"):
        # made only now that the run will go ahead; every worker's env shares it
        sandbox = task_sandbox(short, sandbox_factory)
        made_with["sandbox"] = sandbox
        spare = []
    columns = task_columns(short, entry.name)
    header = {
        "format": FORMAT,
        "status": "running",
        "started": now(),
        "command": command,
        **identity,
        "env": {
            **identity["env"],
            "name": short,
            "version": entry.version,
            "title": columns.title,
            "agents": agents,
            "horizon": getattr(probe, "horizon", None),
            "max_reward": getattr(probe, "max_reward", None),
            "data": data_label(probe, short, kwargs, first_info.get(agents[0], {})),
        },
        "team": team.describe(),
        "episodes_planned": len(plan),
        "model_options": vars(run.options),
        "sandbox": describe_sandbox(sandbox, probe),
        "software": software_versions(),
        "hardware": hardware(),
    }
    try:
        results = ResultsFile.open(path, header, resume=resume, overwrite=overwrite)
    except ResultsError as error:
        raise BenchError(str(error)) from None
    # an episode recorded for another task (a file of an older plan, e.g. split "all" when it
    # meant train then eval) is played again, never mixed in
    recorded = {int(e["index"]): (e.get("split"), e.get("task")) for e in results.episodes}
    results.keep_only(
        p.index for p in plan if recorded.get(p.index, (p.split, p.task)) == (p.split, p.task)
    )
    pending = [p for p in plan if p.index not in results.finished]
    results.flush("running")
    shown = [c.name for c in columns.columns] + [COST]
    bar = Progress(
        len(plan), len(plan) - len(pending), f"{short} {team.label} {protocol.name}", progress
    )
    local = threading.local()

    def play(plan_item: EpisodePlan) -> dict[str, Any]:
        env = getattr(local, "env", None)
        if env is None:
            env = local.env = spare.pop() if spare else make(entry.id, **made_with)
        with team.episode():  # batching models wait for the calls of the episodes in play
            return play_episode(env, team, protocol, plan_item, run.sampling)

    workers = max(1, min(team.episodes_at_once(run.options), len(pending)))
    pool = DaemonPool(workers, "episode")
    queue = iter(pending)  # handed out one per free worker: after a failure, none starts
    futures: set[Future] = {pool.submit(play, p) for p in itertools.islice(queue, workers)}
    try:
        while futures:
            finished, futures = wait(futures, timeout=0.5, return_when=FIRST_COMPLETED)
            failed = [f for f in finished if f.exception() is not None]
            for future in finished:  # keep every episode that finished before raising
                if future not in failed:
                    results.add(future.result())
                    bar.update(_running_means(results, shown))
            results.flush("running", force=False)
            if failed:
                failed[0].result()
            futures |= {pool.submit(play, p) for p in itertools.islice(queue, len(finished))}
    except KeyboardInterrupt:
        results.flush("interrupted")
        raise Interrupted(path, len(results.finished), len(plan)) from None
    except Exception as error:
        results.flush("failed")
        raise RunFailed(
            f"{short} / {team.label} / {protocol.name}: {type(error).__name__}: {error} "
            f"({len(results.finished)} of {len(plan)} episodes kept in {path}; continue with "
            "--resume)"
        ) from error
    finally:
        bar.close()
        pool.close()
    results.flush("complete")
    return RunOutcome(path, results.document)


def _accepts(env_class: type, name: str) -> bool:
    import inspect

    try:
        return name in inspect.signature(env_class).parameters
    except (TypeError, ValueError):
        return False


def describe_sandbox(sandbox: Any, env: Any = None) -> dict[str, Any] | None:
    """The code sandbox's backend and limits, and the env's per-test limits (None for envs
    that run no code)."""
    if sandbox is None:
        return None
    described: dict[str, Any] = {
        "backend": getattr(sandbox, "kind", type(sandbox).__name__),
        "workers": getattr(sandbox, "size", None),
        "rlimits": dict(getattr(sandbox, "limits", {}) or {}),
        "test_timeout_s": getattr(env, "test_timeout", None),
        "max_timeouts": getattr(env, "max_timeouts", None),
    }
    options = getattr(sandbox, "options", None)
    if isinstance(options, Mapping):
        described["container"] = {
            key: options[key]
            for key in (
                "network_mode",
                "read_only",
                "tmpfs",
                "mem_limit",
                "memswap_limit",
                "pids_limit",
                "nano_cpus",
                "cap_drop",
                "security_opt",
                "user",
            )
            if key in options
        }
        described["image"] = getattr(sandbox, "image", None)
    return described


__all__ = [
    "BenchError",
    "BenchRun",
    "Interrupted",
    "NotApplicable",
    "RunFailed",
    "RunOutcome",
    "run_bench",
]
