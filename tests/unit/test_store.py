"""The lease store's contract, on DynamoDB (moto, dynalite: tables of template.yaml) and in memory, explicit `now`s."""

from __future__ import annotations

import base64
import json
from datetime import timedelta

import pytest

from scheduler.errors import InvalidRequest, LeaseConflict, LeaseNotFound, NotLeaseOwner
from scheduler.lifecycle import LeaseStatus
from scheduler.models import ListFilter, WorkerKind
from scheduler.providers.base import ProvisionedWorker
from scheduler.store import LeaseStateChanged, LeaseStore
from scheduler.store.items import InvalidNumber

from .builders import NOW, RELEASE_CLAIM_SECONDS, RETENTION_SECONDS, Leases, epoch, new_lease, worker_for
from .stored import stored_item, ttl_delete

LATER = NOW + timedelta(minutes=5)
FAR_FUTURE = NOW + timedelta(days=1)


def all_live(store: LeaseStore, query: ListFilter | None = None) -> list[str]:
    """Walk every page of list_live; the ids in the order they came."""
    query = query or ListFilter()
    ids: list[str] = []
    token: str | None = None
    for _ in range(100):
        page, token = store.list_live(query._replace(next_token=token), NOW)
        ids.extend(lease.lease_id for lease in page)
        if token is None:
            return ids
    raise AssertionError("list_live did not finish paging")


def token_of(payload: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


# --- create_pending / get -----------------------------------------------------------------------


def test_pending_lease_reads_back_as_recorded(store: LeaseStore) -> None:
    lease = new_lease(correlation_id="job-7", region="eu-west-1")
    store.create_pending(lease)
    assert store.get(lease.lease_id) == lease


def test_lease_without_labels_reads_back_with_nulls(store: LeaseStore) -> None:
    lease = new_lease(owner_id=None)
    store.create_pending(lease)
    stored = store.get(lease.lease_id)
    assert (stored.owner_id, stored.correlation_id, stored.region) == (None, None, None)


def test_get_of_unknown_lease_is_not_found(store: LeaseStore) -> None:
    with pytest.raises(LeaseNotFound):
        store.get(new_lease().lease_id)


# --- activate / fail_pending --------------------------------------------------------------------


def test_activate_moves_pending_lease_to_active(leases: Leases, store: LeaseStore) -> None:
    lease = leases.pending()
    store.activate(lease.lease_id, "local-docker", worker_for(lease))
    assert store.get(lease.lease_id).status == LeaseStatus.ACTIVE


def test_activate_records_the_worker(leases: Leases, store: LeaseStore) -> None:
    lease = leases.pending()
    worker = ProvisionedWorker(token="ctr-42", endpoint="http://127.0.0.1:18080", cost_per_hour=0.42)
    active = store.activate(lease.lease_id, "local-docker", worker)
    assert (active.provider_token, active.endpoint, active.cost_per_hour) == ("ctr-42", "http://127.0.0.1:18080", 0.42)


def test_activate_records_the_provider_that_served(leases: Leases, store: LeaseStore) -> None:
    lease = leases.pending(provider="local-docker")
    assert store.activate(lease.lease_id, "runpod", worker_for(lease)).provider == "runpod"


def test_activate_without_endpoint_or_price_leaves_them_null(leases: Leases, store: LeaseStore) -> None:
    lease = leases.pending()
    active = store.activate(lease.lease_id, "local-docker", ProvisionedWorker(token="ctr-1", endpoint=None))
    assert (active.endpoint, active.cost_per_hour) == (None, None)


def test_activate_of_a_lease_active_with_another_worker_is_refused(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active()
    other = ProvisionedWorker(token="ctr-someone-else", endpoint=None)
    with pytest.raises(LeaseStateChanged):
        store.activate(lease.lease_id, "local-docker", other)


def test_repeated_activate_with_the_same_worker_is_a_retry_and_succeeds(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active()  # as when botocore retries an activate whose first answer timed out
    again = store.activate(lease.lease_id, "local-docker", worker_for(lease))
    assert again.status == LeaseStatus.ACTIVE and again.provider_token == lease.provider_token


def test_activate_of_unknown_lease_is_refused(store: LeaseStore) -> None:
    lease = new_lease()
    with pytest.raises(LeaseStateChanged):
        store.activate(lease.lease_id, "local-docker", worker_for(lease))


def test_activate_of_unknown_lease_creates_nothing(store: LeaseStore) -> None:
    lease = new_lease()
    with pytest.raises(LeaseStateChanged):
        store.activate(lease.lease_id, "local-docker", worker_for(lease))
    with pytest.raises(LeaseNotFound):
        store.get(lease.lease_id)


def test_fail_pending_ends_the_lease_as_failed(leases: Leases, store: LeaseStore) -> None:
    lease = leases.pending()
    store.fail_pending(lease.lease_id, LATER)
    failed = store.get(lease.lease_id)
    assert (failed.status, failed.released_at) == (LeaseStatus.FAILED, LATER)


def test_fail_pending_leaves_an_active_lease_alone(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active()
    store.fail_pending(lease.lease_id, LATER)
    assert store.get(lease.lease_id).status == LeaseStatus.ACTIVE


def test_failed_pending_lease_cannot_be_activated(leases: Leases, store: LeaseStore) -> None:
    lease = leases.pending()
    store.fail_pending(lease.lease_id, LATER)
    with pytest.raises(LeaseStateChanged):
        store.activate(lease.lease_id, "local-docker", worker_for(lease))


# --- claim_release / finish_release -------------------------------------------------------------


def test_release_by_owner_claims_the_lease(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active(owner_id="alice")
    claim = store.claim_release(lease.lease_id, "alice", NOW)
    assert (claim.outcome, store.get(lease.lease_id).status) == (LeaseStatus.RELEASED, LeaseStatus.RELEASING)


def test_release_of_lease_without_owner_is_open_to_any_caller(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active(owner_id=None)
    assert store.claim_release(lease.lease_id, "bob", NOW).lease.lease_id == lease.lease_id


def test_release_of_lease_without_owner_needs_no_owner_header(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active(owner_id=None)
    assert store.claim_release(lease.lease_id, None, NOW).outcome == LeaseStatus.RELEASED


def test_release_by_other_owner_is_forbidden(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active(owner_id="alice")
    with pytest.raises(NotLeaseOwner):
        store.claim_release(lease.lease_id, "bob", NOW)


def test_release_without_owner_of_an_owned_lease_is_forbidden(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active(owner_id="alice")
    with pytest.raises(NotLeaseOwner):
        store.claim_release(lease.lease_id, None, NOW)


def test_forbidden_release_leaves_the_lease_active(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active(owner_id="alice")
    with pytest.raises(NotLeaseOwner):
        store.claim_release(lease.lease_id, "bob", NOW)
    assert store.get(lease.lease_id).status == LeaseStatus.ACTIVE


def test_release_of_unknown_lease_is_not_found(store: LeaseStore) -> None:
    with pytest.raises(LeaseNotFound):
        store.claim_release(new_lease().lease_id, "alice", NOW)


def test_release_of_released_lease_is_not_found(leases: Leases, store: LeaseStore) -> None:
    lease = leases.released(owner_id="alice")
    with pytest.raises(LeaseNotFound):
        store.claim_release(lease.lease_id, "alice", LATER)


def test_release_of_expired_lease_is_not_found(leases: Leases, store: LeaseStore) -> None:
    lease = leases.expired(owner_id="alice")
    with pytest.raises(LeaseNotFound):
        store.claim_release(lease.lease_id, "alice", FAR_FUTURE)


def test_second_release_claim_of_one_lease_loses(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active(owner_id="alice")
    store.claim_release(lease.lease_id, "alice", NOW)
    with pytest.raises(LeaseNotFound):
        store.claim_release(lease.lease_id, "alice", NOW)


def test_sweep_cannot_claim_a_lease_a_caller_is_releasing(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active(ttl_seconds=60)
    just_expired = lease.expires_at + timedelta(seconds=1)
    store.claim_release(lease.lease_id, lease.owner_id, lease.expires_at - timedelta(seconds=1))
    assert store.claim_due(lease.lease_id, just_expired) is None


def test_caller_cannot_release_a_lease_the_sweep_claimed(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active(ttl_seconds=60)
    swept_at = lease.expires_at + timedelta(seconds=1)
    assert store.claim_due(lease.lease_id, swept_at) is not None
    with pytest.raises(LeaseNotFound):
        store.claim_release(lease.lease_id, lease.owner_id, swept_at)


def test_finish_release_records_released_with_its_time(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active()
    claim = store.claim_release(lease.lease_id, lease.owner_id, NOW)
    released = store.finish_release(claim, LATER)
    assert (released.status, released.released_at) == (LeaseStatus.RELEASED, LATER)


def test_released_lease_stays_readable(leases: Leases, store: LeaseStore) -> None:
    lease = leases.released(at=LATER)
    stored = store.get(lease.lease_id)
    assert (stored.status, stored.released_at, stored.provider_token) == (
        LeaseStatus.RELEASED,
        LATER,
        f"ctr-{lease.lease_id[:8]}",
    )


def test_finish_release_by_a_superseded_claim_is_refused(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active()
    stale = store.claim_release(lease.lease_id, lease.owner_id, NOW)
    assert store.claim_due(lease.lease_id, FAR_FUTURE) is not None
    with pytest.raises(LeaseStateChanged):
        store.finish_release(stale, FAR_FUTURE)


def test_finish_release_twice_is_refused(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active()
    claim = store.claim_release(lease.lease_id, lease.owner_id, NOW)
    store.finish_release(claim, NOW)
    with pytest.raises(LeaseStateChanged):
        store.finish_release(claim, LATER)


# --- list_live ----------------------------------------------------------------------------------


def test_list_returns_pending_and_active_leases(leases: Leases, store: LeaseStore) -> None:
    pending, active = leases.pending(), leases.active()
    assert sorted(all_live(store)) == sorted([pending.lease_id, active.lease_id])


def test_list_returns_leases_as_stored(leases: Leases, store: LeaseStore) -> None:
    active = leases.active()
    page, _ = store.list_live(ListFilter(), NOW)
    assert page == [active]


def test_list_omits_released_lease(leases: Leases, store: LeaseStore) -> None:
    leases.released()
    assert all_live(store) == []


def test_list_shows_a_lease_being_released_as_releasing(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active()
    store.claim_release(lease.lease_id, lease.owner_id, NOW)
    page, _ = store.list_live(ListFilter(), NOW)
    assert [(listed.lease_id, listed.status) for listed in page] == [(lease.lease_id, LeaseStatus.RELEASING)]


def test_list_shows_a_release_whose_claim_went_stale(leases: Leases, store: LeaseStore) -> None:
    """A worker that could not be removed leaves its lease `releasing` with a claim the sweep takes over once
    stale; it may bill all that time, so it stays listed."""
    lease = leases.active()
    store.claim_release(lease.lease_id, lease.owner_id, NOW)
    later = NOW + timedelta(seconds=RELEASE_CLAIM_SECONDS + 1)
    page, _ = store.list_live(ListFilter(), later)
    assert [(listed.lease_id, listed.status) for listed in page] == [(lease.lease_id, LeaseStatus.RELEASING)]


def test_list_shows_an_expired_lease_the_sweep_is_still_releasing(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active(ttl_seconds=600)
    swept_at = lease.expires_at + timedelta(seconds=1)
    assert store.claim_due(lease.lease_id, swept_at) is not None
    page, _ = store.list_live(ListFilter(), swept_at + timedelta(seconds=30))
    assert [(listed.lease_id, listed.status) for listed in page] == [(lease.lease_id, LeaseStatus.RELEASING)]


def test_list_filters_a_lease_being_released_by_owner(leases: Leases, store: LeaseStore) -> None:
    alices, bobs = leases.active(owner_id="alice"), leases.active(owner_id="bob")
    for lease in (alices, bobs):
        store.claim_release(lease.lease_id, lease.owner_id, NOW)
    assert all_live(store, ListFilter(owner_id="bob")) == [bobs.lease_id]


def test_list_pages_over_overdue_leases_to_every_listed_one(leases: Leases, store: LeaseStore) -> None:
    """Overdue leases the sweep has not claimed come first in the index and are left out; paging goes on
    past them to the stale release among them and to the live leases after."""
    later = NOW + timedelta(seconds=RELEASE_CLAIM_SECONDS + 1)
    for _ in range(3):
        leases.active(ttl_seconds=60)  # past expiry at `later`, not yet swept
    stale = leases.active(ttl_seconds=3600)
    store.claim_release(stale.lease_id, stale.owner_id, NOW)
    live = leases.active(ttl_seconds=7200)
    listed: list[str] = []
    token: str | None = None
    for _ in range(20):
        page, token = store.list_live(ListFilter(limit=1, next_token=token), later)
        listed += [lease.lease_id for lease in page]
        if token is None:
            break
    assert listed == [stale.lease_id, live.lease_id]


def test_list_omits_a_lease_once_its_release_is_recorded(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active()
    claim = store.claim_release(lease.lease_id, lease.owner_id, NOW)
    store.finish_release(claim, NOW)
    assert all_live(store) == []


def test_list_omits_expired_lease(leases: Leases, store: LeaseStore) -> None:
    leases.expired()
    assert all_live(store) == []


def test_list_omits_active_lease_past_expiry_not_yet_swept(leases: Leases, store: LeaseStore) -> None:
    overdue = leases.active(created_at=NOW - timedelta(hours=2), ttl_seconds=3600)
    live = leases.active()
    assert (all_live(store), store.get(overdue.lease_id).status) == ([live.lease_id], LeaseStatus.ACTIVE)


def test_list_filters_by_owner(leases: Leases, store: LeaseStore) -> None:
    alices = leases.active(owner_id="alice")
    leases.active(owner_id="bob")
    leases.active(owner_id=None)
    assert all_live(store, ListFilter(owner_id="alice")) == [alices.lease_id]


def test_list_filters_by_kind(leases: Leases, store: LeaseStore) -> None:
    leases.active(kind=WorkerKind.RENDERER)
    anim = leases.active(kind=WorkerKind.ANIM)
    assert all_live(store, ListFilter(kind=WorkerKind.ANIM)) == [anim.lease_id]


def test_list_filters_by_provider(leases: Leases, store: LeaseStore) -> None:
    leases.active(provider="local-docker")
    runpod = leases.active(provider="runpod")
    assert all_live(store, ListFilter(provider="runpod")) == [runpod.lease_id]


def test_list_combines_filters(leases: Leases, store: LeaseStore) -> None:
    leases.active(owner_id="alice", kind=WorkerKind.RENDERER)
    wanted = leases.active(owner_id="alice", kind=WorkerKind.ANIM)
    leases.active(owner_id="bob", kind=WorkerKind.ANIM)
    assert all_live(store, ListFilter(owner_id="alice", kind=WorkerKind.ANIM)) == [wanted.lease_id]


def test_list_page_holds_at_most_limit_leases(leases: Leases, store: LeaseStore) -> None:
    for _ in range(5):
        leases.active()
    page, token = store.list_live(ListFilter(limit=2), NOW)
    assert (len(page), token is not None) == (2, True)


def test_list_pages_return_every_lease_exactly_once(leases: Leases, store: LeaseStore) -> None:
    ids = [leases.active(ttl_seconds=600 + index).lease_id for index in range(7)]
    listed = all_live(store, ListFilter(limit=2))
    assert sorted(listed) == sorted(ids)


def test_list_of_everything_in_one_page_has_no_next_token(leases: Leases, store: LeaseStore) -> None:
    leases.active()
    assert store.list_live(ListFilter(limit=10), NOW)[1] is None


@pytest.mark.parametrize(
    "token",
    ["garbage", "!!!", "é", token_of([1, 2]), token_of({"s": 7, "k": None}), token_of({"s": 0, "k": "x"})],
)
def test_list_with_garbage_next_token_is_invalid_request(store: LeaseStore, token: str) -> None:
    with pytest.raises(InvalidRequest):
        store.list_live(ListFilter(next_token=token), NOW)


@pytest.mark.parametrize(
    "start_key",
    [{"lease_id": "not-an-attribute-value"}, {"lease_id": {"S": "0b6c2f0e-8f0e-4f54-9d8e-3c8a3e4d9a11"}}],
)
def test_list_with_forged_next_token_is_invalid_request(store: LeaseStore, start_key: object) -> None:
    with pytest.raises(InvalidRequest):
        store.list_live(ListFilter(next_token=token_of({"s": 0, "k": start_key})), NOW)


def test_sharded_list_returns_every_lease_across_pages(sharded_store: LeaseStore) -> None:
    leases = Leases(sharded_store)
    ids = [leases.active(ttl_seconds=600 + index).lease_id for index in range(12)]
    shards = {stored_item(sharded_store, lease_id)["live_shard"]["S"] for lease_id in ids}
    assert len(shards) > 1, "the leases should spread over several shards"
    assert sorted(all_live(sharded_store, ListFilter(limit=3))) == sorted(ids)


def test_sharded_list_lists_each_lease_once(sharded_store: LeaseStore) -> None:
    leases = Leases(sharded_store)
    for index in range(12):
        leases.active(ttl_seconds=600 + index)
    listed = all_live(sharded_store, ListFilter(limit=5))
    assert len(listed) == len(set(listed)) == 12


def test_sharded_list_filters_across_shards(sharded_store: LeaseStore) -> None:
    leases = Leases(sharded_store)
    alices = [leases.active(owner_id="alice").lease_id for _ in range(6)]
    for _ in range(6):
        leases.active(owner_id="bob")
    assert sorted(all_live(sharded_store, ListFilter(owner_id="alice", limit=2))) == sorted(alices)


# --- renew --------------------------------------------------------------------------------------


def test_renew_sets_expiry_to_now_plus_ttl(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active()
    assert store.renew(lease.lease_id, "alice", 7200, LATER).expires_at == LATER + timedelta(seconds=7200)


def test_renew_records_the_requested_ttl(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active(ttl_seconds=3600)
    store.renew(lease.lease_id, "alice", 900, LATER)
    assert store.get(lease.lease_id).ttl_seconds == 900


def test_renew_without_ttl_uses_the_lease_own_ttl(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active(ttl_seconds=600)
    renewed = store.renew(lease.lease_id, "alice", None, LATER)
    assert (renewed.expires_at, renewed.ttl_seconds) == (LATER + timedelta(seconds=600), 600)


def test_renew_can_shorten_a_lease(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active(ttl_seconds=3600)
    assert store.renew(lease.lease_id, "alice", 60, LATER).expires_at == LATER + timedelta(seconds=60)


def test_renewed_lease_is_not_due_at_its_old_expiry(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active(ttl_seconds=600)
    store.renew(lease.lease_id, "alice", 3600, LATER)
    assert list(store.due_leases(lease.expires_at + timedelta(seconds=1))) == []


def test_renewed_lease_is_listed_past_its_old_expiry(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active(ttl_seconds=600)
    store.renew(lease.lease_id, "alice", 3600, LATER)
    page, _ = store.list_live(ListFilter(), lease.expires_at + timedelta(seconds=1))
    assert [listed.lease_id for listed in page] == [lease.lease_id]


def test_renew_past_the_end_the_provider_gave_the_worker_is_a_conflict_naming_it(
    leases: Leases, store: LeaseStore
) -> None:
    lease = leases.ending(NOW + timedelta(seconds=900), ttl_seconds=600)
    with pytest.raises(LeaseConflict, match="past 2026-11-30T04:15:00Z") as refused:
        store.renew(lease.lease_id, "alice", 601, LATER)
    assert refused.value.details == {"worker_ends_at": "2026-11-30T04:15:00Z"}
    assert store.get(lease.lease_id).expires_at == lease.expires_at


def test_renew_up_to_the_end_the_provider_gave_the_worker_is_taken(leases: Leases, store: LeaseStore) -> None:
    lease = leases.ending(NOW + timedelta(seconds=900), ttl_seconds=600)
    assert store.renew(lease.lease_id, "alice", 600, LATER).expires_at == NOW + timedelta(seconds=900)


def test_renew_without_ttl_is_held_against_the_end_the_provider_gave_the_worker(
    leases: Leases, store: LeaseStore
) -> None:
    lease = leases.ending(NOW + timedelta(seconds=900), ttl_seconds=600)
    renewed = store.renew(lease.lease_id, "alice", None, LATER)
    assert (renewed.expires_at, renewed.ttl_seconds) == (NOW + timedelta(seconds=900), 600)
    with pytest.raises(LeaseConflict, match="past 2026-11-30T04:15:00Z"):
        store.renew(lease.lease_id, "alice", None, LATER + timedelta(seconds=1))


def test_renew_past_the_workers_end_by_another_owner_is_forbidden_not_explained(
    leases: Leases, store: LeaseStore
) -> None:
    lease = leases.ending(NOW + timedelta(seconds=900), ttl_seconds=600)
    with pytest.raises(NotLeaseOwner):
        store.renew(lease.lease_id, "bob", 3600, LATER)


def test_renew_of_lease_without_owner_is_open_to_any_caller(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active(owner_id=None)
    assert store.renew(lease.lease_id, "bob", 60, LATER).expires_at == LATER + timedelta(seconds=60)


def test_renew_of_unknown_lease_is_not_found(store: LeaseStore) -> None:
    with pytest.raises(LeaseNotFound):
        store.renew(new_lease().lease_id, "alice", 60, NOW)


def test_renew_of_lease_being_released_is_a_conflict(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active()
    store.claim_release(lease.lease_id, "alice", NOW)
    with pytest.raises(LeaseConflict):
        store.renew(lease.lease_id, "alice", 60, NOW)


def test_renew_of_pending_lease_is_a_conflict(leases: Leases, store: LeaseStore) -> None:
    lease = leases.pending()
    with pytest.raises(LeaseConflict):
        store.renew(lease.lease_id, "alice", 60, NOW)


def test_renew_of_released_lease_is_not_found(leases: Leases, store: LeaseStore) -> None:
    lease = leases.released()
    with pytest.raises(LeaseNotFound):
        store.renew(lease.lease_id, "alice", 60, LATER)


def test_renew_of_swept_expired_lease_is_not_found(leases: Leases, store: LeaseStore) -> None:
    lease = leases.expired()
    with pytest.raises(LeaseNotFound):
        store.renew(lease.lease_id, "alice", 60, FAR_FUTURE)


def test_renew_of_expired_lease_the_sweep_is_releasing_is_not_found(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active(ttl_seconds=60)
    assert store.claim_due(lease.lease_id, lease.expires_at) is not None
    with pytest.raises(LeaseNotFound):
        store.renew(lease.lease_id, "alice", 60, lease.expires_at)


def test_renew_of_active_lease_past_its_expiry_is_not_found(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active(ttl_seconds=60)
    with pytest.raises(LeaseNotFound):
        store.renew(lease.lease_id, "alice", 60, lease.expires_at)


def test_renew_past_expiry_leaves_the_expiry_alone(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active(ttl_seconds=60)
    with pytest.raises(LeaseNotFound):
        store.renew(lease.lease_id, "alice", 600, lease.expires_at + timedelta(seconds=5))
    assert store.get(lease.lease_id).expires_at == lease.expires_at


def test_renew_by_other_owner_is_forbidden(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active(owner_id="alice")
    with pytest.raises(NotLeaseOwner):
        store.renew(lease.lease_id, "bob", 60, NOW)


def test_renew_without_owner_of_an_owned_lease_is_forbidden(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active(owner_id="alice")
    with pytest.raises(NotLeaseOwner):
        store.renew(lease.lease_id, None, 60, NOW)


# --- due_leases / claim_due ---------------------------------------------------------------------


def test_due_leases_are_the_live_leases_past_their_due_time(leases: Leases, store: LeaseStore) -> None:
    due = leases.active(ttl_seconds=60)
    leases.active(ttl_seconds=3600)
    leases.pending(ttl_seconds=3600)
    assert [lease.lease_id for lease in store.due_leases(LATER)] == [due.lease_id]


def test_due_leases_include_an_overdue_pending_lease(leases: Leases, store: LeaseStore) -> None:
    pending = leases.pending(ttl_seconds=60)
    assert [lease.lease_id for lease in store.due_leases(LATER)] == [pending.lease_id]


def test_due_leases_omit_ended_leases(leases: Leases, store: LeaseStore) -> None:
    leases.released()
    leases.expired(ttl_seconds=60)
    assert list(store.due_leases(FAR_FUTURE)) == []


def test_due_leases_include_a_stale_release_claim(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active()
    store.claim_release(lease.lease_id, "alice", NOW)
    stale_at = NOW + timedelta(seconds=RELEASE_CLAIM_SECONDS)
    assert [due.lease_id for due in store.due_leases(stale_at)] == [lease.lease_id]


def test_due_leases_omit_a_fresh_release_claim(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active(ttl_seconds=60)
    store.claim_release(lease.lease_id, "alice", NOW)
    assert list(store.due_leases(NOW + timedelta(seconds=RELEASE_CLAIM_SECONDS - 1))) == []


def test_due_leases_stop_at_the_limit(leases: Leases, store: LeaseStore) -> None:
    for _ in range(5):
        leases.active(ttl_seconds=60)
    assert len(list(store.due_leases(LATER, limit=3))) == 3


def test_sharded_due_leases_come_from_every_shard(sharded_store: LeaseStore) -> None:
    leases = Leases(sharded_store)
    ids = [leases.active(ttl_seconds=60).lease_id for _ in range(10)]
    assert sorted(lease.lease_id for lease in sharded_store.due_leases(LATER)) == sorted(ids)


def test_claim_due_claims_an_expired_lease_as_expired(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active(ttl_seconds=60)
    claim = store.claim_due(lease.lease_id, LATER)
    assert claim is not None
    assert (claim.outcome, store.get(lease.lease_id).status) == (LeaseStatus.EXPIRED, LeaseStatus.RELEASING)


def test_claim_due_wins_only_once(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active(ttl_seconds=60)
    store.claim_due(lease.lease_id, LATER)
    assert store.claim_due(lease.lease_id, LATER) is None


def test_claim_due_of_lease_not_yet_due_is_none(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active(ttl_seconds=3600)
    assert store.claim_due(lease.lease_id, LATER) is None


def test_claim_due_of_ended_lease_is_none(leases: Leases, store: LeaseStore) -> None:
    lease = leases.released()
    assert store.claim_due(lease.lease_id, FAR_FUTURE) is None


def test_claim_due_of_unknown_lease_is_none(store: LeaseStore) -> None:
    assert store.claim_due(new_lease().lease_id, FAR_FUTURE) is None


def test_claim_due_retakes_a_stale_release_claim_as_released(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active()
    first = store.claim_release(lease.lease_id, "alice", NOW)
    retaken = store.claim_due(lease.lease_id, FAR_FUTURE)
    assert retaken is not None
    assert (retaken.outcome, retaken.claim_id != first.claim_id) == (LeaseStatus.RELEASED, True)


def test_retaken_release_claim_finishes_as_released(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active()
    store.claim_release(lease.lease_id, "alice", NOW)
    retaken = store.claim_due(lease.lease_id, FAR_FUTURE)
    assert retaken is not None
    assert store.finish_release(retaken, FAR_FUTURE).status == LeaseStatus.RELEASED


def test_swept_lease_finishes_as_expired(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active(ttl_seconds=60)
    claim = store.claim_due(lease.lease_id, LATER)
    assert claim is not None
    ended = store.finish_release(claim, LATER)
    assert (ended.status, ended.released_at) == (LeaseStatus.EXPIRED, LATER)


# --- reclaim_ttl_deleted ------------------------------------------------------------------------


def test_reclaim_writes_a_ttl_deleted_lease_back_as_an_expiry_claim(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active(ttl_seconds=60)
    claim = store.reclaim_ttl_deleted(ttl_delete(store, lease.lease_id), LATER)
    assert claim is not None
    assert (claim.outcome, store.get(lease.lease_id).status) == (LeaseStatus.EXPIRED, LeaseStatus.RELEASING)


def test_reclaimed_lease_keeps_its_worker(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active(ttl_seconds=60)
    claim = store.reclaim_ttl_deleted(ttl_delete(store, lease.lease_id), LATER)
    assert claim is not None
    assert claim.lease.provider_token == lease.provider_token


def test_reclaim_does_nothing_when_the_lease_exists(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active(ttl_seconds=60)
    old_image = stored_item(store, lease.lease_id)
    assert store.reclaim_ttl_deleted(old_image, LATER) is None


def test_reclaim_leaves_an_existing_lease_unchanged(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active(ttl_seconds=60)
    store.reclaim_ttl_deleted(stored_item(store, lease.lease_id), LATER)
    assert store.get(lease.lease_id) == lease


def test_reclaim_of_one_deletion_wins_once(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active(ttl_seconds=60)
    old_image = ttl_delete(store, lease.lease_id)
    store.reclaim_ttl_deleted(old_image, LATER)
    assert store.reclaim_ttl_deleted(old_image, LATER) is None


def test_reclaimed_lease_finishes_as_expired(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active(ttl_seconds=60)
    claim = store.reclaim_ttl_deleted(ttl_delete(store, lease.lease_id), LATER)
    assert claim is not None
    assert store.finish_release(claim, LATER).status == LeaseStatus.EXPIRED


# --- claim_failed -------------------------------------------------------------------------------


def test_claim_failed_claims_a_ghost_lease_with_its_token(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active()
    claim = store.claim_failed(lease.lease_id, LATER, status=LeaseStatus.ACTIVE, token=lease.provider_token)
    assert claim is not None
    assert (claim.outcome, store.get(lease.lease_id).status) == (LeaseStatus.FAILED, LeaseStatus.RELEASING)


def test_claim_failed_with_another_token_is_none(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active()
    assert store.claim_failed(lease.lease_id, LATER, status=LeaseStatus.ACTIVE, token="ctr-other") is None


def test_claim_failed_of_lease_in_another_status_is_none(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active()
    assert store.claim_failed(lease.lease_id, LATER, status=LeaseStatus.PENDING, token=None) is None


def test_claim_failed_without_token_claims_a_stuck_pending_lease(leases: Leases, store: LeaseStore) -> None:
    lease = leases.pending()
    claim = store.claim_failed(lease.lease_id, LATER, status=LeaseStatus.PENDING, token=None)
    assert claim is not None
    assert store.finish_release(claim, LATER).status == LeaseStatus.FAILED


# --- the table's TTL attribute ------------------------------------------------------------------


def test_live_lease_ttl_is_its_expiry(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active()
    assert stored_item(store, lease.lease_id)["ttl"] == {"N": str(epoch(lease.expires_at))}


def test_renewed_lease_ttl_is_its_new_expiry(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active()
    renewed = store.renew(lease.lease_id, "alice", 7200, LATER)
    assert stored_item(store, lease.lease_id)["ttl"] == {"N": str(epoch(renewed.expires_at))}


def test_ended_lease_ttl_is_its_end_plus_retention(leases: Leases, store: LeaseStore) -> None:
    lease = leases.released(at=LATER)
    assert stored_item(store, lease.lease_id)["ttl"] == {"N": str(epoch(LATER) + RETENTION_SECONDS)}


def test_claimed_lease_ttl_outlives_the_claim(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active(ttl_seconds=60)
    store.claim_release(lease.lease_id, "alice", NOW)
    ttl = int(stored_item(store, lease.lease_id)["ttl"]["N"])
    assert ttl > epoch(NOW) + RELEASE_CLAIM_SECONDS


def test_ended_lease_leaves_the_live_index(leases: Leases, store: LeaseStore) -> None:
    lease = leases.released()
    item = stored_item(store, lease.lease_id)
    assert ("live_shard" in item, "due_at" in item) == (False, False)


# --- live_leases (the reconciler's view) --------------------------------------------------------


def test_live_leases_are_pending_active_and_releasing(leases: Leases, store: LeaseStore) -> None:
    pending, active, releasing = leases.pending(), leases.active(), leases.active()
    store.claim_release(releasing.lease_id, releasing.owner_id, NOW)
    leases.released()
    leases.expired()
    live = sorted(lease.lease_id for lease in store.live_leases())
    assert live == sorted([pending.lease_id, active.lease_id, releasing.lease_id])


def test_sharded_live_leases_come_from_every_shard(sharded_store: LeaseStore) -> None:
    leases = Leases(sharded_store)
    ids = [leases.active().lease_id for _ in range(10)]
    assert sorted(lease.lease_id for lease in sharded_store.live_leases()) == sorted(ids)


# --- continuing a listing after time passed (DynamoDB: a start key must satisfy the key condition) -----


def test_a_continuation_still_pages_after_its_start_key_expired(leases: Leases, store: LeaseStore) -> None:
    """DynamoDB refuses an ExclusiveStartKey outside the key condition ("The provided starting key does
    not match the range key predicate"); dynalite enforces it, moto does not. A slow consumer's next
    page must not fail because the last lease of the page before has expired meanwhile."""
    short = leases.active(ttl_seconds=60)
    later = [leases.active(ttl_seconds=3600 + index).lease_id for index in range(3)]
    first, token = store.list_live(ListFilter(limit=1), NOW)
    assert [lease.lease_id for lease in first] == [short.lease_id] and token is not None

    after_expiry = NOW + timedelta(seconds=120)
    listed: list[str] = []
    for _ in range(10):
        page, token = store.list_live(ListFilter(limit=1, next_token=token), after_expiry)
        listed += [lease.lease_id for lease in page]
        if token is None:
            break
    assert listed == later


def test_a_continuation_leaves_out_leases_that_expired_since_the_page_before(leases: Leases, store: LeaseStore) -> None:
    first = leases.active(ttl_seconds=3600)
    soon = leases.active(ttl_seconds=3601)
    last = leases.active(ttl_seconds=7200)
    page, token = store.list_live(ListFilter(limit=1), NOW)
    assert [lease.lease_id for lease in page] == [first.lease_id]

    listed: list[str] = []
    while token is not None:
        page, token = store.list_live(ListFilter(limit=1, next_token=token), soon.expires_at)
        listed += [lease.lease_id for lease in page]
    assert listed == [last.lease_id]


def test_a_page_may_be_empty_while_the_listing_goes_on(leases: Leases, store: LeaseStore) -> None:
    """DynamoDB applies the filter after reading `Limit` items: a page can be empty with a next token."""
    for _ in range(2):
        leases.active(owner_id="bob")
    alices = leases.active(owner_id="alice", ttl_seconds=7200)
    page, token = store.list_live(ListFilter(owner_id="alice", limit=1), NOW)
    assert (page, token is not None) == ([], True)
    assert all_live(store, ListFilter(owner_id="alice", limit=1)) == [alices.lease_id]


@pytest.mark.parametrize(
    "key",
    [
        {"lease_id": {"S": "0b6c2f0e-8f0e-4f54-9d8e-3c8a3e4d9a11"}, "live_shard": {"S": "0"}, "due_at": {"N": "-1"}},
        {"lease_id": {"S": "0b6c2f0e-8f0e-4f54-9d8e-3c8a3e4d9a11"}, "live_shard": {"S": "1"}, "due_at": {"N": "5"}},
        {"lease_id": {"S": "0b6c2f0e-8f0e-4f54-9d8e-3c8a3e4d9a11"}, "live_shard": {"S": "0"}, "due_at": {"S": "5"}},
        {"lease_id": {"S": "x"}, "live_shard": {"S": "0"}, "due_at": {"N": "5"}},
        {"lease_id": {"S": "0b6c2f0e-8f0e-4f54-9d8e-3c8a3e4d9a11"}, "live_shard": {"S": "0"}, "due_at": {"N": "1e3"}},
    ],
    ids=["negative-due", "other-shard", "due-as-string", "not-a-lease-id", "exponent"],
)
def test_a_crafted_start_key_is_invalid_request(store: LeaseStore, key: object) -> None:
    with pytest.raises(InvalidRequest):
        store.list_live(ListFilter(next_token=token_of({"s": 0, "k": key})), NOW)


@pytest.mark.dynamodb_only("crafts a DynamoDB start key into the token; the memory store's tokens are its own")
def test_a_well_formed_start_key_of_no_lease_pages_on(leases: Leases, store: LeaseStore) -> None:
    lease = leases.active(ttl_seconds=3600)
    key = {"lease_id": {"S": "00000000-0000-4000-8000-000000000000"}, "live_shard": {"S": "0"}, "due_at": {"N": "1"}}
    page, token = store.list_live(ListFilter(next_token=token_of({"s": 0, "k": key})), NOW)
    assert ([listed.lease_id for listed in page], token) == ([lease.lease_id], None)


# --- numbers DynamoDB cannot store (38 significant digits, 1E-130 to 1E+126, no NaN or infinity) ---------


@pytest.mark.parametrize("price", [float("nan"), float("inf"), float("-inf"), 1e200, 1e-200])
def test_activate_refuses_a_price_dynamodb_cannot_store_and_writes_nothing(
    leases: Leases, store: LeaseStore, price: float
) -> None:
    lease = leases.pending()
    worker = ProvisionedWorker(token="ctr-1", endpoint=None, cost_per_hour=price)
    with pytest.raises(InvalidNumber):
        store.activate(lease.lease_id, "local-docker", worker)
    assert store.get(lease.lease_id).status == LeaseStatus.PENDING


def test_activate_records_a_price_at_the_edge_of_dynamodbs_range(leases: Leases, store: LeaseStore) -> None:
    lease = leases.pending()
    worker = ProvisionedWorker(token="ctr-1", endpoint=None, cost_per_hour=9.5e125)
    assert store.activate(lease.lease_id, "local-docker", worker).cost_per_hour == 9.5e125
