"""What a training run reports as it goes: one JSON line per update, and optionally TensorBoard,
Weights & Biases and a progress bar.

    with RunLogger("runs/magrpo", total_updates=200) as logger:
        for update in range(200):
            ...
            logger.log(update, {"mean_return": 0.41, "loss": 1.7})

`output_dir/metrics.jsonl` is the machine-readable record: one object per `log` call,
`{"update": ..., <metrics>..., "time": <seconds since the logger started>}`, flushed at once and
always strict JSON (NaN and infinities are written as null). A resumed run appends to it.
`read_metrics` reads it back, also while the run is still writing or after it was killed.

torch (for TensorBoard), wandb and tqdm are imported only when a logger asks for them.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["METRICS_FILE", "RunLogger", "metrics_path", "read_metrics"]

METRICS_FILE = "metrics.jsonl"
TENSORBOARD_DIR = "tensorboard"
RESERVED_KEYS = ("update", "time")
"""Keys every line of metrics.jsonl has: a metric may not use them."""
POSTFIX_METRICS = ("mean_return", "loss")
"""The metrics the progress bar shows, when a `log` call has them."""


def metrics_path(path: str | os.PathLike[str]) -> Path:
    """The metrics file of a run: `path` itself if it is a file, else `path/metrics.jsonl`."""
    path = Path(path)
    return path / METRICS_FILE if path.is_dir() else path


def _json_value(key: str, value: Any) -> Any:
    """A metric value as strict JSON: numbers as int or float (NaN and +-inf as None)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if not isinstance(value, numbers.Number) and callable(getattr(value, "item", None)):
        value = value.item()  # a numpy scalar or a one-element tensor
    if isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        number = float(value)
        return number if math.isfinite(number) else None
    raise TypeError(f"metric {key!r} is a {type(value).__name__}: log numbers (or None)")


def _drop_partial_last_line(path: Path) -> None:
    """Make a metrics file end with a complete line before a resumed run appends to it.

    A run killed mid-write leaves a last line without its newline. If that fragment is a whole
    JSON object it only lacks the newline, which is added; otherwise it is cut off, so the new
    lines do not run on from it and the file stays one JSON object per line.
    """
    if not path.is_file():
        return
    with open(path, "rb+") as handle:
        end = handle.seek(0, os.SEEK_END)
        if end == 0:
            return
        handle.seek(end - 1)
        if handle.read(1) == b"\n":
            return
        # find where the last line starts
        start, block = end, 4096
        while start > 0:
            step = min(block, start)
            handle.seek(start - step)
            newline = handle.read(step).rfind(b"\n")
            if newline >= 0:
                start = start - step + newline + 1
                break
            start -= step
        handle.seek(start)
        fragment = handle.read()
        try:
            complete = isinstance(json.loads(fragment), dict)
        except ValueError:
            complete = False
        if complete:
            handle.seek(end)
            handle.write(b"\n")
        else:
            handle.truncate(start)


class RunLogger:
    """Logs one update's metrics to metrics.jsonl, TensorBoard, Weights & Biases and a tqdm bar.

    Args:
        output_dir: the run directory (created if missing). An existing metrics.jsonl there is
            appended to, so a resumed run keeps its history.
        tensorboard: also write TensorBoard scalars to `output_dir/tensorboard` (needs torch and
            tensorboard; without them a warning is given once and the rest goes on).
        wandb: keyword arguments for `wandb.init` (e.g. `{"project": "collabzoo"}`) to also log
            to Weights & Biases; None (the default) leaves wandb alone. `dir` defaults to
            output_dir. Asking for it without wandb installed raises ImportError at once.
        total_updates: the length of the progress bar (None: a bar without a total).
        progress: show a tqdm progress bar on stderr, advanced by one per `log` call, showing
            the latest mean_return (and loss, if logged).
        initial_update: updates already done before this logger (a resumed run): where the
            progress bar starts.
    """

    def __init__(
        self,
        output_dir: str | os.PathLike[str],
        *,
        tensorboard: bool = True,
        wandb: Mapping[str, Any] | None = None,
        total_updates: int | None = None,
        progress: bool = True,
        initial_update: int = 0,
    ) -> None:
        self.output_dir = Path(output_dir)
        self.path = self.output_dir / METRICS_FILE
        self._closed = False
        self._file = None
        self._writer = None
        self._wandb_run = None
        self._bar = None

        wandb_module = None
        if wandb is not None:
            try:
                import wandb as wandb_module
            except ImportError:
                raise ImportError(
                    "Weights & Biases logging was asked for (wandb=...) but wandb is not "
                    "installed: pip install wandb"
                ) from None

        self.output_dir.mkdir(parents=True, exist_ok=True)
        _drop_partial_last_line(self.path)
        self._start = time.monotonic()
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (closed in close())
        try:
            if tensorboard:
                self._writer = self._tensorboard_writer()
            if wandb_module is not None:
                settings = dict(wandb)
                settings.setdefault("dir", str(self.output_dir))
                self._wandb_run = wandb_module.init(**settings)
            if progress:
                from tqdm.auto import tqdm

                self._bar = tqdm(
                    total=total_updates, initial=initial_update, unit="update", dynamic_ncols=True
                )
        except BaseException:
            self.close()
            raise

    def _tensorboard_writer(self) -> Any:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as error:
            warnings.warn(
                f"TensorBoard logging is off: {error} (pip install torch tensorboard); "
                f"metrics still go to {self.path}",
                RuntimeWarning,
                stacklevel=3,
            )
            return None
        return SummaryWriter(log_dir=str(self.output_dir / TENSORBOARD_DIR))

    @property
    def closed(self) -> bool:
        return self._closed

    def log(self, update: int, metrics: Mapping[str, Any]) -> None:
        """Record the metrics of one update: a line in metrics.jsonl (written and flushed now),
        TensorBoard scalars at step `update`, a wandb log, and one step of the progress bar."""
        if self._closed:
            raise RuntimeError(f"this RunLogger ({self.path}) is closed")
        if isinstance(update, bool) or not isinstance(update, numbers.Integral):
            raise TypeError(f"update must be an int, got {update!r}")
        update = int(update)
        values: dict[str, Any] = {}
        for key, value in metrics.items():
            if not isinstance(key, str):
                raise TypeError(f"metric names must be str, got {key!r}")
            if key in RESERVED_KEYS:
                raise ValueError(f"{key!r} is written by the logger itself; rename that metric")
            values[key] = _json_value(key, value)
        record = {"update": update, **values, "time": round(time.monotonic() - self._start, 3)}
        self._file.write(json.dumps(record, allow_nan=False) + "\n")
        self._file.flush()

        numeric = {
            key: float(value)
            for key, value in values.items()
            if isinstance(value, (int, float)) and not isinstance(value, bool)
        }
        if self._writer is not None:
            for key, value in numeric.items():
                self._writer.add_scalar(key, value, global_step=update)
        if self._wandb_run is not None:
            self._wandb_run.log(dict(values), step=update)
        if self._bar is not None:
            shown = {key: f"{numeric[key]:.4g}" for key in POSTFIX_METRICS if key in numeric}
            if shown:
                self._bar.set_postfix(shown, refresh=False)
            self._bar.update(1)

    def close(self) -> None:
        """Flush and close everything; calling it again does nothing."""
        if self._closed:
            return
        self._closed = True
        if self._bar is not None:
            self._bar.close()
        if self._writer is not None:
            self._writer.flush()
            self._writer.close()
        if self._wandb_run is not None:
            self._wandb_run.finish()
        if self._file is not None:
            self._file.close()

    def __enter__(self) -> RunLogger:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def read_metrics(path: str | os.PathLike[str], *, drop_rewound: bool = False) -> list[dict]:
    """The records of a run's metrics.jsonl, in the order they were written.

    `path` is a run directory or the jsonl file itself. An unreadable last line (a run killed,
    or still running, mid-write) is skipped; an unreadable line before it raises ValueError
    naming the line.

    With `drop_rewound`, a run resumed from an earlier checkpoint reads as one history: a record
    whose update is not above the one before it discards the earlier records from that update
    on (they belong to the abandoned branch).
    """
    path = metrics_path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no metrics file at {path}")
    with open(path, encoding="utf-8", errors="replace") as handle:
        lines = handle.read().splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    records: list[dict] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if not isinstance(record, dict):
            if number == len(lines):
                break  # a truncated last line
            raise ValueError(f"{path}, line {number}: not a JSON object: {line[:80]!r}")
        records.append(record)
    if drop_rewound:
        records = _latest_branch(records)
    return records


def _latest_branch(records: list[dict]) -> list[dict]:
    kept: list[dict] = []
    for record in records:
        update = record.get("update")
        if isinstance(update, (int, float)):
            while kept and isinstance(kept[-1].get("update"), (int, float)):
                if kept[-1]["update"] < update:
                    break
                kept.pop()
        kept.append(record)
    return kept
