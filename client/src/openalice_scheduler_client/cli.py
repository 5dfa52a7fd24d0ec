"""`leasectl`: the lease API from the command line.

    leasectl [--url URL] [--token T | --secret S | --auth iam [--region R] [--profile P]] [--json] COMMAND

Exit codes: 0 success, 1 the API refused or failed (code and message on stderr), 2 usage error,
3 the service cannot be reached, 4 the worker never became ready (`--wait`, `wait`: it failed to boot,
the wait timed out, or the lease ended in the queue). With `--json` stdout carries exactly one JSON document:
the API's body on success (`list`: every page merged, `next_token` null; `release`: `{}`, standing for the
API's empty 204 body), and the error envelope `{"error": {"code", "message", "details"?}}` on
exit 1 or 3 (API Gateway's `{"message": ...}` 401/403 bodies and unreachable services normalised
to it). `watch --json` is a stream: one JSON document (a list body) per line per refresh.

This module is the entry point: the whole parser, the dispatch to the command modules (`cli_leases`,
`cli_queue`, `cli_watch`, `cli_usage`, `cli_ops`, `cli_callers`, `cli_completion`, which share `cli_context`), and error
reporting. The credential options are the client's arguments: `openalice_scheduler_client.auth` chooses.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TextIO

from .auth import AUTH_ENV, MODES, SECRET_ENV, TOKEN_ENV
from .cli_callers import add_callers_parser, cmd_callers
from .cli_completion import add_completion_parser, cmd_completion
from .cli_context import EXIT_API_ERROR, EXIT_OK, EXIT_UNREACHABLE, PROG, Command, Context
from .cli_events import add_events_parsers, cmd_events, cmd_webhooks
from .cli_leases import LEASE_COMMANDS, add_lease_parsers, check_release
from .cli_ops import OPERATIONS, add_operations
from .cli_progress import WaitProgress
from .cli_queue import add_queue_parser, cmd_queue
from .cli_style import CLEAR_EOL, ExampleFormatter, example_epilog, format_remaining, format_table, isatty
from .cli_usage import add_usage_parser, cmd_usage
from .cli_watch import add_watch_parser, cmd_watch
from .client import SchedulerClient
from .errors import SchedulerError, ServiceUnreachable, Unauthorized
from .transport import DEFAULT_URL, URL_ENV

# What callers and tests take from `leasectl`'s module besides `main`.
__all__ = ["CLEAR_EOL", "WaitProgress", "build_parser", "format_remaining", "format_table", "main"]

COMMANDS: dict[str, Command] = {
    **LEASE_COMMANDS,
    "queue": cmd_queue,
    "watch": cmd_watch,
    "events": cmd_events,
    "webhooks": cmd_webhooks,
    "usage": cmd_usage,
    **OPERATIONS,
    "callers": cmd_callers,
    "completion": cmd_completion,
}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `leasectl` (every command has `--help`, ending with an example)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Acquire, inspect, renew and release worker leases of the OpenAlice scheduler.",
        epilog=(
            f"environment: {URL_ENV} (default {DEFAULT_URL}); one credential: {TOKEN_ENV} (--token),\n"
            f"{SECRET_ENV} (--secret), or {AUTH_ENV}=iam (--auth iam: SigV4 from the AWS credential chain,\n"
            "AWS_PROFILE, AWS_REGION). Options beat the environment; two credential options are an error.\n"
            "exit codes: 0 success, 1 the API refused or failed, 2 usage error, 3 service unreachable,\n"
            "4 the worker never became ready (acquire --wait, wait; or the lease ended in the queue).\n"
            "`leasectl COMMAND --help` shows what COMMAND does, with an example."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--url", help=f"scheduler base URL (default: ${URL_ENV} or {DEFAULT_URL})")
    parser.add_argument(
        "--token", metavar="T", help=f"your caller token, sent as Authorization: Bearer (default: ${TOKEN_ENV})"
    )
    parser.add_argument(
        "--secret", metavar="S", help=f"shared secret sent as X-Internal-Secret (default: ${SECRET_ENV})"
    )
    parser.add_argument(
        "--auth", choices=MODES, help=f"how to authenticate (default: ${AUTH_ENV}, else by the variable that is set)"
    )
    parser.add_argument(
        "--region", metavar="R", help="the API's AWS region, for --auth iam (default: from the URL, AWS_REGION)"
    )
    parser.add_argument(
        "--profile", metavar="P", help="the AWS profile to sign as, for --auth iam (default: AWS_PROFILE)"
    )
    parser.add_argument(
        "--json", action="store_true", help="print the API's JSON body on stdout instead of human-readable text"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    add_lease_parsers(commands)
    add_queue_parser(commands)
    add_usage_parser(commands)
    add_watch_parser(commands)
    add_events_parsers(commands)
    add_operations(parser, commands)
    add_callers_parser(commands)
    add_completion_parser(commands)
    for name, sub in commands.choices.items():
        sub.epilog = example_epilog(name)
        sub.formatter_class = ExampleFormatter
    return parser


def _report(ctx: Context, client: SchedulerClient, error: SchedulerError) -> int:
    if ctx.json:
        ctx.print_json(error.envelope())
    if isinstance(error, ServiceUnreachable):
        ctx.stderr.write(f"{PROG}: cannot reach the scheduler: {error.message}\n")
        return EXIT_UNREACHABLE
    ctx.stderr.write(f"{PROG}: {error.code}: {error.message}\n")
    for problem in error.details.get("problems") or []:
        if isinstance(problem, dict):
            ctx.stderr.write(f"  {problem.get('field', '?')}: {problem.get('problem', '?')}\n")
    if isinstance(error, Unauthorized) and not client.credential.present:
        ctx.stderr.write(f"  (no credential given: pass --token or --secret, or set {TOKEN_ENV} or {SECRET_ENV})\n")
    return EXIT_API_ERROR


@contextmanager
def _log_to(stream: TextIO) -> Iterator[None]:
    """Show the client's warnings (e.g. `retry 1/4 in 0.5 s`) on `stream` while the command runs."""
    library = logging.getLogger("openalice_scheduler_client")
    handler = logging.StreamHandler(stream)
    clear = f"\r{CLEAR_EOL}" if isatty(stream) else ""  # a spinner may be on that line
    handler.setFormatter(logging.Formatter(f"{clear}{PROG}: %(message)s"))
    handler.setLevel(logging.WARNING)
    previous_level = library.level
    library.addHandler(handler)
    if library.getEffectiveLevel() > logging.WARNING:
        library.setLevel(logging.WARNING)
    try:
        yield
    finally:
        library.removeHandler(handler)
        library.setLevel(previous_level)


def main(argv: Sequence[str] | None = None, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Run `leasectl` with `argv` (default: the process's arguments); returns the exit code."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    parser = build_parser()
    args = parser.parse_args(argv)  # usage errors exit 2 here
    check_release(parser, args)
    if getattr(args, "lease_id", None) == "":
        parser.error("ID must not be empty")
    if getattr(args, "name", None) == "":
        parser.error("NAME must not be empty")
    ctx = Context(parser, args, out, err)
    # watch refreshes every second: one quick attempt per frame beats a long retry behind it.
    overrides: dict[str, Any] = {"retries": 0, "timeout": 10.0} if args.command == "watch" else {}
    try:
        client = ctx.client(**overrides)
    except ValueError as bad:  # a malformed --url / $SCHEDULER_URL, credential options that disagree (CredentialError)
        parser.error(str(bad))
    try:
        with client, _log_to(err):
            return COMMANDS[args.command](ctx, client)
    except SchedulerError as error:
        return _report(ctx, client, error)
    except KeyboardInterrupt:
        err.write("\n")
        return 130
    except BrokenPipeError:
        # `leasectl list | head`: the reader left; exit quietly without a traceback at shutdown.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
