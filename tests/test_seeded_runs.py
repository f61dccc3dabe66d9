"""`seed` repeats a training run: the learner seeds torch's RNG, which training samples from,
so the same command gives the same samples, losses and returns, and another seed other ones."""

from __future__ import annotations

import json
from pathlib import Path

from tests.optional import require_module

require_module("torch", "train")

TIMED = ("seconds", "per_s", "time")


def metrics(output: Path, seed: int) -> list[dict]:
    """The metrics of a 2-update MAGRPO run on TinyCoop from the command line, timings left out."""
    from collabzoo.cli import main

    settings = ["progress=false", "tensorboard=false", "save_steps=0", "max_new_tokens=2"]
    command = ["train", "magrpo", "--env", "tinycoop", "--model", "tiny", "--updates", "2"]
    command += ["--output", str(output), "--eval-episodes", "0", "--set", f"seed={seed}"]
    assert main(command + [part for s in settings for part in ("--set", s)]) == 0
    lines = (output / "metrics.jsonl").read_text().splitlines()
    return [
        {k: v for k, v in json.loads(line).items() if not any(t in k for t in TIMED)}
        for line in lines
    ]


def test_the_same_seed_repeats_a_run_and_another_seed_does_not(tmp_path: Path) -> None:
    import torch

    torch.manual_seed(12345)  # whatever the caller's RNG state: the config's seed decides
    first = metrics(tmp_path / "first", seed=3)
    torch.manual_seed(54321)
    assert metrics(tmp_path / "again", seed=3) == first
    other = metrics(tmp_path / "other", seed=4)
    assert [(r["loss"], r["mean_return"]) for r in other] != [
        (r["loss"], r["mean_return"]) for r in first
    ]
