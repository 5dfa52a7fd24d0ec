"""A sweep that keeps up with a burst: due leases released concurrently, bounded, and the rest handed on."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from scheduler.deadline import Deadline
from scheduler.handoff import MAX_HOPS, LambdaHandoff, continuation, hop_of
from scheduler.leases.sweep import sweep
from scheduler.lifecycle import LeaseStatus
from scheduler.providers.memory import MemoryProvider
from scheduler.store import LeaseStore

from .builders import NOW, Leases, context, memory_provider, registry_of

LATER = NOW + timedelta(hours=2)


def _expired(leases: Leases, provider: MemoryProvider, count: int) -> list[str]:
    ids = []
    for _ in range(count):
        lease = leases.active(ttl_seconds=60)
        provider.add_worker(lease.lease_id, str(lease.provider_token), NOW)
        ids.append(lease.lease_id)
    return ids


def test_due_leases_are_released_several_at_once(store: LeaseStore, leases: Leases) -> None:
    provider = memory_provider(releases_meet=3)
    ids = _expired(leases, provider, 6)

    report = sweep(context(store, registry_of(provider), clock=lambda: LATER, sweep_concurrency=3))

    assert sorted(lease.lease_id for lease in report.ended) == sorted(ids)
    assert provider.most_releasing_at_once == 3
    assert provider.workers == {} and not report.more


def test_a_concurrency_of_one_releases_one_at_a_time(store: LeaseStore, leases: Leases) -> None:
    provider = memory_provider(release_seconds=0.05)
    _expired(leases, provider, 3)

    report = sweep(context(store, registry_of(provider), clock=lambda: LATER, sweep_concurrency=1))

    assert len(report.ended) == 3 and provider.most_releasing_at_once == 1


def test_a_full_batch_says_there_may_be_more(store: LeaseStore, leases: Leases) -> None:
    provider = memory_provider()
    _expired(leases, provider, 3)

    report = sweep(context(store, registry_of(provider), clock=lambda: LATER, sweep_batch_size=2))

    assert len(report.ended) == 2 and report.more
    assert len(provider.workers) == 1


def test_leases_a_run_cannot_reach_before_its_deadline_stay_due_and_unclaimed(
    store: LeaseStore, leases: Leases
) -> None:
    provider = memory_provider()
    ids = _expired(leases, provider, 3)

    report = sweep(context(store, registry_of(provider), clock=lambda: LATER, deadline=Deadline.within(0)))

    assert (report.ended, report.unreached, report.more) == ([], 3, True)
    assert {store.get(lease_id).status for lease_id in ids} == {LeaseStatus.ACTIVE}
    assert len(provider.workers) == 3


def test_failed_releases_are_not_a_reason_to_hand_on(store: LeaseStore, leases: Leases) -> None:
    provider = memory_provider(fail_releases=2)
    _expired(leases, provider, 2)

    report = sweep(context(store, registry_of(provider), clock=lambda: LATER))

    assert len(report.failed_releases) == 2 and not report.more


# --- the hand-off ---------------------------------------------------------------------------------


class _LambdaClient:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[dict[str, Any]] = []
        self.fail = fail

    def invoke(self, **call: Any) -> dict[str, Any]:
        if self.fail:
            raise ConnectionError("the Lambda API cannot be reached")
        self.calls.append(call)
        return {"StatusCode": 202}


def test_a_hand_off_invokes_the_function_asynchronously_with_the_next_hop() -> None:
    client = _LambdaClient()

    assert LambdaHandoff(client).hand_on("sweep-fn", 2)

    (call,) = client.calls
    assert (call["FunctionName"], call["InvocationType"]) == ("sweep-fn", "Event")
    assert hop_of(__import__("json").loads(call["Payload"])) == 2


def test_the_hand_off_chain_ends_at_its_limit() -> None:
    client = _LambdaClient()

    assert not LambdaHandoff(client).hand_on("sweep-fn", MAX_HOPS + 1)

    assert client.calls == []


def test_a_hand_off_that_cannot_be_sent_leaves_the_rest_to_the_next_scheduled_run() -> None:
    assert not LambdaHandoff(_LambdaClient(fail=True)).hand_on("sweep-fn", 1)


def test_a_scheduled_event_is_hop_zero_and_a_continuation_names_its_hop() -> None:
    assert hop_of({"source": "aws.events", "detail-type": "Scheduled Event"}) == 0
    assert hop_of(continuation(3)) == 3
    assert hop_of({"handoff_hop": "3"}) == 0 and hop_of(None) == 0
