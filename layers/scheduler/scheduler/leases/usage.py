"""Usage: what leases cost per owner over a range of UTC days, grouped by owner, kind or provider."""

from __future__ import annotations

from collections import defaultdict
from datetime import date
from typing import TYPE_CHECKING

from scheduler.callers.access import readable_owners
from scheduler.costs import usd
from scheduler.request_models import UsageGrouping, UsageQuery

if TYPE_CHECKING:
    from scheduler.leases.context import Context

Total = dict[str, object]


def usage_report(ctx: Context, query: UsageQuery) -> dict[str, object]:
    """`{"usage": [...], "since", "until"}` for the leases that ended on those days (defaults: today; a
    range that ends before it starts holds no day, so no totals), of the owners the caller may read (a service:
    its own, one query each — the table is keyed by owner, so that reads theirs only)."""
    owners = readable_owners(ctx.caller, query.owner_id)
    today = ctx.clock().date()
    since = date.fromisoformat(query.since) if query.since else today
    until = date.fromisoformat(query.until) if query.until else max(today, since)
    totals: dict[tuple[str | None, str | None], list[int]] = defaultdict(lambda: [0, 0, 0])
    for owner in (None,) if owners is None else owners:
        for stored in ctx.store.usage_rows(owner, since.isoformat(), until.isoformat()):
            detail = {UsageGrouping.KIND: stored.kind, UsageGrouping.PROVIDER: stored.provider}.get(query.group_by)
            total = totals[(stored.owner_id, detail)]
            total[0] += stored.leases
            total[1] += stored.lease_seconds
            total[2] += stored.cost_micros
    rows: list[Total] = []
    for (owner_id, detail), (leases, seconds, cost) in sorted(
        totals.items(), key=lambda kv: (kv[0][0] or "", kv[0][1] or "")
    ):
        row: Total = {"owner_id": owner_id}
        if query.group_by is not UsageGrouping.OWNER:
            row[query.group_by.value] = detail
        row.update({"leases": leases, "lease_seconds": seconds, "cost_usd": usd(cost)})
        rows.append(row)
    return {"usage": rows, "since": since.isoformat(), "until": until.isoformat()}
