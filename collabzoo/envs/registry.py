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
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium
import pettingzoo
from pettingzoo import AECEnv, ParallelEnv
from pettingzoo.utils.conversions import parallel_to_aec

from collabzoo.envs.family import REWARD, TaskColumns, TaskFamily, TaskSpec, load
from collabzoo.envs.module_paths import MODULE_PATHS

NAMESPACE = "collabzoo"
_ID = re.compile(rf"^{NAMESPACE}/(?P<name>[A-Za-z][A-Za-z0-9]*)-v(?P<version>\d+)$")


@dataclass(frozen=True)
class EnvEntry:
    """One registered environment."""

    id: str
    entry_point: str | Callable[..., Any]
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
        return load(self.entry_point)


_REGISTRY: dict[str, EnvEntry] = {}


def register(id: str, entry_point: str | Callable[..., Any], description: str) -> None:
    """Register `collabzoo/Name-vN` with a `module:Class` entry point (or the class itself) and
    a one-line summary."""
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


_FAMILIES: dict[str, TaskFamily] = {}
_SPECS: dict[str, TaskSpec] = {}


def register_family(family: TaskFamily) -> None:
    """Register every env a family declares, its declaration with it, and the import paths its
    modules had before they moved into the family."""
    if family.name in _FAMILIES:
        raise ValueError(f"task family {family.name!r} is already registered")
    for spec in family.tasks:
        register(spec.id, spec.entry_point, spec.description)
        _SPECS[spec.id] = spec
    for old, new in family.module_paths.items():
        MODULE_PATHS.add(old, new)
    _FAMILIES[family.name] = family


def families() -> list[TaskFamily]:
    """Every registered family, in registration order."""
    return list(_FAMILIES.values())


def task_specs() -> list[TaskSpec]:
    """Every declared task, family by family in registration order."""
    return [spec for family in _FAMILIES.values() for spec in family.tasks]


def task_spec(name: str) -> TaskSpec:
    """The declaration of a registered env (by id or short name). An env registered without one
    (`register`) gets a plain declaration: its reward as the one column, no teams."""
    entry = resolve(name)
    if entry.id in _SPECS:
        return _SPECS[entry.id]
    return TaskSpec(
        entry.id,
        entry.entry_point,
        entry.description,
        TaskColumns(entry.name, (REWARD,), REWARD.name),
    )


def declared(short_name: str) -> TaskSpec | None:
    """The declaration of the task with this short name, None for an env without one (results
    files name their env by its short name)."""
    return next((s for s in _SPECS.values() if s.short_name == short_name), None)


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
