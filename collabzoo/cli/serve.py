"""`collabzoo serve`: one env over OpenEnv's HTTP/WebSocket server."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from collabzoo.cli.options import (
    add_env_arg,
    key_values,
    nonnegative_float,
    port_number,
    positive_int,
)
from collabzoo.cli.usage import UsageError, checked


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        from collabzoo.integrations.openenv import make_app, run_server
    except ImportError as error:
        raise UsageError(
            f'collabzoo serve needs openenv-core ({error}); pip install "collabzoo[interop]"'
        ) from None
    app = checked(
        make_app,
        args.env,
        key_values(args.env_arg),
        max_sessions=args.max_sessions,
        session_timeout_s=args.session_timeout or None,
    )
    print(
        f"serving {app.state.collabzoo_env_id} over OpenEnv at http://{args.host}:{args.port} "
        f"(WebSocket /ws; up to {args.max_sessions} sessions)",
        file=sys.stderr,
        flush=True,
    )
    return checked(run_server, app, host=args.host, port=args.port)


def add_commands(commands: Any) -> None:
    """Add `serve` to the `collabzoo` subcommands."""
    serving = commands.add_parser(
        "serve",
        help="serve an environment over OpenEnv (HTTP/WebSocket reset, step, state)",
        description="Serve ENV with openenv-core's server: each WebSocket session gets its own "
        "copy of the env; the action is the joint action (one completion per agent), the "
        "observation every agent's prompt, the rewards, infos and state(). Connect with "
        "collabzoo.integrations.openenv.remote_env(URL), a PettingZoo ParallelEnv.",
    )
    serving.add_argument("env", metavar="ENV", help="env name or id (collabzoo list names them)")
    serving.add_argument("--host", default="127.0.0.1", help="address to bind (%(default)s)")
    serving.add_argument("--port", type=port_number, default=8000, help="port (%(default)s)")
    add_env_arg(serving)
    serving.add_argument(
        "--max-sessions", type=positive_int, default=256, help="concurrent sessions (%(default)s)"
    )
    serving.add_argument(
        "--session-timeout",
        type=nonnegative_float,
        default=900.0,
        help="seconds before an idle session is dropped (%(default)g; 0: never)",
    )
    serving.set_defaults(handler=cmd_serve)
