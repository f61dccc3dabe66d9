"""The environment registry: versioned ids, short names, and PettingZoo's own registry.

`make("strbuild")`, `make("StrBuild")` and `make("collabzoo/StrBuild-v0")` give the same env; a
short or unversioned name resolves to the newest version. Each id is also registered with
`pettingzoo.register`, so `pettingzoo.make("parallel", "collabzoo/StrBuild-v0")` works, and
`pettingzoo.make("aec", "collabzoo/StrBuild-v0")` gives its AEC view (`make_aec`); its
single-agent view (`collabzoo.envs.single`) is registered with Gymnasium, so
`gymnasium.make("collabzoo/StrBuild-single-v0")` works too.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
from dataclasses import dataclass
from typing import Any

import gymnasium
import pettingzoo
from pettingzoo import AECEnv, ParallelEnv
from pettingzoo.utils.conversions import parallel_to_aec

NAMESPACE = "collabzoo"
_ID = re.compile(rf"^{NAMESPACE}/(?P<name>[A-Za-z][A-Za-z0-9]*)-v(?P<version>\d+)$")


@dataclass(frozen=True)
class EnvEntry:
    """One registered environment."""

    id: str
    entry_point: str
    description: str

    @property
    def name(self) -> str:
        return _ID.match(self.id).group("name")  # type: ignore[union-attr]

    @property
    def version(self) -> int:
        return int(_ID.match(self.id).group("version"))  # type: ignore[union-attr]

    @property
    def short_name(self) -> str:
        return self.name.lower()

    def load(self) -> type[ParallelEnv]:
        module, _, attr = self.entry_point.partition(":")
        return getattr(importlib.import_module(module), attr)


_REGISTRY: dict[str, EnvEntry] = {}


def register(id: str, entry_point: str, description: str) -> None:
    """Register `collabzoo/Name-vN` with a `module:Class` entry point and a one-line summary."""
    if not _ID.match(id):
        raise ValueError(f"environment ids look like '{NAMESPACE}/Name-v0', got {id!r}")
    if id in _REGISTRY:
        raise ValueError(f"environment {id!r} is already registered")
    _REGISTRY[id] = EnvEntry(id, entry_point, description)
    pettingzoo.register("parallel", id, entry_point=entry_point)
    pettingzoo.register("aec", id, entry_point=functools.partial(make_aec, id))
    name, _, version = id.rpartition("-v")
    gymnasium.register(
        f"{name}-single-v{version}",
        entry_point="collabzoo.envs.single:SingleAgentView",
        kwargs={"env": id},
    )


def entries() -> list[EnvEntry]:
    """Every registered environment, sorted by id."""
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def names() -> list[str]:
    """Every registered environment id."""
    return sorted(_REGISTRY)


def resolve(name: str) -> EnvEntry:
    """The entry for an id, a short name (`strbuild`) or an unversioned name (newest version)."""
    if not isinstance(name, str):
        raise TypeError(f"environment name must be a str, got {type(name).__name__}")
    if name in _REGISTRY:
        return _REGISTRY[name]
    wanted = name.strip().lower().removeprefix(f"{NAMESPACE}/")
    candidates = [e for e in _REGISTRY.values() if wanted in (e.short_name, e.id.lower())]
    if not candidates:
        known = ", ".join(sorted({e.short_name for e in _REGISTRY.values()}) + names())
        raise ValueError(f"unknown environment {name!r}; known names: {known}")
    return max(candidates, key=lambda e: e.version)


def make(name: str, **kwargs: Any) -> ParallelEnv:
    """Make a registered environment; keyword arguments go to its constructor."""
    entry = resolve(name)
    env_class = entry.load()
    try:
        inspect.signature(env_class).bind(**kwargs)
    except TypeError as error:
        accepted = [p for p in inspect.signature(env_class).parameters if p != "self"]
        raise TypeError(f"{entry.id}: {error}; it accepts: {', '.join(accepted)}") from None
    return env_class(**kwargs)


def make_aec(name: str, **kwargs: Any) -> AECEnv:
    """The env as a PettingZoo AECEnv (`parallel_to_aec`), for AEC-only tools: the agents act
    one after another, and the env plays the turn once every live agent has acted."""
    return parallel_to_aec(make(name, **kwargs))


pettingzoo_make = make
"""`make` under the name PettingZoo users look for: `collabzoo.pettingzoo_make("strbuild")`."""
