"""Running untrusted, model-written code in isolation (Docker by default).

    from collabzoo.sandbox import get_sandbox
    with get_sandbox() as sandbox:
        result = sandbox.run("def f(x):\n    return x + 1", ["assert candidate(1) == 2"],
                             entry_point="f")
        result.passed  # (True,)

Imports nothing else from collabzoo: rewards call into it, never the other way round.
"""

from __future__ import annotations

import atexit
import sys
import threading
import warnings
from collections.abc import Sequence
from typing import Any

from collabzoo.sandbox.pool import Sandbox
from collabzoo.sandbox.result import ExecResult, Job

KINDS = ("auto", "docker", "process", "ray")


def docker_available() -> tuple[bool, str]:
    """Whether a Docker daemon answers, and if not, why."""
    try:
        import docker

        docker.from_env(timeout=5).ping()
        return True, "the Docker daemon answers"
    except Exception as error:  # no SDK, no socket, no permission, daemon down
        return False, f"{type(error).__name__}: {error}"


def get_sandbox(kind: str = "auto", **limits: Any) -> Sandbox:
    """A sandbox pool. "docker": hardened containers; "process": local child processes with
    resource limits (weaker isolation); "auto": Docker wherever a daemon answers, else the
    process backend with a loud warning; "ray": a Docker pool on every node of a Ray cluster
    (`address=`; see `ray_pool`). `limits` go to the backend (size, memory_mb, ...; for
    Docker also `runtime="runsc"`: gVisor, a second wall)."""
    if kind not in KINDS:
        raise ValueError(f"sandbox kind must be one of {KINDS}, got {kind!r}")
    if kind == "auto":
        available, why = docker_available()
        if not available:
            message = (
                f"collabzoo: no Docker daemon ({why}); running model-written code with the "
                "PROCESS backend, which isolates it much less. Start Docker for real isolation."
            )
            warnings.warn(message, RuntimeWarning, stacklevel=2)
            print(message, file=sys.stderr, flush=True)
            kind = "process"
        else:
            kind = "docker"
    if kind == "ray":  # a pool per node of a Ray cluster (address="auto", "ray://...")
        from collabzoo.sandbox.ray_pool import RaySandbox

        return RaySandbox(**limits)
    if kind == "docker":
        from collabzoo.sandbox.docker import DockerSandbox

        return DockerSandbox(**limits)
    if limits.get("runtime") is not None:  # never a silent step down from gVisor
        raise ValueError(
            f"runtime={limits['runtime']!r} needs the docker sandbox, and this one is "
            f"{kind!r}" + ("" if kind == "process" else " (no Docker daemon answers)")
        )
    limits.pop("runtime", None)
    from collabzoo.sandbox.process import ProcessSandbox

    return ProcessSandbox(**limits)


_defaults: dict[tuple[str, ...], Sandbox] = {}
_default_lock = threading.Lock()


def default_sandbox(packages: Sequence[str] = ()) -> Sandbox:
    """One process-wide sandbox (kind "auto") per package set, made on first use and closed at
    exit; every env that is not given its own shares the one its task's packages name."""
    key = tuple(sorted(set(packages)))
    with _default_lock:
        if key not in _defaults:
            sandbox = get_sandbox("auto", packages=key) if key else get_sandbox("auto")
            atexit.register(sandbox.close)
            _defaults[key] = sandbox
        return _defaults[key]


__all__ = [
    "KINDS",
    "ExecResult",
    "Job",
    "Sandbox",
    "default_sandbox",
    "docker_available",
    "get_sandbox",
]
