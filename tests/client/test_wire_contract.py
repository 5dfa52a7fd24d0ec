"""The client speaks openapi.yaml's contract without reading it (it imports nothing of the service and no YAML):
each name and bound it writes itself is held to openapi.yaml here, as scripts/wire_contract.py reads it — the
Lease's properties, the statuses, kinds, GPU classes, worker states and groupings, the bounds it applies before
asking — and `leasectl` offers exactly those.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
from typing import Any

import pytest
from openalice_scheduler_client import models
from openalice_scheduler_client.cli import main

from scripts.wire_contract import contract, load
from tests.client.fake_scheduler import FakeScheduler

CONTRACT: dict[str, Any] = {constant.name: constant.value for constant in contract(load())}


def _rule(table: str, field: str) -> dict[str, Any]:
    rule: dict[str, Any] = CONTRACT[table][field]
    return rule


def test_the_client_lease_has_every_property_of_openapi_s_lease_in_its_order() -> None:
    fields = tuple(field.name for field in dataclasses.fields(models.Lease) if field.name != "raw")
    missing = [name for name in CONTRACT["LEASE_FIELDS"] if name not in fields]
    extra = [name for name in fields if name not in CONTRACT["LEASE_FIELDS"]]
    assert not missing, (
        f"the client's Lease lacks {missing}, which openapi.yaml's Lease has: add each, and to from_wire"
    )
    assert not extra, f"the client's Lease has {extra}, which openapi.yaml's Lease does not"
    assert fields == CONTRACT["LEASE_FIELDS"], "the client's Lease orders its fields otherwise than openapi.yaml"


def test_the_client_reads_every_property_of_a_lease() -> None:
    wire = {name: None for name in CONTRACT["LEASE_FIELDS"]}
    wire |= {"lease_id": "l-1", "kind": "renderer", "status": "active", "ttl_seconds": 60}
    wire |= {"created_at": "2026-11-30T04:00:00Z", "expires_at": "2026-11-30T05:00:00Z"}
    lease = models.Lease.from_wire(wire)
    assert set(lease.raw) == set(CONTRACT["LEASE_FIELDS"])


@pytest.mark.parametrize(
    ("client", "contract_name"),
    [
        ("STATUSES", "LEASE_STATUSES"),
        ("LISTED_STATUSES", "LIVE_LEASE_STATUSES"),
        ("KINDS", "WORKER_KINDS"),
        ("GPU_CLASSES", "GPU_CLASSES"),
        ("WORKER_STATES", "WORKER_STATES"),
    ],
)
def test_the_client_s_vocabulary_is_openapi_yaml_s(client: str, contract_name: str) -> None:
    assert getattr(models, client) == CONTRACT[contract_name], f"client models.{client} against openapi.yaml"


def test_live_and_ended_statuses_split_openapi_s_statuses() -> None:
    assert set(CONTRACT["LIVE_LEASE_STATUSES"]) == models.LIVE_STATUSES
    assert set(CONTRACT["LEASE_STATUSES"]) - set(CONTRACT["LIVE_LEASE_STATUSES"]) == models.ENDED_STATUSES
    assert set(models.USABLE_STATUSES) < models.LIVE_STATUSES


def test_the_client_s_own_bounds_are_openapi_yaml_s() -> None:
    from openalice_scheduler_client import cli_ops, cli_usage, client

    assert _rule("GET_LEASE_QUERY", "wait_ready")["maximum"] == client.MAX_WAIT_READY_SECONDS
    assert _rule("GET_LEASE_LOGS_QUERY", "tail")["maximum"] == cli_ops.MAX_TAIL
    assert _rule("GET_USAGE_QUERY", "group_by")["enum"] == cli_usage.GROUPINGS


def test_every_status_has_its_colour() -> None:
    from openalice_scheduler_client import cli_style

    assert set(cli_style.STATUS_COLOURS) == set(CONTRACT["LEASE_STATUSES"])


@pytest.mark.parametrize("status", CONTRACT["LEASE_STATUSES"])
def test_leasectl_lists_by_exactly_the_statuses_the_service_lists(fake: FakeScheduler, status: str) -> None:
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):  # argparse writes to sys.*
            code = main(
                ["--url", fake.url, "--secret", fake.secret, "list", "--status", status], stdout=out, stderr=err
            )
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    assert code == (0 if status in CONTRACT["LIVE_LEASE_STATUSES"] else 2), err.getvalue()


# --- the callers registry ----------------------------------------------------------------------------


def _schema(name: str) -> dict[str, Any]:
    schema: dict[str, Any] = load()["components"]["schemas"][name]
    return schema


def test_the_client_caller_has_every_property_of_openapi_s_caller_in_its_order() -> None:
    fields = tuple(field.name for field in dataclasses.fields(models.Caller) if field.name != "raw")

    assert fields == tuple(_schema("Caller")["properties"]), "the client's Caller against openapi.yaml's Caller"
    assert set(_schema("Caller")["required"]) == set(fields), "openapi.yaml's Caller requires another set of fields"


def test_the_client_reads_every_property_of_a_caller() -> None:
    wire = {name: None for name in _schema("Caller")["properties"]}
    wire |= {"name": "anim", "role": "service", "owners": ["anim-service"], "created_by": "admin"}
    wire |= {"created_at": "2026-12-01T00:00:00Z"}

    caller = models.Caller.from_wire(wire)

    assert set(caller.raw) == set(_schema("Caller")["properties"]) and caller.principal_arn is None


def test_what_adding_a_caller_returns_is_openapi_s_caller_created() -> None:
    from openalice_scheduler_client.callers import AddedCaller

    fields = {field.name for field in dataclasses.fields(AddedCaller) if field.name != "raw"}
    assert fields == set(_schema("CallerCreated")["properties"])


def test_the_client_s_roles_are_openapi_yaml_s() -> None:
    assert tuple(_schema("Role")["enum"]) == models.ROLES


def test_the_client_s_grace_bounds_are_openapi_yaml_s() -> None:
    from openalice_scheduler_client import callers, cli_callers

    rule = _rule("ROTATE_REQUEST", "grace_seconds")
    assert (rule["minimum"], rule["maximum"]) == (0, cli_callers.MAX_GRACE_SECONDS)
    assert rule["minimum"] <= callers.DEFAULT_GRACE_SECONDS <= rule["maximum"]


def test_what_leasectl_callers_add_sends_is_openapi_s_caller_request(fake: FakeScheduler) -> None:
    from tests.client.fake_callers import ADMIN_TOKEN

    fake.auth.mode = "token"
    out, err = io.StringIO(), io.StringIO()
    argv = ["--url", fake.url, "--token", ADMIN_TOKEN, "callers", "add", "ops", "--owner", "o", "--role", "operator"]
    assert main([*argv, "--principal-arn", "arn:aws:iam::123456789012:role/ops"], stdout=out, stderr=err) == 0

    (request,) = fake.calls("POST", "/v1/callers")
    assert set(request.body) == set(_schema("CallerRequest")["properties"])
    assert set(_schema("CallerRequest")["required"]) <= set(request.body)
