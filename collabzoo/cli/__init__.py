"""The `collabzoo` command line: list the environments, play one by hand, run the scripted demo.

    collabzoo list [--json]
    collabzoo play ENV [--seed N] [--task ID_OR_INDEX] [--split train|eval|all]
                       [--partner oracle|naive] [--seat AGENT] [--env-arg KEY=VALUE ...]
    collabzoo serve ENV [--host H] [--port N] [--env-arg KEY=VALUE ...]   (OpenEnv server)
    collabzoo demo [--episodes-per-task N] [--json PATH] [--envs strbuild,housebuild]
    collabzoo bench --env ENV|all|embedded --team SPEC [--protocol P] ...   (collabzoo.bench)
    collabzoo leaderboard DIR [--format markdown|csv|json] [--plot PNG]
    collabzoo rescore FILE [FILE ...]     (replay a results file, check every reward)
    collabzoo export ENV --team SPEC --episodes N -o DIR   (episodes as a datasets dataset)
    collabzoo sft DATASET --model tiny|small|NAME --output DIR   (supervised warm start)
    collabzoo train ALGO --env ENV --model tiny|NAME|WARM_START --output DIR
    collabzoo plot RUN [RUN ...]
    collabzoo reproduce --model NAME [--tasks ...] [--rows default,...] [--dry-run] [--ray]
    collabzoo model list|pull NAME;  collabzoo sandbox build|check

One module per command group registers its commands (`add_commands`); the options several
commands share are defined once in `collabzoo.cli.options`. Only the standard library and the
environments are imported here: no torch, no transformers (a command imports what it needs
when it runs). User mistakes (an unknown env, a bad task, a bad constructor argument) end with
one line "collabzoo: error: ..." on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys

from collabzoo import __version__
from collabzoo.cli import bench, demo, model, play, plot, reproduce, sandbox, serve, sft, train
from collabzoo.cli.usage import PROG, CommandParser, UsageError, report_error

COMMAND_GROUPS = (play, demo, train, sft, sandbox, model, serve, plot, bench, reproduce)
"""Registered in this order, which `collabzoo --help` lists; the bench family (bench,
leaderboard, rescore, export) comes last, then `reproduce`, which runs train and bench."""


def build_parser() -> argparse.ArgumentParser:
    """The `collabzoo` parser; each subcommand sets its `handler`."""
    parser = CommandParser(
        prog=PROG,
        description="Multi-agent LLM collaboration tasks as PettingZoo environments.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for group in COMMAND_GROUPS:
        group.add_commands(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit status (2 for a usage mistake, 130 on Ctrl-C)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # --help, --version and argparse's own usage errors
        return stop.code if isinstance(stop.code, int) else 2
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    args.argv = list(sys.argv[1:] if argv is None else argv)  # recorded by `bench`
    try:
        return args.handler(args)
    except UsageError as error:
        return report_error(str(error))
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `collabzoo demo | head`: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


__all__ = ["PROG", "UsageError", "build_parser", "main"]
