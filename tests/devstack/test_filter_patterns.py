"""Lambda event filtering as the local stack applies the template's FilterCriteria."""

from __future__ import annotations

from typing import Any

import pytest

from devstack.filter_patterns import matches, matches_any
from devstack.template import SamTemplate
from scheduler.leases.ttl_stream import may_free_capacity
from scheduler.lifecycle import ENDED, LIVE, LeaseStatus


def _record(event_name: str, identity: dict[str, str] | None, status: str) -> dict[str, Any]:
    record: dict[str, Any] = {
        "eventName": event_name,
        "dynamodb": {"Keys": {"lease_id": {"S": "x"}}, "OldImage": {"status": {"S": status}}},
    }
    if identity is not None:
        record["userIdentity"] = identity
    return record


TTL = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}


@pytest.fixture(scope="module")
def ttl_filters() -> tuple[dict[str, Any], ...]:
    (mapping,) = [found for found in SamTemplate.load().stream_mappings if found.function == "TtlStreamFunction"]
    return mapping.filter_patterns


def test_the_lifecycle_events_mapping_passes_every_change() -> None:
    (mapping,) = [found for found in SamTemplate.load().stream_mappings if found.function == "LifecycleEventsFunction"]
    assert mapping.filter_patterns == ()
    assert all(
        matches_any(mapping.filter_patterns, _record(name, None, "active")) for name in ("INSERT", "MODIFY", "REMOVE")
    )


@pytest.mark.parametrize("status", [status.value for status in LeaseStatus if status in LIVE])
def test_ttl_deletion_of_a_live_lease_passes_the_template_filter(ttl_filters: Any, status: str) -> None:
    assert matches_any(ttl_filters, _record("REMOVE", TTL, status))


@pytest.mark.parametrize("status", [status.value for status in LeaseStatus if status in ENDED])
def test_ttl_deletion_of_an_ended_lease_is_filtered_out(ttl_filters: Any, status: str) -> None:
    assert not matches_any(ttl_filters, _record("REMOVE", TTL, status))


def test_user_deletion_is_filtered_out(ttl_filters: Any) -> None:
    assert not matches_any(ttl_filters, _record("REMOVE", None, "active"))


def test_deletion_by_another_principal_is_filtered_out(ttl_filters: Any) -> None:
    other = {"type": "Service", "principalId": "lambda.amazonaws.com"}
    assert not matches_any(ttl_filters, _record("REMOVE", other, "active"))


def test_modify_is_filtered_out(ttl_filters: Any) -> None:
    assert not matches_any(ttl_filters, _record("MODIFY", TTL, "active"))


def _change(event_name: str, old: str | None, new: str | None) -> dict[str, Any]:
    images = {name: {"status": {"S": status}} for name, status in (("OldImage", old), ("NewImage", new)) if status}
    return {"eventName": event_name, "dynamodb": {"Keys": {"lease_id": {"S": "x"}}, **images}}


@pytest.mark.parametrize("old", [status.value for status in LeaseStatus])
@pytest.mark.parametrize("new", [status.value for status in LeaseStatus])
def test_a_change_passes_the_filter_exactly_when_the_handler_serves_the_queue_for_it(
    ttl_filters: Any, old: str, new: str
) -> None:
    record = _change("MODIFY", old, new)
    assert matches_any(ttl_filters, record) is may_free_capacity(record)


@pytest.mark.parametrize("status", [status.value for status in LeaseStatus])
def test_a_new_lease_passes_the_filter_only_when_it_joins_the_queue(ttl_filters: Any, status: str) -> None:
    record = _change("INSERT", None, status)
    assert matches_any(ttl_filters, record) is may_free_capacity(record) is (status == "queued")


def test_the_end_of_a_lease_that_held_capacity_passes_and_a_queued_leases_end_does_not(ttl_filters: Any) -> None:
    assert matches_any(ttl_filters, _change("MODIFY", "releasing", "released"))
    assert matches_any(ttl_filters, _change("MODIFY", "pending", "failed"))
    assert not matches_any(ttl_filters, _change("MODIFY", "queued", "expired"))
    assert not matches_any(ttl_filters, _change("MODIFY", "active", "releasing"))


def test_no_filters_pass_everything() -> None:
    assert matches_any((), {"anything": 1})


@pytest.mark.parametrize(
    ("rule", "value", "expected"),
    [
        ({"prefix": "lea"}, "lease-1", True),
        ({"prefix": "pod"}, "lease-1", False),
        ({"suffix": "-1"}, "lease-1", True),
        ({"anything-but": ["a", "b"]}, "c", True),
        ({"anything-but": ["a", "b"]}, "a", False),
        ({"numeric": [">", 5, "<=", 10]}, 10, True),
        ({"numeric": [">", 5]}, 5, False),
    ],
)
def test_content_filter_operators(rule: dict[str, Any], value: Any, expected: bool) -> None:
    assert matches({"field": [rule]}, {"field": value}) is expected


def test_exists_false_matches_a_missing_field() -> None:
    assert matches({"userIdentity": [{"exists": False}]}, {"eventName": "REMOVE"})
