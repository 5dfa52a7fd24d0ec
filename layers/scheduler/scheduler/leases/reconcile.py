"""The reconciler: compares every provider's managed workers with the table and repairs the difference.

One run is five named passes over one listing of the workers and one of the live leases:

1. `index_starting`: starting leases recorded before the starting index enter it;
2. `remove_orphans`: a worker no live lease owns, past the grace period, is removed;
3. `fail_ghosts`: an active lease whose worker vanished, or is listed stopped, ends `failed`;
4. `fail_stuck_pending`: a lease `pending` past PENDING_DEADLINE_SECONDS ends `failed`, any worker of it removed;
5. `repair_counters`: a cap, quota or host counter that drifted from the live leases is set right.

Each pass records what it did in the run's `ReconcileReport`; one lease's or worker's failure never stops
a pass (the next run retries it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from scheduler.leases.workers import release_claimed, unconfigured_pending
from scheduler.lifecycle import LeaseStatus
from scheduler.models import Lease
from scheduler.observability.log import Logger
from scheduler.providers.base import ManagedWorker, ProviderRequestFailed, failed_request
from scheduler.store import counters

if TYPE_CHECKING:
    from scheduler.leases.context import Context

logger = Logger(child=True)

# Longer than the live index takes to catch up with a write (typically well under a second).
COUNTER_SETTLE_SECONDS = 30


@dataclass
class ReconcileReport:
    """What one reconcile run found and did."""

    orphans_removed: list[str] = field(default_factory=list)
    ghosts_failed: list[str] = field(default_factory=list)
    stopped_failed: list[str] = field(default_factory=list)
    stuck_pending_failed: list[str] = field(default_factory=list)
    counters_repaired: dict[str, tuple[int, int]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    orphans_by_provider: Counter[str] = field(default_factory=Counter)
    live_by_provider: Counter[str] = field(default_factory=Counter)
    ended: list[Lease] = field(default_factory=list)
    starting_indexed: list[str] = field(default_factory=list)  # starting leases recorded before that index


class Listing:
    """Every configured provider's managed workers, listed once at `at` (a provider that could not be
    listed is absent: none of its workers or leases is judged this run)."""

    def __init__(self, ctx: Context, report: ReconcileReport) -> None:
        self.at = ctx.clock()
        self._providers = ctx.providers
        self.workers: dict[str, list[ManagedWorker]] = {}
        for provider in ctx.providers.in_order():
            try:
                with failed_request():
                    self.workers[provider.name] = provider.list_managed(ctx.deadline)
            except ProviderRequestFailed as error:
                report.errors.append(f"{provider.name}: {error}")
                logger.warning("cannot list workers; skipping this provider", extra={"provider": provider.name})
        self._by_key = {
            name: {self.key(name, worker.token): worker for worker in listed} for name, listed in self.workers.items()
        }

    def key(self, provider: str, token: str | None) -> str | None:
        """What a lease's token and the listing's have in common for one worker (`Provider.worker_key`)."""
        return None if token is None else self._providers.get(provider).worker_key(token)

    def own_worker(self, lease: Lease) -> ManagedWorker | None:
        """The lease's own worker as listed, if it was."""
        return self._by_key[lease.provider].get(self.key(lease.provider, lease.provider_token))

    def owns(self, lease: Lease | None, provider: str, worker: ManagedWorker) -> bool:
        """Whether `lease` accounts for `worker` (a pending or releasing lease may have a worker anywhere)."""
        if lease is None:
            return False
        if lease.status in (LeaseStatus.PENDING, LeaseStatus.RELEASING):
            return True
        if lease.provider != provider:
            return False
        return self.key(provider, lease.provider_token) == self.key(provider, worker.token)


def reconcile(ctx: Context) -> ReconcileReport:
    """Remove orphans, fail ghosts and leases whose worker stopped, clean up leases stuck in `pending`, index
    starting leases and repair drifted counters (ORPHAN_GRACE_SECONDS, PENDING_DEADLINE_SECONDS)."""
    report = ReconcileReport()
    # Workers first, then leases: a worker is only ever created after its lease row is written,
    # so every worker listed here that belongs to a live lease also shows up in the lease listing.
    listing = Listing(ctx, report)
    live = {lease.lease_id: lease for lease in ctx.store.live_leases()}
    report.live_by_provider.update(lease.provider for lease in live.values())
    index_starting(ctx, live.values(), report)
    remove_orphans(ctx, listing, live, report)
    fail_ghosts(ctx, listing, live.values(), report)
    fail_stuck_pending(ctx, listing.at, live.values(), report)
    if _counters_kept(ctx):
        try:
            report.counters_repaired = repair_counters(ctx)
        except Exception as error:  # retried next run; the rest of the report stands
            report.errors.append(f"counter repair: {error}")
            logger.exception("counter repair failed; the next pass retries it")
    return report


def index_starting(ctx: Context, live: Iterable[Lease], report: ReconcileReport) -> None:
    """Starting leases recorded before the starting index existed enter it, so that the sweep's readiness
    pass sees them (one conditional write per starting lease; those already in it refuse it)."""
    for lease in live:
        if not lease.is_starting:
            continue
        try:
            if ctx.store.index_starting(lease.lease_id):
                report.starting_indexed.append(lease.lease_id)
        except Exception as error:  # noqa: BLE001 - one lease's failure must not stop the pass
            report.errors.append(f"lease {lease.lease_id}: {error}")


def remove_orphans(ctx: Context, listing: Listing, live: Mapping[str, Lease], report: ReconcileReport) -> None:
    """Remove every listed worker that no live lease owns, once it is older than ORPHAN_GRACE_SECONDS (an
    acquire may be about to record it)."""
    grace = timedelta(seconds=ctx.settings.orphan_grace_seconds)
    for provider_name, listed in listing.workers.items():
        for worker in listed:
            if listing.owns(live.get(worker.lease_id), provider_name, worker) or listing.at - worker.created_at < grace:
                continue
            try:
                ctx.providers.get(provider_name).release(worker.lease_id, worker.token, ctx.deadline)
            except Exception as error:  # noqa: BLE001 - one worker's failure must not stop the pass
                report.errors.append(f"orphan {worker.token}: {error}")
                continue
            report.orphans_removed.append(worker.token)
            report.orphans_by_provider[provider_name] += 1
            logger.warning(
                "orphan worker removed",
                extra={"provider": provider_name, "token": worker.token, "lease_id": worker.lease_id},
            )


def fail_ghosts(ctx: Context, listing: Listing, live: Iterable[Lease], report: ReconcileReport) -> None:
    """End `failed` every active lease whose worker its provider no longer lists (a ghost) or lists stopped."""
    # Only a lease older than the pending deadline had its worker before the listing; a younger one may
    # have been activated after it, and must not be called a ghost.
    settled_before = listing.at - timedelta(seconds=ctx.settings.pending_deadline_seconds)
    for lease in live:
        if lease.status != LeaseStatus.ACTIVE or lease.provider not in listing.workers:
            continue
        try:
            own = listing.own_worker(lease)
            if own is None and lease.created_at <= settled_before:
                if ctx.providers.get(lease.provider).vouches_for(lease.provider_token):
                    vanished = f"the worker vanished: {lease.provider} no longer lists it"
                    _fail(ctx, lease, report.ghosts_failed, lease.provider_token, vanished, report)
            elif own is not None and own.stopped_reason:
                # The lease's own worker, listed as stopped: evidence, not absence, so no settling is needed.
                _fail(ctx, lease, report.stopped_failed, lease.provider_token, own.stopped_reason, report)
        except Exception as error:  # one lease's failure must not stop the pass; the next run retries it
            report.errors.append(f"lease {lease.lease_id}: {error}")
            logger.exception("reconciling a lease failed; the next run retries it", extra={"lease_id": lease.lease_id})


def fail_stuck_pending(ctx: Context, now: datetime, live: Iterable[Lease], report: ReconcileReport) -> None:
    """End `failed` every lease still `pending` PENDING_DEADLINE_SECONDS after it was made (its acquire died),
    removing any worker made for it on every provider."""
    seconds = ctx.settings.pending_deadline_seconds
    for lease in live:
        if lease.status != LeaseStatus.PENDING or lease.created_at > now - timedelta(seconds=seconds):
            continue
        if lease.provider not in ctx.providers.names:
            # Its worker may run there: leave it pending (visible; the sweep keeps it releasing from its
            # expiry), never failed on the word of the providers still configured.
            report.errors.append(unconfigured_pending(lease))
            logger.warning("pending lease left on an unconfigured provider", extra={"lease_id": lease.lease_id})
            continue
        reason = (
            f"the acquire did not finish within {seconds} s (PENDING_DEADLINE_SECONDS); any worker made for it was"
            " removed"
        )
        try:
            _fail(ctx, lease, report.stuck_pending_failed, None, reason, report)
        except Exception as error:  # one lease's failure must not stop the pass; the next run retries it
            report.errors.append(f"lease {lease.lease_id}: {error}")
            logger.exception("reconciling a lease failed; the next run retries it", extra={"lease_id": lease.lease_id})


def _counters_kept(ctx: Context) -> bool:
    """Counters exist to drift: a cap, a quota or a budget is set, or a provider's place has a cap."""
    return ctx.limits.active or any(counter.maximum is not None for counter in ctx.providers.place_counters())


def repair_counters(ctx: Context) -> dict[str, tuple[int, int]]:
    """Set every cap/quota counter that drifted to what the live leases actually hold.

    The holds come from the live index, which is eventually consistent: a lease written a moment ago
    may be missing, a lease just ended may still show. So one pass never repairs; it notes the
    disagreement on the counter with the counter's version (read strongly consistently). A later
    pass, at least COUNTER_SETTLE_SECONDS on, repairs only if the counter is still at that version —
    no lease took or gave back a slot in between, so the index has caught up with every change — and
    the index still shows the same count; the write is conditional on that version, so an acquire or
    release landing meanwhile makes it a no-op. A repair never undoes a concurrent acquire or release.
    """
    store, now = ctx.store, ctx.clock()
    states = store.counter_states()
    expected = counters.expected_counts(store.live_holds())
    repaired: dict[str, tuple[int, int]] = {}
    for counter in sorted(set(states) | set(expected)):
        if not counters.repairable(counter):
            continue  # a day's spend holds what ended leases cost too: the live index cannot say what it should read
        state, actual = states.get(counter, counters.CounterState()), expected.get(counter, 0)
        if state.leases == actual:
            continue
        confirmed = (
            state.suspect_version == state.version
            and state.suspect_expected == actual
            and state.suspect_at is not None
            and int(now.timestamp()) - state.suspect_at >= COUNTER_SETTLE_SECONDS
        )
        if not confirmed:
            store.suspect_counter(counter, state.version, actual, now)
        elif store.repair_counter(counter, state.version, actual):
            repaired[counter] = (state.leases, actual)
            logger.warning("lease counter repaired", extra={"counter": counter, "was": state.leases, "now": actual})
    return repaired


def _fail(ctx: Context, lease: Lease, done: list[str], token: str | None, reason: str, report: ReconcileReport) -> None:
    claim = ctx.store.claim_failed(
        lease.lease_id, ctx.clock(), status=lease.status, token=token, reason=reason, by=ctx.caller.name
    )
    if claim is None:
        return  # it changed since we listed it: activated, released or renewed meanwhile
    try:
        ended = release_claimed(ctx, claim)
    except ProviderRequestFailed as error:
        report.errors.append(f"lease {lease.lease_id}: {error}")
        return
    done.append(lease.lease_id)
    report.ended.append(ended)
    logger.warning(
        "lease failed by reconciler", extra={"lease_id": lease.lease_id, "was": lease.status.value, "reason": reason}
    )
