"""Leases whose worker stopped behind the service's back (killed, crashed, OOM, an engine restart).

Such a lease is ended `failed` with the reason recorded, its worker removed and its cap and quota
slots given back — by whichever sees it first:

- the scheduled sweep (every minute when deployed): one cheap call per provider that offers one
  (`Provider.stopped_workers`: for a Docker host, one filtered container listing);
- a read of the lease (`GET /v1/lease/{id}`), for providers that can be asked about one worker
  without spending an API quota (local-docker), at most every few seconds per lease;
- the reconciler, from its full listing (`reconcile.py`).

An unreachable provider here is a failed request (`providers.base.failed_request`): the check is
skipped, never taken for "the worker is gone".

A stopped worker is positive evidence (the engine reports the lease's own container as exited),
so no settling delay applies; every end is a conditional claim on `active` with the lease's own
worker token, so a racing release, renewal or second checker never double-ends a lease.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from scheduler.leases.outcomes import Read
from scheduler.lifecycle import LeaseStatus
from scheduler.models import Lease, is_lease_id
from scheduler.observability.log import Logger

if TYPE_CHECKING:  # a read check loads the provider code when it first asks a provider
    from scheduler.leases.context import Context

logger = Logger(child=True)


@dataclass
class StoppedReport:
    """What one pass over the providers' stopped workers did."""

    ended: list[Lease] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def fail_stopped_workers(ctx: Context) -> StoppedReport:
    """End every active lease whose worker a provider reports stopped (one cheap call per provider)."""
    from scheduler.providers.base import ProviderRequestFailed, failed_request

    report = StoppedReport()
    for provider in ctx.providers.in_order():
        if ctx.deadline.expired:
            break
        try:
            with failed_request():
                stopped = provider.stopped_workers(ctx.deadline)
        except ProviderRequestFailed as error:
            report.errors.append(f"{provider.name}: {error}")
            logger.warning("cannot list stopped workers", extra={"provider": provider.name, "error": str(error)})
            continue
        for worker in stopped:
            if not is_lease_id(worker.lease_id) or ctx.deadline.expired:
                continue
            ended = end_lease_of_stopped_worker(ctx, worker.lease_id, worker.token, worker.reason)
            if ended is not None:
                report.ended.append(ended)
    return report


def end_lease_of_stopped_worker(ctx: Context, lease_id: str, token: str, reason: str) -> Lease | None:
    """Claim the lease as failed (only if still `active` on this worker), remove the worker, record the end.

    None when the lease is not active on this worker (ended, released meanwhile, or an orphan the
    reconciler handles). If the worker cannot be removed now, the lease stays `releasing` and the
    sweep finishes it.
    """
    from scheduler.leases.workers import release_claimed
    from scheduler.providers.base import ProviderRequestFailed

    claim = ctx.store.claim_failed(
        lease_id, ctx.clock(), status=LeaseStatus.ACTIVE, token=token, reason=reason, by=ctx.caller.name
    )
    if claim is None:
        return None
    logger.warning(
        "lease failed: its worker stopped",
        extra={"lease_id": lease_id, "provider": claim.lease.provider, "reason": reason},
    )
    try:
        return release_claimed(ctx, claim)
    except ProviderRequestFailed as error:
        logger.warning("the stopped worker could not be removed yet; the sweep retries", extra={"error": str(error)})
        return ctx.store.get(lease_id)


class ReadCheck:
    """On a read of an active lease, ask its provider whether the worker still runs.

    Only for providers in `checked` (default: those whose package says a read may ask, a cheap call without
    API quota), at most once every `interval_seconds` per lease in this execution environment, within
    `budget_seconds`. After a failed check the provider is left alone for `quiet_seconds`, so an
    unreachable host does not slow every read down.
    """

    def __init__(
        self,
        *,
        checked: frozenset[str] | None = None,
        interval_seconds: float = 5.0,
        budget_seconds: float = 2.0,
        quiet_seconds: float = 30.0,
        monotonic: Callable[[], float] = time.monotonic,
        remember: int = 10_000,
    ) -> None:
        self._checked = checked
        self._interval = interval_seconds
        self._budget = budget_seconds
        self._quiet = quiet_seconds
        self._monotonic = monotonic
        self._remember = remember
        self._last_checked: dict[str, float] = {}
        self._quiet_until: dict[str, float] = {}

    def __call__(self, ctx: Context, lease: Lease) -> Read:
        """The lease as read, or as ended now when its worker turned out to have stopped."""
        if not self._due(ctx, lease):
            return Read(lease)
        assert lease.provider_token is not None  # noqa: S101 - _due checked it  # nosec B101
        ctx = ctx.sooner(self._budget)
        from scheduler.providers.base import ProviderRequestFailed, failed_request

        provider = ctx.providers.get(lease.provider)  # the driver loads only here, on first need
        try:
            with failed_request():
                reason = provider.stopped_reason(lease.lease_id, lease.provider_token, ctx.deadline)
        except ProviderRequestFailed as error:
            self._quiet_until[lease.provider] = self._monotonic() + self._quiet
            logger.warning("worker check on read failed", extra={"provider": lease.provider, "error": str(error)})
            return Read(lease)
        if reason is None:
            return Read(lease)
        ended = end_lease_of_stopped_worker(ctx, lease.lease_id, lease.provider_token, reason)
        if ended is None:
            return Read(ctx.store.get(lease.lease_id))
        return Read(ended, ended_now=True)

    def _checks(self, ctx: Context, provider: str) -> bool:
        if self._checked is None:
            self._checked = ctx.providers.checked_on_read()
        return provider in self._checked and provider in ctx.providers.names

    def _due(self, ctx: Context, lease: Lease) -> bool:
        if lease.status != LeaseStatus.ACTIVE or not self._checks(ctx, lease.provider) or not lease.provider_token:
            return False
        now = self._monotonic()
        if self._quiet_until.get(lease.provider, 0.0) > now:
            return False
        last = self._last_checked.get(lease.lease_id)
        if last is not None and now - last < self._interval:
            return False
        if len(self._last_checked) >= self._remember:
            horizon = now - self._interval
            self._last_checked = {key: when for key, when in self._last_checked.items() if when > horizon}
        self._last_checked[lease.lease_id] = now
        return True
