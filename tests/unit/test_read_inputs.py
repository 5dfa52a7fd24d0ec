"""The read inputs, validated by hand (no pydantic on the read functions' cold start), as strictly as a
pydantic model with `extra="forbid"`: each refusal is InvalidRequest naming the field and the problem."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import pytest

from scheduler.api.http import HttpRequest, MalformedEvent
from scheduler.errors import InvalidRequest
from scheduler.models import ListFilter, ReadQuery, RenewRequest, WorkerKind


def refused_fields(parse: Any, data: object) -> list[str]:
    with pytest.raises(InvalidRequest) as refused:
        parse(data)
    assert refused.value.details is not None
    return [problem["field"] for problem in refused.value.details["problems"]]  # type: ignore[index, union-attr]


def test_a_list_query_with_every_filter_is_read() -> None:
    query = ListFilter.parse(
        {"owner_id": "alice", "kind": "anim", "provider": "runpod", "limit": "7", "next_token": "abc"}
    )
    assert query == ListFilter(owner_id="alice", kind=WorkerKind.ANIM, provider="runpod", limit=7, next_token="abc")


def test_an_empty_list_query_takes_the_defaults() -> None:
    assert ListFilter.parse({}) == ListFilter()


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("owner_id", " alice"),
        ("owner_id", "a" * 129),
        ("owner_id", "ali\u00e9"),
        ("kind", "RENDERER"),
        ("provider", "p" * 65),
        ("limit", "0"),
        ("limit", "1001"),
        ("limit", "1e2"),
        ("limit", "-5"),
        ("limit", "\uff11"),
        ("limit", "9" * 5000),
        ("next_token", "t" * 4097),
        ("unknown", "x"),
    ],
)
def test_a_list_query_value_outside_the_contract_is_refused_naming_its_field(name: str, value: str) -> None:
    assert refused_fields(ListFilter.parse, {name: value}) == [name]


def test_every_problem_of_a_list_query_is_named() -> None:
    assert refused_fields(ListFilter.parse, {"kind": "x", "limit": "0", "extra": "1"}) == ["kind", "limit", "extra"]


@pytest.mark.parametrize("value", ["26", "1.5", " 3", "", "1234567"])
def test_a_wait_ready_outside_0_to_25_whole_seconds_is_refused(value: str) -> None:
    assert refused_fields(ReadQuery.parse, {"wait_ready": value}) == ["wait_ready"]


def test_wait_ready_is_read_as_seconds() -> None:
    assert ReadQuery.parse({"wait_ready": "25"}).wait_ready == 25


def test_a_renew_body_of_null_ttl_keeps_the_lease_ttl() -> None:
    assert RenewRequest.parse({"ttl_seconds": None}).ttl_seconds is None


def test_a_renew_body_that_is_no_object_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="request body must be a JSON object"):
        RenewRequest.parse([1])


@pytest.mark.parametrize(
    "changes",
    [
        {"headers": None},
        {"headers": {"x": 1}},
        {"queryStringParameters": {"limit": "\ud800"}},
        {"pathParameters": ["lease_id"]},
        {"body": 5},
        {"isBase64Encoded": "maybe"},
        {"requestContext": "req"},
        {"requestContext": {"requestId": 7}},
    ],
)
def test_an_event_that_is_no_http_api_payload_is_malformed(changes: dict[str, Any]) -> None:
    with pytest.raises(MalformedEvent):
        HttpRequest.of_event({"routeKey": "GET /v1/leases", "headers": {}, **changes})


def test_an_event_s_parts_are_read() -> None:
    request = HttpRequest.of_event(
        {
            "routeKey": "GET /v1/leases",
            "headers": {"X-Lease-Owner": "alice"},
            "queryStringParameters": {"limit": "5"},
            "isBase64Encoded": "true",
            "body": "e30=",
            "requestContext": {"requestId": "req-1", "http": {"method": "GET", "path": "/v1/leases"}},
        }
    )
    assert (request.header("x-lease-owner"), request.queryStringParameters, request.request_id) == (
        "alice",
        {"limit": "5"},
        "req-1",
    )
    assert request.json_body() == {}


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ('{"kind":"renderer"}'.encode("utf-16"), "must be UTF-8 (RFC 8259), not UTF-16"),
        ('{"kind":"renderer"}'.encode("utf-16-le"), "must be UTF-8 (RFC 8259), not UTF-16-LE"),
        ('{"kind":"renderer"}'.encode("utf-16-be"), "must be UTF-8 (RFC 8259), not UTF-16-BE"),
        ('{"kind":"renderer"}'.encode("utf-32"), "must be UTF-8 (RFC 8259), not UTF-32"),
        ('{"kind":"renderer"}'.encode("utf-32-le"), "must be UTF-8 (RFC 8259), not UTF-32-LE"),
        ('{"kind":"renderer"}'.encode("utf-8-sig"), "must be UTF-8 without a byte order mark"),
        (b'{"kind":"\xff"}', "not valid UTF-8"),
    ],
)
def test_a_body_in_other_than_utf8_is_refused_saying_so(raw: bytes, problem: str) -> None:
    request = HttpRequest(body=base64.b64encode(raw).decode(), is_base64=True)
    with pytest.raises(InvalidRequest, match=re.escape(problem)):
        request.json_body()


@pytest.mark.parametrize("body", ['\ufeff{"kind":"renderer"}', '{"kind":"renderer"}'.encode("utf-16-le").decode()])
def test_a_text_body_with_a_byte_order_mark_or_in_utf16_is_refused(body: str) -> None:
    with pytest.raises(InvalidRequest, match=r"must be UTF-8"):
        HttpRequest(body=body).json_body()


def test_a_text_body_with_a_lone_surrogate_is_no_utf8_not_bad_base64() -> None:
    with pytest.raises(InvalidRequest, match="request body is not valid UTF-8"):
        HttpRequest(body='{"kind":"\ud800"}').json_body()


def test_a_utf8_body_is_read() -> None:
    region = "K\u00f8benhavn \u2603"
    raw = json.dumps({"region": region}, ensure_ascii=False).encode()
    assert HttpRequest(body=base64.b64encode(raw).decode(), is_base64=True).json_body() == {"region": region}
