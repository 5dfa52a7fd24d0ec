"""How `leasectl` looks: leases as a table or as `name: value` lines, colours for lease statuses
(terminals only, never with NO_COLOR), and the example each subcommand's `--help` ends with."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TextIO

from .models import (
    ACTIVE,
    EXPIRED,
    FAILED,
    PENDING,
    PREEMPTED,
    QUEUED,
    RELEASED,
    RELEASING,
    USABLE_STATUSES,
    Lease,
)

RESET = "\x1b[0m"
CLEAR_EOL = "\x1b[K"
STATUS_COLOURS = {
    ACTIVE: "\x1b[32m",  # green: serving
    PENDING: "\x1b[33m",  # yellow: on its way
    RELEASING: "\x1b[33m",
    FAILED: "\x1b[31m",  # red: look at failure_reason
    RELEASED: "\x1b[2m",  # dim: over
    EXPIRED: "\x1b[2m",
    QUEUED: "\x1b[36m",  # cyan: waiting for capacity
    PREEMPTED: "\x1b[35m",  # magenta: ended for a lease of higher priority
}
TABLE_COLUMNS = ("ID", "KIND", "GPU", "PROVIDER", "STATUS", "OWNER", "REMAINING", "$/H", "COST", "ENDPOINT")
RIGHT_ALIGNED = ("REMAINING", "$/H", "COST")

Paint = Callable[[str, str], str]


def isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def wants_colour(stream: TextIO, environ: dict[str, str] | None = None) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set to anything (https://no-color.org)."""
    variables = os.environ if environ is None else environ
    if variables.get("NO_COLOR"):
        return False
    return isatty(stream)


def paint_status(status: str, text: str) -> str:
    """`text` (a status, maybe padded) in its status's colour."""
    colour = STATUS_COLOURS.get(status)
    return f"{colour}{text}{RESET}" if colour else text


def no_paint(status: str, text: str) -> str:
    return text


def painter(stream: TextIO) -> Paint:
    """How statuses are written on `stream`."""
    return paint_status if wants_colour(stream) else no_paint


# --- leases as text --------------------------------------------------------------------------------


def format_dollars(amount: float | None) -> str:
    """`$0.3450` (four decimals: GPU seconds cost fractions of a cent), or `-`."""
    return "-" if amount is None else f"${amount:,.4f}"


def format_remaining(remaining: timedelta, past: str = "expired") -> str:
    """A compact countdown: `45s`, `9m59s`, `2h05m`, or `past` (`expired`) at or below zero."""
    seconds = int(remaining.total_seconds())
    if seconds <= 0:
        return past
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def when(value: datetime | None) -> str:
    """A time as the wire writes it (`2026-11-30T04:00:00Z`), or `-`."""
    return "-" if value is None else value.strftime("%Y-%m-%dT%H:%M:%SZ")


def format_notice(lease: Lease, now: datetime) -> str | None:
    """What a live lease's preemption notice says (None without one): when it ends, in how long, and for what."""
    if not lease.has_notice or lease.preempt_at is None:
        return None
    return f"preempted at {when(lease.preempt_at)} {_notice_detail(lease, now)}"


def _notice_detail(lease: Lease, now: datetime) -> str:
    assert lease.preempt_at is not None  # noqa: S101 - only leases with a notice  # nosec B101
    left = format_remaining(lease.preempt_at - now, past="")
    by = "higher priority" if lease.preempt_priority is None else f"priority {lease.preempt_priority}"
    return f"({f'in {left}' if left else 'now'}), for a lease of {by}"


def format_notices(leases: Sequence[Lease], now: datetime, paint: Paint = no_paint) -> list[str]:
    """One line per listed lease with a preemption notice (none: no lines)."""
    lines = []
    for lease in leases:
        notice = format_notice(lease, now)
        if notice is not None:
            lines.append(paint(PREEMPTED, f"! {lease.lease_id} ({lease.owner_id or '-'}): {notice}"))
    return lines


def lease_row(lease: Lease, now: datetime) -> tuple[str, ...]:
    """One table row of a lease (columns as TABLE_COLUMNS); a lease with a notice has until its preempt_at."""
    ends = lease.expires_at if lease.preempt_at is None else min(lease.expires_at, lease.preempt_at)
    remaining = format_remaining(ends - now) if lease.status in USABLE_STATUSES else "-"
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


def format_table_rows(columns: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[str] = ()) -> list[str]:
    """`rows` as aligned text lines under the `columns` header (those named in `right` right-aligned)."""
    table = [tuple(columns), *(tuple(row) for row in rows)]
    widths = [max(len(row[column]) for row in table) for column in range(len(columns))]
    aligned = {columns.index(name) for name in right}
    return [
        "  ".join(
            cell.rjust(widths[i]) if i in aligned else cell.ljust(widths[i]) for i, cell in enumerate(row)
        ).rstrip()
        for row in table
    ]


def format_lease(lease: Lease, now: datetime | None = None, paint: Paint = no_paint) -> list[str]:
    """Every field of a lease as aligned `name: value` lines (`paint` colours the status, and a notice)."""
    moment = now or datetime.now(UTC)
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
        ("created_by", lease.created_by or "-"),
        ("ended_by", lease.ended_by or "-"),
        ("priority", f"{lease.priority}{', preemptible' if lease.preemptible else ''}"),
        ("queued_at", when(lease.queued_at)),
        ("queued_until", when(lease.queued_until)),
        *([("queue_position", str(lease.queue_position))] if lease.queue_position is not None else []),
        ("queue_reason", lease.queue_reason or "-"),
        ("admitted_at", when(lease.admitted_at)),
        ("preempt_at", _notice_field(lease, moment, paint)),
    ]
    width = max(len(name) for name, _ in fields)
    return [f"{name.ljust(width)}  {value}" for name, value in fields]


def _notice_field(lease: Lease, now: datetime, paint: Paint) -> str:
    if not lease.has_notice:
        return when(lease.preempt_at)
    return paint(PREEMPTED, f"{when(lease.preempt_at)} {_notice_detail(lease, now)}: the lease ends preempted then")


# --- help ------------------------------------------------------------------------------------------

EXAMPLES: dict[str, str] = {
    "acquire": "leasectl acquire --kind renderer --ttl 600 --owner anim-svc --env SCENE=intro\n"
    "  leasectl acquire --gpu high --wait 300       # returns once the worker is ready\n"
    "  leasectl acquire --queue 10m --priority 80 --preemptible --wait   # waits in the queue when all is taken",
    "queue": "leasectl queue --owner anim-svc",
    "wait": "leasectl wait 10eb885b-1051-480d-b839-dafaec1f503f --timeout 300",
    "list": "leasectl list --owner anim-svc --provider local-docker --status active",
    "get": "leasectl --json get 10eb885b-1051-480d-b839-dafaec1f503f",
    "renew": "leasectl renew 10eb885b-1051-480d-b839-dafaec1f503f --ttl 900 --owner anim-svc",
    "release": "leasectl release 10eb885b-1051-480d-b839-dafaec1f503f --owner anim-svc\n"
    "  leasectl release --owner anim-svc --all      # every live lease of anim-svc",
    "watch": "leasectl watch --interval 2\n  leasectl watch --events         # each lease event as it happens",
    "events": "leasectl events 10eb885b-1051-480d-b839-dafaec1f503f",
    "webhooks": "leasectl webhooks add https://hooks.example.com/leases --owner anim-svc --event lease.ready\n"
    "  leasectl webhooks list\n  leasectl webhooks remove wh_5d41402abc4b2a76b9719d911017c592",
    "usage": "leasectl usage --owner anim-svc --since 2026-11-01 --group-by provider",
    "health": "leasectl health",
    "logs": "leasectl logs 10eb885b-1051-480d-b839-dafaec1f503f --tail 50 --follow --owner anim-svc",
    "completion": 'eval "$(leasectl completion bash)"      # or: leasectl completion fish | source',
    "callers": "leasectl --token $(cat .local/admin-token) callers add anim --owner anim-service --role service\n"
    "  leasectl --auth iam callers list",
    "callers add": "leasectl callers add anim --owner anim-service --role service   # prints its token once\n"
    "  leasectl callers add ops --role operator --principal-arn arn:aws:iam::123456789012:role/ops  # iam mode",
    "callers list": "leasectl --json callers list | jq -r '.callers[].name'",
    "callers rotate": "leasectl callers rotate anim --grace 30m   # the old token works 30 more minutes",
    "callers remove": "leasectl callers remove anim",
}


def example_epilog(command: str) -> str | None:
    """The `--help` epilog of `command`: its example."""
    example = EXAMPLES.get(command)
    return None if example is None else f"example:\n  {example}"


class ExampleFormatter(argparse.HelpFormatter):
    """Descriptions wrapped as usual; the example epilog kept line for line."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("example:"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)
