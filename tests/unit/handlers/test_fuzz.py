"""Every input a caller controls, fuzzed harder than schemathesis' defaults, never makes a handler answer 5xx.

Through each function's Lambda entry point (no Docker: acquire gets an in-memory provider), with
inputs schemathesis does not generate by default: lone surrogates and other invalid Unicode in every
string (body fields, headers, query parameters, path), NaN / Infinity / 1e999 / 5,000-digit numbers
as raw JSON, crafted and garbled `next_token`s, odd headers (any case, duplicated, empty, very long),
base64 bodies that are not base64 or not UTF-8. Every answer must be a documented 2xx or 4xx with the
error body's shape.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from devstack.lambda_environment import LambdaContext

from .conftest import Function

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]
EVENTS = REPO / "events"
EXAMPLES = 150
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)

# Any code point, lone surrogates included (hypothesis leaves category Cs out unless told).
any_char = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())
nasty_text = st.one_of(
    st.text(any_char, max_size=40),
    st.sampled_from(["\ud800", "a\udfffb", "\x00", " ", "", "é", "☃", "\u202e", "x" * 5000, "renderer\ud800"]),
)
raw_numbers = st.sampled_from(
    ["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "1e-999", "9" * 5000, "600.0", "-0", "1E2", "0x10", "6e2"]
)


def json_values(depth: int = 2) -> st.SearchStrategy[Any]:
    leaves = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(10**40), max_value=10**40),
        st.floats(allow_nan=True, allow_infinity=True),
        nasty_text,
    )
    if depth == 0:
        return leaves
    return st.one_of(
        leaves,
        st.lists(json_values(depth - 1), max_size=3),
        st.dictionaries(nasty_text, json_values(depth - 1), max_size=3),
    )


FIELDS = ["kind", "gpu", "ttl_seconds", "owner_id", "correlation_id", "region", "env"]
GOOD = {"kind": "renderer", "gpu": "none", "ttl_seconds": 60, "owner_id": "fuzz", "env": {"A": "b"}}


@st.composite
def raw_bodies(draw: st.DrawFn) -> tuple[str | None, bool]:
    """(body, isBase64Encoded): mostly JSON objects near the schema, with nasty values spliced in as raw text."""
    shape = draw(st.sampled_from(["near", "near", "near", "any", "text", "base64", "none"]))
    if shape == "none":
        return None, False
    if shape == "text":
        return draw(nasty_text), False
    if shape == "base64":
        raw = draw(st.binary(max_size=64))
        return draw(st.sampled_from([base64.b64encode(raw).decode(), "not base64!", "\ud800"])), True
    if shape == "any":
        return json.dumps(draw(json_values()), allow_nan=True), False
    body: dict[str, Any] = dict(GOOD)
    for name in draw(st.lists(st.sampled_from([*FIELDS, "extra"]), max_size=3, unique=True)):
        body[name] = draw(json_values(1))
    if draw(st.booleans()):
        body["env"] = draw(st.dictionaries(nasty_text, nasty_text, max_size=3))
    text = json.dumps(body, allow_nan=True)
    if draw(st.booleans()):  # a raw number JSON parsers disagree on, where an integer belongs
        text = text.replace('"ttl_seconds": 60', f'"ttl_seconds": {draw(raw_numbers)}')
    return text, False


@st.composite
def headers(draw: st.DrawFn) -> dict[str, str]:
    result = {"content-type": "application/json", "x-internal-secret": "s"}
    for name in draw(
        st.lists(
            st.sampled_from(["Idempotency-Key", "idempotency-key", "X-Lease-Owner", "x-lease-owner", "Content-Type"]),
            max_size=3,
        )
    ):
        result[name] = draw(nasty_text)
    return result


def crafted_token() -> st.SearchStrategy[str]:
    key = st.fixed_dictionaries(
        {
            "lease_id": st.one_of(st.just({"S": str(uuid.uuid4())}), json_values(1)),
            "live_shard": st.one_of(st.just({"S": "0"}), json_values(1)),
            "due_at": st.one_of(
                st.builds(lambda n: {"N": n}, st.one_of(raw_numbers, st.integers(0, 2**41).map(str))),
                json_values(1),
            ),
        }
    )
    well_formed = st.fixed_dictionaries(  # what this service issues, with any due time: old, future, odd
        {
            "lease_id": st.uuids().map(lambda value: {"S": str(value)}),
            "live_shard": st.just({"S": "0"}),
            "due_at": st.integers(0, 10**12 - 1).map(lambda value: {"N": str(value)}),
        }
    )
    payload = st.one_of(
        st.fixed_dictionaries({"s": st.just(0), "k": well_formed}),
        st.fixed_dictionaries({"s": json_values(0), "k": st.one_of(st.none(), key)}),
        json_values(),
    )
    encoded = payload.map(lambda value: base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("="))
    return st.one_of(encoded, nasty_text)


@pytest.fixture
def handlers(function: Callable[[str], Function]) -> Callable[[str], Any]:
    """Each function's module, on this test's runtime (an in-memory provider)."""
    return lambda name: function(name).module


def invoke(module: Any, event_file: str, **changes: Any) -> dict[str, Any]:
    event = dict(json.loads((EVENTS / event_file).read_text()))
    event.update(changes)
    deadline_ms = int((time.time() + 30) * 1000)
    response: dict[str, Any] = module.lambda_handler(event, LambdaContext("Fuzzed", 256, "req-fuzz", deadline_ms))
    return response


def assert_documented(response: dict[str, Any], allowed: set[int]) -> None:
    status = response["statusCode"]
    assert status in allowed, response
    if status >= 400:
        error = json.loads(response["body"])["error"]
        assert isinstance(error["code"], str) and isinstance(error["message"], str), response


@pytest.mark.dynamodb_only("its headers include Idempotency-Keys, which need powertools' DynamoDB table")
@FUZZ
@given(body=raw_bodies(), sent=headers())
def test_acquire_never_answers_5xx(
    handlers: Callable[[str], Any], body: tuple[str | None, bool], sent: dict[str, str]
) -> None:
    raw, encoded = body
    response = invoke(handlers("acquire_lease"), "acquire_lease.json", body=raw, isBase64Encoded=encoded, headers=sent)
    assert_documented(response, {201, 400, 409})


@FUZZ
@given(body=raw_bodies(), sent=headers(), lease_id=st.one_of(st.just(str(uuid.uuid4())), nasty_text))
def test_renew_never_answers_5xx(
    handlers: Callable[[str], Any], body: tuple[str | None, bool], sent: dict[str, str], lease_id: str
) -> None:
    raw, encoded = body
    response = invoke(
        handlers("renew_lease"),
        "renew_lease.json",
        body=raw,
        isBase64Encoded=encoded,
        headers=sent,
        pathParameters={"lease_id": lease_id},
    )
    assert_documented(response, {200, 400, 403, 404, 409})


@FUZZ
@given(
    query=st.dictionaries(
        st.sampled_from(["owner_id", "kind", "provider", "limit", "next_token", "other"]),
        st.one_of(nasty_text, crafted_token()),
        max_size=4,
    ),
    sent=headers(),
)
def test_list_never_answers_5xx(handlers: Callable[[str], Any], query: dict[str, str], sent: dict[str, str]) -> None:
    response = invoke(handlers("list_leases"), "list_leases.json", queryStringParameters=query, headers=sent)
    assert_documented(response, {200, 400})


@FUZZ
@given(token=crafted_token(), limit=st.sampled_from(["1", "100"]))
def test_any_next_token_is_a_page_or_invalid_request(handlers: Callable[[str], Any], token: str, limit: str) -> None:
    response = invoke(
        handlers("list_leases"), "list_leases.json", queryStringParameters={"next_token": token, "limit": limit}
    )
    assert_documented(response, {200, 400})


@FUZZ
@given(lease_id=st.one_of(nasty_text, st.uuids().map(str)), sent=headers())
def test_get_and_release_never_answer_5xx(handlers: Callable[[str], Any], lease_id: str, sent: dict[str, str]) -> None:
    for function, event_file in (("get_lease", "get_lease.json"), ("release_lease", "release_lease.json")):
        response = invoke(handlers(function), event_file, pathParameters={"lease_id": lease_id}, headers=sent)
        assert_documented(response, {200, 204, 400, 403, 404})


@pytest.mark.parametrize("where", ["headers", "queryStringParameters", "pathParameters"])
def test_a_lone_surrogate_anywhere_in_the_request_is_invalid_request(
    handlers: Callable[[str], Any], where: str
) -> None:
    event = {"headers": {"x-lease-owner": "a"}, "queryStringParameters": {}, "pathParameters": {"lease_id": "x"}}
    event[where] = {**event[where], "provider" if where == "queryStringParameters" else "x": "\ud800"}
    response = invoke(handlers("list_leases"), "list_leases.json", **event)
    assert (response["statusCode"], json.loads(response["body"])["error"]["code"]) == (400, "invalid_request")


@FUZZ
@given(
    lease_id=st.one_of(nasty_text, st.uuids().map(str)),
    query=st.dictionaries(st.sampled_from(["tail", "since", "timestamps", "other"]), nasty_text, max_size=3),
    sent=headers(),
)
def test_logs_never_answer_5xx(
    handlers: Callable[[str], Any], lease_id: str, query: dict[str, str], sent: dict[str, str]
) -> None:
    response = invoke(
        handlers("lease_logs"),
        "lease_logs.json",
        pathParameters={"lease_id": lease_id},
        queryStringParameters=query,
        headers=sent,
    )
    assert_documented(response, {200, 400, 403, 404, 409, 410})


@FUZZ
@given(
    query=st.dictionaries(st.sampled_from(["owner_id", "next_token", "other"]), st.one_of(nasty_text, crafted_token())),
    sent=headers(),
)
def test_releasing_an_owners_leases_never_answers_5xx(
    handlers: Callable[[str], Any], query: dict[str, str], sent: dict[str, str]
) -> None:
    response = invoke(
        handlers("release_owner_leases"), "release_owner_leases.json", queryStringParameters=query, headers=sent
    )
    assert_documented(response, {200, 400, 403})
