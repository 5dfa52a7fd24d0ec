"""The sweep's expiry warnings: each active lease is warned once of its coming expiry, EXPIRY_WARNING_SECONDS
ahead, by a conditional write of the sweep's own (`lifecycle.WARN_EXPIRY`), which the leases table's stream
turns into the `lease.expiring` event. A renewal moves the expiry, and so makes room for the next warning.

The sweep runs once a period (a minute in AWS), so it warns of the expiries that fall within the warning plus
one period: each warning comes between EXPIRY_WARNING_SECONDS and that plus a sweep period before the expiry
(never later), and a lease made with less time than that left is warned at the first sweep. Finding them reads
the live index's range of those expiries; acquire, renew and release write nothing more for it. The marks are
written SWEEP_CONCURRENCY at a time, as the due leases are released: a batch of leases made together comes due
together, and its warnings must not hold up the run's later passes (or, in `make run`, its next run).
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from scheduler.leases.concurrently import map_bounded
from scheduler.store.items import epoch

if TYPE_CHECKING:
    from scheduler.leases.context import Context
    from scheduler.models import Lease


def warn_expiring(ctx: Context) -> list[Lease]:
    """Warn every active lease whose expiry falls within the warning window and was not warned of yet; the leases
    warned now (none when EXPIRY_WARNING_SECONDS is 0)."""
    ahead = ctx.settings.expiry_warning_seconds
    if ahead <= 0:
        return []
    now = ctx.clock()
    until = now + timedelta(seconds=ahead + ctx.settings.sweep_interval_seconds)
    expiring = list(ctx.store.expiring_leases(now, until))

    def warn(lease: Lease) -> bool:
        if ctx.deadline.expired:
            return False  # the next sweep finds it: nothing was marked for it
        return ctx.store.warn_expiry(lease.lease_id, epoch(lease.expires_at), now)

    marked = map_bounded(warn, expiring, ctx.settings.sweep_concurrency, "warn")
    return [lease for lease, done in zip(expiring, marked, strict=True) if done]
