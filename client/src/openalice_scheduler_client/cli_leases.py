"""`leasectl` lease commands: `acquire`, `wait`, `list`, `get`, `renew` and `release` (one lease, or every
live lease of an owner), their arguments and what each prints."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from .cli_context import EXIT_NOT_READY, EXIT_OK, PROG, Command, Context, duration, positive_float, positive_int
from .cli_progress import WaitProgress, spinner
from .cli_queue import place_of
from .cli_style import format_notices, format_table, painter
from .client import SchedulerClient
from .errors import ReadyTimeout, WorkerNotReady
from .models import GPU_CLASSES, KINDS, LISTED_STATUSES, Lease

DEFAULT_WAIT_SECONDS = 600
EXIT_SOME_NOT_RELEASED = 1  # as for any refusal by the API
MAX_QUEUE_SECONDS = 86400  # LeaseRequest.queue_seconds
MAX_PRIORITY = 100  # LeaseRequest.priority


def _env_pair(text: str) -> tuple[str, str]:
    key, separator, value = text.partition("=")
    if not separator or not key:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key, value


def _queue_seconds(text: str) -> int:
    return duration(text, MAX_QUEUE_SECONDS, "the longest the service lets a request wait")


def _priority(text: str) -> int:
    if not text.isdigit() or int(text) > MAX_PRIORITY:
        raise argparse.ArgumentTypeError(f"{text!r} is not a priority (a whole number from 0 to {MAX_PRIORITY})")
    return int(text)


def add_lease_parsers(commands: Any) -> None:
    """The arguments of `acquire`, `wait`, `list`, `get`, `renew` and `release`."""
    acquire = commands.add_parser("acquire", help="lease a worker", description="Lease a worker (POST /v1/lease).")
    acquire.add_argument("--kind", required=True, choices=KINDS, help="worker kind")
    acquire.add_argument("--gpu", choices=GPU_CLASSES, default="none", help="GPU class (default: none)")
    acquire.add_argument("--ttl", type=positive_int, metavar="SECONDS", help="lease length (service default 3600)")
    acquire.add_argument("--owner", metavar="O", help="owner id; renew and release must then name it")
    acquire.add_argument(
        "--max-cost", type=positive_float, metavar="USD", help="price ceiling per hour (skips dearer workers)"
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
        "--queue",
        type=_queue_seconds,
        metavar="DURATION",
        help="when nothing can serve it now, wait in the queue this long (0 to 1d, e.g. 90, 10m, 1h; default 0:"
        " answer at once)",
    )
    acquire.add_argument(
        "--priority", type=_priority, metavar="N", help="0 to 100 (service default 50): higher is admitted first"
    )
    acquire.add_argument(
        "--preemptible", action="store_true", help="a queued lease of higher priority may end this one, with notice"
    )
    acquire.add_argument(
        "--wait",
        type=positive_int,
        nargs="?",
        const=DEFAULT_WAIT_SECONDS,
        metavar="SECONDS",
        help=f"wait until the worker is ready (at most SECONDS, default {DEFAULT_WAIT_SECONDS}; the time in the"
        " queue aside), progress on stderr; a lease whose worker is not ready by then is released",
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
        type=positive_int,
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
    renew.add_argument("--ttl", type=positive_int, metavar="SECONDS", help="new ttl (default: the lease's own)")
    renew.add_argument("--owner", metavar="O", help="the lease's owner id (X-Lease-Owner)")

    release = commands.add_parser(
        "release", help="release a lease", description="Release a lease and remove its worker (DELETE /v1/lease/ID)."
    )
    release.add_argument("lease_id", metavar="ID", nargs="?")
    release.add_argument("--owner", metavar="O", help="the lease's owner id (X-Lease-Owner)")
    release.add_argument(
        "--all", action="store_true", help="release every live lease of --owner (DELETE /v1/leases?owner_id=O)"
    )


def check_release(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """`release`'s combinations argparse cannot express (exit 2 with the usage line)."""
    if args.command == "release":
        if args.all and args.lease_id:
            parser.error("release takes an ID or --all, not both")
        if args.all and not args.owner:
            parser.error("release --all needs --owner: it releases every live lease of that owner")
        if not args.all and not args.lease_id:
            parser.error("release needs an ID (or --owner O --all)")


def list_body(leases: Sequence[Lease]) -> dict[str, Any]:
    """What `--json` prints for a listing: the API's list body, every page merged."""
    return {"leases": [lease.raw for lease in leases], "next_token": None}


# --- waiting for a worker ------------------------------------------------------------------------


def _wait_for(ctx: Context, client: SchedulerClient, lease: Lease, timeout: float) -> Lease:
    with WaitProgress(ctx.stderr) as progress:

        def seen(answer: Lease, elapsed: float) -> None:
            # A read of a queued lease does not carry its place: the queue does.
            progress.update(place_of(client, answer) if answer.is_queued else answer, elapsed)

        progress.update(lease, 0.0)
        if lease.is_ready:
            return lease
        return client.wait_ready(lease.lease_id, timeout, on_progress=seen, lease=lease)


def _not_ready(ctx: Context, error: WorkerNotReady, released: bool = False) -> int:
    if ctx.json:
        document = error.envelope()
        if error.lease is not None:
            document["error"]["details"] = {"lease": error.lease.raw}
        ctx.print_json(document)
    ctx.stderr.write(f"{PROG}: {error.message}\n")
    if released:
        ctx.stderr.write("  (the lease was released: its worker was not ready within the wait)\n")
    return EXIT_NOT_READY


# --- commands --------------------------------------------------------------------------------------


def cmd_acquire(ctx: Context, client: SchedulerClient) -> int:
    args = ctx.args
    with spinner(f"acquiring a {args.kind} worker (gpu {args.gpu})…", ctx.stderr):
        lease = client.acquire(
            args.kind,
            gpu=args.gpu,
            ttl_seconds=args.ttl,
            owner_id=args.owner,
            env=dict(args.env) or None,
            max_cost_per_hour=args.max_cost,
            queue_seconds=args.queue,
            priority=args.priority,
            preemptible=True if args.preemptible else None,
        )
    if args.wait is not None and not lease.is_ready:
        try:
            lease = _wait_for(ctx, client, lease, args.wait)
        except KeyboardInterrupt:
            _cancel_if_queued(ctx, client, lease.lease_id)
            raise
        except ReadyTimeout as timed_out:
            client.release(lease.lease_id, owner_id=args.owner)  # no paid worker left booting behind the command
            return _not_ready(ctx, timed_out, released=True)
        except WorkerNotReady as failed:
            return _not_ready(ctx, failed)
    ctx.show_lease(lease, {"lease": lease.raw, "provider": lease.provider})
    return EXIT_OK


def _cancel_if_queued(ctx: Context, client: SchedulerClient, lease_id: str) -> None:
    """Ctrl-C while waiting in the queue cancels the queued lease (nothing was made for it yet); one admitted
    meanwhile is left as `wait` leaves a starting one."""
    try:
        if client.get(lease_id).is_queued:
            client.release(lease_id, owner_id=ctx.args.owner)
            ctx.stderr.write(f"\n{PROG}: cancelled the queued lease {lease_id}")
    except Exception as error:  # noqa: BLE001 - the interrupt is what the user asked for; say what was left
        ctx.stderr.write(f"\n{PROG}: the lease {lease_id} may still be queued: {error}")


def cmd_wait(ctx: Context, client: SchedulerClient) -> int:
    try:
        lease = _wait_for(ctx, client, client.get(ctx.args.lease_id), ctx.args.timeout)
    except WorkerNotReady as failed:
        return _not_ready(ctx, failed)
    ctx.show_lease(lease, {"lease": lease.raw})
    return EXIT_OK


def cmd_list(ctx: Context, client: SchedulerClient) -> int:
    leases = client.list(owner_id=ctx.args.owner, kind=ctx.args.kind, provider=ctx.args.provider)
    if ctx.args.status:  # the API filters by owner, kind and provider; the status is chosen here
        leases = [lease for lease in leases if lease.status == ctx.args.status]
    if ctx.json:
        ctx.print_json(list_body(leases))
    elif leases:
        paint = painter(ctx.stdout)
        now = datetime.now(UTC)
        lines = format_table(leases, now, paint) + format_notices(leases, now, paint)
        ctx.stdout.write("\n".join(lines) + "\n")
    else:
        ctx.stdout.write("No live leases.\n")
    return EXIT_OK


def cmd_get(ctx: Context, client: SchedulerClient) -> int:
    lease = client.get(ctx.args.lease_id)
    ctx.show_lease(lease, {"lease": lease.raw})
    return EXIT_OK


def cmd_renew(ctx: Context, client: SchedulerClient) -> int:
    lease = client.renew(ctx.args.lease_id, ttl_seconds=ctx.args.ttl, owner_id=ctx.args.owner)
    ctx.show_lease(lease, {"lease": lease.raw})
    return EXIT_OK


def cmd_release(ctx: Context, client: SchedulerClient) -> int:
    if ctx.args.all:
        return _release_owner(ctx, client)
    client.release(ctx.args.lease_id, owner_id=ctx.args.owner)
    if ctx.json:
        ctx.print_json({})
    else:
        ctx.stdout.write(f"released {ctx.args.lease_id}\n")
    return EXIT_OK


def _release_owner(ctx: Context, client: SchedulerClient) -> int:
    """`release --owner X --all`: every live lease of X, continuation after continuation."""
    owner = ctx.args.owner
    result = client.release_all(owner)
    if ctx.json:
        ctx.print_json(
            {
                "owner_id": owner,
                "released": [lease.raw for lease in result.released],
                "not_released": [vars(item) for item in result.not_released],
                "next_token": None,
            }
        )
    else:
        paint = painter(ctx.stdout)
        for lease in result.released:
            ctx.stdout.write(f"{paint('released', 'released')} {lease.lease_id}  {lease.provider}  {lease.kind}\n")
        for item in result.not_released:
            ctx.stdout.write(f"not released {item.lease_id} ({item.status}): {item.code}: {item.message}\n")
        count = len(result.released)
        summary = f"released {count} lease{'s' if count != 1 else ''} of {owner}"
        if result.not_released:
            summary += f"; {len(result.not_released)} could not be released"
        ctx.stdout.write(summary + "\n")
    return EXIT_SOME_NOT_RELEASED if result.not_released else EXIT_OK


LEASE_COMMANDS: dict[str, Command] = {
    "acquire": cmd_acquire,
    "wait": cmd_wait,
    "list": cmd_list,
    "get": cmd_get,
    "renew": cmd_renew,
    "release": cmd_release,
}
