"""SchedulerClient against the fake lease API: typed results, error mapping, retries, idempotency."""

from __future__ import annotations

import socket
import time
import uuid
from datetime import UTC, date, datetime, timedelta

import pytest
import requests
from openalice_scheduler_client import (
    BudgetExceeded,
    Conflict,
    Forbidden,
    InvalidRequest,
    InvalidResponse,
    Lease,
    NoCapacity,
    NotFound,
    ProviderError,
    QuotaExceeded,
    SchedulerClient,
    SchedulerError,
    ServerError,
    ServiceUnreachable,
    Unauthorized,
)
from openalice_scheduler_client.client import _is_connect_failure

from tests.client.fake_scheduler import FakeScheduler


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# --- typed results ---------------------------------------------------------------------------------


def test_acquire_returns_a_typed_lease_with_aware_utc_times(client: SchedulerClient) -> None:
    lease = client.acquire("renderer", gpu="none", ttl_seconds=600, owner_id="me", correlation_id="c-1", region="eu")

    assert isinstance(lease, Lease)
    assert lease.kind == "renderer" and lease.status == "active" and lease.provider == "fake"
    assert lease.owner_id == "me" and lease.correlation_id == "c-1" and lease.region == "eu"
    assert lease.ttl_seconds == 600 and lease.cost_per_hour is None and lease.released_at is None
    assert lease.created_at.tzinfo is not None and lease.created_at.utcoffset() == timedelta(0)
    assert timedelta(seconds=590) < lease.expires_at - datetime.now(UTC) <= timedelta(seconds=601)
    assert lease.raw["lease_id"] == lease.lease_id and lease.is_live


def test_lease_is_frozen_and_compares_without_raw() -> None:
    wire = {
        "lease_id": "l1",
        "provider": "p",
        "kind": "anim",
        "gpu": "high",
        "status": "released",
        "endpoint": None,
        "created_at": "2026-11-30T04:00:00Z",
        "expires_at": "2026-11-30T05:00:00Z",
        "released_at": "2026-11-30T04:30:00Z",
        "provider_token": None,
        "owner_id": None,
        "correlation_id": None,
        "region": None,
        "ttl_seconds": 3600,
        "cost_per_hour": 0.5,
    }
    lease = Lease.from_wire(wire)

    assert lease == Lease.from_wire({**wire, "future_field": 1})
    assert lease.released_at == datetime(2026, 11, 30, 4, 30, tzinfo=UTC)
    assert not lease.is_live and lease.cost_per_hour == 0.5
    with pytest.raises(AttributeError):
        lease.status = "active"  # type: ignore[misc]
    with pytest.raises(ValueError, match="expires_at"):
        Lease.from_wire({k: v for k, v in wire.items() if k != "expires_at"})


def test_acquire_sends_only_the_given_fields(client: SchedulerClient, fake: FakeScheduler) -> None:
    client.acquire("anim", env={"JOB_ID": "42"})

    (request,) = fake.calls("POST", "/v1/lease")
    assert request.body == {"kind": "anim", "gpu": "none", "env": {"JOB_ID": "42"}}
    assert request.header("Content-Type") == "application/json"
    assert request.header("X-Internal-Secret") == fake.secret


def test_get_list_renew_release_round_trip(client: SchedulerClient, fake: FakeScheduler) -> None:
    lease = client.acquire("renderer", ttl_seconds=60, owner_id="me")

    assert client.get(lease.lease_id) == lease
    assert [item.lease_id for item in client.list(owner_id="me")] == [lease.lease_id]
    renewed = client.renew(lease.lease_id, ttl_seconds=120, owner_id="me")
    assert renewed.ttl_seconds == 120 and renewed.expires_at > lease.expires_at
    assert fake.calls("POST", ".*/renew")[0].header("X-Lease-Owner") == "me"
    client.release(lease.lease_id, owner_id="me")
    assert client.get(lease.lease_id).status == "released"
    assert client.list() == []


def test_renew_without_ttl_sends_an_empty_object(client: SchedulerClient, fake: FakeScheduler) -> None:
    lease = client.acquire("renderer")

    client.renew(lease.lease_id)

    assert fake.calls("POST", ".*/renew")[0].body == {}


def test_list_follows_next_token_to_the_end(client: SchedulerClient, fake: FakeScheduler) -> None:
    fake.page_size = 2
    made = {fake.add_lease(owner_id="o")["lease_id"] for _ in range(5)}
    fake.add_lease(owner_id="someone-else")

    assert {lease.lease_id for lease in client.list(owner_id="o")} == made
    assert len(fake.calls("GET", "/v1/leases")) == 3


def test_list_limit_caps_the_total_and_list_page_returns_the_token(
    client: SchedulerClient, fake: FakeScheduler
) -> None:
    fake.page_size = 2
    for _ in range(5):
        fake.add_lease()

    assert len(client.list(limit=3)) == 3
    page, token = client.list_page(limit=2)
    assert len(page) == 2 and token == "2"
    rest, end = client.list_page(limit=10, next_token=token)
    assert len(rest) == 2 and end == "4"
    assert len(list(client.iter_leases(page_size=2))) == 5


def test_lease_ids_are_escaped_in_paths(client: SchedulerClient, fake: FakeScheduler) -> None:
    with pytest.raises(NotFound):
        client.get("a/b c")

    assert fake.calls("GET")[0].path == "/v1/lease/a%2Fb%20c"


def test_url_and_secret_default_to_the_environment(fake: FakeScheduler, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCHEDULER_URL", fake.url + "/")
    monkeypatch.setenv("INTERNAL_SECRET", fake.secret)

    with SchedulerClient() as scheduler:
        assert scheduler.url == fake.url
        assert scheduler.list() == []
        assert "fake-secret" not in repr(scheduler)


def test_url_defaults_to_loopback_3000(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SCHEDULER_URL", raising=False)

    assert SchedulerClient().url == "http://127.0.0.1:3000"
    with pytest.raises(ValueError, match="http"):
        SchedulerClient("127.0.0.1:3000")


# --- error mapping ---------------------------------------------------------------------------------


def test_missing_secret_maps_api_gateways_unauthorized_body(fake: FakeScheduler) -> None:
    with SchedulerClient(fake.url, "") as scheduler, pytest.raises(Unauthorized) as raised:
        scheduler.list()

    assert (raised.value.status, raised.value.code, raised.value.message) == (401, "unauthorized", "Unauthorized")


def test_wrong_secret_maps_api_gateways_forbidden_body(fake: FakeScheduler) -> None:
    with SchedulerClient(fake.url, "wrong") as scheduler, pytest.raises(Forbidden) as raised:
        scheduler.get("x")

    assert (raised.value.status, raised.value.code, raised.value.message) == (403, "forbidden", "Forbidden")


def test_error_envelope_gives_code_message_and_details(client: SchedulerClient) -> None:
    with pytest.raises(InvalidRequest) as raised:
        client.acquire("spaceship")

    error = raised.value
    assert error.status == 400 and error.code == "invalid_request"
    assert error.message == "invalid request body" and error.details == {"problems": [{"field": "kind"}]}
    assert error.envelope()["error"]["details"] == {"problems": [{"field": "kind"}]}
    assert isinstance(error, SchedulerError)


@pytest.mark.parametrize(
    ("status", "code", "expected"),
    [
        (404, "not_found", NotFound),
        (409, "conflict", Conflict),
        (429, "quota_exceeded", QuotaExceeded),
        (502, "provider_error", ProviderError),
        (503, "no_capacity", NoCapacity),
        (500, "internal_error", ServerError),
        (418, "teapot", SchedulerError),
        (409, "brand_new_code", Conflict),
    ],
)
def test_each_error_code_maps_to_its_class(
    client: SchedulerClient, fake: FakeScheduler, status: int, code: str, expected: type[SchedulerError]
) -> None:
    fake.fail("GET", "/v1/lease/.*", status=status, code=code, times=10)
    client.retries = 0

    with pytest.raises(expected) as raised:
        client.get("any")

    assert type(raised.value) is expected and raised.value.code == code and raised.value.status == status


def test_a_success_without_json_is_an_invalid_response(client: SchedulerClient, fake: FakeScheduler) -> None:
    fake.fail("GET", "/v1/lease/.*", status=200, body="<html>proxy</html>")

    with pytest.raises(InvalidResponse):
        client.get("x")


# --- retries ---------------------------------------------------------------------------------------


def test_retried_acquire_after_503_sends_the_same_idempotency_key_and_body(
    client: SchedulerClient, fake: FakeScheduler
) -> None:
    fake.fail("POST", "/v1/lease", status=503, code="no_capacity", times=2)

    lease = client.acquire("renderer", ttl_seconds=600, owner_id="me")

    attempts = fake.calls("POST", "/v1/lease")
    assert len(attempts) == 3
    keys = {attempt.header("Idempotency-Key") for attempt in attempts}
    assert len(keys) == 1 and uuid.UUID(keys.pop()).version == 4
    assert len({attempt.raw_body for attempt in attempts}) == 1
    assert list(fake.leases) == [lease.lease_id]


def test_acquire_whose_answer_was_lost_is_retried_without_a_second_worker(
    client: SchedulerClient, fake: FakeScheduler
) -> None:
    fake.fail("POST", "/v1/lease", mode="apply_then_drop")

    lease = client.acquire("anim")

    assert len(fake.calls("POST", "/v1/lease")) == 2
    assert list(fake.leases) == [lease.lease_id]


def test_each_acquire_call_gets_a_new_key_unless_the_caller_gives_one(
    client: SchedulerClient, fake: FakeScheduler
) -> None:
    client.acquire("renderer")
    client.acquire("renderer")
    first = client.acquire("renderer", idempotency_key="job-7")
    again = client.acquire("renderer", idempotency_key="job-7")

    keys = [request.header("Idempotency-Key") for request in fake.calls("POST", "/v1/lease")]
    assert keys[0] != keys[1] and keys[2:] == ["job-7", "job-7"]
    assert first.lease_id == again.lease_id and len(fake.leases) == 3
    with pytest.raises(Conflict):
        client.acquire("anim", idempotency_key="job-7")


@pytest.mark.parametrize("status", [502, 504])
def test_gateway_errors_are_retried(client: SchedulerClient, fake: FakeScheduler, status: int) -> None:
    fake.fail("GET", "/v1/leases", status=status, body={"message": "Internal Server Error"})

    assert client.list() == []
    assert len(fake.calls("GET", "/v1/leases")) == 2


def test_rate_limited_is_retried_after_retry_after(client: SchedulerClient, fake: FakeScheduler) -> None:
    fake.fail("GET", "/v1/leases", status=429, code="rate_limited", headers={"Retry-After": "0.3"})
    client.max_backoff = 1.0

    started = time.monotonic()
    assert client.list() == []

    assert time.monotonic() - started >= 0.3
    assert len(fake.calls("GET", "/v1/leases")) == 2


def test_quota_exceeded_is_not_retried(client: SchedulerClient, fake: FakeScheduler) -> None:
    fake.fail("POST", "/v1/lease", status=429, code="quota_exceeded", times=5)

    with pytest.raises(QuotaExceeded):
        client.acquire("renderer", owner_id="busy")

    assert len(fake.calls("POST", "/v1/lease")) == 1


@pytest.mark.parametrize(
    ("status", "code", "expected"),
    [
        (400, "invalid_request", InvalidRequest),
        (401, None, Unauthorized),
        (403, "forbidden", Forbidden),
        (404, "not_found", NotFound),
        (409, "conflict", Conflict),
        (500, "internal_error", ServerError),
    ],
)
def test_client_errors_are_never_retried(
    client: SchedulerClient, fake: FakeScheduler, status: int, code: str | None, expected: type[SchedulerError]
) -> None:
    body = {"message": "Unauthorized"} if code is None else None
    fake.fail("POST", "/v1/lease", status=status, code=code, body=body, times=5)

    with pytest.raises(expected):
        client.acquire("renderer")

    assert len(fake.calls("POST", "/v1/lease")) == 1


def test_retries_are_bounded_in_attempts(client: SchedulerClient, fake: FakeScheduler) -> None:
    fake.fail("POST", "/v1/lease", status=503, code="no_capacity", times=100)
    client.retries = 3

    with pytest.raises(NoCapacity) as raised:
        client.acquire("renderer")

    assert len(fake.calls("POST", "/v1/lease")) == 4
    assert raised.value.details["attempts"] == 4 and fake.leases == {}


def test_retries_are_bounded_in_total_time(fake: FakeScheduler) -> None:
    fake.fail("GET", "/v1/leases", status=503, code="no_capacity", times=1000)
    scheduler = SchedulerClient(fake.url, fake.secret, retries=1000, backoff=0.05, max_backoff=0.1, retry_deadline=0.5)

    started = time.monotonic()
    with pytest.raises(NoCapacity):
        scheduler.list()

    assert time.monotonic() - started < 1.0
    assert 2 < len(fake.calls("GET", "/v1/leases")) < 100


def test_connection_refused_is_retried_then_service_unreachable() -> None:
    scheduler = SchedulerClient(f"http://127.0.0.1:{_closed_port()}", "s", retries=2, backoff=0.01)

    with pytest.raises(ServiceUnreachable) as raised:
        scheduler.acquire("renderer")

    assert raised.value.status is None and raised.value.code == "unreachable"
    assert raised.value.details["attempts"] == 3
    assert "connection refused" in raised.value.message


def test_dropped_connection_is_retried(client: SchedulerClient, fake: FakeScheduler) -> None:
    fake.fail("GET", "/v1/lease/.*", mode="drop")
    lease = client.acquire("renderer")

    assert client.get(lease.lease_id).lease_id == lease.lease_id
    assert len(fake.calls("GET", "/v1/lease/.*")) == 2


# --- release and the 404 after a retry ------------------------------------------------------------


def test_release_404_on_the_first_attempt_is_not_found(client: SchedulerClient) -> None:
    with pytest.raises(NotFound):
        client.release("never-existed")


def test_release_twice_is_not_found_the_second_time(client: SchedulerClient) -> None:
    lease = client.acquire("renderer")
    client.release(lease.lease_id)

    with pytest.raises(NotFound):
        client.release(lease.lease_id)


def test_release_whose_answer_was_lost_counts_the_retrys_404_as_success(
    client: SchedulerClient, fake: FakeScheduler
) -> None:
    lease = client.acquire("renderer", owner_id="me")
    fake.fail("DELETE", "/v1/lease/.*", mode="apply_then_drop")

    client.release(lease.lease_id, owner_id="me")

    assert len(fake.calls("DELETE")) == 2
    assert len(fake.calls("GET", "/v1/lease/.*")) == 1  # the 404 was checked against the lease
    assert fake.leases[lease.lease_id]["status"] == "released"


def test_release_after_a_5xx_then_404_counts_as_success(client: SchedulerClient, fake: FakeScheduler) -> None:
    lease = client.acquire("renderer")
    fake.fail("DELETE", "/v1/lease/.*", status=504, body={"message": "Endpoint request timed out"})
    fake.expire(lease.lease_id)  # whatever ended it, the lease exists and is over

    client.release(lease.lease_id)


def test_release_retry_404_for_an_unknown_lease_is_still_not_found(
    client: SchedulerClient, fake: FakeScheduler
) -> None:
    fake.fail("DELETE", "/v1/lease/.*", mode="drop")

    with pytest.raises(NotFound):
        client.release("never-existed")

    assert len(fake.calls("DELETE")) == 2


def test_release_404_after_a_rate_limited_attempt_is_not_found(client: SchedulerClient, fake: FakeScheduler) -> None:
    """A 429 is answered before any handler runs: it cannot have released anything."""
    fake.fail("DELETE", "/v1/lease/.*", status=429, code="rate_limited")

    with pytest.raises(NotFound):
        client.release("never-existed")

    assert len(fake.calls("DELETE")) == 2 and fake.calls("GET", "/v1/lease/.*") == []


def test_a_refused_connection_is_known_not_to_have_reached_the_service() -> None:
    session = requests.Session()
    with pytest.raises(requests.ConnectionError) as refused:
        session.get(f"http://127.0.0.1:{_closed_port()}/", timeout=2)

    assert _is_connect_failure(refused.value)
    assert not _is_connect_failure(requests.ConnectionError("Remote end closed connection without response"))
    assert not _is_connect_failure(requests.ReadTimeout("read timed out"))


def test_release_provider_error_is_not_retried(client: SchedulerClient, fake: FakeScheduler) -> None:
    lease = client.acquire("renderer")
    fake.fail("DELETE", "/v1/lease/.*", status=502, code="provider_error")

    with pytest.raises(ProviderError):
        client.release(lease.lease_id)

    assert len(fake.calls("DELETE")) == 1


def test_release_retries_no_capacity(client: SchedulerClient, fake: FakeScheduler) -> None:
    lease = client.acquire("renderer")
    fake.fail("DELETE", "/v1/lease/.*", status=503, code="no_capacity")

    client.release(lease.lease_id)

    assert [r.path for r in fake.calls("DELETE")] == [f"/v1/lease/{lease.lease_id}"] * 2
    assert fake.calls("GET", "/v1/lease/.*") == []  # the retry answered 204: nothing to check


def test_release_of_another_owners_lease_is_forbidden(client: SchedulerClient) -> None:
    lease = client.acquire("renderer", owner_id="me")

    with pytest.raises(Forbidden):
        client.release(lease.lease_id, owner_id="you")
    with pytest.raises(Forbidden):
        client.release(lease.lease_id)  # no X-Lease-Owner at all


def test_health_needs_no_secret(fake: FakeScheduler) -> None:
    with SchedulerClient(fake.url, "") as scheduler:
        assert scheduler.health() == {"status": "ok", "service": "openalice-scheduler"}


def test_usage_returns_the_report_and_sends_only_what_was_given(client: SchedulerClient, fake: FakeScheduler) -> None:
    report = client.usage(owner_id="anim", since=date(2026, 11, 1), group_by="provider")

    assert fake.requests[-1].query == {"owner_id": "anim", "since": "2026-11-01", "group_by": "provider"}
    assert report["usage"] == [
        {"owner_id": "anim", "provider": "fake", "leases": 2, "lease_seconds": 1800, "cost_usd": 0.345}
    ]


def test_budget_exceeded_is_not_retried(client: SchedulerClient, fake: FakeScheduler) -> None:
    fake.fail("POST", "/v1/lease", status=429, code="budget_exceeded", times=5)

    with pytest.raises(BudgetExceeded):
        client.acquire("renderer", owner_id="anim", max_cost_per_hour=1.0)

    assert len(fake.calls("POST", "/v1/lease")) == 1
    assert fake.requests[-1].body["max_cost_per_hour"] == 1.0
