"""GET /v1/lease/{id}/logs and DELETE /v1/leases?owner_id=: what an operator or a restarting caller sees."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from scheduler.lifecycle import LeaseStatus
from scheduler.providers.memory import MemoryProvider
from scheduler.store import LeaseStore
from scheduler.worker_logs import MAX_LOG_BYTES
from tests.support.metrics import RecordedMetrics

from ..builders import NOW, Leases
from .conftest import Function, event, with_header


def logs_event(lease_id: str, owner: str | None = "anim-service", **query: str) -> dict[str, Any]:
    sample = with_header(event("lease_logs", lease_id), "x-lease-owner", owner)
    return {**sample, "queryStringParameters": query}


def release_all_event(owner_id: str | None, header: str | None = None, **query: str) -> dict[str, Any]:
    sample = with_header(event("release_owner_leases"), "x-lease-owner", header if header is not None else owner_id)
    parameters = {**({"owner_id": owner_id} if owner_id is not None else {}), **query}
    return {**sample, "queryStringParameters": parameters}


def running(leases: Leases, provider: MemoryProvider, owner_id: str = "anim-service", **fields: Any) -> str:
    lease = leases.active(owner_id=owner_id, **fields)
    provider.add_worker(lease.lease_id, str(lease.provider_token))
    return lease.lease_id


# --- logs ------------------------------------------------------------------------------------------


def test_logs_answer_the_workers_output_as_text(
    function: Callable[[str], Function], leases: Leases, provider: MemoryProvider
) -> None:
    lease_id = running(leases, provider)
    token = next(iter(provider.workers))
    provider.write(token, "loading scene", "frame 1 rendered")

    response = function("lease_logs")(logs_event(lease_id))

    assert response["statusCode"] == 200
    assert response["headers"]["Content-Type"] == "text/plain; charset=utf-8"
    assert response["body"] == "loading scene\nframe 1 rendered\n"


def test_logs_give_the_last_tail_lines(
    function: Callable[[str], Function], leases: Leases, provider: MemoryProvider
) -> None:
    lease_id = running(leases, provider)
    provider.write(next(iter(provider.workers)), *(f"line {number}" for number in range(10)))
    assert function("lease_logs")(logs_event(lease_id, tail="2"))["body"] == "line 8\nline 9\n"


def test_logs_with_timestamps_start_each_line_with_its_time(
    function: Callable[[str], Function], leases: Leases, provider: MemoryProvider
) -> None:
    lease_id = running(leases, provider)
    provider.write(next(iter(provider.workers)), "hello")
    body = function("lease_logs")(logs_event(lease_id, timestamps="true"))["body"]
    assert body == "2026-11-30T04:00:00Z hello\n"


def test_logs_since_a_time_leave_out_older_lines(
    function: Callable[[str], Function], leases: Leases, provider: MemoryProvider
) -> None:
    lease_id = running(leases, provider)
    provider.write(next(iter(provider.workers)), "old", "new")
    body = function("lease_logs")(logs_event(lease_id, since="2026-11-30T04:00:00.000000001Z"))["body"]
    assert body == "new\n"


def test_logs_larger_than_a_megabyte_keep_the_newest_lines_and_say_so(
    function: Callable[[str], Function], leases: Leases, provider: MemoryProvider
) -> None:
    lease_id = running(leases, provider)
    provider.write(next(iter(provider.workers)), *(f"{number:04d}" + "x" * 1000 for number in range(2000)))

    response = function("lease_logs")(logs_event(lease_id, tail="5000"))

    assert len(response["body"].encode()) <= MAX_LOG_BYTES
    assert response["body"].endswith("1999" + "x" * 1000 + "\n")
    assert response["headers"]["X-Logs-Truncated"] == "true"


@pytest.mark.parametrize(
    "query", [{"tail": "0"}, {"tail": "5001"}, {"tail": "ten"}, {"since": "yesterday"}, {"x": "1"}]
)
def test_logs_with_a_bad_query_answer_400(
    function: Callable[[str], Function], leases: Leases, provider: MemoryProvider, query: dict[str, str]
) -> None:
    lease_id = running(leases, provider)
    status, body = function("lease_logs").http(logs_event(lease_id, **query))
    assert (status, body["error"]["code"]) == (400, "invalid_request")


def test_logs_of_an_unknown_lease_answer_404(function: Callable[[str], Function]) -> None:
    status, body = function("lease_logs").http(logs_event("3f2b8c1e-6d4a-4f7b-9c2e-1a5d7e9b0c42"))
    assert (status, body["error"]["code"]) == (404, "not_found")


def test_logs_of_another_owners_lease_answer_403(
    function: Callable[[str], Function], leases: Leases, provider: MemoryProvider
) -> None:
    lease_id = running(leases, provider, owner_id="someone-else")
    assert function("lease_logs").http(logs_event(lease_id))[0] == 403


def test_logs_of_a_lease_without_an_owner_need_no_owner_header(
    function: Callable[[str], Function], leases: Leases, provider: MemoryProvider
) -> None:
    lease = leases.active(owner_id=None)
    provider.add_worker(lease.lease_id, str(lease.provider_token))
    assert function("lease_logs")(logs_event(lease.lease_id, owner=None))["statusCode"] == 200


def test_logs_of_a_released_lease_answer_410(
    function: Callable[[str], Function], leases: Leases, provider: MemoryProvider
) -> None:
    lease = leases.released(owner_id="anim-service")
    status, body = function("lease_logs").http(logs_event(lease.lease_id))
    assert (status, body["error"]["code"]) == (410, "gone")
    assert "released" in body["error"]["message"]


def test_logs_of_a_pending_lease_without_a_worker_answer_409(
    function: Callable[[str], Function], leases: Leases
) -> None:
    lease = leases.pending(owner_id="anim-service")
    assert function("lease_logs").http(logs_event(lease.lease_id))[0] == 409


def test_logs_an_unreachable_provider_cannot_give_answer_502(
    function: Callable[[str], Function], leases: Leases, provider: MemoryProvider
) -> None:
    lease_id = running(leases, provider)
    provider.unreachable = True
    status, body = function("lease_logs").http(logs_event(lease_id))
    assert (status, body["error"]["code"]) == (502, "provider_error")


# --- releasing an owner's leases -------------------------------------------------------------------


def test_releasing_an_owners_leases_releases_each_and_leaves_other_owners_alone(
    function: Callable[[str], Function], leases: Leases, provider: MemoryProvider, store: LeaseStore
) -> None:
    mine = sorted(running(leases, provider) for _ in range(3))
    theirs = running(leases, provider, owner_id="live-control")

    status, body = function("release_owner_leases").http(release_all_event("anim-service"))

    assert status == 200
    assert sorted(lease["lease_id"] for lease in body["released"]) == mine
    assert {lease["status"] for lease in body["released"]} == {"released"}
    assert (body["not_released"], body["next_token"]) == ([], None)
    assert store.get(theirs).status is LeaseStatus.ACTIVE
    assert [worker.lease_id for worker in provider.workers.values()] == [theirs]


def test_releasing_an_owners_leases_counts_each_release(
    function: Callable[[str], Function], leases: Leases, provider: MemoryProvider, metrics: RecordedMetrics
) -> None:
    running(leases, provider)
    running(leases, provider)
    function("release_owner_leases").http(release_all_event("anim-service"))
    assert sum(point["value"] for point in metrics.of("LeaseReleased")) == 2


def test_releasing_an_owners_leases_with_another_owner_header_answers_403(
    function: Callable[[str], Function], leases: Leases, provider: MemoryProvider, store: LeaseStore
) -> None:
    lease_id = running(leases, provider)
    status, body = function("release_owner_leases").http(release_all_event("anim-service", header="intruder"))
    assert (status, body["error"]["code"]) == (403, "forbidden")
    assert store.get(lease_id).status is LeaseStatus.ACTIVE


def test_releasing_an_owners_leases_without_the_owner_header_answers_403(
    function: Callable[[str], Function],
) -> None:
    sample = with_header(release_all_event("anim-service"), "x-lease-owner", None)
    assert function("release_owner_leases").http(sample)[0] == 403


def test_releasing_without_naming_an_owner_answers_400(function: Callable[[str], Function]) -> None:
    status, body = function("release_owner_leases").http(release_all_event(None, header="anim-service"))
    assert (status, body["error"]["code"]) == (400, "invalid_request")


def test_releasing_an_owner_with_no_leases_releases_nothing(function: Callable[[str], Function]) -> None:
    status, body = function("release_owner_leases").http(release_all_event("nobody"))
    assert (status, body) == (200, {"released": [], "not_released": [], "next_token": None})


def test_a_lease_that_could_not_be_released_is_named_with_why(
    function: Callable[[str], Function], leases: Leases, provider: MemoryProvider
) -> None:
    lease_id = running(leases, provider)
    pending = leases.pending(owner_id="anim-service").lease_id
    provider.fail_releases = 1

    body = function("release_owner_leases").http(release_all_event("anim-service"))[1]

    refused = {item["lease_id"]: (item["status"], item["code"]) for item in body["not_released"]}
    assert refused == {lease_id: ("releasing", "provider_error"), pending: ("pending", "conflict")}
    assert body["released"] == []


def test_a_lease_left_releasing_by_a_failed_release_is_named_with_why_and_not_attempted_again(
    function: Callable[[str], Function], leases: Leases, provider: MemoryProvider
) -> None:
    lease_id = running(leases, provider)
    provider.fail_releases = 1  # the provider's release raises ProviderRequestFailed: the worker stays
    assert function("release_lease").http(event("release_lease", lease_id))[0] == 502
    attempts = len(provider.release_calls)

    status, body = function("release_owner_leases").http(release_all_event("anim-service"))

    assert (status, body["released"]) == (200, [])
    (refused,) = body["not_released"]
    assert (refused["lease_id"], refused["status"], refused["code"]) == (lease_id, "releasing", "provider_error")
    assert "the sweep retries" in refused["message"]
    assert len(provider.release_calls) == attempts  # its claim is another release's: never two at once


def test_a_lease_this_call_could_not_release_is_named_once(
    function: Callable[[str], Function], leases: Leases, provider: MemoryProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its claim's due time moves it on in the live index, where the same call's next page finds it again."""
    from scheduler.leases import release_all

    monkeypatch.setattr(release_all, "PAGE_SIZE", 1)
    lease_id = running(leases, provider, ttl_seconds=60)  # first in the index; the claim's due time is later
    others = {running(leases, provider, ttl_seconds=3600) for _ in range(2)}
    provider.fail_releases = 1

    body = function("release_owner_leases").http(release_all_event("anim-service"))[1]

    assert [item["lease_id"] for item in body["not_released"]] == [lease_id]
    assert {lease["lease_id"] for lease in body["released"]} == others


def test_more_leases_than_one_call_releases_continue_with_next_token(
    function: Callable[[str], Function],
    leases: Leases,
    provider: MemoryProvider,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from scheduler.leases import release_all

    monkeypatch.setattr(release_all, "MAX_RELEASES_PER_CALL", 2)
    mine = {running(leases, provider) for _ in range(5)}
    handler = function("release_owner_leases")

    released: list[str] = []
    token: str | None = None
    calls = 0
    while True:
        query = {"next_token": token} if token else {}
        body = handler.http(release_all_event("anim-service", **query))[1]
        released += [lease["lease_id"] for lease in body["released"]]
        calls += 1
        token = body["next_token"]
        if token is None:
            break

    assert (set(released), len(released), calls) == (mine, 5, 3)


def test_pending_leases_do_not_hold_back_the_active_ones_behind_them(
    function: Callable[[str], Function],
    leases: Leases,
    provider: MemoryProvider,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from scheduler.leases import release_all

    monkeypatch.setattr(release_all, "MAX_RELEASES_PER_CALL", 2)
    pending = {leases.pending(owner_id="anim-service").lease_id for _ in range(4)}
    active = {running(leases, provider) for _ in range(2)}

    body = function("release_owner_leases").http(release_all_event("anim-service"))[1]

    assert {lease["lease_id"] for lease in body["released"]} == active
    assert {item["lease_id"] for item in body["not_released"]} == pending


def test_leases_being_released_do_not_hold_back_the_active_ones_behind_them(
    function: Callable[[str], Function],
    leases: Leases,
    provider: MemoryProvider,
    store: LeaseStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from scheduler.leases import release_all

    monkeypatch.setattr(release_all, "MAX_RELEASES_PER_CALL", 2)
    releasing = set()
    for _ in range(4):
        lease_id = running(leases, provider, ttl_seconds=60)  # before the active ones in the live index
        store.claim_release(lease_id, "anim-service", NOW)
        releasing.add(lease_id)
    active = {running(leases, provider, ttl_seconds=3600) for _ in range(2)}

    body = function("release_owner_leases").http(release_all_event("anim-service"))[1]

    assert {lease["lease_id"] for lease in body["released"]} == active
    assert {item["lease_id"] for item in body["not_released"]} == releasing
    assert body["next_token"] is None


def test_a_continuation_the_service_did_not_issue_answers_400(function: Callable[[str], Function]) -> None:
    status, body = function("release_owner_leases").http(release_all_event("anim-service", next_token="bogus!"))
    assert (status, body["error"]["code"]) == (400, "invalid_request")


def test_a_call_short_of_time_releases_one_lease_and_continues(
    function: Callable[[str], Function],
    leases: Leases,
    provider: MemoryProvider,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from scheduler.leases import release_all

    monkeypatch.setattr(release_all, "RESERVE_SECONDS", 3600.0)  # never enough time left for a second release
    running(leases, provider)
    running(leases, provider)

    first = function("release_owner_leases").http(release_all_event("anim-service"))[1]
    second = function("release_owner_leases").http(release_all_event("anim-service", next_token=first["next_token"]))[1]

    assert (len(first["released"]), first["next_token"] is not None) == (1, True)
    assert (len(second["released"]), second["next_token"]) == (1, None)
