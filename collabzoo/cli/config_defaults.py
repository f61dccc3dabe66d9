"""Defaults shown in help that the learners own, read from their dataclasses when the help is
printed, so the command line never types a learner's default a second time.

Reading them imports the learners (torch), which only printing a training command's help
does: building the parser stays free of torch, and without the train extra the help says
"the learner's default" instead of a number.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from typing import Any

UNKNOWN = "the learner's default"
"""Shown for a default that cannot be read: the learners are not installed."""


class DefaultHelp(str):
    """A help text whose `%(config_default)s` is filled by `read()` only when argparse formats
    the help (`help % params`), not when the parser is built."""

    read: Callable[[], str]

    def __new__(cls, text: str, read: Callable[[], str]) -> DefaultHelp:
        help_text = super().__new__(cls, text)
        help_text.read = read
        return help_text

    def __mod__(self, params: Any) -> str:
        return str.__mod__(str(self), {**params, "config_default": self.read()})


def field_default(config: type, field: str) -> Any:
    """The default of one field of a config dataclass (its factory's value if it has one)."""
    for found in dataclasses.fields(config):
        if found.name == field:
            if found.default is not dataclasses.MISSING:
                return found.default
            if found.default_factory is not dataclasses.MISSING:
                return found.default_factory()
    raise KeyError(f"{config.__name__} has no field {field!r} with a default")


def _shown(defaults: Mapping[str, Any]) -> str:
    """One value when every learner agrees, else each learner's."""
    values = list(defaults.values())
    if all(v == values[0] for v in values):
        return str(values[0])
    return ", ".join(f"{name} {value}" for name, value in defaults.items())


def learners_default(field: str) -> Callable[[], str]:
    """`field`'s default in every `collabzoo train` learner's config."""

    def read() -> str:
        try:
            from collabzoo.algos import LEARNERS
        except ImportError:
            return UNKNOWN
        return _shown(
            {name: field_default(config, field) for name, (config, _) in LEARNERS.items()}
        )

    return read


def supervised_default(field: str) -> Callable[[], str]:
    """`field`'s default in `SupervisedConfig` (`collabzoo sft`)."""

    def read() -> str:
        try:
            from collabzoo.algos import SupervisedConfig
        except ImportError:
            return UNKNOWN
        return str(field_default(SupervisedConfig, field))

    return read


def policy_default(parameter: str) -> Callable[[], str]:
    """A default of `LLMPolicy`'s constructor (the policy a training command builds)."""

    def read() -> str:
        try:
            from collabzoo.algos import LLMPolicy
        except ImportError:
            return UNKNOWN
        return str(inspect.signature(LLMPolicy).parameters[parameter].default)

    return read
