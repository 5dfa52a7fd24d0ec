"""The queue through the functions, on every store: the acquire's 202, GET /v1/queue by caller, a queued lease's
DELETE, a renewal past a preemption notice (409 `preempting`), the stream handler serving the queue, and the
Idempotency-Key of a queued acquire."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from scheduler.owner_policies import OwnerPolicies
from scheduler.providers.memory import MemoryProvider
from scheduler.runtime import Runtime
from scheduler.store.items import epoch
from scheduler.store.port import LeaseStorePort
from scheduler.store.queue_records import NoticeRecord
from tests.support.metrics import RecordedMetrics

from ..builders import NOW, Leases, memory_provider, new_lease, worker_for
from .as_callers import ANIM, AUDIT, LIVE, OPS, Api, with_principals
from .conftest import Function, event, runtime_of, with_header

CAPPED = {"local-docker": 1}


def acquire(function: Callable[..., Function], runtime: Runtime, **body: Any) -> tuple[int, Any]:
    body.setdefault("kind", "renderer")
    return function("acquire_lease", runtime).http(event("acquire_lease", body=json.dumps(body)))


@pytest.fixture
def capped(limited_store: LeaseStorePort, metrics: RecordedMetrics, idempotency_table: str) -> Runtime:
    return runtime_of(limited_store, metrics=metrics, provider_caps=CAPPED, idempotency_table=idempotency_table)


@pytest.mark.moto_only("a cap is taken in a transaction, which dynalite lacks")
def test_an_acquire_that_may_wait_is_answered_202_queued_with_its_position(
    function: Callable[..., Function], capped: Runtime, metrics: RecordedMetrics
) -> None:
    assert acquire(function, capped, owner_id="a")[0] == 201
    status, body = acquire(function, capped, owner_id="b", queue_seconds=600, priority=70)
    lease = body["lease"]
    assert status == 202 and body["provider"] == "local-docker"
    assert (lease["status"], lease["queue_position"], lease["priority"], lease["provider_token"]) == (
        "queued",
        1,
        70,
        None,
    )
    assert lease["queued_until"] == "2026-11-30T04:10:00Z" and "at its lease cap" in lease["queue_reason"]
    assert "LeaseQueued" in metrics.names()


def test_an_acquire_no_provider_has_room_for_that_may_wait_is_answered_202_queued(
    function: Callable[..., Function], runtime: Runtime, provider: MemoryProvider
) -> None:
    provider.full = True
    status, body = acquire(function, runtime, owner_id="b", queue_seconds=600, priority=70, preemptible=True)
    lease = body["lease"]
    assert (status, lease["status"], lease["queue_position"], lease["provider_token"]) == (202, "queued", 1, None)
    assert (lease["priority"], lease["preemptible"], lease["queued_until"]) == (70, True, "2026-11-30T04:10:00Z")
    assert "no provider had room" in lease["queue_reason"] and provider.workers == {}


@pytest.mark.moto_only("a cap is taken in a transaction, which dynalite lacks")
def test_a_queued_lease_is_cancelled_by_its_delete(function: Callable[..., Function], capped: Runtime) -> None:
    acquire(function, capped, owner_id="a")
    lease_id = acquire(function, capped, owner_id="b", queue_seconds=600)[1]["lease"]["lease_id"]
    deleted = function("release_lease", capped)(with_header(event("release_lease", lease_id), "x-lease-owner", "b"))
    read = function("get_lease", capped).http(event("get_lease", lease_id))[1]["lease"]
    assert deleted["statusCode"] == 204
    assert (read["status"], read["provider_token"], read["ended_by"]) == ("released", None, "shared-secret")


@pytest.mark.moto_only("owner budgets use TransactWriteItems, which dynalite lacks")
def test_an_acquire_over_the_daily_spend_limit_is_429_even_when_it_may_wait(
    function: Callable[..., Function], budget_store: LeaseStorePort
) -> None:
    # 0.6 USD/h for an hour (and the release lag) reserves about 0.62 of the day's 1.0: a second does not fit today.
    runtime = runtime_of(budget_store, memory_provider(cost_per_hour=0.6), max_spend_per_owner_per_day=1.0)
    assert acquire(function, runtime, owner_id="anim", ttl_seconds=3600)[0] == 201
    status, body = acquire(function, runtime, owner_id="anim", ttl_seconds=3600, queue_seconds=600)
    assert (status, body["error"]["code"]) == (429, "budget_exceeded")
    assert body["error"]["details"]["budget"] == "MAX_SPEND_PER_OWNER_PER_DAY"
    assert queue_of(function, runtime)[1]["queue"] == []


@pytest.mark.moto_only("owner budgets use TransactWriteItems, which dynalite lacks")
def test_an_acquire_over_the_hourly_budget_that_may_wait_is_queued_for_it(
    function: Callable[..., Function], budget_store: LeaseStorePort
) -> None:
    runtime = runtime_of(budget_store, memory_provider(cost_per_hour=0.6), max_cost_per_hour_per_owner=1.0)
    assert acquire(function, runtime, owner_id="anim")[0] == 201
    status, body = acquire(function, runtime, owner_id="anim", queue_seconds=600)
    assert (status, body["lease"]["status"]) == (202, "queued")
    assert "MAX_COST_PER_HOUR_PER_OWNER" in body["lease"]["queue_reason"]


def test_without_a_cap_a_queued_lease_blocks_no_acquire_the_provider_can_serve(
    function: Callable[..., Function], runtime: Runtime, provider: MemoryProvider
) -> None:
    provider.full = True
    assert acquire(function, runtime, owner_id="a", queue_seconds=600)[0] == 202
    provider.full = False  # room for this lease, if not for the queued one (a GPU the host lacks, say)
    status, body = acquire(function, runtime, owner_id="b")
    assert (status, body["lease"]["status"]) == (201, "active")


def test_a_priority_above_the_owners_limit_is_403_naming_it(
    function: Callable[..., Function], store: LeaseStorePort, idempotency_table: str
) -> None:
    limited = runtime_of(
        store, idempotency_table=idempotency_table, owner_policies=OwnerPolicies.parse('{"*": {"max_priority": 40}}')
    )
    status, body = acquire(function, limited, priority=41)
    assert status == 403 and body["error"]["code"] == "forbidden" and "max_priority 40" in body["error"]["message"]


def test_a_renewal_past_a_preemption_notice_is_409_preempting(
    function: Callable[..., Function], store: LeaseStorePort, runtime: Runtime
) -> None:
    lease = new_lease(created_at=NOW - timedelta(hours=1), ttl_seconds=7200).replace(preemptible=True, priority=10)
    store.create_pending(lease)
    store.activate(lease.lease_id, lease.provider, worker_for(lease))
    store.queue.notice(lease.lease_id, NOW, NoticeRecord(epoch(NOW) + 120, "p", 80), epoch(NOW) - 300)
    renewal = with_header(event("renew_lease", lease.lease_id, body='{"ttl_seconds": 600}'), "x-lease-owner", "alice")
    status, body = function("renew_lease").http(renewal)
    assert status == 409 and body["error"]["code"] == "preempting"
    assert body["error"]["details"] == {"preempt_at": "2026-11-30T04:02:00Z"}


# --- GET /v1/queue -----------------------------------------------------------------------------------------


def queue_of(function: Callable[..., Function], runtime: Runtime, **query: str) -> tuple[int, Any]:
    sample = event("queue", queryStringParameters=query)
    return function("queue", runtime).http(sample)


def fill(leases: Leases, store: LeaseStorePort) -> dict[str, str]:
    """Queued leases of three owners, by owner: anim-service (priority 90), live-control (50), anim-batch (10)."""
    from scheduler.lifecycle import LeaseStatus
    from scheduler.store.queue_model import QueueWait

    made = {}
    for at, (owner, priority) in enumerate((("anim-batch", 10), ("live-control", 50), ("anim-service", 90))):
        created = NOW + timedelta(seconds=at)
        lease = new_lease(owner_id=owner, created_at=created).replace(
            status=LeaseStatus.QUEUED, priority=priority, queued_at=created, queued_until=created + timedelta(hours=1)
        )
        store.queue.enqueue(lease.replace(expires_at=lease.queued_until), QueueWait("full", ("local-docker",), True))
        made[owner] = lease.lease_id
    return made


def test_the_queue_is_answered_in_admission_order_with_positions(
    function: Callable[..., Function], store: LeaseStorePort, runtime: Runtime, leases: Leases
) -> None:
    made = fill(leases, store)
    status, body = queue_of(function, runtime)
    assert status == 200
    assert [(lease["lease_id"], lease["queue_position"]) for lease in body["queue"]] == [
        (made["anim-service"], 1),
        (made["live-control"], 2),
        (made["anim-batch"], 3),
    ]


def test_the_queue_answers_its_first_leases_up_to_the_limit(
    function: Callable[..., Function], store: LeaseStorePort, runtime: Runtime, leases: Leases
) -> None:
    fill(leases, store)
    assert [lease["queue_position"] for lease in queue_of(function, runtime, limit="2")[1]["queue"]] == [1, 2]


@pytest.mark.parametrize("mode", ["token", "iam"])
def test_a_service_sees_its_own_queued_leases_with_their_places_in_the_whole_queue(
    function: Callable[..., Function], store: LeaseStorePort, leases: Leases, mode: str
) -> None:
    made = fill(leases, store)
    api = Api(lambda name: function(name, with_principals(runtime_of(store, auth_mode=mode))), mode)
    _, own = api.http(ANIM, "queue", event("queue"))
    assert [(lease["lease_id"], lease["queue_position"]) for lease in own["queue"]] == [
        (made["anim-service"], 1),
        (made["anim-batch"], 3),
    ]
    assert [lease["lease_id"] for lease in api.http(LIVE, "queue", event("queue"))[1]["queue"]] == [
        made["live-control"]
    ]
    assert len(api.http(OPS, "queue", event("queue"))[1]["queue"]) == 3
    assert len(api.http(AUDIT, "queue", event("queue"))[1]["queue"]) == 3
    status, refused = api.http(ANIM, "queue", event("queue", queryStringParameters={"owner_id": "live-control"}))
    assert status == 403 and refused["error"]["code"] == "forbidden"


def test_in_secret_mode_the_queue_is_everyones_or_the_named_owners(
    function: Callable[..., Function], store: LeaseStorePort, runtime: Runtime, leases: Leases
) -> None:
    made = fill(leases, store)
    assert len(queue_of(function, runtime)[1]["queue"]) == 3
    named = queue_of(function, runtime, owner_id="live-control")[1]["queue"]
    assert [(lease["lease_id"], lease["queue_position"]) for lease in named] == [(made["live-control"], 2)]


def test_in_secret_mode_a_queued_lease_is_cancelled_only_with_its_owners_x_lease_owner(
    function: Callable[..., Function], store: LeaseStorePort, runtime: Runtime, leases: Leases
) -> None:
    queued = fill(leases, store)["live-control"]
    release = function("release_lease")
    status, body = release.http(with_header(event("release_lease", queued), "x-lease-owner", "anim-batch"))
    assert (status, body["error"]["code"], store.get(queued).status) == (403, "forbidden", "queued")
    assert release(with_header(event("release_lease", queued), "x-lease-owner", "live-control"))["statusCode"] == 204
    assert store.get(queued).status == "released"


def test_a_bad_queue_query_is_400_naming_it(function: Callable[..., Function], runtime: Runtime) -> None:
    status, body = queue_of(function, runtime, limit="0", color="red")
    assert status == 400
    assert [problem["field"] for problem in body["error"]["details"]["problems"]] == ["limit", "color"]


# --- the stream serves the queue ---------------------------------------------------------------------------


def end_record(lease_id: str, old: str = "releasing", new: str = "released") -> dict[str, Any]:
    image = {"lease_id": {"S": lease_id}}
    return {
        "eventName": "MODIFY",
        "dynamodb": {
            "SequenceNumber": "1",
            "OldImage": {**image, "status": {"S": old}},
            "NewImage": {**image, "status": {"S": new}},
        },
    }


@pytest.mark.moto_only("a cap is taken in a transaction, which dynalite lacks")
def test_the_stream_serves_the_queue_after_a_lease_gave_its_slot_back(
    function: Callable[..., Function], capped: Runtime, metrics: RecordedMetrics
) -> None:
    holder = acquire(function, capped, owner_id="a")[1]["lease"]
    waiting = acquire(function, capped, owner_id="b", queue_seconds=600)[1]["lease"]
    function("release_lease", capped)(with_header(event("release_lease", holder["lease_id"]), "x-lease-owner", "a"))

    answer = function("ttl_stream", capped)({"Records": [end_record(holder["lease_id"])]})

    assert answer == {"batchItemFailures": []}
    read = function("get_lease", capped).http(event("get_lease", waiting["lease_id"]))[1]["lease"]
    assert read["status"] == "active" and read["admitted_at"] is not None
    assert {"QueueDepth", "Admitted", "TimeInQueue"} <= set(metrics.names())


def test_the_stream_serves_a_queue_that_waits_for_a_providers_own_room(
    function: Callable[..., Function], runtime: Runtime, provider: MemoryProvider
) -> None:
    provider.full = True
    waiting = acquire(function, runtime, owner_id="b", queue_seconds=600)[1]["lease"]
    provider.full = False

    answer = function("ttl_stream")({"Records": [end_record(str(uuid.uuid4()))]})

    read = function("get_lease").http(event("get_lease", waiting["lease_id"]))[1]["lease"]
    assert answer == {"batchItemFailures": []}
    assert (read["status"], read["admitted_at"], len(provider.workers)) == ("active", "2026-11-30T04:00:00Z", 1)


@pytest.mark.moto_only("a cap is taken in a transaction, which dynalite lacks")
def test_the_stream_leaves_the_queue_alone_for_a_change_that_frees_nothing(
    function: Callable[..., Function], capped: Runtime, metrics: RecordedMetrics
) -> None:
    acquire(function, capped, owner_id="a")
    acquire(function, capped, owner_id="b", queue_seconds=600)
    function("ttl_stream", capped)({"Records": [end_record("x", old="active", new="active")]})
    assert "QueueDepth" not in metrics.names()


@pytest.mark.dynamodb_only("an Idempotency-Key needs powertools' DynamoDB table")
@pytest.mark.moto_only("a cap is taken in a transaction, which dynalite lacks")
def test_a_repeated_key_of_a_queued_acquire_is_answered_202_with_the_same_lease(
    function: Callable[..., Function], capped: Runtime
) -> None:
    acquire(function, capped, owner_id="a")
    sample = event("acquire_lease", body=json.dumps({"kind": "renderer", "owner_id": "b", "queue_seconds": 600}))
    keyed = with_header(sample, "idempotency-key", "job-1")
    first = function("acquire_lease", capped).http(keyed)
    again = function("acquire_lease", capped).http(keyed)
    assert first[0] == again[0] == 202
    assert first[1]["lease"]["lease_id"] == again[1]["lease"]["lease_id"]
