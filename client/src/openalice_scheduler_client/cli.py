"""`leasectl`: the lease API from the command line.

    leasectl [--url URL] [--secret S] [--json] COMMAND

Exit codes: 0 success, 1 the API refused or failed (code and message on stderr), 2 usage error,
3 the service cannot be reached, 4 the worker never became ready (`--wait`, `wait`: it failed to boot,
or the wait timed out). With `--json` stdout carries exactly one JSON document: the API's
body on success (`list`: every page merged, `next_token` null; `release`: `{}`, standing for the
API's empty 204 body), and the error envelope `{"error": {"code", "message", "details"?}}` on
exit 1 or 3 (API Gateway's `{"message": ...}` 401/403 bodies and unreachable services normalised
to it). `watch --json` is a stream: one JSON document (a list body) per line per refresh.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, TextIO

from .cli_ops import OPERATIONS, add_operations, check_arguments, release_owner
from .cli_style import Paint, no_paint, painter
from .cli_usage import add_usage_parser, format_dollars, format_usage
from .client import DEFAULT_URL, SECRET_ENV, URL_ENV, SchedulerClient
from .errors import ReadyTimeout, SchedulerError, ServiceUnreachable, Unauthorized, WorkerNotReady
from .models import GPU_CLASSES, KINDS, Lease

# What GET /v1/leases lists: pending and active leases until they expire, releasing ones until their worker is gone.
LISTED_STATUSES = ("pending", "active", "releasing")
USABLE_STATUSES = ("pending", "active")  # a countdown to expires_at means something only for these

EXIT_OK = 0
EXIT_API_ERROR = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_NOT_READY = 4
DEFAULT_WAIT_SECONDS = 600

PROG = "leasectl"
TABLE_COLUMNS = ("ID", "KIND", "GPU", "PROVIDER", "STATUS", "OWNER", "REMAINING", "$/H", "COST", "ENDPOINT")
RIGHT_ALIGNED = ("REMAINING", "$/H", "COST")
CLEAR_SCREEN, HOME, CLEAR_EOL, CLEAR_BELOW = "\x1b[2J", "\x1b[H", "\x1b[K", "\x1b[J"
HIDE_CURSOR, SHOW_CURSOR = "\x1b[?25l", "\x1b[?25h"


# --- arguments -------------------------------------------------------------------------------------


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of seconds") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than 0")
    return value


def _env_pair(text: str) -> tuple[str, str]:
    key, separator, value = text.partition("=")
    if not separator or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key, value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `leasectl` (every command has `--help`)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Acquire, inspect, renew and release worker leases of the OpenAlice scheduler.",
        epilog=(
            f"environment: {URL_ENV} (default {DEFAULT_URL}), {SECRET_ENV}.\n"
            "exit codes: 0 success, 1 the API refused or failed, 2 usage error, 3 service unreachable,\n"
            "4 the worker never became ready (acquire --wait, wait)."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--url", help=f"scheduler base URL (default: ${URL_ENV} or {DEFAULT_URL})")
    parser.add_argument(
        "--secret", metavar="S", help=f"internal secret sent as X-Internal-Secret (default: ${SECRET_ENV})"
    )
    parser.add_argument(
        "--json", action="store_true", help="print the API's JSON body on stdout instead of human-readable text"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    acquire = commands.add_parser("acquire", help="lease a worker", description="Lease a worker (POST /v1/lease).")
    acquire.add_argument("--kind", required=True, choices=KINDS, help="worker kind")
    acquire.add_argument("--gpu", choices=GPU_CLASSES, default="none", help="GPU class (default: none)")
    acquire.add_argument("--ttl", type=_positive_int, metavar="SECONDS", help="lease length (service default 3600)")
    acquire.add_argument("--owner", metavar="O", help="owner id; renew and release must then name it")
    acquire.add_argument(
        "--max-cost", type=_positive_float, metavar="USD", help="price ceiling per hour (skips dearer workers)"
    )
    acquire.add_argument(
        "--env",
        type=_env_pair,
        nargs="+",
        action="extend",
        default=[],
        metavar="K=V",
        help="environment for the worker (repeatable)",
    )
    acquire.add_argument(
        "--wait",
        type=_positive_int,
        nargs="?",
        const=DEFAULT_WAIT_SECONDS,
        metavar="SECONDS",
        help=f"wait until the worker is ready (at most SECONDS, default {DEFAULT_WAIT_SECONDS}), progress on stderr;"
        " a lease whose worker is not ready by then is released",
    )

    wait = commands.add_parser(
        "wait",
        help="wait until a lease's worker is ready",
        description="Wait until the lease's worker is ready (GET /v1/lease/ID?wait_ready=N), progress on stderr;"
        " exit 4 with the reason when it fails to boot or is not ready in time (the lease is left as it is).",
    )
    wait.add_argument("lease_id", metavar="ID")
    wait.add_argument(
        "--timeout",
        type=_positive_int,
        default=DEFAULT_WAIT_SECONDS,
        metavar="SECONDS",
        help=f"give up after SECONDS (default {DEFAULT_WAIT_SECONDS})",
    )

    listing = commands.add_parser(
        "list", help="list live leases", description="List live leases (GET /v1/leases, every page)."
    )
    listing.add_argument("--owner", metavar="O", help="only leases of this owner")
    listing.add_argument("--kind", choices=KINDS, help="only leases of this kind")
    listing.add_argument("--provider", metavar="P", help="only leases on this provider (local-docker, runpod)")
    listing.add_argument("--status", choices=LISTED_STATUSES, help="only leases in this status")

    get = commands.add_parser(
        "get", help="show one lease", description="Show one lease, ended ones too (GET /v1/lease/ID)."
    )
    get.add_argument("lease_id", metavar="ID")

    renew = commands.add_parser(
        "renew", help="extend a lease", description="Set a lease's expiry to now + ttl (POST /v1/lease/ID/renew)."
    )
    renew.add_argument("lease_id", metavar="ID")
    renew.add_argument("--ttl", type=_positive_int, metavar="SECONDS", help="new ttl (default: the lease's own)")
    renew.add_argument("--owner", metavar="O", help="the lease's owner id (X-Lease-Owner)")

    release = commands.add_parser(
        "release", help="release a lease", description="Release a lease and remove its worker (DELETE /v1/lease/ID)."
    )
    release.add_argument("lease_id", metavar="ID", nargs="?")
    release.add_argument("--owner", metavar="O", help="the lease's owner id (X-Lease-Owner)")
    release.add_argument(
        "--all", action="store_true", help="release every live lease of --owner (DELETE /v1/leases?owner_id=O)"
    )

    add_usage_parser(commands)

    watch = commands.add_parser(
        "watch",
        help="live view of the leases",
        description="Redraw the live leases and their remaining time in place until Ctrl-C.",
    )
    watch.add_argument("--interval", type=_positive_float, default=1.0, metavar="SECONDS", help="refresh period")
    watch.add_argument("--once", action="store_true", help="draw one frame and exit (no screen control codes)")
    add_operations(parser, commands)
    return parser


# --- formatting ------------------------------------------------------------------------------------


def format_remaining(remaining: timedelta) -> str:
    """A compact countdown: `45s`, `9m59s`, `2h05m`, or `expired`."""
    seconds = int(remaining.total_seconds())
    if seconds <= 0:
        return "expired"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def lease_row(lease: Lease, now: datetime) -> tuple[str, ...]:
    """One table row of a lease (columns as TABLE_COLUMNS)."""
    remaining = format_remaining(lease.remaining(now)) if lease.status in USABLE_STATUSES else "-"
    return (
        lease.lease_id,
        lease.kind,
        lease.gpu,
        lease.provider or "-",
        lease.status,
        lease.owner_id or "-",
        remaining,
        "-" if lease.cost_per_hour is None else f"{lease.cost_per_hour:.2f}",
        format_dollars(lease.cost_usd),
        lease.endpoint or "-",
    )


def format_table(leases: Sequence[Lease], now: datetime | None = None, paint: Paint = no_paint) -> list[str]:
    """The leases as aligned text lines under a header (REMAINING is right-aligned; `paint` colours STATUS)."""
    moment = now or datetime.now(UTC)
    rows = [TABLE_COLUMNS, *(lease_row(lease, moment) for lease in leases)]
    widths = [max(len(row[column]) for row in rows) for column in range(len(TABLE_COLUMNS))]
    right = {TABLE_COLUMNS.index(name) for name in RIGHT_ALIGNED}
    status_column = TABLE_COLUMNS.index("STATUS")
    lines = []
    for number, row in enumerate(rows):
        cells = [
            cell.rjust(widths[index]) if index in right else cell.ljust(widths[index]) for index, cell in enumerate(row)
        ]
        if number:  # not the header
            cells[status_column] = paint(row[status_column], cells[status_column])
        lines.append("  ".join(cells).rstrip())
    return lines


def format_lease(lease: Lease, now: datetime | None = None, paint: Paint = no_paint) -> list[str]:
    """Every field of a lease as aligned `name: value` lines (`paint` colours the status)."""
    moment = now or datetime.now(UTC)

    def when(value: datetime | None) -> str:
        return "-" if value is None else value.strftime("%Y-%m-%dT%H:%M:%SZ")

    expires = when(lease.expires_at)
    if lease.is_live:
        expires += f" (in {format_remaining(lease.remaining(moment))})"
    fields = [
        ("lease_id", lease.lease_id),
        ("status", paint(lease.status, lease.status)),
        ("worker_state", lease.worker_state),
        ("kind", lease.kind),
        ("gpu", lease.gpu),
        ("provider", lease.provider or "-"),
        ("endpoint", lease.endpoint or "-"),
        ("created_at", when(lease.created_at)),
        ("expires_at", expires),
        ("ready_at", when(lease.ready_at)),
        ("released_at", when(lease.released_at)),
        ("ttl_seconds", str(lease.ttl_seconds)),
        ("owner_id", lease.owner_id or "-"),
        ("correlation_id", lease.correlation_id or "-"),
        ("region", lease.region or "-"),
        ("provider_token", lease.provider_token or "-"),
        ("cost_per_hour", "-" if lease.cost_per_hour is None else f"${lease.cost_per_hour:.4f}"),
        ("cost_ceiling", "-" if lease.max_cost_per_hour is None else f"${lease.max_cost_per_hour:.4f}"),
        ("cost_usd", format_dollars(lease.cost_usd)),
        ("failure_reason", lease.failure_reason or "-"),
    ]
    width = max(len(name) for name, _ in fields)
    return [f"{name.ljust(width)}  {value}" for name, value in fields]


def _print_json(document: Any, out: TextIO, *, compact: bool = False) -> None:
    text = json.dumps(document, separators=(",", ":")) if compact else json.dumps(document, indent=2)
    out.write(text + "\n")
    out.flush()


def _list_body(leases: Sequence[Lease]) -> dict[str, Any]:
    return {"leases": [lease.raw for lease in leases], "next_token": None}


# --- spinner ---------------------------------------------------------------------------------------


@contextmanager
def spinner(message: str, stream: TextIO) -> Iterator[None]:
    """Animate `message` on `stream` while the block runs, only when `stream` is a terminal."""
    if not _isatty(stream):
        yield
        return
    encoding = (getattr(stream, "encoding", None) or "ascii").lower()
    frames = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏" if encoding.replace("-", "") == "utf8" else "|/-\\"
    done = threading.Event()
    started = time.monotonic()

    def spin() -> None:
        for frame in itertools.cycle(frames):
            stream.write(f"\r{frame} {message} {time.monotonic() - started:.0f}s{CLEAR_EOL}")
            stream.flush()
            if done.wait(0.1):
                return

    thread = threading.Thread(target=spin, name="leasectl-spinner", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        stream.write(f"\r{CLEAR_EOL}")
        stream.flush()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


# --- waiting for a worker ------------------------------------------------------------------------


def describe_wait(lease: Lease | None, elapsed: float) -> str:
    """One progress line: the lease's state and the time waited so far."""
    if lease is None:
        return f"waiting for the worker… {elapsed:.0f}s"
    if lease.is_ready:
        state = "worker ready"
    elif lease.is_starting:
        state = f"{lease.status}, worker starting"
    else:
        state = lease.status
    return f"lease {lease.lease_id}: {state} ({elapsed:.0f}s)"


class WaitProgress:
    """Progress of a wait on `stream`: redrawn in place every fraction of a second on a terminal, one line
    per change of state otherwise."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._tty = _isatty(stream)
        self._lease: Lease | None = None
        self._started = time.monotonic()
        self._last_state: tuple[str, str] | None = None
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> WaitProgress:
        if self._tty:
            self._thread = threading.Thread(target=self._redraw, name="leasectl-wait", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()
            with self._lock:
                self._draw()
                self._stream.write("\n")
                self._stream.flush()

    def update(self, lease: Lease, elapsed: float) -> None:
        """A new answer: remember it; without a terminal, print it when its state changed."""
        with self._lock:
            self._lease = lease
            state = (lease.status, lease.worker_state)
            if not self._tty and state != self._last_state:
                self._stream.write(describe_wait(lease, elapsed) + "\n")
                self._stream.flush()
            self._last_state = state

    def _redraw(self) -> None:
        while not self._done.wait(0.2):
            with self._lock:
                self._draw()

    def _draw(self) -> None:
        self._stream.write("\r" + describe_wait(self._lease, time.monotonic() - self._started) + CLEAR_EOL)
        self._stream.flush()


def _wait_for(ctx: _Context, client: SchedulerClient, lease: Lease, timeout: float) -> Lease:
    with WaitProgress(ctx.stderr) as progress:
        progress.update(lease, 0.0)
        if lease.is_ready:
            return lease
        return client.wait_ready(lease.lease_id, timeout, on_progress=progress.update)


def _not_ready(ctx: _Context, error: WorkerNotReady, released: bool = False) -> int:
    if ctx.json:
        document = error.envelope()
        if error.lease is not None:
            document["error"]["details"] = {"lease": error.lease.raw}
        _print_json(document, ctx.stdout)
    ctx.stderr.write(f"{PROG}: {error.message}\n")
    if released:
        ctx.stderr.write("  (the lease was released: its worker was not ready within the wait)\n")
    return EXIT_NOT_READY


# --- commands --------------------------------------------------------------------------------------


class _Context:
    def __init__(self, args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> None:
        self.args = args
        self.json = bool(args.json)
        self.stdout = stdout
        self.stderr = stderr

    def client(self, **overrides: Any) -> SchedulerClient:
        return SchedulerClient(self.args.url, self.args.secret, **overrides)

    def show_lease(self, lease: Lease, body: dict[str, Any]) -> None:
        if self.json:
            _print_json(body, self.stdout)
        else:
            self.stdout.write("\n".join(format_lease(lease, paint=painter(self.stdout))) + "\n")

    def print_json(self, document: Any) -> None:
        _print_json(document, self.stdout)


def _cmd_acquire(ctx: _Context, client: SchedulerClient) -> int:
    args = ctx.args
    with spinner(f"acquiring a {args.kind} worker (gpu {args.gpu})…", ctx.stderr):
        lease = client.acquire(
            args.kind,
            gpu=args.gpu,
            ttl_seconds=args.ttl,
            owner_id=args.owner,
            env=dict(args.env) or None,
            max_cost_per_hour=args.max_cost,
        )
    if args.wait is not None and not lease.is_ready:
        try:
            lease = _wait_for(ctx, client, lease, args.wait)
        except ReadyTimeout as timed_out:
            client.release(lease.lease_id, owner_id=args.owner)  # no paid worker left booting behind the command
            return _not_ready(ctx, timed_out, released=True)
        except WorkerNotReady as failed:
            return _not_ready(ctx, failed)
    ctx.show_lease(lease, {"lease": lease.raw, "provider": lease.provider})
    return EXIT_OK


def _cmd_wait(ctx: _Context, client: SchedulerClient) -> int:
    try:
        lease = _wait_for(ctx, client, client.get(ctx.args.lease_id), ctx.args.timeout)
    except WorkerNotReady as failed:
        return _not_ready(ctx, failed)
    ctx.show_lease(lease, {"lease": lease.raw})
    return EXIT_OK


def _cmd_list(ctx: _Context, client: SchedulerClient) -> int:
    leases = client.list(owner_id=ctx.args.owner, kind=ctx.args.kind, provider=ctx.args.provider)
    if ctx.args.status:  # the API filters by owner, kind and provider; the status is chosen here
        leases = [lease for lease in leases if lease.status == ctx.args.status]
    if ctx.json:
        _print_json(_list_body(leases), ctx.stdout)
    elif leases:
        ctx.stdout.write("\n".join(format_table(leases, paint=painter(ctx.stdout))) + "\n")
    else:
        ctx.stdout.write("No live leases.\n")
    return EXIT_OK


def _cmd_get(ctx: _Context, client: SchedulerClient) -> int:
    lease = client.get(ctx.args.lease_id)
    ctx.show_lease(lease, {"lease": lease.raw})
    return EXIT_OK


def _cmd_renew(ctx: _Context, client: SchedulerClient) -> int:
    lease = client.renew(ctx.args.lease_id, ttl_seconds=ctx.args.ttl, owner_id=ctx.args.owner)
    ctx.show_lease(lease, {"lease": lease.raw})
    return EXIT_OK


def _cmd_release(ctx: _Context, client: SchedulerClient) -> int:
    if ctx.args.all:
        return release_owner(ctx, client)
    client.release(ctx.args.lease_id, owner_id=ctx.args.owner)
    if ctx.json:
        _print_json({}, ctx.stdout)
    else:
        ctx.stdout.write(f"released {ctx.args.lease_id}\n")
    return EXIT_OK


def watch_frame(
    url: str, leases: Sequence[Lease] | None, error: str | None, interval: float, paint: Paint = no_paint
) -> list[str]:
    """The lines of one `watch` frame: a title, the table (or a note), and the last error if any."""
    now = datetime.now(UTC)
    count = "?" if leases is None else str(len(leases))
    title = f"{PROG} watch  {url}  {count} live  {now:%H:%M:%S} UTC  (every {interval:g}s, Ctrl-C to quit)"
    lines = [title, ""]
    if leases:
        lines += format_table(leases, now, paint)
    elif leases is not None:
        lines.append("No live leases.")
    if error:
        lines += ["", f"! {error}"]
    return lines


def _cmd_watch(ctx: _Context, client: SchedulerClient) -> int:
    interval: float = ctx.args.interval
    if ctx.args.once:
        snapshot = client.list()
        if ctx.json:
            _print_json(_list_body(snapshot), ctx.stdout, compact=True)
        else:
            ctx.stdout.write("\n".join(watch_frame(client.url, snapshot, None, interval)) + "\n")
        return EXIT_OK
    ansi = _isatty(ctx.stdout) and not ctx.json
    out = ctx.stdout
    if ansi:
        out.write(HIDE_CURSOR + CLEAR_SCREEN)
    leases: list[Lease] | None = None
    try:
        while True:
            error: str | None = None
            fetched_at = time.monotonic()
            try:
                leases = client.list()
            except ServiceUnreachable as unreachable:
                error = f"service unreachable: {unreachable.message} (retrying)"
            except SchedulerError as failed:
                error = f"{failed.code}: {failed.message} (retrying)"
            if ctx.json:
                if error is None and leases is not None:
                    _print_json(_list_body(leases), out, compact=True)
                else:
                    ctx.stderr.write(f"{PROG}: {error}\n")
            else:
                frame = watch_frame(client.url, leases, error, interval, painter(out) if ansi else no_paint)
                if ansi:
                    out.write(HOME + "".join(line + CLEAR_EOL + "\n" for line in frame) + CLEAR_BELOW)
                else:
                    out.write("\n".join(frame) + "\n\n")
                out.flush()
            time.sleep(max(0.0, interval - (time.monotonic() - fetched_at)))
    except KeyboardInterrupt:
        return EXIT_OK
    finally:
        if ansi:
            out.write(SHOW_CURSOR)
            out.flush()


COMMANDS: dict[str, Callable[[_Context, SchedulerClient], int]] = {
    "acquire": _cmd_acquire,
    "list": _cmd_list,
    "get": _cmd_get,
    "renew": _cmd_renew,
    "release": _cmd_release,
    "watch": _cmd_watch,
    "wait": _cmd_wait,
    **OPERATIONS,
    "usage": lambda ctx, client: _cmd_usage(ctx, client),
}


def _cmd_usage(ctx: _Context, client: SchedulerClient) -> int:
    args = ctx.args
    report = client.usage(owner_id=args.owner, since=args.since, until=args.until, group_by=args.group_by)
    if ctx.json:
        _print_json(report, ctx.stdout)
    else:
        ctx.stdout.write("\n".join(format_usage(report, args.group_by)) + "\n")
    return EXIT_OK


def _report(ctx: _Context, error: SchedulerError) -> int:
    if ctx.json:
        _print_json(error.envelope(), ctx.stdout)
    if isinstance(error, ServiceUnreachable):
        ctx.stderr.write(f"{PROG}: cannot reach the scheduler: {error.message}\n")
        return EXIT_UNREACHABLE
    ctx.stderr.write(f"{PROG}: {error.code}: {error.message}\n")
    for problem in error.details.get("problems") or []:
        if isinstance(problem, dict):
            ctx.stderr.write(f"  {problem.get('field', '?')}: {problem.get('problem', '?')}\n")
    if isinstance(error, Unauthorized) and not (ctx.args.secret or os.environ.get(SECRET_ENV)):
        ctx.stderr.write(f"  (no secret given: pass --secret or set {SECRET_ENV})\n")
    return EXIT_API_ERROR


@contextmanager
def _log_to(stream: TextIO) -> Iterator[None]:
    """Show the client's warnings (e.g. `retry 1/4 in 0.5 s`) on `stream` while the command runs."""
    library = logging.getLogger("openalice_scheduler_client")
    handler = logging.StreamHandler(stream)
    clear = f"\r{CLEAR_EOL}" if _isatty(stream) else ""  # a spinner may be on that line
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
    check_arguments(parser, args)
    if getattr(args, "lease_id", None) == "":
        parser.error("ID must not be empty")
    ctx = _Context(args, out, err)
    # watch refreshes every second: one quick attempt per frame beats a long retry behind it.
    overrides: dict[str, Any] = {"retries": 0, "timeout": 10.0} if args.command == "watch" else {}
    try:
        client = ctx.client(**overrides)
    except ValueError as bad:  # a malformed --url / $SCHEDULER_URL
        parser.error(str(bad))
    try:
        with client, _log_to(err):
            return COMMANDS[args.command](ctx, client)
    except SchedulerError as error:
        return _report(ctx, error)
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
