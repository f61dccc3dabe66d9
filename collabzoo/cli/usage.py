"""User mistakes on the command line, and how they are reported: one "collabzoo: error: ..."
line on stderr and exit status 2, never a traceback."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from collabzoo.envs.hub import DatasetUnavailable

PROG = "collabzoo"


class UsageError(Exception):
    """A mistake on the command line: reported as one 'collabzoo: error:' line, exit 2."""


class CommandParser(argparse.ArgumentParser):
    """argparse's parser, except that a mistake in one argument's value (a number out of its
    range, not a number, not one of the choices) is reported as every usage error is, one
    'collabzoo: error: argument --flag: ...' line: the usage block would say nothing about it.
    Mistakes in the command line's shape (a missing or unknown argument) keep the usage."""

    def error(self, message: str) -> NoReturn:
        if message.startswith("argument "):
            self.exit(2, f"{PROG}: error: {message}\n")
        super().error(message)


def report_error(message: str) -> int:
    """Print `message` as argparse prints its own usage errors; the exit status to return."""
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return 2


def checked(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call into the envs with user input; their ValueError / TypeError / KeyError / OSError
    (whose messages say what was expected) become a UsageError."""
    try:
        return call(*args, **kwargs)
    except DatasetUnavailable as error:  # offline without a local copy: say which one to pass
        raise UsageError(f"{error.title}: {error.hint('--env-arg data=PATH')}") from None
    except (ValueError, TypeError, KeyError, OSError) as error:
        message = error.args[0] if isinstance(error, KeyError) and error.args else error
        raise UsageError(str(message)) from None
