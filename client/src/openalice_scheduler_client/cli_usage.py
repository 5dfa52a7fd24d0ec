"""`leasectl usage`: what leases cost per owner over UTC days (GET /v1/usage), as a table with dollars."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from datetime import date
from typing import Any

from .cli_context import EXIT_OK, Context
from .cli_style import format_dollars
from .client import SchedulerClient

GROUPINGS = ("owner", "kind", "provider")


def _day(text: str) -> str:
    try:
        return date.fromisoformat(text).isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a day (YYYY-MM-DD)") from None


def add_usage_parser(commands: Any) -> None:
    """The `usage` command's arguments."""
    usage = commands.add_parser(
        "usage",
        help="what leases cost",
        description="What the leases that ended on the UTC days SINCE..UNTIL cost (GET /v1/usage; default today).",
    )
    usage.add_argument("--owner", metavar="O", help="only this owner")
    usage.add_argument("--since", type=_day, metavar="DAY", help="first UTC day, YYYY-MM-DD (default: today)")
    usage.add_argument("--until", type=_day, metavar="DAY", help="last UTC day, YYYY-MM-DD (default: today)")
    usage.add_argument(
        "--group-by", choices=GROUPINGS, default="owner", help="rows per owner (default), kind or provider"
    )


def format_duration(seconds: int) -> str:
    hours, rest = divmod(int(seconds), 3600)
    return f"{hours}h{rest // 60:02d}m"


def format_usage(report: Mapping[str, Any], group_by: str) -> list[str]:
    """The report as aligned lines: one row per group, a TOTAL row, and the days it covers."""
    rows: Sequence[Mapping[str, Any]] = report.get("usage") or []
    detail = group_by.upper() if group_by != "owner" else None
    header = ("OWNER", *((detail,) if detail else ()), "LEASES", "TIME", "COST")
    lines: list[tuple[str, ...]] = [header]
    for row in rows:
        lines.append(
            (
                str(row.get("owner_id") or "-"),
                *((str(row.get(group_by) or "-"),) if detail else ()),
                str(row.get("leases", 0)),
                format_duration(int(row.get("lease_seconds", 0))),
                format_dollars(float(row.get("cost_usd", 0.0))),
            )
        )
    total = (
        "TOTAL",
        *(("",) if detail else ()),
        str(sum(int(row.get("leases", 0)) for row in rows)),
        format_duration(sum(int(row.get("lease_seconds", 0)) for row in rows)),
        format_dollars(sum(float(row.get("cost_usd", 0.0)) for row in rows)),
    )
    lines.append(total)
    widths = [max(len(line[column]) for line in lines) for column in range(len(header))]
    numeric = range(len(header) - 3, len(header))
    text = [
        "  ".join(
            cell.rjust(widths[i]) if i in numeric else cell.ljust(widths[i]) for i, cell in enumerate(line)
        ).rstrip()
        for line in lines
    ]
    text.append(f"UTC days {report.get('since')} to {report.get('until')}")
    return text


def cmd_usage(ctx: Context, client: SchedulerClient) -> int:
    args = ctx.args
    report = client.usage(owner_id=args.owner, since=args.since, until=args.until, group_by=args.group_by)
    if ctx.json:
        ctx.print_json(report)
    else:
        ctx.stdout.write("\n".join(format_usage(report, args.group_by)) + "\n")
    return EXIT_OK
