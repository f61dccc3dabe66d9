"""The results file of a run: one JSON document that says what ran and what happened.

It holds everything needed to audit or re-score a run: the env id, version and constructor
arguments, the data used, the split and seeds, the team and protocol, the sampling settings,
the sandbox backend and its limits, package versions and hardware, and one record per
episode (every generated text with its token count, the actions the env got, and each turn's
reward, reward components and metrics). `summary` is derived from the episodes and is
recomputed whenever the file is read, so the episodes are the source of truth.

The file is rewritten atomically (a temporary file renamed over it), at most every
`FLUSH_SECONDS` while a run goes and always when it ends, fails or is interrupted, so a killed
run loses at most the last few seconds of episodes, and a crash never leaves half a file.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

from collabzoo.bench.columns import COST, TIME, task_columns
from collabzoo.bench.stats import mean_ci, pooled_ci

FORMAT = "collabzoo-bench/1"
FLUSH_SECONDS = 2.0
IDENTITY = ("env.id", "env.kwargs", "team.spec", "protocol", "split", "seed", "sampling")
"""What must match for `--resume` to continue a file (anything else may change)."""
PACKAGES = (
    "collabzoo",
    "pettingzoo",
    "gymnasium",
    "numpy",
    "datasets",
    "docker",
    "openai",
    "torch",
    "transformers",
    "peft",
    "accelerate",
)


class ResultsError(ValueError):
    """A results file that cannot be used (unreadable, another format, another run)."""


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def software_versions() -> dict[str, str]:
    """Python and the installed versions of the packages a run's numbers depend on."""
    versions = {"python": platform.python_version()}
    for package in PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return versions


def _gpus() -> list[str]:
    """GPU names from torch when it is already loaded, else from nvidia-smi when present."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return [torch.cuda.get_device_name(k) for k in range(torch.cuda.device_count())]
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        listed = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in listed.stdout.splitlines() if line.strip()]


def hardware() -> dict[str, Any]:
    """Where the run ran: the numbers in Time depend on it."""
    memory = None
    with contextlib.suppress(ValueError, OSError, AttributeError):  # not every OS tells
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpus": os.cpu_count(),
        "memory_bytes": memory,
        "gpus": _gpus(),
    }


def write_json_atomic(path: Path, document: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as f:
            json.dump(document, f, indent=1, ensure_ascii=False, default=str)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def read_results(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A results file, checked and with its summary recomputed from its episodes."""
    path = Path(path)
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise ResultsError(f"cannot read results file {path}: {error}") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ResultsError(f"{path} is not a collabzoo bench results file (format {FORMAT})")
    if not isinstance(document.get("episodes"), list):
        raise ResultsError(f"{path} has no episodes list")
    document["summary"] = summarize(document)
    return document


def _lookup(document: Mapping[str, Any], dotted: str) -> Any:
    value: Any = document
    for key in dotted.split("."):
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def identity_mismatch(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The IDENTITY fields where two headers differ, as 'field: old -> new'."""
    differences = []
    for field in IDENTITY:
        a = json.dumps(_lookup(old, field), sort_keys=True, default=str)
        b = json.dumps(_lookup(new, field), sort_keys=True, default=str)
        if a != b:
            differences.append(f"{field}: {a} -> {b}")
    return differences


def episode_scores(document: Mapping[str, Any], episode: Mapping[str, Any]) -> dict[str, float]:
    """One episode's Time, Cost and score columns."""
    env = document.get("env", {})
    columns = task_columns(env.get("name", ""), env.get("title")).columns
    metrics = episode.get("final_metrics") or {}
    best = env.get("max_reward")
    reward = episode.get("final_reward")
    fraction = (
        float(reward) / float(best)
        if isinstance(best, (int, float)) and best and math.isfinite(best) and reward is not None
        else math.nan
    )
    values = {TIME: float(episode.get("time_s", math.nan)), COST: float(episode.get("cost", 0))}
    for column in columns:
        if column.metric == "_reward_fraction":
            values[column.name] = fraction * column.scale
        else:
            values[column.name] = column.value(metrics)
    return values


def summarize(document: Mapping[str, Any]) -> dict[str, Any]:
    """Mean and 95% interval of every column over the finished episodes; a pooled column
    (`Column.pooled_over`) is its rate pooled over them instead (`stats.pooled_ci`), and its
    cell says what it was pooled over and the checks it counted."""
    episodes = document.get("episodes", [])
    per_episode = [episode_scores(document, e) for e in episodes]
    names = list(dict.fromkeys(name for values in per_episode for name in values))
    env = document.get("env", {})
    pooled = {
        c.name: c
        for c in task_columns(env.get("name", ""), env.get("title")).columns
        if c.pooled_over is not None
    }
    summary: dict[str, Any] = {
        "episodes": len(episodes),
        "episodes_planned": document.get("episodes_planned"),
    }
    for name in names or [TIME, COST]:
        values = [v.get(name, math.nan) for v in per_episode]
        column = pooled.get(name)
        if column is None:
            summary[name] = mean_ci(values).as_dict()
            continue
        checks = [column.weight(e.get("final_metrics") or {}) for e in episodes]
        summary[name] = {
            **pooled_ci(values, checks).as_dict(),
            "pooled_over": column.pooled_over,
            "checks": math.fsum(d for v, d in zip(values, checks, strict=True) if math.isfinite(v)),
        }
    rewards = [e.get("final_reward") for e in episodes]
    summary["final_reward"] = mean_ci(r for r in rewards if r is not None).as_dict()
    return summary


class ResultsFile:
    """A run's results document on disk, written as episodes finish."""

    def __init__(self, path: Path, document: dict[str, Any]) -> None:
        self.path = path
        self.document = document
        self._episodes: dict[int, dict[str, Any]] = {
            int(e["index"]): e for e in document.get("episodes", [])
        }
        self._last_flush = 0.0
        self._started = time.monotonic()
        self._elapsed_before = float(document.get("elapsed_s") or 0.0)

    @staticmethod
    def check(path: Path, header: Mapping[str, Any], *, resume: bool, overwrite: bool) -> None:
        """Raise ResultsError unless a run with this header may write `path`: a new file,
        --overwrite, or --resume of the same run."""
        if not path.exists() or overwrite:
            return
        old = read_results(path)
        if not resume:
            raise ResultsError(
                f"{path} already holds {len(old['episodes'])} of "
                f"{old.get('episodes_planned')} episodes ({old.get('status')}); pass "
                "--resume to finish it or --overwrite to start again"
            )
        differences = identity_mismatch(old, header)
        if differences:
            raise ResultsError(
                f"--resume: {path} is another run; it differs in "
                + "; ".join(differences)
                + " (use another --output folder, or --overwrite)"
            )

    @classmethod
    def open(
        cls, path: Path, header: dict[str, Any], *, resume: bool, overwrite: bool
    ) -> ResultsFile:
        """A new file, or with `resume` the existing one (same run only)."""
        cls.check(path, header, resume=resume, overwrite=overwrite)
        if path.exists() and not overwrite:
            old = read_results(path)
            document = {**old, **{k: v for k, v in header.items() if k != "started"}}
            document["resumed"] = [*old.get("resumed", []), now()]
            return cls(path, document)
        return cls(path, {**header, "episodes": []})

    @property
    def finished(self) -> set[int]:
        return set(self._episodes)

    @property
    def episodes(self) -> list[dict[str, Any]]:
        return [self._episodes[k] for k in sorted(self._episodes)]

    def add(self, episode: dict[str, Any]) -> None:
        self._episodes[int(episode["index"])] = episode

    def keep_only(self, indices: Iterable[int]) -> None:
        wanted = set(indices)
        self._episodes = {k: v for k, v in self._episodes.items() if k in wanted}

    def flush(self, status: str, *, force: bool = True) -> None:
        """Write the file (unless `force` is off and the last write was recent)."""
        if not force and time.monotonic() - self._last_flush < FLUSH_SECONDS:
            return
        self.document["status"] = status
        self.document["updated"] = now()
        self.document["elapsed_s"] = self._elapsed_before + time.monotonic() - self._started
        self.document["episodes"] = self.episodes
        self.document["summary"] = summarize(self.document)
        write_json_atomic(self.path, self.document)
        self._last_flush = time.monotonic()
