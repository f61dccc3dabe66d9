"""`collabzoo reproduce`: the dry run lists every planned run with its estimate; `--quick` runs
end to end on the CPU (plan, train, bench, leaderboard), a run killed by SIGKILL resumes without
redoing a finished run; `--ray` on a local Ray cluster of two worker processes gives the local
run's results for the same seeds. On a task without a one-model mode (TinyCoop, StrBuild) the
GRPO and AC rows plan, train and bench the joint learners under the `joint` protocol."""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.optional import require_module

torch = require_module("torch", "train")

from collabzoo.algos import LEARNERS, MAGRPOConfig, MAGRPOTrainer  # noqa: E402
from collabzoo.algos.learners.actor_critic import ActorCriticConfig  # noqa: E402
from collabzoo.algos.runtime.run_log import read_metrics  # noqa: E402
from collabzoo.bench.reproduce import (  # noqa: E402
    CLAIM,
    DONE,
    MANIFEST,
    POSTER_ROWS,
    ReproduceError,
    Settings,
    claimed,
    plan,
    pooled,
    record_failure,
    render,
    resolve_rows,
    run_local,
)
from collabzoo.bench.results import episode_scores, read_results, summarize  # noqa: E402
from collabzoo.bench.seed_effects import Effect, SeedSpread, seed_values  # noqa: E402
from collabzoo.bench.stats import permutation_p  # noqa: E402
from collabzoo.bench.teams import slug  # noqa: E402
from collabzoo.cli import main  # noqa: E402
from collabzoo.envs.family import POSTER_METHODS  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PYTHONPATH = os.pathsep.join(
    [str(ROOT), *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
)
QUICK_EPISODES, QUICK_TOKENS, QUICK_STEPS = 2, 4, 4  # what --quick promises
RAY_ROWS = ("raw", "grpo", "collm-cc")
"""The rows the Ray run plays: untrained, one agent trained by a tree learner, and a team
trained by an actor-critic with a team critic."""


def command(output: Path, *more: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "collabzoo.cli",
        "reproduce",
        "--quick",
        "--output",
        str(output),
        *more,
    ]


def section_tables(board: str) -> dict[str, list[list[str]]]:
    """A reproduction's Markdown: each `## ` section's table rows as cells (the rule left out)."""
    tables: dict[str, list[list[str]]] = {}
    section = ""
    for line in board.splitlines():
        if line.startswith("## "):
            section = line[3:]
        elif line.startswith("|") and not line.startswith("|---"):
            tables.setdefault(section, []).append([c.strip() for c in line.strip("|").split("|")])
    return tables


def markers(output: Path) -> dict[str, tuple[bytes, int, int]]:
    """Each finished run's folder: (its done.json, that file's and its manifest's mtimes)."""
    found = {}
    for done in output.glob(f"runs/*/*/*/{DONE}"):
        manifest = done.with_name(MANIFEST)
        found[str(done.parent.relative_to(output))] = (
            done.read_bytes(),
            done.stat().st_mtime_ns,
            manifest.stat().st_mtime_ns,
        )
    return found


def episodes(folder: Path) -> list[dict]:
    """A run's bench episodes without their wall-clock times (equal across processes)."""
    done = json.loads((folder / DONE).read_text())
    document = json.loads((folder / done["results"]).read_text())
    return [{k: v for k, v in e.items() if k != "time_s"} for e in document["episodes"]]


def training(folder: Path) -> list[dict]:
    """A trained run's metrics.jsonl without its timings."""
    timed = ("update_seconds", "joint_samples_per_s", "time", "seconds")
    lines = (folder / "train" / "metrics.jsonl").read_text().splitlines()
    return [
        {k: v for k, v in json.loads(line).items() if not any(t in k for t in timed)}
        for line in lines
    ]


@pytest.fixture(scope="module")
def cut_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """`reproduce --quick` killed (SIGKILL) once three runs are finished, then the same command
    again to the end: the folder, and the finished runs' markers before and after."""
    output = tmp_path_factory.mktemp("reproduce") / "quick"
    env = {**os.environ, "PYTHONPATH": PYTHONPATH, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        command(output), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 240
    while len(markers(output)) < 3 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    _, stderr = process.communicate()
    assert process.returncode == -signal.SIGKILL, (
        f"finished before the cut: {stderr.decode()[-2000:]}"
    )
    before = markers(output)
    started = {str(p.parent.relative_to(output)) for p in output.glob(f"runs/*/*/*/{MANIFEST}")}
    resumed = subprocess.run(command(output), env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    return {
        "output": output,
        "before": before,
        "cut_short": started - set(before),
        "after": markers(output),
        "log": resumed.stdout,
    }


@pytest.mark.slow(seconds=80)
def test_quick_runs_end_to_end_and_a_cut_run_resumes_without_redoing_finished_runs(
    cut_run: dict,
) -> None:
    output, before, after = cut_run["output"], cut_run["before"], cut_run["after"]
    rows = len(POSTER_ROWS)
    assert 3 <= len(before) < rows
    assert (
        f"{rows} runs planned, {len(before)} finished already, {rows - len(before)} to run"
        in (cut_run["log"])
    )
    assert len(after) == rows
    for folder, marker in before.items():  # not one byte nor mtime of a finished run moved
        assert after[folder] == marker, f"{folder} was redone"
    for folder in cut_run["cut_short"]:  # a run killed mid-way started again, and finished
        assert after[folder][2] > max(m[1] for m in before.values())
    # Every row benched its episodes; the trained ones within their budget of env steps.
    for folder in after:
        done = json.loads(after[folder][0])
        spec = done["run"]
        assert len(episodes(output / folder)) == QUICK_EPISODES
        tokens = [
            g["tokens"]
            for e in episodes(output / folder)
            for t in e["turns"]
            for g in t["generations"]
        ]
        assert tokens and max(tokens) <= QUICK_TOKENS
        if spec["row"]["learner"] is None:
            assert done["train"] == {}
            continue
        config = LEARNERS[spec["row"]["learner"]][0]()
        per_update = config.rollout_buffer_size * config.num_generations  # H = 1 on TLDR
        assert done["train"]["env_steps"] == per_update * -(-QUICK_STEPS // per_update)
        assert training(output / folder)[-1]["env_steps"] == done["train"]["env_steps"]
        saved = {p.name for p in (output / folder / "train" / "final").iterdir()}
        assert ({"writer"} if spec["row"]["one_agent"] else {"concise", "detailed"}) <= saved
    # The table: every row by its name in the poster's order, then the published rows.
    board = (output / "leaderboard.md").read_text()
    tables = section_tables(board)
    lines = [cells[0] for cells in tables["TLDR"]]
    assert lines[1:] == [*POSTER_METHODS, *(f"{m} (published)" for m in POSTER_METHODS)]
    # Each trained row against the untrained row of its protocol; one seed: no call is made.
    moved = tables["Which trained rows moved the metric"][1:]
    trained = [n for n, r in POSTER_ROWS.items() if r.trained]
    assert [(c[0], c[1], c[2]) for c in moved] == [("tldr", "Score", n) for n in trained]
    against = {n: "Raw model" if POSTER_ROWS[n].one_agent else "Parallel" for n in trained}
    assert {c[2]: c[3] for c in moved} == against
    assert {c[7] for c in moved} == {"one seed: no spread"}
    raw = read_results(next(output.glob("runs/tldr/Raw-model/seed-0/bench/*.json")))
    assert moved[0][4] == f"{summarize(raw)['Score']['mean']:.1f} (n=1)"
    # Every row's wall time, from its completion marker; nothing is left unfinished.
    walls = tables["Wall time"][1:]
    assert [c[1] for c in walls] == list(POSTER_ROWS)
    for cells in walls:
        folder = output / "runs" / "tldr" / slug(cells[1]) / "seed-0"
        assert cells[4] == f"{json.loads((folder / DONE).read_text())['seconds']:.0f}"
    assert "## Runs not finished" not in board


def test_a_finished_run_is_read_back_and_a_changed_plan_is_refused_but_not_a_memory_bound(
    cut_run: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    output = cut_run["output"]
    assert main(["reproduce", "--quick", "--output", str(output), "--dry-run"]) == 0
    listed = capsys.readouterr().out
    assert listed.count("| done |") == len(POSTER_ROWS) and "0 to run" in listed
    # Over several seeds a row pools its seeds' episodes: here two rows' (Cost 4 and 8).
    raw, parallel = (
        read_results(next(output.glob(f"runs/tldr/{row}/seed-0/bench/*.json")))
        for row in ("Raw-model", "Parallel")
    )
    for document, path in ((raw, "a"), (parallel, "b")):
        document["_path"] = path
    both = pooled([raw, parallel])
    assert len(both["episodes"]) == both["summary"]["episodes"] == 2 * QUICK_EPISODES
    # Over seeds a metric is each seed's own mean (here the two rows stand in for two seeds).
    spread = seed_values({1: parallel, 0: raw}, "Cost")
    assert spread.values == (QUICK_TOKENS, 2 * QUICK_TOKENS) and spread.sd == pytest.approx(
        2.8284271
    )
    assert both["summary"]["Cost"]["mean"] == (QUICK_TOKENS + 2 * QUICK_TOKENS) / 2
    code = main(["reproduce", "--quick", "--output", str(output), "--dry-run", "--env-steps", "9"])
    assert code == 2
    assert "finished with other settings" in capsys.readouterr().err
    # Smaller scoring passes bound memory and keep the loss: the finished runs are the same runs.
    memory = ["--set", "logprob_batch_size=2", "--set", "gradient_checkpointing=true"]
    assert main(["reproduce", "--quick", "--output", str(output), "--dry-run", *memory]) == 0
    assert capsys.readouterr().out.count("| done |") == len(POSTER_ROWS)


@pytest.mark.slow(seconds=70)
def test_ray_runs_each_run_as_a_task_and_equals_the_local_run(
    cut_run: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ray = require_module("ray", "distributed")
    ray.init(
        address="local",
        num_cpus=2,  # two worker processes, one run each at a time
        include_dashboard=False,
        log_to_driver=False,
        _node_ip_address="127.0.0.1",
        runtime_env={"env_vars": {"PYTHONPATH": PYTHONPATH, "OMP_NUM_THREADS": "1"}},
    )
    try:
        code = main(
            [
                "reproduce",
                "--quick",
                "--ray",
                "--rows",
                ",".join(RAY_ROWS),
                "--output",
                str(tmp_path),
            ]
        )
    finally:
        ray.shutdown()
    log = capsys.readouterr()
    assert code == 0, log.err
    assert (
        f"{len(RAY_ROWS)} runs planned, 0 finished already, {len(RAY_ROWS)} to run on Ray"
        in log.out
    )
    gathered = markers(tmp_path)
    assert len(gathered) == len(RAY_ROWS)
    for folder in gathered:
        done = json.loads(gathered[folder][0])
        local = json.loads(cut_run["after"][folder][0])
        assert done["run"] == local["run"]  # the same plan entry, run elsewhere
        results = tmp_path / folder / done["results"]
        team = json.loads(results.read_text())["team"]["spec"]
        assert done["run"]["row"]["learner"] is None or "collabzoo-run-" in team  # a worker's
        assert episodes(tmp_path / folder) == episodes(cut_run["output"] / folder)
        if done["train"]:
            assert training(tmp_path / folder) == training(cut_run["output"] / folder)
            assert done["train"]["env_steps"] == local["train"]["env_steps"]
    assert "| CoLLM-CC |" in (tmp_path / "leaderboard.md").read_text()


def test_dry_run_lists_every_run_with_its_estimate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A learner registered after the poster's: a row by its name, with no change to reproduce.
    monkeypatch.setitem(LEARNERS, "newlearner", (MAGRPOConfig, MAGRPOTrainer))
    argv = ["reproduce", "--quick", "--dry-run", "--seeds", "0,3", "--output", str(tmp_path)]
    assert main([*argv, "--rows", "default,newlearner", "--tokens-per-second", "2"]) == 0
    out = capsys.readouterr().out
    table = [line.split(" | ") for line in out.splitlines() if line.startswith("| tldr")]
    names = [*POSTER_METHODS, "NEWLEARNER"]
    assert [(cells[1], cells[2]) for cells in table] == [(n, s) for n in names for s in ("0", "3")]
    assert not any(tmp_path.iterdir()), "a dry run writes nothing"
    total = 0.0
    for cells in table:
        row = cells[1]
        learner = {r.name: r for r in POSTER_ROWS.values()}.get(row)
        agents = 1 if learner is not None and learner.one_agent else 2
        protocol = cells[3]
        bench = QUICK_EPISODES * {"single": 1, "discussion": 2 * 2}.get(protocol, 2)
        assert cells[8] == str(bench)
        trained = 0
        if learner is None or learner.trained:
            name = "magrpo" if learner is None else learner.learner
            config = LEARNERS[name][0]()
            per_update = config.rollout_buffer_size * config.num_generations
            updates = -(-QUICK_STEPS // per_update)
            assert cells[4] == f"{name if learner else 'newlearner'} × {updates} updates"
            assert cells[5] == str(updates * per_update)
            trained = updates * per_update * agents
            assert cells[6] == str(trained)
            assert isinstance(config, ActorCriticConfig) == (name in ("iac", "cc"))
        seconds = (bench + 3 * trained) * QUICK_TOKENS / 2
        assert cells[9] == f"{seconds:.0f} s", cells
        total += seconds
    assert f"{len(table)} runs, {len(table)} to run; estimated {total / 60:.0f} min" in out


def test_rows_resolve_at_run_time_and_bad_names_are_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    learners = {"magrpo": None, "iac": None, "cc": None, "madpo": None, "joint": None}
    rows = resolve_rows(["raw", "MAGRPO", "madpo", "magrpo", "joint"], learners)
    assert [(r.name, r.protocol, r.learner) for r in rows] == [
        ("Raw model", "single", None),
        ("MAGRPO", "parallel", "magrpo"),
        ("MADPO", "parallel", "madpo"),
        ("JOINT", "joint", "joint"),  # one model writes every role
    ]
    with pytest.raises(ReproduceError, match="unknown row 'madpo'"):
        resolve_rows(["madpo"], {"magrpo": None})
    assert main(["reproduce", "--quick", "--dry-run", "--rows", "nosuch"]) == 2
    assert "unknown row 'nosuch'" in capsys.readouterr().err


def test_one_agent_rows_keep_the_envs_own_mode_and_else_plan_the_joint_learners(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from collabzoo.bench.reproduce import Settings, plan, steps_per_update

    rows = resolve_rows(["grpo", "ac", "magrpo"])
    settings = Settings(
        models=["tiny"],
        tasks=["tldr", "strbuild"],
        rows=rows,
        env_steps=100,
        env_kwargs={"tldr": {"data": "sample"}},
    )
    runs = {(r.task, r.row.name): r for r in plan(settings)}
    played = {key: (r.row.protocol, r.row.learner) for key, r in runs.items()}
    assert played == {
        # TLDR has a one-model mode of its own (the reference's baseline): the env's one agent.
        ("tldr", "GRPO (1 agent)"): ("single", "magrpo"),
        ("tldr", "AC (1 agent)"): ("single", "iac"),
        ("tldr", "MAGRPO"): ("parallel", "magrpo"),
        # StrBuild has none: one joint policy for both builders, benched as it was trained.
        ("strbuild", "GRPO (1 agent)"): ("joint", "joint"),
        ("strbuild", "AC (1 agent)"): ("joint", "joint-ac"),
        ("strbuild", "MAGRPO"): ("parallel", "magrpo"),
    }
    # The same budget rule: the joint learners' own K, episodes and branching over StrBuild's
    # 4 turns (the joint actor branches at every turn, as MAGRPO; joint-ac at the first only).
    for name, learner in (("GRPO (1 agent)", "joint"), ("AC (1 agent)", "joint-ac")):
        train = runs[("strbuild", name)].spec["train"]
        config = LEARNERS[learner][0]()
        k, episodes = config.num_generations, config.rollout_buffer_size
        expected = episodes * (k + k**2 + k**3 + k**4) if learner == "joint" else episodes * k * 4
        assert train["steps_per_update"] == steps_per_update(config, 4) == expected
        assert train["updates"] == -(-100 // expected)
    # The dry run: one joint generation per training step and per bench turn.
    argv = ["reproduce", "--quick", "--dry-run", "--tasks", "tinycoop", "--rows", "grpo,ac"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "tinycoop: no one-model mode of its own, so GRPO (1 agent) and AC (1 agent)" in out
    table = [line.split(" | ") for line in out.splitlines()]
    table = [cells for cells in table if cells[0] == "| tinycoop"]
    assert [cells[1:5] for cells in table] == [
        ["GRPO (1 agent)", "0", "joint", "joint × 1 updates"],
        ["AC (1 agent)", "0", "joint", "joint-ac × 1 updates"],
    ]
    for cells in table:
        assert cells[5] == cells[6] == "8"  # env steps = train generations: one agent
        assert cells[7:9] == [str(QUICK_EPISODES), str(QUICK_EPISODES)]  # H = 1, one generation


@pytest.mark.slow(seconds=40)
def test_a_task_without_a_one_model_mode_trains_and_benches_the_joint_learners(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["reproduce", "--quick", "--tasks", "tinycoop", "--rows", "grpo,ac"]
    assert main([*argv, "--output", str(tmp_path)]) == 0, capsys.readouterr().err
    for row, learner in (("GRPO-1-agent", "joint"), ("AC-1-agent", "joint-ac")):
        folder = tmp_path / "runs" / "tinycoop" / row / "seed-0"
        done = json.loads((folder / DONE).read_text())
        assert done["run"]["row"]["learner"] == learner
        config = LEARNERS[learner][0]()
        per_update = config.rollout_buffer_size * config.num_generations  # H = 1 on TinyCoop
        assert done["train"]["env_steps"] == per_update * -(-QUICK_STEPS // per_update)
        assert training(folder)[-1]["env_steps"] == done["train"]["env_steps"]
        saved = {p.name for p in (folder / "train" / "final").iterdir()}
        assert saved == (
            {"alpha+beta"} if learner == "joint" else {"alpha+beta", "critic-alpha+beta"}
        )
        # Benched under `joint`: the saved joint actor, one tagged generation per turn.
        document = json.loads((folder / done["results"]).read_text())
        assert document["protocol"]["name"] == "joint"
        members = document["team"]["members"]
        assert {m["name"] for m in members.values()} == {str(folder / "train/final/alpha+beta")}
        assert len(document["episodes"]) == QUICK_EPISODES
        for episode in document["episodes"]:
            (turn,) = episode["turns"]
            (generation,) = turn["generations"]
            assert (generation["agent"], generation["stage"]) == ("alpha+beta", "joint")
            assert set(turn["actions"]) == {"alpha", "beta"}
            assert generation["tokens"] <= QUICK_TOKENS
    board = (tmp_path / "leaderboard.md").read_text()
    assert "| GRPO (1 agent) | joint |" in board and "| AC (1 agent) | joint |" in board


def test_one_model_per_agent_needs_a_solo_model_for_the_one_model_rows(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from collabzoo.bench.reproduce import Settings, plan

    pair = "smollm2-135m-instruct,tiny"
    assert main(["reproduce", "--quick", "--dry-run", "--model", pair]) == 2
    assert "--solo-model" in capsys.readouterr().err
    rows = resolve_rows(["raw", "grpo", "parallel", "magrpo"])
    settings = Settings(
        models=pair.split(","),
        tasks=["tldr"],
        rows=rows,
        solo_model="tiny",
        env_kwargs={"tldr": {"data": "sample"}},
    )
    models = {run.row.name: run.spec["models"] for run in plan(settings)}
    assert models == {
        "Raw model": ["tiny"],
        "GRPO (1 agent)": ["tiny"],
        "Parallel": pair.split(","),
        "MAGRPO": pair.split(","),
    }


@pytest.mark.parametrize(
    ("trained", "untrained", "higher_is_better", "verdict"),
    [
        ((50.0, 52.0, 54.0), (40.0, 41.0, 42.0), True, "moved: better"),  # +12 > 2 + 1
        ((50.0, 52.0, 54.0), (40.0, 41.0, 42.0), False, "moved: worse"),  # lower is better
        ((40.0, 44.0, 48.0), (40.0, 41.0, 42.0), True, "within the seeds' spread"),  # 3 <= 4 + 1
        ((50.0,), (40.0, 41.0, 42.0), True, "one seed: no spread"),
        ((), (40.0, 41.0), True, "not run"),
    ],
)
def test_a_trained_row_moved_the_metric_only_beyond_both_rows_seed_spreads(
    trained: tuple[float, ...], untrained: tuple[float, ...], higher_is_better: bool, verdict: str
) -> None:
    effect = Effect(
        "tldr",
        "Score",
        higher_is_better,
        "MAGRPO",
        "Parallel",
        SeedSpread(trained),
        SeedSpread(untrained),
    )
    assert effect.verdict == verdict
    if len(trained) == 3:
        assert effect.difference == pytest.approx(sum(trained) / 3 - 41.0)
        assert (
            SeedSpread(trained).cell()
            == f"{sum(trained) / 3:.1f} ± {SeedSpread(trained).sd:.1f} (n=3)"
        )


def test_the_table_lists_unfinished_runs_with_the_error_of_those_that_failed(
    tmp_path: Path,
) -> None:
    settings = Settings(
        models=["tiny"],
        tasks=["tldr"],
        rows=resolve_rows(["raw", "parallel", "magrpo"]),
        seeds=[0, 1],
        env_kwargs={"tldr": {"data": "sample"}},
    )
    runs = plan(settings)
    record_failure(tmp_path / runs[1].folder, "RuntimeError: out of memory")
    board = render(runs, tmp_path, settings)
    listed = board.split("## Runs not finished")[1].strip().splitlines()
    assert listed == [
        f"- tldr | {r.row.name} | seed {r.seed}: "
        + (
            "failed: RuntimeError: out of memory"
            if k == 1
            else "not run yet (the same command runs it)"
        )
        for k, r in enumerate(runs)
    ]
    assert "## Which trained rows moved the metric" in board  # planned, with nothing run yet
    assert board.count("| not run |") == 1


def test_a_run_finished_by_another_process_meanwhile_is_skipped(tmp_path: Path) -> None:
    """Two local processes on one folder: a run the other finished after this one planned is
    not run again (its marker is not touched)."""
    settings = Settings(
        models=["tiny"], tasks=["tldr"], rows=resolve_rows(["raw"]), env_kwargs={"tldr": {}}
    )
    (run,) = plan(settings)
    folder = tmp_path / run.folder
    folder.mkdir(parents=True)
    marker = json.dumps({"run": run.spec, "results": "bench/none.json"}, default=str)
    (folder / DONE).write_text(marker)
    said: list[str] = []
    assert run_local([run], tmp_path, said.append) == []
    assert said == ["[1/1] tldr | Raw model | seed 0: finished already"]
    assert (folder / DONE).read_text() == marker and not (folder / MANIFEST).exists()


HOLD_CLAIM = """
import sys, time
from pathlib import Path
from collabzoo.bench.reproduce import claimed
with claimed(Path(sys.argv[1])) as holder:
    print("held" if holder is None else "refused", flush=True)
    if holder is None:
        time.sleep(float(sys.argv[2]))
"""


def test_a_run_another_live_process_is_running_is_skipped_and_a_dead_ones_claim_taken_over(
    tmp_path: Path,
) -> None:
    """Two processes with overlapping --seeds: the second skips the run the first holds (it
    once trained the same run twice into one folder); a killed process's claim lapses, so the
    run resumes; a claim file no process holds (left by an older version) is no claim."""
    settings = Settings(
        models=["tiny"], tasks=["tldr"], rows=resolve_rows(["raw"]), env_kwargs={"tldr": {}}
    )
    (run,) = plan(settings)
    folder = tmp_path / run.folder
    other = subprocess.Popen(
        [sys.executable, "-c", HOLD_CLAIM, str(folder), "60"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert other.stdout is not None and other.stdout.readline().strip() == "held"
        said: list[str] = []
        assert run_local([run], tmp_path, said.append) == []
        assert said == [
            f"[1/1] tldr | Raw model | seed 0: running in another process (pid {other.pid} "
            f"on {os.uname().nodename}); skipped"
        ]
        assert not (folder / MANIFEST).exists() and not (folder / DONE).exists()
        with claimed(folder) as holder:
            assert holder == f"pid {other.pid} on {os.uname().nodename}"
    finally:
        other.kill()
        other.wait()
    assert (folder / CLAIM).exists(), "a killed process leaves its file behind"
    with claimed(folder) as holder:
        assert holder is None, "a killed process's claim lapses with it"
        assert json.loads((folder / CLAIM).read_text())["pid"] == os.getpid()
        with claimed(folder) as again:
            assert again == f"pid {os.getpid()} on {os.uname().nodename}", "held once only"
    assert not (folder / CLAIM).exists(), "the claim goes when its run ends"
    (folder / CLAIM).write_text(json.dumps({"pid": other.pid, "host": os.uname().nodename}))
    with claimed(folder) as holder:
        assert holder is None, "an unlocked claim file is no claim"


def test_processes_racing_for_a_dead_process_s_claim_let_one_win(tmp_path: Path) -> None:
    """Four processes at once on a run whose claim file a killed process left: one holds it,
    the others are refused (taking over by removing the dead pid's file let two win)."""
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / CLAIM).write_text(json.dumps({"pid": 2**22 + 7, "host": os.uname().nodename}))
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", HOLD_CLAIM, str(folder), "20"], stdout=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    try:
        said = sorted(r.stdout.readline().strip() for r in racers if r.stdout is not None)
    finally:
        for racer in racers:
            racer.kill()
            racer.wait()
    assert said == ["held", "refused", "refused", "refused"]


def test_the_report_reads_a_reproduction_folder_back(cut_run: dict) -> None:
    """benchmarks/reproduce_report.py: every planned row with its seed's scores, wall time and
    training curve, read from the folder the quick run left."""
    from tests.conftest import benchmark_module

    report = benchmark_module("reproduce_report")
    output = cut_run["output"]
    results = report.read_folder(output)
    assert [r["row"] for r in results["rows"]] == list(POSTER_ROWS)
    assert results["unfinished"] == []
    for row in results["rows"]:
        folder = output / "runs" / "tldr" / slug(row["row"]) / "seed-0"
        done = json.loads((folder / DONE).read_text())
        (seed,) = row["seeds"].values()
        assert seed["seconds"] == done["seconds"]
        document = read_results(folder / done["results"])
        assert seed["means"]["Score"] == summarize(document)["Score"]["mean"]
        # a run the cut caught in training redid the updates past its checkpoint: one history
        kept = read_metrics(folder / "train", drop_rewound=True) if row["learner"] else []
        points = [[r.get("env_steps"), r.get("mean_return")] for r in kept]
        assert seed["curve"] == [point for point in points if None not in point]
    assert {e["verdict"] for e in results["effects"]} == {"one seed: no spread"}
    # One seed has no spread, but its episodes are there for the permutation test.
    by_row = {r["row"]: r for r in results["rows"]}
    for effect in results["effects"]:
        for side, row in (("trained", effect["row"]), ("untrained", effect["baseline"])):
            folder = output / "runs" / "tldr" / slug(row) / "seed-0"
            document = read_results(folder / json.loads((folder / DONE).read_text())["results"])
            episodes = [episode_scores(document, e)["Score"] for e in document["episodes"]]
            assert effect["episodes"][side] == episodes
            assert len(episodes) == by_row[row]["seeds"]["0"]["episodes"]
        expected = permutation_p(effect["episodes"]["trained"], effect["episodes"]["untrained"])
        assert effect["p_episodes"] == expected
    assert report.headline(results)["section"] == report.SECTION
    # An episode reading beside the columns (the env's reward): the same pairs, its own values.
    read = report.read_folder(output, ("final_reward",))["readings"]
    assert [(e["row"], e["baseline"]) for e in read] == [
        (e["row"], e["baseline"]) for e in results["effects"]
    ]
    for effect in read:
        for side, row in (("trained", effect["row"]), ("untrained", effect["baseline"])):
            folder = output / "runs" / "tldr" / slug(row) / "seed-0"
            document = read_results(folder / json.loads((folder / DONE).read_text())["results"])
            rewards = [float(e["final_reward"]) for e in document["episodes"]]
            assert effect["episodes"][side] == rewards
            assert effect[side] == [statistics.fmean(rewards)]
        assert effect["metric"] == "final_reward" and effect["verdict"] == "one seed: no spread"
    assert "| tldr | final_reward | MAGRPO | Parallel |" in report.readings_table(
        {"readings": read}
    )


def test_report_writes_the_table_of_what_finished_and_runs_nothing(
    cut_run: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A budget that ends before the plan: `--report` plans one more row, runs nothing, and
    the table holds the finished rows and lists the new row's run as not run."""
    import shutil

    output = tmp_path / "copy"
    shutil.copytree(cut_run["output"], output)
    code = main(
        ["reproduce", "--quick", "--output", str(output), "--rows", "default,atgrpo", "--report"]
    )
    assert code == 0
    said = capsys.readouterr().out
    assert f"{len(POSTER_ROWS) + 1} runs planned, {len(POSTER_ROWS)} finished already" in said
    assert "1 not run (--report runs none)" in said
    assert not (output / "runs/tldr/ATGRPO").exists()  # not even started
    plan = json.loads((output / "plan.json").read_text(encoding="utf-8"))
    assert [e["run"]["row"]["name"] for e in plan][-1] == "ATGRPO"
    board = (output / "leaderboard.md").read_text(encoding="utf-8")
    assert "- tldr | ATGRPO | seed 0: not run yet" in board
    assert all(f"| {name} |" in board for name in POSTER_ROWS)


def test_a_learner_scoped_setting_reaches_that_learners_rows_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--set LEARNER:FIELD=VALUE`: one learner's rows get it (read by its own config), the
    others stay as they were; an unknown learner or field is refused in one line."""
    output = tmp_path / "scoped"
    shared = ["reproduce", "--quick", "--output", str(output), "--rows", "magrpo,madpo-iter"]
    assert main([*shared, "--set", "madpo-iter:generation_batch_size=3", "--report"]) == 0
    plan = json.loads((output / "plan.json").read_text(encoding="utf-8"))
    configs = {e["run"]["row"]["name"]: e["run"]["train"]["config"] for e in plan}
    assert configs["MADPO-ITER"]["generation_batch_size"] == 3
    assert "generation_batch_size" not in configs["MAGRPO"]
    capsys.readouterr()
    assert main([*shared, "--dry-run", "--set", "nosuch:seed=1"]) == 2
    assert "no learner 'nosuch'" in capsys.readouterr().err
    assert main([*shared, "--dry-run", "--set", "madpo-iter:generation_batch=1"]) == 2
    assert "did you mean generation_batch_size" in capsys.readouterr().err


def test_an_online_preference_update_counts_every_candidate_it_samples() -> None:
    """An online preference iteration steps the env once per candidate and comparator
    candidate on each of its episodes (MARLHFIter then adds its tree updates); an offline
    learner samples its whole set first, so a budget per update is refused, naming why."""
    from collabzoo.algos.learners.madpo import MADPOConfig, MADPOIterConfig
    from collabzoo.algos.learners.marlhf import MARLHFIterConfig
    from collabzoo.bench.reproduce import steps_per_update

    online = MADPOIterConfig(preference_num_items=2, preference_num_candidates=4)
    assert steps_per_update(online, horizon=1) == 2 * (4 + 4)
    fewer = MADPOIterConfig(
        preference_num_items=2, preference_num_candidates=4, comparator_num_candidates=1
    )
    assert steps_per_update(fewer, horizon=1) == 2 * (4 + 1)
    rlhf = MARLHFIterConfig(preference_num_items=1, preference_num_candidates=4)
    tree = rlhf.num_train_epochs * rlhf.rollout_buffer_size * rlhf.num_generations
    assert tree > 0 and steps_per_update(rlhf, horizon=1) == 8 + tree
    with pytest.raises(ReproduceError, match="whole pair set before its first update"):
        steps_per_update(MADPOConfig(), horizon=1)


def test_a_preference_row_trains_on_its_budget_and_records_its_env_steps(tmp_path: Path) -> None:
    """MADPOIter at the quick budget (one episode, 2 candidates and 2 comparator candidates:
    4 env steps an update): the run's marker records the env steps its candidates took."""
    output = tmp_path / "pref"
    rows = ["--rows", "madpo-iter", "--env-steps", "4"]
    scoped = ["--set", "madpo-iter:preference_num_items=1"]
    scoped += ["--set", "madpo-iter:preference_num_candidates=2"]
    assert main(["reproduce", "--quick", "--output", str(output), *rows, *scoped]) == 0
    done = json.loads(next(output.glob(f"runs/tldr/MADPO-ITER/seed-0/{DONE}")).read_text())
    assert done["train"]["updates"] == 1 and done["train"]["env_steps"] == 4


def test_an_offline_preference_learner_spends_the_budget_on_its_pair_set() -> None:
    """MADPO's budget buys its pair set (budget // C episodes) and its updates are one pass over
    the most pairs they can give; MARLHF keeps its pair set and puts the rest of the budget in
    RL updates; what cannot fit is refused, saying what to change."""
    from collabzoo.algos.learners.madpo import MADPOConfig
    from collabzoo.algos.learners.marlhf import MARLHFConfig
    from collabzoo.bench.reproduce import offline_preference_plan, steps_per_update

    madpo = MADPOConfig(preference_num_candidates=4, train_batch_size=2)
    plan_ = offline_preference_plan(madpo, horizon=1, budget=32)
    # 8 episodes x 4 candidates; at most min(16, C(4, 2) = 6) pairs an episode, 2 a step.
    assert plan_ == {
        "steps_per_update": 0,
        "updates": 24,
        "pair_set_env_steps": 32,
        "config": {"preference_num_items": 8},
    }
    marlhf = MARLHFConfig(preference_num_items=2, preference_num_candidates=4)
    rl = steps_per_update(marlhf, 1, rl_only=True)
    plan_ = offline_preference_plan(marlhf, horizon=1, budget=24 + 3 * rl)
    assert plan_ is not None and plan_["pair_set_env_steps"] == (2 + 4) * 4  # 4 held out
    assert plan_["updates"] == 3 and plan_["steps_per_update"] == rl
    with pytest.raises(ReproduceError, match="preference_num_items"):
        offline_preference_plan(marlhf, horizon=1, budget=24)  # no room for one RL update
    with pytest.raises(ReproduceError, match="more than the budget"):
        offline_preference_plan(madpo, horizon=1, budget=3)
    assert offline_preference_plan(MAGRPOConfig(), horizon=1, budget=32) is None


def test_offline_preference_rows_run_on_the_budget(tmp_path: Path) -> None:
    """`--rows madpo,marlhf` at a small budget on TinyCoop (a task whose candidates differ, so
    pairs exist): each run records the env steps its pair set and RL updates took."""
    output = tmp_path / "offline"
    argv = ["reproduce", "--quick", "--tasks", "tinycoop", "--rows", "madpo,marlhf"]
    argv += ["--env-steps", "16", "--output", str(output)]
    argv += ["--set", "madpo:preference_num_candidates=4"]
    for setting in ("preference_num_candidates=4", "preference_num_items=2"):
        argv += ["--set", f"marlhf:{setting}"]
    argv += ["--set", "marlhf:reward_heldout_items=0"]
    assert main(argv) == 0
    madpo = json.loads(next(output.glob(f"runs/tinycoop/MADPO/seed-0/{DONE}")).read_text())
    marlhf = json.loads(next(output.glob(f"runs/tinycoop/MARLHF/seed-0/{DONE}")).read_text())
    assert madpo["run"]["train"]["config"]["preference_num_items"] == 4
    assert madpo["train"]["env_steps"] == 16 and madpo["train"]["updates"] == 12
    per_update = marlhf["run"]["train"]["steps_per_update"]
    assert marlhf["train"]["env_steps"] == 2 * 4 + marlhf["train"]["updates"] * per_update
    assert marlhf["train"]["last"]["reward_model/train_pairs"] > 0
    assert main([*argv, "--set", "madpo:preference_num_items=2", "--dry-run"]) == 2
