"""Loading a task's items from a hub dataset id or a local file or directory.

Every data-backed env takes `data=` in `make(...)`; this module turns that value into a list of
plain dicts, so envs never care where their items came from.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from collabzoo.envs.hub import load_hub_records

T = TypeVar("T")

FILE_SUFFIXES = (".json", ".jsonl", ".jsonl.gz", ".json.gz", ".csv")
ALL = "all"
"""The split of every task item of an env, in the dataset's own order (whole-benchmark runs)."""
REFERENCE_SPLITS = ("train", "eval")
"""The reference's two disjoint slices of a dataset."""
SPLITS = (*REFERENCE_SPLITS, ALL)
"""What `split=` and `options={"split": ...}` accept."""


def _suffix(path: Path) -> str | None:
    name = path.name.lower()
    return next((s for s in sorted(FILE_SUFFIXES, key=len, reverse=True) if name.endswith(s)), None)


def _read_text(path: Path) -> str:
    """The file's text; ValueError, naming the file, when it is not UTF-8 text (or gzip of it)."""
    try:
        if path.name.lower().endswith(".gz"):
            with gzip.open(path, "rt", encoding="utf-8") as f:
                return f.read()
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, gzip.BadGzipFile, EOFError) as error:
        compressed = "gzip-compressed " if path.name.lower().endswith(".gz") else ""
        raise ValueError(
            f"{path}: not {compressed}UTF-8 text ({type(error).__name__}: {error}); expected "
            f"JSON records in one of {FILE_SUFFIXES}"
        ) from None


def _records_from_json(value: Any, path: Path, split: str | None) -> list[dict[str, Any]]:
    if isinstance(value, dict):
        lists = {k: v for k, v in value.items() if isinstance(v, list)}
        if split is not None and split in lists:
            value = lists[split]
        elif len(lists) == 1:
            value = next(iter(lists.values()))
        else:
            raise ValueError(
                f"{path}: a JSON object must hold one list of records (or one per split, "
                f"with {split!r} among them); found lists under {sorted(lists)}"
            )
    if not isinstance(value, list) or not all(isinstance(r, dict) for r in value):
        raise ValueError(f"{path}: expected a list of JSON objects (one per task item)")
    return value


def read_file(path: Path, split: str | None = None) -> list[dict[str, Any]]:
    """Records of one json / jsonl / jsonl.gz / json.gz / csv file."""
    suffix = _suffix(path)
    if suffix is None:
        raise ValueError(f"{path}: unsupported file type; expected one of {FILE_SUFFIXES}")
    text = _read_text(path)
    if suffix == ".csv":
        return [dict(row) for row in csv.DictReader(io.StringIO(text))]
    if suffix in (".jsonl", ".jsonl.gz"):
        records = []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as error:
                    raise ValueError(f"{path}:{number}: not valid JSON: {error}") from error
        return _records_from_json(records, path, split)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not valid JSON: {error}") from error
    return _records_from_json(value, path, split)


def load_records(source: str | os.PathLike[str], *, split: str | None = None) -> list[dict]:
    """Task items from `source`: a local file, a directory of such files (read in name order),
    or a Hugging Face hub dataset id such as `openai/openai_humaneval` (loaded with `datasets`,
    `split` naming the hub split; one quick connectivity check per process, see
    `collabzoo.envs.hub`)."""
    path = Path(source).expanduser()
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and _suffix(p))
        if not files:
            raise ValueError(f"{path}: directory holds no {' / '.join(FILE_SUFFIXES)} files")
        return [r for f in files for r in read_file(f, split)]
    if path.is_file():
        return read_file(path, split)
    hub_id = hub_dataset_id(source)
    if hub_id is None:
        raise FileNotFoundError(
            f"{str(source)!r} is neither an existing file or directory nor a hub dataset id "
            "of the form 'owner/name'"
        )
    return load_hub_records(hub_id, split)


def hub_dataset_id(source: str | os.PathLike[str]) -> str | None:
    """`source` as the hub dataset id `load_records` would load, or None when it names a local
    file or directory (existing or not)."""
    path = Path(source).expanduser()
    text = str(source)
    if path.exists() or _suffix(path) or text.startswith((".", "/", "~")) or text.count("/") != 1:
        return None
    return text


def train_eval_split(items: Sequence[T], split: str, eval_fraction: float = 0.2) -> list[T]:
    """The reference convention for small task lists: the last ~20% are held out for eval.

    Ten items give 8 train / 2 eval, as in the reference StrBuild and HouseBuild runs. A list of
    one item serves both splits. Split "all" is the whole list, in its order.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")
    n = len(items)
    if n <= 1 or split == ALL:
        return list(items)
    held_out = min(n - 1, max(1, round(n * eval_fraction)))
    return list(items[: n - held_out] if split == "train" else items[n - held_out :])


def slice_splits(splits: Any) -> dict[str, tuple[int | None, int | None]]:
    """A dataset env's `splits`: a (start, stop) slice of the records for "train" and "eval"
    each, as the reference slices its hub split ("all" is always every record)."""
    found = dict(splits)
    bounds_ok = all(
        isinstance(v, (tuple, list))
        and len(v) == 2
        and all(b is None or (isinstance(b, int) and not isinstance(b, bool)) for b in v)
        for v in found.values()
    )
    if set(found) != set(REFERENCE_SPLITS) or not bounds_ok:
        raise ValueError(
            f"splits needs a (start, stop) slice for each of {REFERENCE_SPLITS} (split "
            f"{ALL!r} is always every record), got {splits!r}"
        )
    return found
