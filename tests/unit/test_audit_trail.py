"""The audit trail on every store: a lease records the caller that made it (`created_by`) and, once ended, who
ended it (`ended_by`: a caller's name, or the service's own sweep, ttl-stream, reconciler). A release claim
records its claimant, and a claim taking over a stale one keeps it, as it keeps the outcome. A lease stored
before the trail existed reads both as null. Who renewed it last (`renewed_by`) and who found its worker ready
(`ready_by`) are recorded for its events (not shown on the wire lease).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from scheduler.budgets import OwnerBudgets
from scheduler.callers.model import RECONCILER, SHARED_SECRET, SWEEP, TTL_STREAM, Caller, Role
from scheduler.errors import ProviderFailed
from scheduler.leases import readiness, reconcile
from scheduler.leases.readiness import ReadinessPolicy, check_starting_leases
from scheduler.leases.release import release
from scheduler.leases.renew import renew
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


def test_a_renewal_records_its_caller(store: LeaseStorePort, leases: Leases) -> None:
    lease = leases.active()
    store.renew(lease.lease_id, lease.owner_id, 600, NOW + timedelta(seconds=30), by="anim")
    assert stored_item(store, lease.lease_id)["renewed_by"] == {"S": "anim"}


def test_each_renewal_records_its_own_caller_and_one_naming_nobody_leaves_none(
    store: LeaseStorePort, leases: Leases
) -> None:
    lease = leases.active()
    for seconds, by in ((30, "anim"), (60, "ops")):
        store.renew(lease.lease_id, lease.owner_id, 600, NOW + timedelta(seconds=seconds), by=by)
    assert stored_item(store, lease.lease_id)["renewed_by"] == {"S": "ops"}
    store.renew(lease.lease_id, lease.owner_id, 600, NOW + timedelta(seconds=90))
    assert "renewed_by" not in stored_item(store, lease.lease_id)


def test_a_renewal_held_against_its_workers_own_end_records_its_caller(store: LeaseStorePort, leases: Leases) -> None:
    lease = leases.ending(NOW + timedelta(hours=3))  # without a ttl, DynamoDB's store writes a second time
    store.renew(lease.lease_id, lease.owner_id, None, NOW + timedelta(seconds=30), by="anim")
    assert stored_item(store, lease.lease_id)["renewed_by"] == {"S": "anim"}


@pytest.mark.moto_only("a renewal reserving spend is a transaction, which dynalite lacks")
def test_a_renewal_reserving_spend_records_its_caller(budget_store: LeaseStorePort) -> None:
    lease = Leases(budget_store).active()
    budgets = OwnerBudgets(per_hour=None, per_day=100.0, release_lag_seconds=90)
    budget_store.renew_reserving(lease.lease_id, lease.owner_id, 7200, NOW + timedelta(seconds=30), budgets, by="anim")
    assert stored_item(budget_store, lease.lease_id)["renewed_by"] == {"S": "anim"}


def test_marking_a_worker_ready_records_who_found_it_ready_once(store: LeaseStorePort, leases: Leases) -> None:
    pending = leases.pending()
    starting = store.activate(pending.lease_id, pending.provider, worker_for(pending)._replace(ready=False))
    assert isinstance(starting, Lease) and starting.provider_token is not None
    assert store.mark_ready(starting.lease_id, starting.provider_token, NOW, by="sweep") is not None
    assert store.mark_ready(starting.lease_id, starting.provider_token, NOW, by="anim") is None
    assert stored_item(store, starting.lease_id)["ready_by"] == {"S": "sweep"}


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


def test_a_renewal_is_recorded_in_its_callers_name(store: LeaseStorePort, leases: Leases) -> None:
    lease = leases.active(owner_id="anim-service")
    renew(context(store, clock=lambda: NOW, caller=ANIM), lease.lease_id, None, 600)
    assert stored_item(store, lease.lease_id)["renewed_by"] == {"S": "anim"}


def test_a_worker_the_sweep_finds_ready_is_recorded_ready_by_the_sweep(store: LeaseStorePort) -> None:
    provider = memory_provider(boots=True)
    lease = acquire(
        context(store, registry_of(provider), clock=lambda: NOW, caller=ANIM), LeaseRequest(kind=new_lease().kind)
    )
    provider.boot(str(lease.provider_token))
    check_starting_leases(context(store, registry_of(provider), clock=lambda: NOW, caller=SWEEP), ReadinessPolicy())
    assert stored_item(store, lease.lease_id)["ready_by"] == {"S": "sweep"}


def test_a_worker_a_callers_read_finds_ready_is_recorded_ready_by_that_caller(store: LeaseStorePort) -> None:
    provider = memory_provider(boots=True)
    lease = acquire(context(store, registry_of(provider), clock=lambda: NOW), LeaseRequest(kind=new_lease().kind))
    provider.boot(str(lease.provider_token))
    ctx = context(store, registry_of(provider), clock=lambda: NOW, caller=ANIM)
    assert readiness.refresh(ctx, store.get(lease.lease_id), ReadinessPolicy()).became_ready
    assert stored_item(store, lease.lease_id)["ready_by"] == {"S": "anim"}
