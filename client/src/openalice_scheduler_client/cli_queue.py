"""`leasectl queue`: the queued leases in admission order (GET /v1/queue), and a queued lease's place in it for
the progress of `acquire --queue --wait` and `wait`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from .cli_context import EXIT_OK, Context, positive_int
from .cli_style import format_remaining, format_table_rows, when
from .client import SchedulerClient
from .errors import SchedulerError
from .models import Lease

MAX_QUEUE_LIMIT = 1000  # GET /v1/queue's limit
QUEUE_COLUMNS = ("POS", "ID", "PRI", "OWNER", "KIND", "GPU", "AGE", "QUEUED_UNTIL", "REASON")


def add_queue_parser(commands: Any) -> None:
    """The `queue` command's arguments."""
    queue = commands.add_parser(
        "queue",
        help="list the queued leases",
        description="List the queued leases in admission order, 1 = admitted next (GET /v1/queue). A service "
        "caller sees its own, with their places in the whole queue; an operator sees all.",
    )
    queue.add_argument("--owner", metavar="O", help="only this owner's (their places are still in the whole queue)")
    queue.add_argument(
        "--limit", type=positive_int, metavar="N", help="the first N in order (service default 100, at most 1000)"
    )


def format_queue(leases: Sequence[Lease], now: datetime | None = None) -> list[str]:
    """The queue as aligned lines under a header: place, id, priority, owner, kind, gpu, time waited, until when
    it may wait, and what it waits for."""
    moment = now or datetime.now(UTC)
    rows = [
        (
            "-" if lease.queue_position is None else str(lease.queue_position),
            lease.lease_id,
            str(lease.priority),
            lease.owner_id or "-",
            lease.kind,
            lease.gpu,
            "-" if lease.queued_at is None else format_remaining(moment - lease.queued_at, past="0s"),
            when(lease.queued_until),
            lease.queue_reason or "-",
        )
        for lease in leases
    ]
    return format_table_rows(QUEUE_COLUMNS, rows, right=("POS", "PRI", "AGE"))


def place_of(client: SchedulerClient, lease: Lease) -> Lease:
    """A queued lease as GET /v1/queue shows it, with its place (a read of the lease does not carry one); the
    lease as it is when the queue cannot be read or does not show it."""
    try:
        queue = client.queue(owner_id=lease.owner_id, limit=MAX_QUEUE_LIMIT)
    except SchedulerError:
        return lease
    return next((entry for entry in queue if entry.lease_id == lease.lease_id), lease)


def cmd_queue(ctx: Context, client: SchedulerClient) -> int:
    leases = client.queue(owner_id=ctx.args.owner, limit=ctx.args.limit)
    if ctx.json:
        ctx.print_json({"queue": [lease.raw for lease in leases]})
    elif leases:
        ctx.stdout.write("\n".join(format_queue(leases)) + "\n")
    else:
        ctx.stdout.write("The queue is empty.\n")
    return EXIT_OK
