"""The reconciler: compares every provider's managed workers with the table and repairs the difference."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from aws_lambda_powertools import Logger

from scheduler.clock import Clock, utc_now
from scheduler.deadline import Deadline, or_never
from scheduler.leases.workers import release_claimed, unconfigured_pending
from scheduler.lifecycle import LeaseStatus
from scheduler.limits import LeaseLimits
from scheduler.models import Lease
from scheduler.providers.base import ManagedWorker, ProviderRequestFailed, failed_request
from scheduler.providers.configured import ConfiguredProviders
from scheduler.store import LeaseStore, counters

logger = Logger(child=True)


@dataclass
class ReconcileReport:
    """What one reconcile pass found and did."""

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


def _index_starting(store: LeaseStore, live: Iterable[Lease], report: ReconcileReport) -> None:
    """Starting leases recorded before the starting index existed enter it, so that the sweep's readiness
    pass sees them (one conditional write per starting lease; those already in it refuse it)."""
    for lease in live:
        if not lease.is_starting:
            continue
        try:
            if store.index_starting(lease.lease_id):
                report.starting_indexed.append(lease.lease_id)
        except Exception as error:  # noqa: BLE001 - one lease's failure must not stop the pass
            report.errors.append(f"lease {lease.lease_id}: {error}")


def reconcile(
    store: LeaseStore,
    providers: ConfiguredProviders,
    *,
    orphan_grace_seconds: int,
    pending_deadline_seconds: int,
    limits: LeaseLimits | None = None,
    clock: Clock = utc_now,
    deadline: Deadline | None = None,
) -> ReconcileReport:
    """Remove orphans, fail ghosts and leases whose worker stopped, and clean up leases stuck in `pending`."""
    deadline = or_never(deadline)
    report = ReconcileReport()
    now = clock()
    listed_at = now
    # Workers first, then leases: a worker is only ever created after its lease row is written,
    # so every worker listed here that belongs to a live lease also shows up in the lease listing.
    workers: dict[str, list[ManagedWorker]] = {}
    for provider in providers.in_order():
        try:
            with failed_request():
                workers[provider.name] = provider.list_managed(deadline)
        except ProviderRequestFailed as error:
            report.errors.append(f"{provider.name}: {error}")
            logger.warning("cannot list workers; skipping this provider", extra={"provider": provider.name})
    live = {lease.lease_id: lease for lease in store.live_leases()}
    report.live_by_provider.update(lease.provider for lease in live.values())
    _index_starting(store, live.values(), report)

    def key(provider_name: str, token: str | None) -> str | None:
        # A lease's token and the listing's may differ in form for one worker (`Provider.worker_key`).
        return None if token is None else providers.get(provider_name).worker_key(token)

    for provider_name, listed in workers.items():
        for worker in listed:
            lease = live.get(worker.lease_id)
            owned = lease is not None and (
                lease.status == LeaseStatus.PENDING
                or lease.status == LeaseStatus.RELEASING
                or (
                    lease.provider == provider_name
                    and key(provider_name, lease.provider_token) == key(provider_name, worker.token)
                )
            )
            if owned or now - worker.created_at < timedelta(seconds=orphan_grace_seconds):
                continue
            try:
                providers.get(provider_name).release(worker.lease_id, worker.token, deadline)
            except Exception as error:  # noqa: BLE001 - one worker's failure must not stop the pass
                report.errors.append(f"orphan {worker.token}: {error}")
                continue
            report.orphans_removed.append(worker.token)
            report.orphans_by_provider[provider_name] += 1
            logger.warning(
                "orphan worker removed",
                extra={"provider": provider_name, "token": worker.token, "lease_id": worker.lease_id},
            )

    pending_deadline = now - timedelta(seconds=pending_deadline_seconds)
    by_key = {name: {key(name, worker.token): worker for worker in listed} for name, listed in workers.items()}

    def fail(lease: Lease, done: list[str], token: str | None, reason: str) -> None:
        _fail(lease, store, providers, clock, done, report, token=token, reason=reason, deadline=deadline)

    for lease in live.values():
        # Only a lease older than the pending deadline had its worker before the listing above;
        # a younger one may have been activated after it, and must not be called a ghost.
        settled = lease.created_at <= listed_at - timedelta(seconds=pending_deadline_seconds)
        try:
            if lease.status == LeaseStatus.ACTIVE and lease.provider in workers:
                own = by_key[lease.provider].get(key(lease.provider, lease.provider_token))
                if own is None and settled and providers.get(lease.provider).vouches_for(lease.provider_token):
                    vanished = f"the worker vanished: {lease.provider} no longer lists it"
                    fail(lease, report.ghosts_failed, lease.provider_token, vanished)
                elif own is not None and own.stopped_reason:
                    # The lease's own worker, listed as stopped: evidence, not absence, so no settling is needed.
                    fail(lease, report.stopped_failed, lease.provider_token, own.stopped_reason)
            elif lease.status == LeaseStatus.PENDING and lease.created_at <= pending_deadline:
                if lease.provider not in providers.names:
                    # Its worker may run there: leave it pending (visible; the sweep keeps it releasing from
                    # its expiry), never failed on the word of the providers still configured.
                    report.errors.append(unconfigured_pending(lease))
                    logger.warning("pending lease left on an unconfigured provider", extra={"lease_id": lease.lease_id})
                    continue
                reason = (
                    f"the acquire did not finish within {pending_deadline_seconds} s (PENDING_DEADLINE_SECONDS);"
                    " any worker made for it was removed"
                )
                fail(lease, report.stuck_pending_failed, None, reason)
        except Exception as error:  # one lease's failure must not stop the pass; the next pass retries it
            report.errors.append(f"lease {lease.lease_id}: {error}")
            logger.exception("reconciling a lease failed; the next pass retries it", extra={"lease_id": lease.lease_id})
    if limits is not None and limits.active:
        try:
            report.counters_repaired = repair_counters(store, clock())
        except Exception as error:  # retried next pass; the rest of the report stands
            report.errors.append(f"counter repair: {error}")
            logger.exception("counter repair failed; the next pass retries it")
    return report


# Longer than the live index takes to catch up with a write (typically well under a second).
COUNTER_SETTLE_SECONDS = 30


def repair_counters(store: LeaseStore, now: datetime) -> dict[str, tuple[int, int]]:
    """Set every cap/quota counter that drifted to what the live leases actually hold.

    The holds come from the live index, which is eventually consistent: a lease written a moment ago
    may be missing, a lease just ended may still show. So one pass never repairs; it notes the
    disagreement on the counter with the counter's version (read strongly consistently). A later
    pass, at least COUNTER_SETTLE_SECONDS on, repairs only if the counter is still at that version —
    no lease took or gave back a slot in between, so the index has caught up with every change — and
    the index still shows the same count; the write is conditional on that version, so an acquire or
    release landing meanwhile makes it a no-op. A repair never undoes a concurrent acquire or release.
    """
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


def _fail(
    lease: Lease,
    store: LeaseStore,
    providers: ConfiguredProviders,
    clock: Clock,
    done: list[str],
    report: ReconcileReport,
    *,
    token: str | None,
    reason: str,
    deadline: Deadline,
) -> None:
    claim = store.claim_failed(lease.lease_id, clock(), status=lease.status, token=token, reason=reason)
    if claim is None:
        return  # it changed since we listed it: activated, released or renewed meanwhile
    try:
        ended = release_claimed(claim, store, providers, clock, deadline)
    except ProviderRequestFailed as error:
        report.errors.append(f"lease {lease.lease_id}: {error}")
        return
    done.append(lease.lease_id)
    report.ended.append(ended)
    logger.warning(
        "lease failed by reconciler", extra={"lease_id": lease.lease_id, "was": lease.status.value, "reason": reason}
    )
