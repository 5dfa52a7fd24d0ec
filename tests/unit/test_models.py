"""Wire models: what a lease request may hold, and what a lease looks like on the wire (openapi.yaml's LeaseRequest,
RenewRequest and Lease; tests/unit/test_wire_contract.py holds their fields to it)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from unittest.mock import ANY

import pytest

from scheduler.errors import InvalidRequest
from scheduler.models import GpuClass, Lease, LeaseStatus, ListFilter, RenewRequest, WorkerKind
from scheduler.request_models import LeaseRequest

LABELS = ("owner_id", "correlation_id", "region")


def request(**body: Any) -> LeaseRequest:
    return LeaseRequest.parse({"kind": "renderer", **body})


# --- LeaseRequest: kind -------------------------------------------------------------------------


def test_kind_is_required() -> None:
    with pytest.raises(InvalidRequest):
        LeaseRequest.parse({})


@pytest.mark.parametrize("kind", ["renderer", "anim"])
def test_kind_accepts_renderer_and_anim(kind: str) -> None:
    assert request(kind=kind).kind == WorkerKind(kind)


@pytest.mark.parametrize("kind", ["video", "RENDERER", "", None, 1])
def test_kind_rejects_anything_else(kind: object) -> None:
    with pytest.raises(InvalidRequest):
        request(kind=kind)


# --- gpu ----------------------------------------------------------------------------------------


def test_gpu_defaults_to_none() -> None:
    assert request().gpu == GpuClass.NONE


@pytest.mark.parametrize("gpu", ["none", "entry", "mid", "high"])
def test_gpu_accepts_each_class(gpu: str) -> None:
    assert request(gpu=gpu).gpu == GpuClass(gpu)


@pytest.mark.parametrize("gpu", ["low", "HIGH", "", 2])
def test_gpu_rejects_unknown_class(gpu: object) -> None:
    with pytest.raises(InvalidRequest):
        request(gpu=gpu)


# --- ttl_seconds --------------------------------------------------------------------------------


def test_ttl_defaults_to_one_hour() -> None:
    assert request().ttl_seconds == 3600


@pytest.mark.parametrize("ttl", [1, 28800])
def test_ttl_accepts_its_bounds(ttl: int) -> None:
    assert request(ttl_seconds=ttl).ttl_seconds == ttl


@pytest.mark.parametrize("ttl", [0, -1, 28801])
def test_ttl_outside_1_to_28800_is_rejected(ttl: int) -> None:
    with pytest.raises(InvalidRequest):
        request(ttl_seconds=ttl)


@pytest.mark.parametrize("ttl", ["5", True, False, 5.0, 5.5, None])
def test_ttl_that_is_not_an_integer_is_rejected(ttl: object) -> None:
    with pytest.raises(InvalidRequest):
        request(ttl_seconds=ttl)


# --- other fields -------------------------------------------------------------------------------


def test_unknown_field_is_rejected() -> None:
    with pytest.raises(InvalidRequest):
        request(image="evil/image")


@pytest.mark.parametrize("field", LABELS)
def test_labels_are_optional(field: str) -> None:
    assert getattr(request(), field) is None


@pytest.mark.parametrize("field", LABELS)
def test_labels_accept_128_characters(field: str) -> None:
    assert getattr(request(**{field: "x" * 128}), field) == "x" * 128


@pytest.mark.parametrize("field", LABELS)
def test_labels_longer_than_128_characters_are_rejected(field: str) -> None:
    with pytest.raises(InvalidRequest):
        request(**{field: "x" * 129})


@pytest.mark.parametrize("field", LABELS)
def test_labels_that_are_not_strings_are_rejected(field: str) -> None:
    with pytest.raises(InvalidRequest):
        request(**{field: 123})


# --- env ----------------------------------------------------------------------------------------


def test_env_defaults_to_empty() -> None:
    assert request().env == {}


def test_env_accepts_64_entries() -> None:
    env = {f"VAR_{index}": "value" for index in range(64)}
    assert request(env=env).env == env


def test_env_with_65_entries_is_rejected() -> None:
    with pytest.raises(InvalidRequest):
        request(env={f"VAR_{index}": "value" for index in range(65)})


@pytest.mark.parametrize("key", ["A", "_", "_PRIVATE", "RENDER_QUALITY_2"])
def test_env_accepts_variable_name_keys(key: str) -> None:
    assert request(env={key: "1"}).env == {key: "1"}


@pytest.mark.parametrize("key", ["lower", "Mixed", "1ST", "A-B", "A B", "", "É", "A\n", "A\ud800"])
def test_env_key_that_is_not_a_variable_name_is_rejected(key: str) -> None:
    with pytest.raises(InvalidRequest):
        request(env={key: "1"})


@pytest.mark.parametrize("value", [1, True, None, ["x"], {"x": "y"}])
def test_env_value_that_is_not_a_string_is_rejected(value: object) -> None:
    with pytest.raises(InvalidRequest):
        request(env={"KEY": value})


def test_env_that_is_not_an_object_is_rejected() -> None:
    with pytest.raises(InvalidRequest):
        request(env=["KEY=value"])


# --- RenewRequest -------------------------------------------------------------------------------


def test_renew_ttl_is_optional() -> None:
    assert RenewRequest.parse({}).ttl_seconds is None


@pytest.mark.parametrize("ttl", [1, 600, 28800])
def test_renew_accepts_ttl_in_range(ttl: int) -> None:
    assert RenewRequest.parse({"ttl_seconds": ttl}).ttl_seconds == ttl


@pytest.mark.parametrize("ttl", [0, 28801, "60", True, 60.0])
def test_renew_rejects_ttl_that_is_not_an_integer_in_range(ttl: object) -> None:
    with pytest.raises(InvalidRequest) as refused:
        RenewRequest.parse({"ttl_seconds": ttl})
    assert refused.value.details == {"problems": [{"field": "ttl_seconds", "problem": ANY}]}


def test_renew_rejects_unknown_field() -> None:
    with pytest.raises(InvalidRequest) as refused:
        RenewRequest.parse({"ttl_seconds": 60, "expires_at": "2030-01-01T00:00:00Z"})
    assert refused.value.details == {"problems": [{"field": "expires_at", "problem": "Extra inputs are not permitted"}]}


# --- ListFilter ---------------------------------------------------------------------------------


def test_list_limit_defaults_to_100() -> None:
    assert ListFilter().limit == 100


@pytest.mark.parametrize("limit", [0, 1001])
def test_list_limit_outside_1_to_1000_is_rejected(limit: int) -> None:
    with pytest.raises(InvalidRequest):
        ListFilter.parse({"limit": str(limit)})


# --- Lease on the wire --------------------------------------------------------------------------


def make_lease(**fields: Any) -> Lease:
    created = datetime(2026, 11, 30, 4, 0, tzinfo=UTC)
    values: dict[str, Any] = {
        "lease_id": "0b6c2f0e-8f0e-4f54-9d8e-3c8a3e4d9a11",
        "provider": "local-docker",
        "kind": WorkerKind.ANIM,
        "gpu": GpuClass.MID,
        "status": LeaseStatus.ACTIVE,
        "endpoint": "http://127.0.0.1:18080",
        "created_at": created,
        "expires_at": created + timedelta(hours=1),
        "provider_token": "ctr-1",
        "owner_id": "alice",
        "ttl_seconds": 3600,
        "cost_per_hour": 0.25,
    }
    return Lease(**{**values, **fields})


def test_lease_times_are_rfc3339_utc_with_z() -> None:
    wire = make_lease(released_at=datetime(2026, 11, 30, 4, 30, tzinfo=UTC)).wire()
    assert (wire["created_at"], wire["expires_at"], wire["released_at"]) == (
        "2026-11-30T04:00:00Z",
        "2026-11-30T05:00:00Z",
        "2026-11-30T04:30:00Z",
    )


def test_lease_times_in_another_zone_are_written_in_utc() -> None:
    plus_two = timezone(timedelta(hours=2))
    wire = make_lease(created_at=datetime(2026, 11, 30, 6, 0, tzinfo=plus_two)).wire()
    assert wire["created_at"] == "2026-11-30T04:00:00Z"


def test_lease_times_are_written_in_whole_seconds() -> None:
    wire = make_lease(created_at=datetime(2026, 11, 30, 4, 0, 0, 987654, tzinfo=UTC)).wire()
    assert wire["created_at"] == "2026-11-30T04:00:00Z"


def test_lease_without_release_has_null_released_at() -> None:
    assert make_lease().wire()["released_at"] is None


def test_lease_enums_are_written_as_their_strings() -> None:
    wire = make_lease().wire()
    assert (wire["kind"], wire["gpu"], wire["status"]) == ("anim", "mid", "active")


def test_lease_without_endpoint_or_price_writes_nulls() -> None:
    wire = make_lease(endpoint=None, cost_per_hour=None).wire()
    assert (wire["endpoint"], wire["cost_per_hour"]) == (None, None)


def test_lease_wire_survives_a_json_round_trip() -> None:
    wire = make_lease().wire()
    assert json.loads(json.dumps(wire)) == wire
