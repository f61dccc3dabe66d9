"""`collabzoo bench` and `collabzoo leaderboard` offline: scripted teams on every env, the
results files, the leaderboard a user reads, re-scoring from a file, and bad input."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

import collabzoo
from collabzoo.bench import BenchRun, parse_team, read_results, run_bench
from collabzoo.bench.published import PUBLISHED
from collabzoo.bench.rescore import rescore
from collabzoo.bench.stats import mean_ci, permutation_p, pooled_ci, t_quantile
from collabzoo.cli import main
from collabzoo.envs.family import Column
from tests.bench_tables import mean_of, parse_tables
from tests.optional import require_module

TEAMS = ["scripted:oracle", "scripted:heuristic", "scripted:naive"]
OFFLINE = [s for s in collabzoo.envs.task_specs() if s.offline is not None]
"""The declared tasks that play offline, with the package's own tasks: `--env all` runs them."""
SEED_TITLES = ["TLDR", "arXiv", "StrBuild", "HouseBuild", "TinyCoop"]
"""The offline tasks of the seed, in the leaderboard's order (families added since follow)."""
WRITING_MAX = 2.98
"""The heuristic writers' documented score on every sample item (docs/envs/index.md)."""


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "collabzoo.cli", *args],
        text=True,
        capture_output=True,
        timeout=240,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture(scope="module")
def offline_round(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """`collabzoo bench --env all` with every scripted team, offline (the hub unreachable by
    setting, an empty cache), then `collabzoo leaderboard` on its folder."""
    out = tmp_path_factory.mktemp("bench")
    cache = tmp_path_factory.mktemp("hf-cache")
    offline = {"HF_HUB_OFFLINE": "1", "HF_HOME": str(cache), "HF_DATASETS_CACHE": str(cache)}
    teams = [arg for team in TEAMS for arg in ("--team", team)]
    bench = run_cli(
        "bench",
        "--env",
        "all",
        *teams,
        "--protocol",
        "single,parallel",
        "--episodes",
        "3",
        "--output",
        str(out),
        "--no-progress",
        env=offline,
    )
    assert bench.returncode == 0, bench.stderr[-3000:]
    board = run_cli("leaderboard", str(out))
    assert board.returncode == 0, board.stderr[-3000:]
    return out, bench.stdout + bench.stderr, board.stdout


def test_every_env_runs_or_is_skipped_with_a_reason(offline_round) -> None:
    out, log, _ = offline_round
    files = sorted(p.name for p in out.glob("*.json"))
    played = {name.split("__")[0] for name in files}
    # the envs whose tasks ship with the package all ran; the code tasks need their data
    assert played == {s.short_name for s in OFFLINE} >= {"strbuild", "housebuild", "tldr"}
    for spec in collabzoo.envs.task_specs():  # every task that needs its data says so, once
        if spec.offline is None:
            assert any(x.startswith(f"skipped {spec.short_name}") for x in log.splitlines())
    for code_env in ("coophumaneval", "humaneval", "mbpp"):  # one line each, every team alike
        (line,) = [x for x in log.splitlines() if x.startswith(f"skipped {code_env}")]
        assert line.startswith(f"skipped {code_env}: cannot load ") and "offline mode" in line
        assert f"pass --data {code_env}=PATH" in line
    assert "skipped tinycoop / scripted:heuristic: no scripted heuristic team" in log
    # each pair the package has a team for ran under both protocols
    assert "tinycoop__single__scripted-oracle__eval.json" in files
    assert "arxiv__parallel__scripted-naive__eval.json" in files
    pairs = [(s, kind) for s in OFFLINE for kind in ("oracle", "heuristic", "naive")]
    # a team built from the env (BridgeBuild's oracle) plays where the shipped data serves it
    plays = [
        kind in s.teams or (kind in s.env_teams and s.reference_solutions) for s, kind in pairs
    ]
    assert len(files) == 2 * sum(plays)
    assert len(files) >= 2 * 9  # the seed's nine pairs at least


def test_the_oracle_teams_reach_their_known_maxima(offline_round) -> None:
    _, _, board = offline_round
    tables = parse_tables(board)
    assert set(tables) == {s.columns.title for s in OFFLINE} >= set(SEED_TITLES)

    def local(title: str, team: str) -> list[dict[str, str]]:
        rows = [r for r in tables[title] if r["Method"] == team]
        assert {r["Protocol"] for r in rows} == {"single", "parallel"}, rows
        return rows

    for row in local("StrBuild", "scripted:oracle"):
        assert mean_of(row["IoU %"]) == 100.0 and mean_of(row["Adj % ↓"]) == 0.0
        assert row["Episodes"] == "3" and row["Data"] == "reference words"
    for row in local("HouseBuild", "scripted:oracle"):
        assert mean_of(row["IoU %"]) == 100.0 and mean_of(row["HP %"]) == 100.0
    for row in local("TinyCoop", "scripted:oracle"):
        assert mean_of(row["Win %"]) == 100.0
    for title in ("TLDR", "arXiv"):
        for row in local(title, "scripted:heuristic"):
            assert mean_of(row["Score %"]) == pytest.approx(100 * WRITING_MAX / 3, abs=0.05)
            assert row["Data"] == "embedded sample"
        for row in local(title, "scripted:naive"):
            assert mean_of(row["Score %"]) < 100 * WRITING_MAX / 3
    for title in ("StrBuild", "HouseBuild"):  # the naive builders ignore the rules
        naive = local(title, "scripted:naive")
        oracle = local(title, "scripted:oracle")
        assert min(mean_of(r["IoU %"]) for r in oracle) >= max(mean_of(r["IoU %"]) for r in naive)
        if title == "StrBuild":
            assert all(mean_of(r["Adj % ↓"]) > 0 for r in naive)
        else:
            assert all(mean_of(r["HP %"]) < 100 for r in naive)
    # BridgeBuild: the privileged oracle and the sound heuristic link clean, the naive team not
    for row in local("BridgeBuild", "scripted:oracle") + local("BridgeBuild", "scripted:heuristic"):
        assert mean_of(row["Connected %"]) == 100.0 and mean_of(row["Fake hits ↓"]) == 0.0
        assert mean_of(row["Probes ↓"]) > 0 and mean_of(row["Msg tokens ↓"]) > 0
    for row in local("BridgeBuild", "scripted:naive"):
        assert mean_of(row["Fake hits ↓"]) > 0


def test_the_leaderboard_shows_the_published_rows_marked_as_such(offline_round) -> None:
    _, _, board = offline_round
    tables = parse_tables(board)
    assert "TinyCoop" in tables and not [
        r for r in tables["TinyCoop"] if "published" in r["Method"]
    ]
    for title, task in (("TLDR", "tldr"), ("StrBuild", "strbuild"), ("HouseBuild", "housebuild")):
        shown = [r for r in tables[title] if r["Method"].endswith("(published)")]
        assert [r["Method"] for r in shown] == [f"{p.method} (published)" for p in PUBLISHED[task]]
        for row, published in zip(shown, PUBLISHED[task], strict=True):
            assert mean_of(row["Cost (tokens)"]) == published.cost
            assert mean_of(row["Time (s)"]) == published.time
            for column, value in published.scores.items():
                header = next(h for h in row if h.startswith(f"{column} %"))
                assert mean_of(row[header]) == value
            assert row["Data"] == "benchmark (paper)" and "±" not in "".join(row.values())
    raw = next(r for r in tables["StrBuild"] if r["Method"] == "Raw model (published)")
    assert raw["Protocol"] == "single"
    assert "Published models: Qwen3-4B-Instruct-2507 + Qwen2.5-3B-Instruct." in board


def test_a_results_file_holds_what_an_audit_needs(offline_round) -> None:
    out, _, _ = offline_round
    document = json.loads((out / "housebuild__parallel__scripted-oracle__eval.json").read_text())
    assert document["format"] == "collabzoo-bench/1" and document["status"] == "complete"
    env = document["env"]
    assert env["id"] == "collabzoo/HouseBuild-v0" and env["version"] == 0
    assert env["agents"] == ["first_builder", "second_builder"] and env["max_reward"] == 1.0
    assert document["team"]["spec"] == "scripted:oracle"
    assert document["team"]["members"]["first_builder"]["tokens"].startswith("pieces")
    assert document["protocol"] == {"name": "parallel"}
    assert document["split"] == "eval" and document["seed"] == 0
    assert document["sampling"]["max_new_tokens"] == 256 and document["sandbox"] is None
    assert document["software"]["collabzoo"] == collabzoo.__version__
    assert document["hardware"]["cpus"] == os.cpu_count()
    assert document["command"][:2] == ["collabzoo", "bench"]
    episodes = document["episodes"]
    assert [e["index"] for e in episodes] == [0, 1, 2]
    assert [e["seed"] for e in episodes] == [0, 1, 2]
    for episode in episodes:
        assert len(episode["turns"]) == env["horizon"]
        for turn in episode["turns"]:
            assert set(turn["actions"]) == set(env["agents"])
            assert [g["agent"] for g in turn["generations"]] == env["agents"]
            assert sum(turn["components"].values()) == pytest.approx(turn["reward"])
            assert {"iou", "hp"} <= set(turn["metrics"])
        assert episode["cost"] == sum(t["tokens"] for t in episode["turns"])
    summary = document["summary"]
    assert summary["episodes"] == 3 and summary["IoU"]["mean"] == 100.0


def test_every_results_file_is_rescored_from_the_file_alone(offline_round) -> None:
    """`collabzoo rescore` replays every run of the offline round (every env that runs offline,
    every scripted team, single and parallel) and finds each recorded reward again."""
    out, _, _ = offline_round
    files = sorted(out.glob("*.json"))
    assert len({f.name.split("__")[0] for f in files}) >= 5  # the embedded envs, all of them
    replayed = run_cli("rescore", *map(str, files))
    assert replayed.returncode == 0, replayed.stdout[-3000:] + replayed.stderr[-3000:]
    lines = replayed.stdout.splitlines()
    assert len(lines) == len(files)
    for path, line in zip(files, lines, strict=True):
        episodes = len(read_results(path)["episodes"])
        assert line.startswith(f"{path}: {episodes} episodes,") and "as recorded" in line


def test_rescore_finds_a_changed_reward_and_a_changed_action(tmp_path: Path) -> None:
    outcome = run_bench(
        BenchRun("strbuild", parse_team("scripted:oracle"), episodes=3, seed=7),
        tmp_path,
        progress=False,
    )
    assert rescore(outcome.path).ok
    document = json.loads(outcome.path.read_text())
    document["episodes"][1]["turns"][2]["reward"] += 0.25
    document["episodes"][2]["turns"][0]["actions"]["second_builder"] = ""
    del document["episodes"][0]["turns"][3]  # a record cut short: the episode goes on
    outcome.path.write_text(json.dumps(document))

    report = rescore(outcome.path)
    assert not report.ok and (report.episodes, report.turns) == (3, 3 * 4 - 1)
    found = {(m.episode, m.turn, m.what) for m in report.mismatches}
    # the reward alone for the first; the second builder's blocks are missing from the second
    assert found == {
        (0, 3, "turns"),
        (1, 2, "reward"),
        (2, 0, "reward"),
        (2, 0, "components"),
        (2, 0, "metrics"),
    }
    changed = next(m for m in report.mismatches if m.episode == 1)
    assert changed.replayed == pytest.approx(changed.recorded - 0.25)
    cli = run_cli("rescore", str(outcome.path))
    assert cli.returncode == 1 and "5 difference(s) in 3 episodes" in cli.stdout
    assert "episode 1, turn 2: reward recorded" in cli.stdout


def test_more_episodes_than_tasks_wrap_around_with_fresh_seeds(tmp_path: Path) -> None:
    env = collabzoo.make("strbuild")
    tasks = len(env.items("eval"))
    outcome = run_bench(
        BenchRun("strbuild", parse_team("scripted:oracle"), episodes=2 * tasks + 1, seed=100),
        tmp_path,
        progress=False,
    )
    episodes = outcome.document["episodes"]
    assert [e["task"] for e in episodes] == [k % tasks for k in range(2 * tasks + 1)]
    assert [e["seed"] for e in episodes] == list(range(100, 100 + 2 * tasks + 1))
    ids = [str(item.task_id) for item in env.items("eval")]
    assert [e["task_id"] for e in episodes[:tasks]] == ids


@pytest.mark.parametrize("game", ["strbuild", "housebuild"])
def test_split_all_plays_every_task_once_in_order(tmp_path: Path, game: str) -> None:
    env = collabzoo.make(game)
    outcome = run_bench(
        BenchRun(game, parse_team("scripted:naive"), split="all"), tmp_path, progress=False
    )
    episodes = outcome.document["episodes"]
    every = [str(env._item_id(i)) for i in env.items("all")]
    assert [e["task_id"] for e in episodes] == every and len(set(every)) == len(every)
    assert every[: len(env.items("train"))] == [str(env._item_id(i)) for i in env.items("train")]
    assert {e["split"] for e in episodes} == {"all"} and outcome.document["split"] == "all"
    assert [e["task"] for e in episodes] == list(range(len(every)))
    assert outcome.path.name == f"{game}__parallel__scripted-naive__all.json"
    assert rescore(outcome.path).ok
    tables = parse_tables(run_cli("leaderboard", str(tmp_path)).stdout)
    (row,) = [r for r in next(iter(tables.values())) if r["Method"] == "scripted:naive"]
    assert row["Episodes"] == str(len(every)) and row["Split"] == "all"


def test_the_leaderboard_renders_csv_json_and_a_plot(offline_round, tmp_path: Path) -> None:
    require_module("matplotlib", "bench")
    out, _, _ = offline_round
    plot = tmp_path / "plot.png"
    assert (
        main(
            [
                "leaderboard",
                str(out),
                "--format",
                "json",
                "--output",
                str(tmp_path / "b.json"),
                "--plot",
                str(plot),
            ]
        )
        == 0
    )
    tables = json.loads((tmp_path / "b.json").read_text())["tables"]
    titles = [t["title"] for t in tables]
    assert titles[: len(SEED_TITLES)] == SEED_TITLES
    assert set(titles) == {s.columns.title for s in OFFLINE}
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (
        main(
            [
                "leaderboard",
                str(out),
                "--format",
                "csv",
                "--no-published",
                "--output",
                str(tmp_path / "b.csv"),
            ]
        )
        == 0
    )
    lines = (tmp_path / "b.csv").read_text().splitlines()
    assert lines[0].startswith("task,method,protocol") and "published" not in "".join(lines)
    oracle_iou = [
        x for x in lines if x.startswith("strbuild,scripted:oracle,parallel") and ",IoU," in x
    ]
    assert len(oracle_iou) == 1 and oracle_iou[0].split(",")[-2] == "100"


def test_interval_math() -> None:
    # Student's t quantiles (standard tables) and an interval worked by hand
    assert t_quantile(0.975, 1) == pytest.approx(12.7062, abs=1e-4)
    assert t_quantile(0.975, 4) == pytest.approx(2.7764, abs=1e-4)
    assert t_quantile(0.975, 30) == pytest.approx(2.0423, abs=1e-4)
    estimate = mean_ci([1.0, 2.0, 3.0, 4.0, 5.0])
    half = 2.7764 * (2.5**0.5) / 5**0.5
    assert estimate.mean == 3.0 and estimate.half_width == pytest.approx(half, abs=1e-3)
    assert mean_ci([7.0]).n == 1 and mean_ci([]).n == 0


def test_permutation_test_math() -> None:
    # {0, 1} against {2, 3}: of the 6 ways to split {0, 1, 2, 3} in two, 2 are as far apart
    # (|difference| 2), so the exact two-sided p is 1/3; the seeded Monte Carlo is within 0.02.
    p = permutation_p([0.0, 1.0], [2.0, 3.0], rounds=20_000)
    assert p == pytest.approx(1 / 3, abs=0.02)
    assert p == permutation_p([0.0, 1.0], [2.0, 3.0], rounds=20_000)  # seeded: repeatable
    # Equal samples: every relabelling is as far apart as the observed 0.
    assert permutation_p([5.0] * 4, [5.0] * 4) == 1.0
    # Eight against eight, fully separated: only the 2 of C(16, 8) = 12,870 extreme splits hit.
    separated = permutation_p([1.0] * 8, [0.0] * 8, rounds=5_000)
    assert separated < 0.002
    # One untrained side whose episodes all agree still gets a test (a t-test has no variance).
    assert permutation_p([17.0, 93.0, 17.0, 17.0], [17.0] * 8) > 0.2
    assert math.isnan(permutation_p([], [1.0])) and math.isnan(permutation_p([1.0], [math.nan]))


def test_pooled_interval_math() -> None:
    """A pooled column is all passes over all checks, with the ratio estimator's interval
    (worked by hand: rates 1, 1/2, 0 over 1, 2, 4 checks pool to 2/7, residuals y - R d of
    5/7, 3/7, -8/7, SE² = 2 / (3 · 2 · (7/3)²) = 3/49); equal checks give the plain mean's
    numbers exactly, and episodes without checks or a rate are left out."""
    estimate = pooled_ci([1.0, 0.5, 0.0, math.nan, 0.3], [1.0, 2.0, 4.0, 3.0, math.nan])
    assert (estimate.mean, estimate.n) == (pytest.approx(2 / 7), 3)
    assert estimate.half_width == pytest.approx(4.302653 * 3**0.5 / 7, rel=1e-6)
    rates = [0.25, 0.5, 1.0, 0.0]
    assert pooled_ci(rates, [8.0] * 4) == mean_ci(rates)
    assert pooled_ci([0.5], [3.0]).n == 1 and pooled_ci([], []).n == 0
    column = Column("Micro", "micro", pooled_over="checks")
    assert column.value({"micro": 0.5, "checks": 2}) == 50.0 and column.weight({"checks": 2}) == 2
    assert math.isnan(column.value({"micro": 0.5, "checks": 0}))
    assert math.isnan(column.value({"micro": 0.5})), "no checks recorded: no rate to pool"
    assert Column("Micro", "micro", pooled_over=8).weight({}) == 8.0
    with pytest.raises(ValueError, match="pooled_over must be a metric's name or a positive"):
        Column("Micro", "micro", pooled_over=0)


# ----- bad input ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--env", "nope", "--team", "scripted:oracle"], "unknown environment 'nope'"),
        (["--env", "strbuild", "--team", "gpt4"], "must start with a kind: KIND:TARGET"),
        (
            ["--env", "strbuild", "--team", "sglang:x"],
            "unknown kind 'sglang'; the known kinds are scripted, hf, vllm, openai",
        ),
        (["--env", "strbuild", "--team", "scripted:genius"], "unknown scripted team 'genius'"),
        (["--env", "strbuild", "--team", "hf:"], "hf: needs a target"),
        (
            ["--env", "strbuild", "--team", "openai:http://localhost:8000/my-model"],
            "expected openai:http://HOST:PORT/v1/MODEL",
        ),
        (["--env", "strbuild", "--team", "openai:ftp://h/v1/m"], "has no http(s) base URL"),
        (["--env", "strbuild", "--team", "openai:http://h:1/v1/"], "names no model"),
        (
            ["--env", "strbuild", "--team", "scripted:oracle", "--protocol", "debate"],
            "unknown protocol 'debate'; expected one of single, parallel, pipeline, discussion",
        ),
        (
            ["--env", "housebuild", "--team", "scripted:heuristic"],
            "no scripted heuristic team for housebuild (the heuristic team plays arxiv, "
            "bridgebuild, tldr)",
        ),
        (
            [
                "--env",
                "strbuild",
                "--team",
                "scripted:oracle,scripted:naive",
                "--protocol",
                "single",
            ],
            "the single protocol plays one model, but team",
        ),
        (
            ["--env", "strbuild", "--team", "scripted:oracle,naive,naive"],
            "lists 3 models for the 2 agents of strbuild",
        ),
        (
            ["--env", "strbuild", "--team", "scripted:oracle", "--data", "tldr=sample"],
            "is for tldr, which this run does not play",
        ),
        (
            ["--env", "strbuild", "--team", "scripted:oracle", "--env-arg", "horizon"],
            "[ENV:]KEY=VALUE",
        ),
        (["--env", "strbuild", "--team", "scripted:oracle", "--episodes", "0"], "at least 1"),
        (
            ["--env", "strbuild", "--team", "scripted:oracle", "--env-arg", "colour=red"],
            "it accepts:",
        ),
    ],
)
def test_bad_input_gets_a_clear_error(
    tmp_path: Path, capsys, args: list[str], message: str
) -> None:
    assert main(["bench", *args, "--output", str(tmp_path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("collabzoo: error: ") and message in err, err
    assert not list(tmp_path.glob("*.json"))


def test_an_existing_run_is_neither_overwritten_nor_mixed_up(tmp_path: Path, capsys) -> None:
    args = [
        "bench",
        "--env",
        "tinycoop",
        "--team",
        "scripted:oracle",
        "--output",
        str(tmp_path),
        "--no-progress",
    ]
    assert main(args) == 0
    assert main(args) == 2
    assert "already holds 2 of 2 episodes (complete); pass --resume" in capsys.readouterr().err
    assert main([*args, "--resume", "--seed", "5"]) == 2
    assert "is another run; it differs in seed: 0 -> 5" in capsys.readouterr().err
    assert main([*args, "--overwrite", "--seed", "5"]) == 0
    assert read_results(next(tmp_path.glob("*.json")))["seed"] == 5


def test_leaderboard_of_a_missing_folder(capsys) -> None:
    assert main(["leaderboard", "/no/such/results/folder"]) == 2
    assert "no such results folder or file" in capsys.readouterr().err


def test_strbuild_adjacency_of_an_empty_wall_is_undefined_not_perfect(tmp_path: Path) -> None:
    """The reference scores adjacency 0 (its best) when no two blocks touch; the leaderboard
    leaves such episodes out of Adj's mean and says so, while the reward keeps the 0."""
    from collabzoo.bench.teams import PolicyTeam
    from collabzoo.envs.scripted_teams import strbuild_naive

    calls = iter(range(10_000))

    def empty_on_odd_episodes(observation: str) -> str:  # episodes run one by one, 4 turns each
        return "" if (next(calls) // 8) % 2 else strbuild_naive(observation)

    team = PolicyTeam("half-empty", empty_on_odd_episodes)
    outcome = run_bench(BenchRun("strbuild", team, episodes=4), tmp_path, progress=False)
    finals = [e["final_metrics"] for e in outcome.document["episodes"]]
    assert [m["touching_pairs"] > 0 for m in finals] == [True, False, True, False]
    assert all(m["adjacency"] == 0.0 for m in finals[1::2]), "the reference's 0 is kept"
    adj = outcome.document["summary"]["Adj"]
    assert adj["n"] == 2
    assert adj["mean"] == pytest.approx(50 * (finals[0]["adjacency"] + finals[2]["adjacency"]))
    tables = parse_tables(run_cli("leaderboard", str(tmp_path)).stdout)
    (row,) = [r for r in tables["StrBuild"] if r["Method"] == "half-empty"]
    assert row["Adj % ↓"].endswith("(2 of 4 defined)"), row
