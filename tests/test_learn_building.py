"""`benchmarks/learn_building.py --quick`: the whole pipeline (noisy-oracle episodes, export,
warm start, MARL, the task's own metrics, the table and the plot) end to end, and the claim it
exists for at CI size: reinforcement from the warm start raises StrBuild's IoU."""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from tests.conftest import benchmark_module
from tests.optional import require_module

require_module("torch", "train")
require_module("matplotlib", "train")

SEEDS = (0, 1)
IOU_GAIN = 0.03
"""What MAGRPO's quick run (960 environment steps from the quick warm start, StrBuild on the
words I and L) must add to the warm start's last-turn IoU on every seed. Measured over seeds
0-3 (16 evaluation episodes each, about 70 s a seed on one core):

    seed   warm start IoU   after 960 steps   gain     mean return
    0      0.329            0.411             +0.082   1.23 -> 2.82
    1      0.309            0.486             +0.177   0.90 -> 2.68
    2      0.316            0.491             +0.175   1.29 -> 3.06
    3      0.269            0.373             +0.104   1.26 -> 2.14
                                              0.135 mean, 0.047 sd
"""


def benchmark():
    return benchmark_module("learn_building")


@pytest.fixture(scope="module")
def quick(tmp_path_factory) -> tuple[dict, Path]:
    work = tmp_path_factory.mktemp("learn_building")
    argv = ["--quick", "--tasks", "strbuild", "--learners", "magrpo", "--seeds", *map(str, SEEDS)]
    argv += ["--work", str(work), "--json", str(work / "out.json"), "--plot", str(work)]
    assert benchmark().main(argv) == 0
    return json.loads((work / "out.json").read_text()), work


@pytest.mark.slow(seconds=170)  # the module's `quick` fixture runs the pipeline
def test_the_quick_pipeline_runs_end_to_end(quick: tuple[dict, Path]) -> None:
    saved, work = quick
    assert saved["tasks"] == ["strbuild"]
    warm = saved["warm_starts"]["strbuild"]
    for agent in ("first_builder", "second_builder"):
        assert warm["loss_after"][agent] < 0.15 * warm["loss_before"][agent]
    assert (work / "strbuild" / "data" / "state.json").is_file()  # the exported dataset
    assert (work / "strbuild" / "warm" / "final" / "first_builder").is_dir()
    runs = saved["runs"]
    assert sorted(r["seed"] for r in runs) == list(SEEDS)
    assert str(work) not in json.dumps(saved)  # no path of the machine in what gets published
    for run in runs:
        steps = [p["env_steps"] for p in run["points"]]
        assert steps[0] == 0 and steps[-1] >= 960 and steps == sorted(steps)
        assert all(0.0 <= p["iou"] <= 1.0 and 0.0 <= p["adjacency"] <= 1.0 for p in run["points"])
        logged = work / "strbuild" / "magrpo" / f"seed{run['seed']}" / "metrics.jsonl"
        logged = logged.read_text().splitlines()
        assert len([line for line in logged if '"loss"' in line]) == steps[-1] // 30
    png = (work / "learn_strbuild.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 20_000
    table = benchmark().table("strbuild", runs)
    assert table.splitlines()[2].startswith("| warm start | 2 | 0 |")
    assert table.splitlines()[3].startswith("| MAGRPO | 2 | 960 |")


def test_a_second_run_reads_back_what_is_finished(quick: tuple[dict, Path]) -> None:
    """The same command again reuses the dataset, the warm start and the finished runs (their
    curves and times, which a fresh run could not repeat); a shorter budget cuts the curves."""
    saved, work = quick
    logs = sorted((work / "strbuild").glob("*/seed*/metrics.jsonl"))
    assert len(logs) == len(SEEDS)
    written = [log.stat().st_mtime_ns for log in logs]
    argv = ["--quick", "--tasks", "strbuild", "--learners", "magrpo", "--seeds", *map(str, SEEDS)]
    argv += ["--work", str(work), "--json", str(work / "again.json"), "--budget", "480"]
    assert benchmark().main(argv) == 0
    assert [log.stat().st_mtime_ns for log in logs] == written  # nothing ran again
    again = json.loads((work / "again.json").read_text())
    assert again["warm_starts"] == saved["warm_starts"]
    for before, after in zip(saved["runs"], again["runs"], strict=True):
        assert after["points"] == before["points"][:2]
        assert after["points"][-1]["env_steps"] == 480 and after["seconds"] < before["seconds"]


def test_warm_only_stops_before_the_learners(quick: tuple[dict, Path], capsys) -> None:
    """`--warm-only` (the part of a real model's pipeline a CPU can finish) reads the warm start
    back and reports it, and neither runs nor reads back a learner, though finished runs exist."""
    saved, work = quick
    argv = ["--quick", "--tasks", "strbuild", "--learners", "magrpo", "--seeds", *map(str, SEEDS)]
    argv += ["--work", str(work), "--json", str(work / "warm.json"), "--plot", str(work / "p")]
    assert benchmark().main([*argv, "--warm-only"]) == 0
    warm = json.loads((work / "warm.json").read_text())
    assert warm["runs"] == [] and warm["warm_starts"] == saved["warm_starts"]
    assert saved["subtitle"].startswith("seeds 0, 1, ") and "seeds" not in warm["subtitle"]
    assert "no learner runs; warm start:" in capsys.readouterr().out
    assert not (work / "p").exists()  # no plot of curves that do not exist


def test_a_warm_start_of_other_settings_is_made_again(quick: tuple[dict, Path], tmp_path) -> None:
    """A saved warm start is read back only for the settings it was made with: another number
    of optimiser steps (or device, or model) trains a new one instead of reusing it."""
    import datasets

    saved, work = quick
    module = benchmark()
    task, recipe = module.TASKS["strbuild"], module.QUICK
    kwargs = module.env_kwargs(task, recipe, None)
    rows = datasets.load_from_disk(str(work / "strbuild" / "data"))
    folder = tmp_path / "warm"
    shutil.copytree(work / "strbuild" / "warm", folder)
    assert module.warm_start(task, recipe, rows, folder, kwargs) == saved["warm_starts"]["strbuild"]
    changed = replace(recipe, sft_steps=2)
    again = module.warm_start(task, changed, rows, folder, kwargs)
    assert again["loss_after"] != saved["warm_starts"]["strbuild"]["loss_after"]
    stored = json.loads((folder / "summary.json").read_text())
    assert stored["key"]["recipe"]["sft_steps"] == 2 and "budget" not in stored["key"]["recipe"]
    assert module.warm_start(task, changed, rows, folder, kwargs) == again  # now read back


def test_a_gpu_run_is_keyed_apart_from_the_cpu_runs() -> None:
    """A run on `--device cuda` never reads back a CPU run's curve (nor the reverse), while a CPU
    run's key is what it was before the device was an option."""
    module = benchmark()
    job = {"task": "strbuild", "kwargs": {}, "learner": "cc", "seed": 0, "warm": "warm/final"}
    cpu = module.settings_key({**job, "recipe": asdict(module.QUICK)})
    gpu = module.settings_key({**job, "recipe": asdict(replace(module.QUICK, device="cuda"))})
    assert "device" not in cpu["recipe"] and gpu["recipe"]["device"] == "cuda"
    assert {k: v for k, v in gpu["recipe"].items() if k != "device"} == cpu["recipe"]


def test_reinforcement_from_the_warm_start_raises_strbuild_iou(quick: tuple[dict, Path]) -> None:
    saved, _ = quick
    for run in saved["runs"]:
        start, end = run["points"][0], run["points"][-1]
        assert end["iou"] > start["iou"] + IOU_GAIN, (run["seed"], start, end)
        assert end["mean_return"] > start["mean_return"], (run["seed"], start, end)


@pytest.mark.slow(seconds=150)
def test_a_pretrained_model_is_warm_started_as_a_lora_team(tmp_path) -> None:
    """`--model`: the warm start trains a LoRA adapter per agent on the given model (here a
    saved tiny model standing in for SmolLM2), evaluates the raw model and the warm start on
    the task's metrics, saves adapters naming their base, and a learner trains from them."""
    from collabzoo.algos import tiny_causal_lm

    model, tokenizer = tiny_causal_lm(0)
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    work = tmp_path / "work"
    argv = ["--quick", "--tasks", "strbuild", "--learners", "magrpo", "--seeds", "0"]
    argv += ["--model", str(tmp_path / "model"), "--sft-steps", "5", "--eval-episodes", "2"]
    argv += ["--threads", "1"]
    argv += ["--budget", "30", "--every", "30", "--work", str(work), "--json", str(tmp_path / "o")]
    assert benchmark().main(argv) == 0
    saved = json.loads((tmp_path / "o").read_text())
    assert saved["recipe"]["model"] == str(tmp_path / "model") and "LoRA" in saved["subtitle"]
    summary = saved["warm_starts"]["strbuild"]
    for agent, before in summary["loss_before"].items():
        assert summary["loss_after"][agent] < before
    for evaluation in ("raw", "warm"):
        assert set(summary[evaluation]) == {"mean_return", "iou", "adjacency"}
        assert 0 <= summary[evaluation]["iou"] <= 1
    for agent in ("first_builder", "second_builder"):
        adapter = json.loads(
            (work / "strbuild/warm/final" / agent / "adapter_config.json").read_text()
        )
        assert adapter["base_model_name_or_path"] == str(tmp_path / "model")
    (run,) = saved["runs"]
    assert [p["env_steps"] for p in run["points"]] == [0, 30]
    raw = json.loads((work / "strbuild/warm/raw.json").read_text())
    assert raw["point"] == summary["raw"] and raw["key"]["model"] == str(tmp_path / "model")
