"""`leasectl` operations: `--version`, `health`, and `logs` (once, or followed until the lease ends)."""

from __future__ import annotations

import argparse
import re
import time
from datetime import UTC, datetime
from typing import Any

from .cli_context import EXIT_OK, Command, Context
from .client import SchedulerClient
from .errors import Gone, NotFound
from .version import __version__

MAX_TAIL = 5000
_STAMP = re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2})(?:\.([0-9]{1,9}))?Z")


def _tail(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of lines") from None
    if not 1 <= value <= MAX_TAIL:
        raise argparse.ArgumentTypeError(f"{text!r} must be from 1 to {MAX_TAIL}")
    return value


def _interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than 0")
    return value


def add_operations(parser: argparse.ArgumentParser, commands: Any) -> None:
    """`--version`, and the arguments of `health` and `logs`."""
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands.add_parser(
        "health", help="check the service answers", description="Ask the service whether it is up (GET /health)."
    )
    logs = commands.add_parser(
        "logs",
        help="show a lease's worker output",
        description=(
            "Show the worker's output (GET /v1/lease/ID/logs): a Docker worker's stdout and stderr, a RunPod "
            "pod's log. A worker removed (every ended lease's is) has no logs left: exit 1, `gone`."
        ),
    )
    logs.add_argument("lease_id", metavar="ID")
    logs.add_argument("--tail", type=_tail, metavar="N", help="the last N lines (service default 200, at most 5000)")
    logs.add_argument("--since", metavar="TIME", help="only lines written at or after TIME (RFC 3339)")
    logs.add_argument("--timestamps", action="store_true", help="start each line with its time")
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing new lines until the lease ends")
    logs.add_argument("--interval", type=_interval, default=2.0, metavar="SECONDS", help="--follow's poll period")
    logs.add_argument("--owner", metavar="O", help="the lease's owner id (X-Lease-Owner)")


def cmd_health(ctx: Context, client: SchedulerClient) -> int:
    body = client.health()
    if ctx.json:
        ctx.print_json(body)
    else:
        ctx.stdout.write(f"{body.get('status', '?')}: {body.get('service', '?')} at {client.url}\n")
    return EXIT_OK


def cmd_logs(ctx: Context, client: SchedulerClient) -> int:
    args = ctx.args
    if not args.follow:
        logs = client.logs(
            args.lease_id, tail=args.tail, since=args.since, timestamps=args.timestamps, owner_id=args.owner
        )
        ctx.stdout.write(logs.text)
        if logs.truncated:
            ctx.stderr.write("leasectl: older lines were left out (the answer is limited to 1 MiB)\n")
        return EXIT_OK
    return _follow(ctx, client)


def _follow(ctx: Context, client: SchedulerClient) -> int:
    """Poll with `since` = the newest line's time; lines at exactly that time come again and are skipped."""
    args = ctx.args
    last_at: tuple[str, int] | None = None  # (the newest time seen, how many lines carried it)
    since: str | None = args.since
    tail: int | None = args.tail
    try:
        while True:
            try:
                logs = client.logs(args.lease_id, tail=tail, since=since, timestamps=True, owner_id=args.owner)
            except (Gone, NotFound) as ended:
                if last_at is None:
                    raise
                ctx.stderr.write(f"leasectl: no more output: {ended.message}\n")
                return EXIT_OK
            last_at = _print_new(ctx, logs.lines, last_at)
            if last_at is not None:
                since, tail = last_at[0], MAX_TAIL
            else:
                last_at = ("", 0)
            ctx.stdout.flush()
            time.sleep(args.interval)
    except KeyboardInterrupt:
        return EXIT_OK


def _print_new(ctx: Context, lines: list[str], last_at: tuple[str, int] | None) -> tuple[str, int] | None:
    seen_time, seen_count = last_at if last_at else ("", 0)
    skipped = 0
    for line in lines:
        stamp, _, text = line.partition(" ")
        if stamp == seen_time and skipped < seen_count:
            skipped += 1
            continue
        if _STAMP.fullmatch(stamp) is None:  # not a stamped line: print it whole
            ctx.stdout.write(line + "\n")
            continue
        if seen_time and _key(stamp) < _key(seen_time):
            continue
        ctx.stdout.write((line if ctx.args.timestamps else text) + "\n")
        if stamp == seen_time:
            seen_count += 1
        else:
            seen_time, seen_count = stamp, 1
    return (seen_time, seen_count) if seen_time else last_at


def _key(stamp: str) -> tuple[datetime, int]:
    match = _STAMP.fullmatch(stamp)
    if match is None:
        return datetime.min.replace(tzinfo=UTC), 0
    moment = datetime.strptime(match.group(1), "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    return moment, int((match.group(2) or "").ljust(9, "0") or 0)


OPERATIONS: dict[str, Command] = {"health": cmd_health, "logs": cmd_logs}
