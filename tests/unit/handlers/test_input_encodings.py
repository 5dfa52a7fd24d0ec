"""What a caller sends in another encoding or script than the contract's is a 400 that says so, never a 500 nor
"not valid JSON" for valid JSON: other scripts' digits in a query, bodies in UTF-16/UTF-32 or with a byte order
mark, integers with more digits than Python reads."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable

import pytest

from scheduler.providers.memory import MemoryProvider
from scheduler.store import LeaseStore

from .conftest import Function, event, runtime_of

BODY = '{"kind":"renderer","ttl_seconds":600,"owner_id":"anim-service"}'


@pytest.mark.parametrize("name", ["since", "until"])
@pytest.mark.parametrize("day", ["\u0662\u0660\u0662\u0666-12-01", "\uff12\uff10\uff12\uff16-12-01"])
def test_a_usage_day_in_another_scripts_digits_is_400_naming_it(
    function: Callable[[str], Function], budget_store: LeaseStore, name: str, day: str
) -> None:
    usage = function("usage", runtime_of(budget_store))

    status, body = usage.http(event("usage", queryStringParameters={name: day}))

    assert (status, body["error"]["code"]) == (400, "invalid_request")
    assert [problem["field"] for problem in body["error"]["details"]["problems"]] == [name]


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (BODY.encode("utf-16"), "request body must be UTF-8 (RFC 8259), not UTF-16"),
        (BODY.encode("utf-16-le"), "request body must be UTF-8 (RFC 8259), not UTF-16-LE"),
        (BODY.encode("utf-32-be"), "request body must be UTF-8 (RFC 8259), not UTF-32-BE"),
        (BODY.encode("utf-8-sig"), "request body must be UTF-8 without a byte order mark (RFC 8259)"),
    ],
)
def test_an_acquire_body_in_other_than_utf8_is_400_saying_so_and_makes_no_worker(
    function: Callable[[str], Function], provider: MemoryProvider, raw: bytes, problem: str
) -> None:
    sample = event("acquire_lease", body=base64.b64encode(raw).decode(), isBase64Encoded=True)

    status, body = function("acquire_lease").http(sample)

    assert (status, body["error"]) == (400, {"code": "invalid_request", "message": problem})
    assert provider.provisioned == []


def test_an_acquire_with_a_5000_digit_ttl_is_400_naming_the_field(function: Callable[[str], Function]) -> None:
    sample = event("acquire_lease", body='{"kind":"renderer","ttl_seconds":' + "9" * 5000 + "}")

    status, body = function("acquire_lease").http(sample)

    assert (status, body["error"]["code"]) == (400, "invalid_request")
    assert body["error"]["details"]["problems"] == [
        {"field": "ttl_seconds", "problem": "Input should be a number of at most 4300 digits, not 5000"}
    ]


def test_a_renew_with_a_5000_digit_ttl_is_400_naming_the_field(function: Callable[[str], Function]) -> None:
    sample = event("renew_lease", body=json.dumps({"ttl_seconds": 1}).replace("1", "1" * 5000))

    status, body = function("renew_lease").http(sample)

    assert (status, body["error"]["code"]) == (400, "invalid_request")
    assert body["error"]["details"]["problems"] == [
        {"field": "ttl_seconds", "problem": "Input should be a number of at most 4300 digits, not 5000"}
    ]
