"""The acquire body and the operations queries, validated by hand (no pydantic in any function): each
refusal is InvalidRequest naming every field at fault, as strictly as the contract describes them."""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest

from scheduler.api.http import HttpRequest
from scheduler.api.queries import LogsQuery, OwnerReleaseQuery
from scheduler.errors import InvalidRequest
from scheduler.models import ListFilter, ReadQuery, RenewRequest
from scheduler.request_models import LeaseRequest, UsageGrouping, UsageQuery


def refused(parse: Any, data: object) -> list[dict[str, str]]:
    with pytest.raises(InvalidRequest) as refusal:
        parse(data)
    assert refusal.value.details is not None
    return list(refusal.value.details["problems"])  # type: ignore[call-overload]


def fields_of(problems: list[dict[str, str]]) -> list[str]:
    return [problem["field"] for problem in problems]


@pytest.mark.parametrize("price", [float("nan"), float("inf"), float("-inf")])
def test_a_price_ceiling_that_is_no_finite_number_is_refused(price: float) -> None:
    assert fields_of(refused(LeaseRequest.parse, {"kind": "renderer", "max_cost_per_hour": price})) == [
        "max_cost_per_hour"
    ]


def test_a_whole_number_price_ceiling_is_taken_as_a_float() -> None:
    assert LeaseRequest.parse({"kind": "renderer", "max_cost_per_hour": 2}).max_cost_per_hour == 2.0


@pytest.mark.parametrize("field", ["owner_id", "correlation_id", "region"])
def test_a_label_with_a_lone_surrogate_is_refused(field: str) -> None:
    assert fields_of(refused(LeaseRequest.parse, {"kind": "renderer", field: "a\ud800"})) == [field]


@pytest.mark.parametrize("field", ["owner_id", "correlation_id", "region"])
def test_a_blank_label_is_an_absent_one(field: str) -> None:
    assert getattr(LeaseRequest.parse({"kind": "renderer", field: ""}), field) is None


@pytest.mark.parametrize("value", ["a\x00b", "x" * 4097, "\udfff"])
def test_an_env_value_outside_the_contract_is_refused_naming_its_key(value: str) -> None:
    assert fields_of(refused(LeaseRequest.parse, {"kind": "renderer", "env": {"KEY": value}})) == ["env.KEY"]


def test_every_problem_of_a_body_is_named_unknown_fields_last() -> None:
    body = {"kind": "video", "ttl_seconds": 0, "image": "evil"}
    assert fields_of(refused(LeaseRequest.parse, body)) == ["kind", "ttl_seconds", "image"]


def test_a_body_that_is_no_object_is_refused() -> None:
    with pytest.raises(InvalidRequest, match="must be a JSON object"):
        LeaseRequest.parse(["kind", "renderer"])


def test_the_stored_form_of_a_request_names_every_field_with_its_default() -> None:
    assert LeaseRequest.parse({"kind": "anim"}).as_json() == {
        "kind": "anim",
        "gpu": "none",
        "ttl_seconds": 3600,
        "owner_id": None,
        "correlation_id": None,
        "region": None,
        "max_cost_per_hour": None,
        "queue_seconds": 0,
        "priority": 50,
        "preemptible": False,
        "env": {},
    }


def test_a_logs_query_is_read_from_its_strings() -> None:
    query = LogsQuery.parse({"tail": "50", "since": "2026-11-30T17:00:00Z", "timestamps": "true"})
    assert (query.tail, query.since, query.timestamps) == (50, "2026-11-30T17:00:00Z", True)


@pytest.mark.parametrize(
    ("name", "value"),
    [("tail", "0"), ("tail", "5001"), ("tail", "1e3"), ("since", "yesterday"), ("timestamps", "yes"), ("x", "1")],
)
def test_a_logs_query_value_outside_the_contract_is_refused_naming_its_field(name: str, value: str) -> None:
    assert fields_of(refused(LogsQuery.parse, {name: value})) == [name]


def test_releasing_an_owner_s_leases_needs_the_owner_in_secret_mode() -> None:
    in_secret_mode = functools.partial(OwnerReleaseQuery.parse, owner_required=True)
    assert refused(in_secret_mode, {}) == [{"field": "owner_id", "problem": "Field required"}]


def test_outside_secret_mode_releasing_leases_may_leave_the_owner_to_the_caller() -> None:
    assert OwnerReleaseQuery.parse({}) == OwnerReleaseQuery(owner_id=None, next_token=None)


def test_an_owner_no_header_can_carry_is_refused() -> None:
    assert fields_of(refused(OwnerReleaseQuery.parse, {"owner_id": " alice"})) == ["owner_id"]


def test_a_usage_query_takes_the_defaults() -> None:
    assert UsageQuery.parse({}) == UsageQuery(owner_id=None, since=None, until=None, group_by=UsageGrouping.OWNER)


@pytest.mark.parametrize(("name", "value"), [("since", "2026-02-30"), ("until", "2026-1-01"), ("group_by", "day")])
def test_a_usage_query_value_outside_the_contract_is_refused_naming_its_field(name: str, value: str) -> None:
    assert fields_of(refused(UsageQuery.parse, {name: value})) == [name]


def test_a_price_ceiling_too_large_for_a_float_is_refused_not_a_crash() -> None:
    body = json.loads('{"kind": "renderer", "max_cost_per_hour": 1' + "0" * 400 + "}")
    assert fields_of(refused(LeaseRequest.parse, body)) == ["max_cost_per_hour"]


def test_an_unknown_field_with_a_lone_surrogate_is_named_escaped() -> None:
    problems = refused(LeaseRequest.parse, json.loads('{"kind": "renderer", "\\ud800": 1}'))
    assert problems == [{"field": "\\ud800", "problem": "Extra inputs are not permitted"}]


@pytest.mark.parametrize(
    ("parse", "name", "value"), [(LogsQuery.parse, "tail", "0000000001"), (ListFilter.parse, "limit", "00000000001")]
)
def test_a_zero_padded_whole_number_in_a_query_is_read(parse: Any, name: str, value: str) -> None:
    assert getattr(parse({name: value}), name) == 1


# Digits of other scripts: `\d`, `str.isdigit()` and `int()` take them all, and a date parser then chokes.
ARABIC_INDIC_YEAR = "\u0662\u0660\u0662\u0666"  # ٢٠٢٦
FULLWIDTH_YEAR = "\uff12\uff10\uff12\uff16"  # ２０２６


@pytest.mark.parametrize("name", ["since", "until"])
@pytest.mark.parametrize("day", [f"{ARABIC_INDIC_YEAR}-12-01", f"{FULLWIDTH_YEAR}-12-01", "2026-\u0661\u0662-01"])
def test_a_usage_day_in_other_than_ascii_digits_is_refused_naming_its_field(name: str, day: str) -> None:
    assert refused(UsageQuery.parse, {name: day}) == [
        {"field": name, "problem": "String should match pattern '^[0-9]{4}-[0-9]{2}-[0-9]{2}$'"}
    ]


@pytest.mark.parametrize(
    ("parse", "name"), [(LogsQuery.parse, "tail"), (ListFilter.parse, "limit"), (ReadQuery.parse, "wait_ready")]
)
@pytest.mark.parametrize("value", ["\u0663", "\uff13", "\u00b3", "1_0", "+3", " 3"])
def test_a_query_whole_number_in_other_than_ascii_digits_is_refused(parse: Any, name: str, value: str) -> None:
    assert fields_of(refused(parse, {name: value})) == [name]


@pytest.mark.parametrize(
    "since",
    [
        "20260101T000000Z",  # ISO 8601's basic format
        "2026-W01-1T00:00:00Z",  # an ISO week date
        "2026-01-01 00:00:00Z",  # the space RFC 3339's note allows: not in its grammar, refused (openapi.yaml)
        " 2026-01-01T00:00:00Z",
        "2026-01-01T00:00:00Z\n",
        f"{ARABIC_INDIC_YEAR}-01-01T00:00:00Z",
        "2026-01-01T00:00:00.1234567891Z",  # a fraction finer than the nanosecond
    ],
)
def test_a_logs_since_that_is_no_rfc3339_date_time_is_refused(since: str) -> None:
    assert fields_of(refused(LogsQuery.parse, {"since": since})) == ["since"]


LONG = "9" * 5000  # more digits than Python converts (4300 by default)


@pytest.mark.parametrize(
    ("parse", "body", "field"),
    [
        (LeaseRequest.parse, f'{{"kind": "renderer", "ttl_seconds": {LONG}}}', "ttl_seconds"),
        (LeaseRequest.parse, f'{{"kind": "renderer", "max_cost_per_hour": -{LONG}}}', "max_cost_per_hour"),
        (RenewRequest.parse, f'{{"ttl_seconds": {LONG}}}', "ttl_seconds"),
    ],
)
def test_an_integer_too_long_to_read_is_named_with_its_field(parse: Any, body: str, field: str) -> None:
    parsed = HttpRequest(body=body).json_body()
    problem = "Input should be a number of at most 4300 digits, not 5000"
    assert refused(parse, parsed) == [{"field": field, "problem": problem}]


def test_an_integer_too_long_to_read_where_no_number_belongs_is_named_as_what_it_is_not() -> None:
    parsed = HttpRequest(body=f'{{"kind": {LONG}, "env": {{"A": {LONG}}}, "x": {LONG}}}').json_body()
    assert refused(LeaseRequest.parse, parsed) == [
        {"field": "kind", "problem": "Input should be 'renderer' or 'anim'"},
        {"field": "env.A", "problem": "Input should be a valid string"},
        {"field": "x", "problem": "Extra inputs are not permitted"},
    ]
