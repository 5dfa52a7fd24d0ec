"""The audit trail on every store: a lease records the caller that made it (`created_by`) and, once ended, who
ended it (`ended_by`: a caller's name, or the service's own sweep, ttl-stream, reconciler). A release claim
records its claimant, and a claim taking over a stale one keeps it, as it keeps the outcome. A lease stored
before the trail existed reads both as null.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler.callers.model import RECONCILER, SHARED_SECRET, SWEEP, TTL_STREAM, Caller, Role
from scheduler.errors import ProviderFailed
from scheduler.leases import reconcile
from scheduler.leases.release import release
from scheduler.leases.sweep import sweep
from scheduler.leases.ttl_stream import release_ttl_deleted
from scheduler.lifecycle import LeaseStatus
from scheduler.limits import LeaseLimits
from scheduler.models import Lease
from scheduler.providers.memory import MemoryProvider
from scheduler.request_models import LeaseRequest
from scheduler.store.port import LeaseStorePort

from .builders import (
    NOW,
    RELEASE_CLAIM_SECONDS,
    Leases,
    acquire,
    context,
    memory_provider,
    new_lease,
    registry_of,
    worker_for,
)
from .stored import remove_attribute, stored_item, ttl_delete

LATER = NOW + timedelta(hours=2)
ANIM = Caller("anim", Role.SERVICE, ("anim-service",))


def running(leases: Leases, provider: MemoryProvider, **fields: object) -> str:
    lease = leases.active(**fields)  # type: ignore[arg-type]
    provider.add_worker(lease.lease_id, str(lease.provider_token), NOW)
    return lease.lease_id


# --- the store -------------------------------------------------------------------------------------------------


def test_a_lease_records_the_caller_that_made_it(store: LeaseStorePort) -> None:
    lease = new_lease().replace(created_by="anim")
    store.create_pending(lease)
    assert (store.get(lease.lease_id).created_by, store.get(lease.lease_id).ended_by) == ("anim", None)


def test_a_release_is_ended_by_its_claimant_who_shows_only_once_it_ended(store: LeaseStorePort, leases: Leases) -> None:
    lease = leases.active()
    claim = store.claim_release(lease.lease_id, lease.owner_id, NOW, by="anim")
    assert (claim.by, store.get(lease.lease_id).ended_by) == ("anim", None)
    ended = store.finish_release(claim, NOW)
    assert (ended.ended_by, store.get(lease.lease_id).ended_by) == ("anim", "anim")
    assert "claimed_by" not in stored_item(store, lease.lease_id)


def test_a_sweep_finishing_a_callers_stale_release_ends_it_as_the_callers(
    store: LeaseStorePort, leases: Leases
) -> None:
    lease = leases.active(ttl_seconds=86_400)
    store.claim_release(lease.lease_id, lease.owner_id, NOW, by="anim")  # its worker was not removed: it went stale
    taken = store.claim_due(lease.lease_id, NOW + timedelta(seconds=RELEASE_CLAIM_SECONDS + 1), by="sweep")
    assert taken is not None and taken.by == "anim"
    ended = store.finish_release(taken, NOW + timedelta(seconds=RELEASE_CLAIM_SECONDS + 2))
    assert (ended.status, store.get(lease.lease_id).ended_by) == (LeaseStatus.RELEASED, "anim")


def test_an_expired_lease_the_sweep_claims_is_ended_by_the_sweep(store: LeaseStorePort, leases: Leases) -> None:
    lease = leases.active(ttl_seconds=60)
    claim = store.claim_due(lease.lease_id, LATER, by="sweep")
    assert claim is not None
    store.finish_release(claim, LATER)
    assert (store.get(lease.lease_id).status, store.get(lease.lease_id).ended_by) == (LeaseStatus.EXPIRED, "sweep")


def test_a_pending_lease_given_up_is_ended_by_whoever_gave_up(store: LeaseStorePort, leases: Leases) -> None:
    lease = leases.pending()
    assert store.fail_pending(lease.lease_id, NOW, reason="no provider", by="anim")
    assert (store.get(lease.lease_id).status, store.get(lease.lease_id).ended_by) == (LeaseStatus.FAILED, "anim")


def test_claims_of_broken_workers_record_their_claimant(store: LeaseStorePort, leases: Leases) -> None:
    stopped, pending = leases.active(), leases.pending()
    starting = store.activate(pending.lease_id, pending.provider, worker_for(pending)._replace(ready=False))
    assert isinstance(starting, Lease)
    failed = store.claim_failed(
        stopped.lease_id, NOW, status=LeaseStatus.ACTIVE, token=stopped.provider_token, reason="gone", by="reconciler"
    )
    assert starting.provider_token is not None
    booted = store.claim_boot_failed(starting.lease_id, NOW, token=starting.provider_token, reason="no", by="sweep")
    assert (failed and failed.by, booted and booted.by) == ("reconciler", "sweep")


def test_a_ttl_deleted_lease_is_ended_by_the_ttl_stream(store: LeaseStorePort, leases: Leases) -> None:
    lease = leases.active(ttl_seconds=60)
    claim = store.reclaim_ttl_deleted(ttl_delete(store, lease.lease_id), LATER, by="ttl-stream")
    assert claim is not None and claim.by == "ttl-stream"
    store.finish_release(claim, LATER)
    assert store.get(lease.lease_id).ended_by == "ttl-stream"


@pytest.mark.moto_only("the counters are given back in a transaction, which dynalite lacks")
def test_an_end_that_gives_counters_back_answers_who_ended_it(limited_store: LeaseStorePort) -> None:
    ctx = context(limited_store, limits=LeaseLimits(per_owner=2), clock=lambda: NOW, caller=ANIM)
    lease = acquire(ctx, LeaseRequest(kind=new_lease().kind))
    assert release(ctx, lease.lease_id, None).ended_by == "anim"


def test_a_lease_stored_before_the_audit_trail_reads_both_as_null(store: LeaseStorePort) -> None:
    lease = new_lease().replace(created_by="anim")
    store.create_pending(lease)
    store.activate(lease.lease_id, lease.provider, worker_for(lease))
    store.finish_release(store.claim_release(lease.lease_id, lease.owner_id, NOW, by="anim"), NOW)
    for attribute in ("created_by", "ended_by"):  # as an item written before they existed
        remove_attribute(store, lease.lease_id, attribute)
    read = store.get(lease.lease_id)
    assert (read.status, read.created_by, read.ended_by) == (LeaseStatus.RELEASED, None, None)
    assert (read.wire()["created_by"], read.wire()["ended_by"]) == (None, None)


def test_a_lease_made_before_the_audit_trail_is_ended_by_whoever_ends_it_now(
    store: LeaseStorePort, leases: Leases
) -> None:
    lease = leases.active()  # recorded without created_by, as before
    ended = store.finish_release(store.claim_release(lease.lease_id, lease.owner_id, NOW, by="anim"), NOW)
    assert (ended.created_by, store.get(lease.lease_id).created_by, ended.ended_by) == (None, None, "anim")


# --- the use cases: who each actor is ------------------------------------------------------------------------


def test_in_secret_mode_the_trail_names_the_shared_secret(store: LeaseStorePort) -> None:
    provider = memory_provider()
    ctx = context(store, registry_of(provider), clock=lambda: NOW, caller=SHARED_SECRET)
    lease = acquire(ctx, LeaseRequest(kind=new_lease().kind, owner_id="anim-service"))
    ended = release(ctx, lease.lease_id, "anim-service")
    assert (lease.created_by, ended.ended_by) == ("shared-secret", "shared-secret")


def test_the_sweep_the_ttl_stream_and_the_reconciler_end_leases_in_their_own_names(
    store: LeaseStorePort, leases: Leases
) -> None:
    provider = memory_provider()
    expired = running(leases, provider, ttl_seconds=60)
    ttl_deleted = running(leases, provider, ttl_seconds=60)
    ghost = leases.active(ttl_seconds=86_400).lease_id  # its worker is on no provider
    registry = registry_of(provider)
    release_ttl_deleted(
        context(store, registry, clock=lambda: LATER, caller=TTL_STREAM), ttl_delete(store, ttl_deleted)
    )
    sweep(context(store, registry, clock=lambda: LATER, caller=SWEEP))
    reconcile.reconcile(context(store, registry, clock=lambda: LATER, caller=RECONCILER, orphan_grace_seconds=600))
    assert {lease_id: store.get(lease_id).ended_by for lease_id in (expired, ttl_deleted, ghost)} == {
        expired: "sweep",
        ttl_deleted: "ttl-stream",
        ghost: "reconciler",
    }


def test_a_failed_acquire_is_ended_by_its_caller(store: LeaseStorePort) -> None:
    provider = memory_provider(refuse=True)
    ctx = context(store, registry_of(provider), clock=lambda: NOW, caller=ANIM)
    with pytest.raises(ProviderFailed):
        acquire(ctx, LeaseRequest(kind=new_lease().kind))
    (ended,) = [store.get(lease_id) for lease_id, _ in provider.provisioned]
    assert (ended.status, ended.created_by, ended.ended_by) == (LeaseStatus.FAILED, "anim", "anim")
