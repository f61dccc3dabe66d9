"""Episode datasets (`collabzoo export`) and the noisy oracle that writes imperfect ones.

An exported dataset must replay: the same completions, stepped in a fresh env from the row's
env, seed and task, pay exactly the rewards the rows hold, and the prompts are the fresh env's
observations. TRL's `SFTTrainer` must take it as it is, as a prompt-completion dataset.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import datasets
import pytest

import collabzoo
from collabzoo.bench.export import ExportError, episodes_dataset, replayed_rewards
from collabzoo.bench.models import TeamError
from collabzoo.bench.teams import parse_team, scripted_kind
from collabzoo.cli import main
from collabzoo.envs.scripted_teams import NOISY_DROP, TEAMS, NoisyOracle
from tests.optional import require_module


def export(tmp_path: Path, *argv: str) -> tuple[int, Path]:
    output = tmp_path / "data"
    return main(["export", *argv, "-o", str(output), "--no-progress"]), output


def observations_of(env_id: str, row: dict, **kwargs) -> dict[str, str]:
    env = collabzoo.make(env_id, **kwargs)
    observations, _ = env.reset(
        seed=row["seed"], options={"task": json.loads(row["task"]), "split": row["split"]}
    )
    return observations


# ----- the round trip --------------------------------------------------------------------------
@pytest.mark.parametrize("team", ["scripted:oracle", "scripted:noisy"])
def test_an_exported_strbuild_dataset_replays_to_its_rewards(tmp_path: Path, team: str) -> None:
    status, output = export(tmp_path, "strbuild", "--team", team, "--episodes", "6")
    assert status == 0
    rows = datasets.load_from_disk(str(output))
    assert len(rows) == 6 * 4 * 2  # episodes x turns x agents
    assert sorted(set(rows["agent"])) == ["first_builder", "second_builder"]
    assert set(rows["split"]) == {"train"}
    assert replayed_rewards(rows) == rows["reward"]
    first = rows[0]
    assert first["turn"] == 0
    assert first["prompt"] == observations_of("strbuild", first)[first["agent"]]
    assert first["completion"].startswith("/setblock")
    assert set(first["metrics"]) >= {"iou", "adjacency", "coverage"}
    assert json.loads(first["env_kwargs"]) == {}
    # the results file the rows came from is kept beside them
    assert len(list((output / "results").glob("*.json"))) == 1
    if team == "scripted:oracle":
        assert all(m["iou"] == 1.0 for m in rows["metrics"])
    else:
        assert 0.4 < sum(m["iou"] for m in rows["metrics"]) / len(rows) < 0.95


def test_a_replay_catches_a_reward_the_env_no_longer_pays(tmp_path: Path) -> None:
    status, output = export(tmp_path, "strbuild", "--team", "scripted:oracle", "--episodes", "1")
    assert status == 0
    results = next((output / "results").glob("*.json"))
    document = json.loads(results.read_text())
    document["episodes"][0]["turns"][1]["reward"] += 0.5
    results.write_text(json.dumps(document))
    with pytest.raises(ExportError, match=r"episode 0, turn 1: reward recorded .* replayed"):
        episodes_dataset([results])
    rows = datasets.load_from_disk(str(output))
    tampered = rows.map(lambda r: {"reward": r["reward"] + 1.0})
    assert replayed_rewards(tampered) != tampered["reward"]


def test_housebuild_exports_with_its_reference_houses(
    tmp_path: Path, reference_houses_path: Path
) -> None:
    status, output = export(
        tmp_path,
        "housebuild",
        "--team",
        "scripted:noisy:0.5",
        "--episodes",
        "3",
        "--env-arg",
        f"data={reference_houses_path}",
        "--seed",
        "7",
    )
    assert status == 0
    rows = datasets.load_from_disk(str(output))
    assert replayed_rewards(rows) == rows["reward"]
    assert json.loads(rows[0]["env_kwargs"]) == {"data": str(reference_houses_path)}
    assert rows[0]["seed"] == 7
    row = rows[0]
    assert (
        row["prompt"]
        == observations_of("housebuild", row, data=str(reference_houses_path))[row["agent"]]
    )


def test_results_files_export_without_playing_again(tmp_path: Path) -> None:
    results = tmp_path / "results"
    assert (
        main(
            [
                "bench",
                "--env",
                "strbuild",
                "--team",
                "scripted:naive",
                "--team",
                "scripted:oracle",
                "--episodes",
                "2",
                "--output",
                str(results),
                "--no-progress",
            ]
        )
        == 0
    )
    status, output = export(tmp_path, str(results))
    assert status == 0
    rows = datasets.load_from_disk(str(output))
    assert sorted(set(rows["team"])) == ["scripted:naive", "scripted:oracle"]
    assert len(rows) == 2 * 2 * 4 * 2
    assert set(rows["split"]) == {"eval"}  # what the bench played
    naive = [r for r in rows if r["team"] == "scripted:naive"]
    assert all(r["metrics"]["adjacency"] == 1.0 for r in naive)


def test_export_refuses_what_it_cannot_write(tmp_path: Path, capsys) -> None:
    status, _ = export(tmp_path, "strbuild", "housebuild", "--team", "scripted:oracle")
    assert status == 2
    assert "with --team, name one env to play (got 2" in capsys.readouterr().err
    status, _ = export(tmp_path, str(tmp_path / "nothing-here"))
    assert status == 2
    assert "no results file or folder at" in capsys.readouterr().err
    status, _ = export(tmp_path, str(tmp_path), "--episodes", "3")
    assert status == 2
    assert "--episodes, --seed, --env-arg and --greedy need --team" in capsys.readouterr().err
    assert export(tmp_path, "strbuild", "--team", "scripted:oracle", "--episodes", "1")[0] == 0
    status, _ = export(tmp_path, "strbuild", "--team", "scripted:oracle", "--episodes", "1")
    assert status == 2
    assert "exists and is not empty: pass --overwrite" in capsys.readouterr().err


def test_trl_sft_trainer_takes_the_dataset_as_it_is(tmp_path: Path) -> None:
    trl = require_module("trl", "interop")
    require_module("torch", "train")
    from collabzoo.algos.policies.model_loading import small_causal_lm

    status, output = export(tmp_path, "strbuild", "--team", "scripted:noisy", "--episodes", "2")
    assert status == 0
    rows = datasets.load_from_disk(str(output))
    model, tokenizer = small_causal_lm(
        [*rows["prompt"], *rows["completion"]],
        hidden_size=32,
        num_layers=1,
        num_heads=2,
        num_kv_heads=1,
        intermediate_size=64,
        vocab_size=300,
    )
    config = trl.SFTConfig(
        output_dir=str(tmp_path / "trl"),
        max_steps=2,
        per_device_train_batch_size=2,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        max_length=4096,
        learning_rate=1e-3,
    )
    trainer = trl.SFTTrainer(
        model=model, processing_class=tokenizer, train_dataset=rows, args=config
    )
    trainer.train()
    assert all(math.isfinite(entry["loss"]) for entry in trainer.state.log_history[:-1])
    # read as prompt-completion: the loss covers each completion (and its end), not the prompt
    example = trainer.train_dataset[0]
    labelled = sum(1 for label in example["labels"] if label != -100)
    completion = tokenizer(rows[0]["completion"], add_special_tokens=False)["input_ids"]
    assert labelled == len(completion) + 1
    assert len(example["input_ids"]) == labelled + len(
        tokenizer(rows[0]["prompt"], add_special_tokens=False)["input_ids"]
    )


# ----- the noisy oracle ------------------------------------------------------------------------
def first_observations(env_id: str, **kwargs) -> dict[str, str]:
    observations, _ = collabzoo.make(env_id, **kwargs).reset(seed=0, options={"task": 0})
    return observations


@pytest.mark.parametrize("game", ["strbuild", "housebuild"])
def test_the_noisy_oracle_drops_lines_of_the_oracle_and_replays(game: str) -> None:
    observation = first_observations(game)["first_builder"]
    oracle = TEAMS["oracle"][game](observation).split("\n")
    assert NoisyOracle(game, 0.0)(observation, 5).split("\n") == oracle
    kept_counts = []
    for seed in range(40):
        answer = NoisyOracle(game)(observation, seed)
        assert answer == NoisyOracle(game)(observation, seed)  # the seed decides
        lines = answer.split("\n") if answer else []
        it = iter(oracle)
        assert all(line in it for line in lines)  # a subsequence: dropped, never changed
        kept_counts.append(len(lines) / len(oracle))
    assert len({round(k, 3) for k in kept_counts}) > 3
    assert abs(sum(kept_counts) / len(kept_counts) - (1 - NOISY_DROP)) < 0.08
    assert NoisyOracle(game)(observation) == NoisyOracle(game)(observation)


def test_noisy_team_specs_and_their_errors() -> None:
    assert scripted_kind("noisy") == ("noisy", NOISY_DROP)
    assert scripted_kind("noisy:0.1") == ("noisy", 0.1)
    assert scripted_kind("oracle") == ("oracle", None)
    assert parse_team("scripted:noisy:0.25").members[0].target == "noisy:0.25"
    for bad, message in [
        ("scripted:noisy:1.5", r"drop probability must be in \[0, 1\), got '1.5'"),
        ("scripted:noisy:lots", r"drop probability must be in \[0, 1\), got 'lots'"),
        ("scripted:oracle:0.2", "noisy takes a drop probability"),
        ("scripted:sloppy", "unknown scripted team 'sloppy'"),
    ]:
        with pytest.raises(TeamError, match=message):
            parse_team(bad)
    with pytest.raises(ValueError, match="no noisy oracle for 'tldr'"):
        NoisyOracle("tldr")
    with pytest.raises(ValueError, match=r"drop must be a probability in \[0, 1\)"):
        NoisyOracle("strbuild", 1.0)
