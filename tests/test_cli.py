"""The `collabzoo` command line: list, demo, play (through a real subprocess) and user errors."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys

import pytest

import collabzoo
from collabzoo.cli import main
from collabzoo.envs import scripted_teams

FINAL_REWARD = re.compile(r"final reward (-?\d+\.\d{3})")


def run_cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "collabzoo.cli", *args],
        input=stdin,
        text=True,
        capture_output=True,
        timeout=60,
    )


def final_reward(stdout: str) -> float:
    found = FINAL_REWARD.findall(stdout)
    assert len(found) == 1, stdout[-2000:]
    return float(found[0])


# ----- list -----------------------------------------------------------------------------------
def test_list_shows_every_env_with_its_id(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    strbuild = [line for line in lines if line.startswith("strbuild ")]
    housebuild = [line for line in lines if line.startswith("housebuild ")]
    assert len(strbuild) == 1 and "collabzoo/StrBuild-v0" in strbuild[0]
    assert len(housebuild) == 1 and "collabzoo/HouseBuild-v0" in housebuild[0]
    # aligned: the ids start in the same column
    assert strbuild[0].index("collabzoo/") == housebuild[0].index("collabzoo/")


def test_list_json(capsys):
    assert main(["list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    by_name = {row["name"]: row for row in listed}
    assert by_name["strbuild"]["id"] == "collabzoo/StrBuild-v0"
    assert by_name["housebuild"]["id"] == "collabzoo/HouseBuild-v0"
    assert all(row["description"] for row in listed)
    assert {row["id"] for row in listed} == set(collabzoo.names())


# ----- demo -----------------------------------------------------------------------------------
def test_demo_scores_the_scripted_teams(tmp_path, capsys):
    path = tmp_path / "demo.json"
    assert main(["demo", "--json", str(path)]) == 0
    captured = capsys.readouterr()
    assert "strbuild" in captured.out and "housebuild" in captured.out
    assert "strbuild oracle: 10 episodes" in captured.err

    results = json.loads(path.read_text())
    rows = results["rows"]

    def mean(env: str, team: str) -> float:
        picked = [r for r in rows if r["env"] == env and r["team"] == team]
        assert {r["split"] for r in picked} == {"train", "eval"}
        total = sum(r["episodes"] for r in picked)
        return sum(r["mean_reward"] * r["episodes"] for r in picked) / total

    assert mean("strbuild", "oracle") == pytest.approx(2.0)
    assert mean("housebuild", "oracle") == pytest.approx(1.0)
    assert mean("strbuild", "naive") < 2.0 - 1e-6
    assert mean("housebuild", "naive") < 1.0 - 1e-6
    assert mean("tldr", "heuristic") >= 2.7 > mean("tldr", "naive")
    assert mean("arxiv", "heuristic") >= 2.7 > mean("arxiv", "naive")
    for row in rows:
        wanted = set(collabzoo.envs.task_spec(row["env"]).demo_metrics)  # what its table shows
        assert wanted and wanted <= set(row["metrics"])
        assert row["episodes"] >= 1
    # one episode per task of both splits, seeded by the task index
    strbuild_oracle = [
        e for e in results["episodes"] if e["env"] == "strbuild" and e["team"] == "oracle"
    ]
    assert len(strbuild_oracle) == sum(
        len(collabzoo.make("strbuild").items(s)) for s in ("train", "eval")
    )
    assert all(e["reward"] == pytest.approx(2.0) for e in strbuild_oracle)
    assert {"iou", "adjacency", "coverage"} <= set(strbuild_oracle[0]["metrics"])


def test_demo_episodes_per_task_and_env_filter(tmp_path, capsys):
    path = tmp_path / "demo.json"
    argv = ["demo", "--envs", "strbuild", "--episodes-per-task", "2", "--json", str(path)]
    assert main(argv) == 0
    results = json.loads(path.read_text())
    assert {r["env"] for r in results["rows"]} == {"strbuild"}
    train = [r for r in results["rows"] if r["team"] == "oracle" and r["split"] == "train"]
    assert train[0]["episodes"] == 2 * len(collabzoo.make("strbuild").items("train"))
    assert "housebuild" not in capsys.readouterr().out


# ----- play -----------------------------------------------------------------------------------
def oracle_answers(horizon_turns: int = 1) -> str:
    env = collabzoo.make("strbuild")
    observations, _ = env.reset(seed=0, options={"task": "I"})
    answers = {a: scripted_teams.strbuild_oracle(observations[a]) for a in env.possible_agents}
    one_turn = "".join(answers[a] + "\n\n" for a in env.possible_agents)
    return one_turn * horizon_turns


def test_play_by_hand_with_the_oracle_answers_scores_the_maximum():
    result = run_cli(
        "play",
        "strbuild",
        *("--seed", "0", "--task", "I", "--env-arg", "horizon=1"),
        stdin=oracle_answers(),
    )
    assert result.returncode == 0, result.stderr
    assert final_reward(result.stdout) == pytest.approx(2.0)
    assert "reward 2.000" in result.stdout
    assert "first_builder" in result.stdout and "second_builder" in result.stdout
    assert "Traceback" not in result.stderr


def test_play_answers_end_with_END_and_later_turns_show_only_the_new_prompt():
    env = collabzoo.make("strbuild")
    observations, _ = env.reset(seed=0, options={"task": "I"})
    answers = [scripted_teams.strbuild_oracle(observations[a]) for a in env.possible_agents]
    stdin = "".join(a + "\nEND\n" for a in answers) * 2
    result = run_cli(
        "play",
        "strbuild",
        *("--seed", "0", "--task", "I", "--env-arg", "horizon=2", "--env-arg", "feedback=score"),
        stdin=stdin,
    )
    assert result.returncode == 0, result.stderr
    assert final_reward(result.stdout) == pytest.approx(2.0)
    # the role prompt is shown once per agent (turn 1), not repeated with the history on turn 2
    assert result.stdout.count("You are the first of 2 builders") == 1
    assert "Your team's last build scored 2.000" in result.stdout


def test_play_with_a_scripted_partner_and_no_input_terminates():
    play = ["play", "strbuild", "--seed", "0", "--task", "I", "--partner", "oracle"]
    result = subprocess.run(
        [sys.executable, "-m", "collabzoo.cli", *play],
        stdin=subprocess.DEVNULL,
        text=True,
        capture_output=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert final_reward(result.stdout) < 2.0
    assert result.stdout.count("##### Turn") == 4  # the whole episode (H=4) was played
    # the human seat (first builder) answered nothing; the oracle partner did
    assert "first_builder: 0 line(s) accepted" in result.stdout
    assert re.search(r"second_builder: [1-9]\d* line\(s\) accepted", result.stdout)


def test_play_reports_accepted_and_rejected_lines(monkeypatch, capsys):
    stdin = "/setblock 0 0 0 oak_planks\nnot a command\n/setblock 99 0 0 stone\n\n"
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(["play", "strbuild", "--seed", "1", "--task", "0", "--env-arg", "horizon=1"])
    assert code == 0
    out = capsys.readouterr().out
    assert "first_builder: 1 line(s) accepted, 2 rejected" in out
    assert "'not a command'" in out
    assert "second_builder: 0 line(s) accepted, 0 rejected" in out
    assert final_reward(out) < 2.0


# ----- errors ---------------------------------------------------------------------------------
def test_unknown_env_is_a_clear_error(capsys):
    assert main(["play", "nosuchenv"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("collabzoo: error:")
    assert "nosuchenv" in err and "strbuild" in err and "housebuild" in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["play", "strbuild", "--env-arg", "bogus=1"], "bogus"),
        (["play", "strbuild", "--env-arg", "horizon"], "KEY=VALUE"),
        (["play", "strbuild", "--env-arg", "feedback=nope"], "feedback"),
        (["play", "strbuild", "--task", "ZZZ"], "ZZZ"),
        (["play", "strbuild", "--task", "99"], "out of range"),
        (["play", "strbuild", "--partner", "oracle", "--seat", "nobody"], "nobody"),
        (["play", "strbuild", "--seat", "first_builder"], "--partner"),
        (["demo", "--envs", "strbuild,nope"], "nope"),
    ],
)
def test_user_mistakes_exit_2_with_one_error_line(argv, expected, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("collabzoo: error:")
    assert len(captured.err.strip().splitlines()) == 1
    assert expected in captured.err
    assert captured.out == ""


def test_an_unknown_team_kind_is_named_with_the_known_ones(tmp_path, capsys):
    """`foo:bar` does start with a kind, only an unknown one: the error says which, and what the
    kinds are, instead of asking for a kind it already has."""
    from collabzoo.bench.teams import KINDS

    argv = ["bench", "--env", "tinycoop", "--team", "foo:bar", "--output", str(tmp_path)]
    assert main([*argv, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("collabzoo: error: team 'foo:bar': unknown kind 'foo';"), err
    assert f"the known kinds are {', '.join(KINDS)}" in err
    assert "must start with a kind" not in err
    assert len(err.strip().splitlines()) == 1


def test_bad_env_arg_message_names_what_the_env_accepts(capsys):
    assert main(["play", "strbuild", "--env-arg", "bogus=1"]) == 2
    err = capsys.readouterr().err
    assert "unexpected keyword argument 'bogus'" in err and "horizon" in err


def test_no_subcommand_prints_help_and_returns_2(capsys):
    assert main([]) == 2
    assert "usage: collabzoo" in capsys.readouterr().err


def test_train_model_help_names_saved_team_folders(capsys):
    """`--model` also takes the team a run or a warm start saved (`load_saved_team`): the help
    says so, and where such a folder comes from."""
    assert main(["train", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    model = help_text.split("--model MODEL", 2)[2].split("--output OUTPUT", 1)[0]
    assert "saved team folder" in model
    assert "OUTPUT/final of an earlier `collabzoo train` or `collabzoo sft`" in model


def test_version(capsys):
    assert main(["--version"]) == 0
    assert collabzoo.__version__ in capsys.readouterr().out


def test_cli_does_not_import_the_learners():
    code = (
        "import sys, collabzoo.cli; "
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], text=True, capture_output=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_play_a_code_task_with_blank_lines_in_the_answers(shared_data, code_sandbox) -> None:
    data = shared_data / "coophumaneval" / "CoopHumanEval.json"
    aux = "def aux(n):\n\n    return n > 1 and all(n % k for k in range(2, n))\nEND\n"
    # two lines of body: the reference calls any one-line `return ...aux...` a thin wrapper
    main_answer = "def x_or_y(n, x, y):\n\n    prime = aux(n)\n    return x if prime else y\nEND\n"
    result = run_cli(
        "play",
        "coophumaneval",
        "--split",
        "eval",
        "--task",
        "CoopHumanEval/0",
        "--env-arg",
        f"data={json.dumps(str(data))}",
        "--env-arg",
        "horizon=1",
        stdin=aux + main_answer,
    )
    assert result.returncode == 0, result.stderr
    assert "finish with a line END" in result.stdout
    assert "final reward 4.000 (max 4.000)" in result.stdout
    assert "main.calls_aux True" in result.stdout
