"""Where a results file came from: the commit, the date, the machine and the command.

Every results file a benchmark writes carries `provenance()` as its top-level `"provenance"`
key, so that a figure in the docs can be traced to the code and the hardware that produced it
(tests/test_docs_numbers.py rebuilds the docs' tables from these files and checks the key).
The scripts run as `python benchmarks/x.py`, so they import this as `from provenance import
provenance`.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]

KEYS = ("commit", "date", "machine", "command")
"""The keys every provenance record has, none of them empty."""


def commit() -> str:
    """The checkout's HEAD, or "unknown" outside a git checkout (an unpacked release)."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=REPOSITORY,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    head = done.stdout.strip()
    return head if done.returncode == 0 and head else "unknown"


def cpu_model() -> str:
    """The CPU's name from /proc/cpuinfo, else what `platform` knows."""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "unknown CPU"


def memory_gib() -> float | None:
    """Physical memory in GiB, where the OS says."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        return None


def gpu_name() -> str | None:
    """The first CUDA device torch sees; None without torch or without a GPU."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    return f"{torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}"


def machine() -> str:
    """One line: CPU model, cores, memory, and the GPU when torch sees one."""
    parts = [cpu_model(), f"{os.cpu_count() or '?'} cores"]
    memory = memory_gib()
    if memory is not None:
        parts.append(f"{memory:.0f} GiB memory")
    gpu = gpu_name()
    if gpu is not None:
        parts.append(f"GPU {gpu}")
    return ", ".join(parts)


def published_argument(argument: str) -> str:
    """An argument as a results file shows it: an absolute path inside the checkout relative to
    it, one outside cut to its last part (no machine's folders get published), `--x=PATH` alike."""
    option, equals, value = (
        argument.partition("=") if argument.startswith("-") else ("", "", argument)
    )
    if not value.startswith("/"):
        return argument
    path = Path(value)
    try:
        shown = path.resolve().relative_to(REPOSITORY).as_posix()
    except (ValueError, OSError):
        shown = path.name
    return f"{option}{equals}{shown}"


def command(argv: list[str]) -> str:
    """`python <script> <args>`, paths as `published_argument` shows them, so the line can be run
    again from the repository root."""
    if not argv:
        return "python"
    script = str(Path(argv[0]).resolve())  # run from any folder: shown from the checkout's root
    return shlex.join(["python", *(published_argument(a) for a in [script, *argv[1:]])])


def provenance(argv: list[str] | None = None) -> dict[str, str]:
    """{"commit", "date" (UTC, YYYY-MM-DD), "machine", "command"} for a results file written now
    by the command `argv` (default: this process's `sys.argv`)."""
    return {
        "commit": commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
        "machine": machine(),
        "command": command(list(sys.argv if argv is None else argv)),
    }


if __name__ == "__main__":
    import json

    print(json.dumps(provenance(), indent=2))
