"""Checkpoints of a training run: written atomically, the newest few kept, RNG states included.

    state = {"models": ..., "optimizers": ..., "rng": capture_rng(), "update": update}
    save_checkpoint("runs/magrpo", update, state)            # runs/magrpo/checkpoint-00000120/
    ...
    found = latest_checkpoint("runs/magrpo")
    if found is not None:
        state = load_checkpoint(found)
        restore_rng(state["rng"])

A checkpoint is a directory `checkpoint-<update:08d>` holding `state.pt` (torch.save of the state
dict) and `meta.json` (the update, the wall-clock time, the format version). It is written into a
temporary `.tmp-checkpoint-*` directory, synced to disk, and only then renamed into place, so a
crash at any moment leaves the earlier checkpoints as they were and never a half-written
`checkpoint-*` directory. Leftover temporary directories are removed by the next save.

torch is imported inside the functions, so importing this module costs nothing.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "CHECKPOINT_FORMAT_VERSION",
    "capture_rng",
    "checkpoints",
    "latest_checkpoint",
    "load_checkpoint",
    "restore_rng",
    "save_checkpoint",
]

CHECKPOINT_FORMAT_VERSION = 1
STATE_FILE = "state.pt"
META_FILE = "meta.json"
TMP_PREFIX = ".tmp-checkpoint-"
CHECKPOINT_NAME = re.compile(r"checkpoint-(\d+)")


def _checkpoint_name(update: int) -> str:
    return f"checkpoint-{update:08d}"


def _fsync_dir(path: Path) -> None:
    """Make a directory's entries (new files, renames) durable; a no-op where unsupported."""
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


def _remove_dir(path: Path) -> None:
    """Delete a directory without ever leaving a partly deleted `checkpoint-*`: it is first
    renamed to a temporary name (atomic), then removed."""
    doomed = Path(tempfile.mkdtemp(prefix=TMP_PREFIX, dir=path.parent))
    os.replace(path, doomed)
    shutil.rmtree(doomed, ignore_errors=True)


def checkpoints(output_dir: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """The complete checkpoints of a run, as (update, path), oldest first."""
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        return []
    found = []
    for entry in output_dir.iterdir():
        match = CHECKPOINT_NAME.fullmatch(entry.name)
        if match and (entry / STATE_FILE).is_file() and (entry / META_FILE).is_file():
            found.append((int(match.group(1)), entry))
    return sorted(found)


def latest_checkpoint(output_dir: str | os.PathLike[str]) -> Path | None:
    """The complete checkpoint with the highest update in `output_dir`, or None."""
    found = checkpoints(output_dir)
    return found[-1][1] if found else None


def save_checkpoint(
    output_dir: str | os.PathLike[str], update: int, state: dict[str, Any], *, keep: int = 2
) -> Path:
    """Save `state` as `output_dir/checkpoint-<update:08d>` atomically; keep the newest `keep`.

    `state` is anything torch.save can write: model and optimizer state dicts, `capture_rng()`,
    counters. Saving an update that already has a checkpoint replaces it. Then the oldest
    checkpoints are removed until `keep` are left, the one just written always among them.
    Returns the path.
    """
    import torch

    if isinstance(update, bool) or not isinstance(update, int) or update < 0:
        raise ValueError(f"update must be an int >= 0, got {update!r}")
    if keep < 1:
        raise ValueError(f"keep must be at least 1, got {keep}")
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    for stale in output_dir.glob(TMP_PREFIX + "*"):
        shutil.rmtree(stale, ignore_errors=True)

    staging = Path(tempfile.mkdtemp(prefix=TMP_PREFIX, dir=output_dir))
    try:
        with open(staging / STATE_FILE, "wb") as handle:
            torch.save(state, handle)
            handle.flush()
            os.fsync(handle.fileno())
        meta = {"format_version": CHECKPOINT_FORMAT_VERSION, "update": update, "time": time.time()}
        with open(staging / META_FILE, "w", encoding="utf-8") as handle:
            json.dump(meta, handle, indent=2)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        _fsync_dir(staging)
        target = output_dir / _checkpoint_name(update)
        if target.exists():
            _remove_dir(target)
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _fsync_dir(output_dir)

    others = [path for _, path in checkpoints(output_dir) if path != target]
    for old in others[: max(len(others) - (keep - 1), 0)]:
        _remove_dir(old)
    return target


def load_checkpoint(path: str | os.PathLike[str], *, map_location: Any = "cpu") -> dict[str, Any]:
    """The state dict saved by `save_checkpoint`.

    `path` is a checkpoint directory, its state.pt, or a run directory (then its latest
    checkpoint). Tensors are loaded onto `map_location` (CPU by default, so a checkpoint made on
    a GPU loads anywhere; `load_state_dict` moves them to the model's device).

    This calls torch.load with weights_only=False, which unpickles arbitrary objects (the
    optimizer state, the numpy RNG state): only load checkpoints you wrote yourself or trust.
    """
    import torch

    path = Path(path)
    if path.is_dir() and not (path / STATE_FILE).is_file():
        latest = latest_checkpoint(path)
        if latest is None:
            raise FileNotFoundError(f"no checkpoint in {path}")
        path = latest
    state_file = path / STATE_FILE if path.is_dir() else path
    if not state_file.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    return torch.load(state_file, map_location=map_location, weights_only=False)


def capture_rng() -> dict[str, Any]:
    """The states of Python's `random`, numpy's global RNG, torch's CPU RNG and (when CUDA is
    available) every CUDA device's RNG: put it in the checkpoint, give it to `restore_rng`."""
    import torch

    return {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
    }


def restore_rng(state: dict[str, Any]) -> None:
    """Set the random generators back to a `capture_rng()` state (missing parts are left as
    they are). CUDA states are restored for the devices present; a different device count
    gives a warning."""
    import torch

    if state.get("python") is not None:
        random.setstate(state["python"])
    if state.get("numpy") is not None:
        np.random.set_state(state["numpy"])
    if state.get("torch") is not None:
        torch.set_rng_state(state["torch"].cpu())
    cuda = state.get("cuda")
    if cuda and torch.cuda.is_available():
        count = torch.cuda.device_count()
        if len(cuda) != count:
            warnings.warn(
                f"the checkpoint has RNG states for {len(cuda)} CUDA device(s), this machine has "
                f"{count}: restoring the first {min(len(cuda), count)}",
                RuntimeWarning,
                stacklevel=2,
            )
        for device, device_state in enumerate(cuda[:count]):
            torch.cuda.set_rng_state(device_state.cpu(), device)
