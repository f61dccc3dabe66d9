"""`benchmarks/learn_real_model.py --quick`: the pretrained model's LoRA team through the whole
pipeline (held-out evaluation before and after, the table, the plot, the saved result) for a
tree learner and an actor-critic learner, and a rerun reads the finished runs back."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import benchmark_module
from tests.optional import require_module

require_module("torch", "train")
require_module("peft", "train")
require_module("matplotlib", "train")


def benchmark():
    return benchmark_module("learn_real_model")


def test_the_quick_pipeline_trains_evaluates_and_reads_back(smollm2: Path, tmp_path) -> None:
    module = benchmark()
    argv = ["--quick", "--learners", "magrpo", "iac", "--seeds", "0", "--model", str(smollm2)]
    argv += ["--work", str(tmp_path), "--json", str(tmp_path / "out.json")]
    assert module.main([*argv, "--plot", str(tmp_path)]) == 0
    saved = json.loads((tmp_path / "out.json").read_text())
    assert saved["recipe"] == {**saved["recipe"], "budget": 8, "group": 2, "model": str(smollm2)}
    runs = {r["learner"]: r for r in saved["runs"]}
    assert sorted(runs) == ["iac", "magrpo"]
    for run in runs.values():
        first, last = run["points"][0], run["points"][-1]
        assert first["env_steps"] == 0 and last["env_steps"] == 8 and run["updates"] == 2
        for point in (first, last):  # the TLDR reward's components, held out
            assert {"mean_return", "level", "length_ratio", "words_1", "words_2"} <= set(point)
            assert 0.0 <= point["mean_return"] <= 3.0
    # both start from the same untrained team on the same held-out episodes
    starts = [{k: v for k, v in r["points"][0].items() if k != "seconds"} for r in runs.values()]
    assert starts[0] == starts[1]
    assert (tmp_path / "learn_real_model_tldr.png").stat().st_size > 10_000
    table = module.table("tldr", saved["runs"])
    assert "| raw model (update 0) | 2 |" in table and "| MAGRPO | 1 |" in table
    again = tmp_path / "again.json"  # a rerun reads every finished run back, untouched
    assert module.main([*argv[:-2], "--json", str(again)]) == 0
    assert json.loads(again.read_text())["runs"] == saved["runs"]
