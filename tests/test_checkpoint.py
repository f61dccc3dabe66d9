"""Checkpoints: round trip, latest, pruning, atomicity under a failing or killed save, RNG."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tests.optional import require_module

torch = require_module("torch", "train")

from collabzoo.algos.runtime.checkpoint import (  # noqa: E402 (after require_module)
    capture_rng,
    checkpoints,
    latest_checkpoint,
    load_checkpoint,
    restore_rng,
    save_checkpoint,
)


def small_model_and_optimizer(seed: int = 0):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(3):  # so the optimizer has moment estimates and a step count
        loss = model(torch.randn(16, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model, optimizer


def names(run_dir):
    return sorted(p.name for p in run_dir.iterdir())


def test_round_trip_of_a_model_and_its_adamw_state(tmp_path):
    model, optimizer = small_model_and_optimizer()
    path = save_checkpoint(
        tmp_path, 7, {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "n": 7}
    )
    assert path == tmp_path / "checkpoint-00000007"
    assert sorted(p.name for p in path.iterdir()) == ["meta.json", "state.pt"]
    meta = json.loads((path / "meta.json").read_text())
    assert meta["update"] == 7 and meta["format_version"] == 1 and meta["time"] > 0

    fresh, fresh_optimizer = small_model_and_optimizer(seed=1)
    state = load_checkpoint(path)
    fresh.load_state_dict(state["model"])
    fresh_optimizer.load_state_dict(state["optimizer"])
    assert state["n"] == 7
    for a, b in zip(model.parameters(), fresh.parameters(), strict=True):
        assert torch.equal(a, b)
    moments = optimizer.state_dict()["state"]
    restored = fresh_optimizer.state_dict()["state"]
    assert moments.keys() == restored.keys()
    for key in moments:
        assert torch.equal(moments[key]["exp_avg_sq"], restored[key]["exp_avg_sq"])
        assert float(moments[key]["step"]) == float(restored[key]["step"]) == 3.0
    # one more identical step on both gives identical parameters
    batch = torch.randn(16, 4)
    for m, opt in ((model, optimizer), (fresh, fresh_optimizer)):
        opt.zero_grad()
        m(batch).pow(2).mean().backward()
        opt.step()
    for a, b in zip(model.parameters(), fresh.parameters(), strict=True):
        assert torch.equal(a, b)
    # a run directory or the state.pt also load
    assert load_checkpoint(tmp_path)["n"] == 7
    assert load_checkpoint(path / "state.pt")["n"] == 7


def test_latest_picks_the_highest_update_and_keep_prunes(tmp_path):
    assert latest_checkpoint(tmp_path) is None
    assert latest_checkpoint(tmp_path / "missing") is None
    for update in (5, 100, 20):
        save_checkpoint(tmp_path, update, {"u": update}, keep=5)
    assert latest_checkpoint(tmp_path) == tmp_path / "checkpoint-00000100"
    save_checkpoint(tmp_path, 150, {"u": 150}, keep=2)
    assert names(tmp_path) == ["checkpoint-00000100", "checkpoint-00000150"]
    assert load_checkpoint(latest_checkpoint(tmp_path))["u"] == 150
    # a directory without its files is not a checkpoint
    (tmp_path / "checkpoint-00000999").mkdir()
    assert latest_checkpoint(tmp_path) == tmp_path / "checkpoint-00000150"
    assert [u for u, _ in checkpoints(tmp_path)] == [100, 150]


def test_saving_an_update_again_replaces_it(tmp_path):
    save_checkpoint(tmp_path, 3, {"v": "old"})
    save_checkpoint(tmp_path, 3, {"v": "new"})
    assert names(tmp_path) == ["checkpoint-00000003"]
    assert load_checkpoint(tmp_path / "checkpoint-00000003")["v"] == "new"


def test_the_checkpoint_just_written_is_never_pruned(tmp_path):
    save_checkpoint(tmp_path, 10, {"u": 10})
    save_checkpoint(tmp_path, 20, {"u": 20})
    save_checkpoint(tmp_path, 15, {"u": 15}, keep=2)
    assert names(tmp_path) == ["checkpoint-00000015", "checkpoint-00000020"]


def test_a_save_that_fails_midway_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    model, _ = small_model_and_optimizer()
    save_checkpoint(tmp_path, 1, {"model": model.state_dict()})
    real_save = torch.save

    def failing_save(obj, handle, *args, **kwargs):
        handle.write(b"half a checkpoint")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", failing_save)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(tmp_path, 2, {"model": model.state_dict()})
    monkeypatch.setattr(torch, "save", real_save)

    assert names(tmp_path) == ["checkpoint-00000001"]  # no checkpoint-2, no temporary left
    assert latest_checkpoint(tmp_path) == tmp_path / "checkpoint-00000001"
    state = load_checkpoint(tmp_path / "checkpoint-00000001")
    assert torch.equal(state["model"]["0.weight"], model.state_dict()["0.weight"])


def test_a_killed_save_leaves_only_a_temporary_that_the_next_save_removes(tmp_path):
    save_checkpoint(tmp_path, 1, {"u": 1})
    killed = textwrap.dedent(
        f"""
        import os, torch
        from collabzoo.algos.runtime.checkpoint import save_checkpoint

        def dying_save(obj, handle, *args, **kwargs):
            handle.write(b"half a checkpoint")
            handle.flush()
            os._exit(9)  # killed: no cleanup runs

        torch.save = dying_save
        save_checkpoint({str(tmp_path)!r}, 2, {{"u": 2}})
        """
    )
    result = subprocess.run([sys.executable, "-c", killed], capture_output=True, timeout=120)
    assert result.returncode == 9, result.stderr.decode()
    leftovers = [n for n in names(tmp_path) if n.startswith(".tmp-checkpoint-")]
    assert len(leftovers) == 1
    assert [n for n in names(tmp_path) if n.startswith("checkpoint-")] == ["checkpoint-00000001"]
    assert load_checkpoint(tmp_path)["u"] == 1

    save_checkpoint(tmp_path, 3, {"u": 3})
    assert names(tmp_path) == ["checkpoint-00000001", "checkpoint-00000003"]


def test_stale_temporary_directories_are_removed_at_the_next_save(tmp_path):
    stale = tmp_path / ".tmp-checkpoint-abc123"
    stale.mkdir(parents=True)
    (stale / "state.pt").write_bytes(b"partial")
    (tmp_path / "metrics.jsonl").write_text("{}\n")  # other files of the run stay
    save_checkpoint(tmp_path, 0, {"u": 0})
    assert names(tmp_path) == ["checkpoint-00000000", "metrics.jsonl"]


def test_bad_arguments_are_refused(tmp_path):
    with pytest.raises(ValueError, match="update"):
        save_checkpoint(tmp_path, -1, {})
    with pytest.raises(ValueError, match="keep"):
        save_checkpoint(tmp_path, 0, {}, keep=0)
    with pytest.raises(FileNotFoundError):
        load_checkpoint(tmp_path)


def draws():
    return (
        [random.random() for _ in range(3)],
        np.random.rand(3).tolist(),
        torch.rand(3).tolist(),
        torch.randint(0, 1000, (3,)).tolist(),
    )


def test_rng_capture_and_restore_reproduce_the_draws(tmp_path):
    random.seed(1)
    np.random.seed(1)
    torch.manual_seed(1)
    draws()
    save_checkpoint(tmp_path, 0, {"rng": capture_rng()})
    expected = draws()
    assert draws() != expected  # the generators moved on
    restore_rng(load_checkpoint(tmp_path)["rng"])
    assert draws() == expected
