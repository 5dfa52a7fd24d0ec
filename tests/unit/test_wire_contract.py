"""openapi.yaml is the one source of the wire contract. scheduler/wire.py is what scripts/wire_contract.py makes of
it, field by field, and every piece of code that speaks the contract by hand (the Lease, the enums, the request
models, the template's live statuses) agrees with wire.py. Each failure names the field and what to change.
"""

from __future__ import annotations

import copy
import inspect
import re
from enum import StrEnum
from types import ModuleType
from typing import Any

import pytest

from devstack.template import SamTemplate
from scheduler import wire
from scheduler.api.queries import LogsQuery, OwnerReleaseQuery, QueueQuery
from scheduler.callers.model import Role
from scheduler.callers.registry import CallerRequest, RotateRequest
from scheduler.events.reads import EventsQuery
from scheduler.lifecycle import ENDED, HOLDING, LIVE, LeaseStatus, WorkerState
from scheduler.models import GpuClass, Lease, ListFilter, ReadQuery, RenewRequest, WorkerKind
from scheduler.request_models import LeaseRequest, UsageGrouping, UsageQuery
from scheduler.webhooks.model import WebhookRequest, WebhooksQuery
from scripts.wire_contract import TARGET, ContractError, contract, differences, load, render
from tests.unit.test_models import make_lease

# Each table of request rules, and the model that reads it.
MODELS: dict[str, Any] = {
    "LEASE_REQUEST": LeaseRequest,
    "RENEW_REQUEST": RenewRequest,
    "LIST_LEASES_QUERY": ListFilter,
    "RELEASE_OWNER_LEASES_QUERY": OwnerReleaseQuery,
    "GET_LEASE_QUERY": ReadQuery,
    "GET_USAGE_QUERY": UsageQuery,
    "GET_LEASE_LOGS_QUERY": LogsQuery,
    "GET_QUEUE_QUERY": QueueQuery,
    "CALLER_REQUEST": CallerRequest,
    "ROTATE_REQUEST": RotateRequest,
    "WEBHOOK_REQUEST": WebhookRequest,
    "LIST_WEBHOOKS_QUERY": WebhooksQuery,
    "LIST_LEASE_EVENTS_QUERY": EventsQuery,
}
# Each enum a request's value is read into, and where openapi.yaml's values for it are.
ENUMS: dict[tuple[str, str], type[StrEnum]] = {
    ("LEASE_REQUEST", "kind"): WorkerKind,
    ("LEASE_REQUEST", "gpu"): GpuClass,
    ("LIST_LEASES_QUERY", "kind"): WorkerKind,
    ("GET_USAGE_QUERY", "group_by"): UsageGrouping,
    ("CALLER_REQUEST", "role"): Role,
}
FLAGS = {("GET_LEASE_LOGS_QUERY", "timestamps")}  # read as a boolean: `true` or `false`


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    return load()


@pytest.fixture(scope="module")
def made(spec: dict[str, Any]) -> ModuleType:
    """The module `make contract` writes from openapi.yaml as it is: what a change of openapi.yaml alone is to
    differ from (so that these tests say one thing each, whether or not wire.py is stale)."""
    module = ModuleType("made_wire")
    exec(compile(render(contract(spec)), "made_wire", "exec"), module.__dict__)  # noqa: S102 - our own output
    return module


def _mismatches(code: str, have: tuple[str, ...], contract_name: str, want: tuple[str, ...], fix: str) -> list[str]:
    found = [
        f"{code} lacks `{name}`, which openapi.yaml's {contract_name} has: {fix}" for name in want if name not in have
    ]
    found += [
        f"{code} has `{name}`, which openapi.yaml's {contract_name} does not" for name in have if name not in want
    ]
    if not found and have != want:
        found.append(f"{code} orders {', '.join(have)}; openapi.yaml's {contract_name}: {', '.join(want)}")
    return found


# --- wire.py is what openapi.yaml makes -------------------------------------------------------------------------


def test_wire_py_is_what_openapi_yaml_makes(spec: dict[str, Any]) -> None:
    constants = contract(spec)
    found = differences(constants, wire)
    assert not found, "\n".join(found)
    assert TARGET.read_text() == render(constants), "scheduler/wire.py is not as `make contract` writes it: run it"


def test_a_bound_changed_in_openapi_yaml_alone_is_named(spec: dict[str, Any], made: ModuleType) -> None:
    changed = copy.deepcopy(spec)
    changed["components"]["schemas"]["LeaseRequest"]["properties"]["ttl_seconds"]["maximum"] = 30000
    assert differences(contract(changed), made) == [
        "openapi.yaml LeaseRequest.ttl_seconds maximum is 30000 but scheduler/wire.py says 28800: run `make contract`"
    ]


def test_a_query_bound_dropped_from_openapi_yaml_alone_is_named(spec: dict[str, Any], made: ModuleType) -> None:
    changed = copy.deepcopy(spec)
    del changed["paths"]["/v1/leases"]["get"]["parameters"][2]["schema"]["maxLength"]
    assert differences(contract(changed), made) == [
        "openapi.yaml listLeases query parameter provider has no maxLength but scheduler/wire.py says 64: "
        "run `make contract`"
    ]


def test_a_lease_property_added_to_openapi_yaml_alone_is_named(spec: dict[str, Any], made: ModuleType) -> None:
    changed = copy.deepcopy(spec)
    changed["components"]["schemas"]["Lease"]["properties"]["foo"] = {"type": ["string", "null"]}
    assert differences(contract(changed), made) == [
        "openapi.yaml Lease has a property `foo` that scheduler/wire.py lacks: run `make contract`",
        "openapi.yaml Lease has a nullable property `foo` that scheduler/wire.py lacks: run `make contract`",
    ]


def test_a_request_field_added_to_openapi_yaml_alone_is_named(spec: dict[str, Any], made: ModuleType) -> None:
    changed = copy.deepcopy(spec)
    changed["components"]["schemas"]["LeaseRequest"]["properties"]["deadline"] = {"type": "integer", "maximum": 9}
    assert differences(contract(changed), made) == [
        "openapi.yaml LeaseRequest has a property `deadline` that scheduler/wire.py lacks: run `make contract`"
    ]


def test_a_status_added_to_openapi_yaml_alone_is_named(spec: dict[str, Any], made: ModuleType) -> None:
    changed = copy.deepcopy(spec)
    changed["components"]["schemas"]["LeaseStatus"]["enum"].append("suspended")
    assert differences(contract(changed), made) == [
        "openapi.yaml LeaseStatus has a value `suspended` that scheduler/wire.py lacks: run `make contract`"
    ]


@pytest.mark.parametrize(
    ("where", "key", "value", "refusal"),
    [
        (("LeaseRequest", "ttl_seconds"), "multipleOf", 60, "`multipleOf`, which the validation does not apply"),
        (("LeaseRequest", "region"), "format", "email", "format 'email' is none the validation checks"),
        (("LeaseRequest", "region"), "pattern", "[a-z]+", "must be anchored"),
        (("LeaseRequest", "region"), "pattern", "^\\d+$", "uses \\d"),
        (("LeaseRequest", "region"), "pattern", "^a|b$", "group a top-level alternative"),
        (("LeaseRequest", "region"), "type", "null", "needs one `type` (besides null)"),
        (("LeaseRequest", "preemptible"), "minimum", 1, "`minimum`, which the validation does not apply"),
    ],
)
def test_a_rule_the_validation_cannot_apply_is_refused_not_left_out(
    spec: dict[str, Any], where: tuple[str, str], key: str, value: object, refusal: str
) -> None:
    changed = copy.deepcopy(spec)
    schema, field = where
    changed["components"]["schemas"][schema]["properties"][field] = {"type": "string", key: value}
    with pytest.raises(ContractError, match=re.escape(refusal)):
        contract(changed)


def test_a_body_that_takes_unknown_properties_is_refused(spec: dict[str, Any]) -> None:
    changed = copy.deepcopy(spec)
    changed["components"]["schemas"]["RenewRequest"]["additionalProperties"] = True
    with pytest.raises(ContractError, match="RenewRequest must say additionalProperties: false"):
        contract(changed)


# --- the code that speaks the contract agrees with wire.py ------------------------------------------------------


def test_the_server_lease_has_every_property_of_openapi_s_lease_in_its_order() -> None:
    fix = "add it to FIELDS, the annotations, __init__ and wire()"
    found = _mismatches("models.Lease.FIELDS", Lease.FIELDS, "Lease", wire.LEASE_FIELDS, fix)
    found += _mismatches("models.Lease.wire()", tuple(make_lease().wire()), "Lease", wire.LEASE_FIELDS, fix)
    found += _mismatches("models.Lease()", tuple(inspect.signature(Lease).parameters), "Lease", wire.LEASE_FIELDS, fix)
    found += _mismatches("models.Lease's annotations", tuple(Lease.__annotations__), "Lease", wire.LEASE_FIELDS, fix)
    assert not found, "\n".join(found)


def test_what_the_server_lease_may_leave_null_is_what_openapi_yaml_lets_be_null() -> None:
    defaults_none = tuple(name for name, p in inspect.signature(Lease).parameters.items() if p.default is None)
    fix = "give it the default None in models.Lease()"
    assert (
        _mismatches("models.Lease()'s None defaults", defaults_none, "Lease (nullable)", wire.LEASE_NULLABLE, fix) == []
    )
    assert set(wire.LEASE_REQUIRED) <= set(make_lease().wire()), "every property openapi.yaml requires is written"


@pytest.mark.parametrize(
    ("code", "values", "contract_name", "want"),
    [
        ("lifecycle.LeaseStatus", tuple(LeaseStatus), "LeaseStatus", wire.LEASE_STATUSES),
        (
            "lifecycle.LIVE",
            tuple(status for status in LeaseStatus if status in LIVE),
            "LiveLease",
            wire.LIVE_LEASE_STATUSES,
        ),
        ("lifecycle.WorkerState", tuple(WorkerState), "Lease.worker_state", wire.WORKER_STATES),
        ("models.WorkerKind", tuple(WorkerKind), "WorkerKind", wire.WORKER_KINDS),
        ("models.GpuClass", tuple(GpuClass), "GpuClass", wire.GPU_CLASSES),
    ],
)
def test_the_enums_are_openapi_yaml_s(
    code: str, values: tuple[str, ...], contract_name: str, want: tuple[str, ...]
) -> None:
    fix = "declare it in lifecycle.py (with its transitions) or models.py first"
    assert _mismatches(code, tuple(str(value) for value in values), contract_name, want, fix) == []


def test_every_enum_a_request_is_read_into_holds_the_rule_s_values() -> None:
    choices = {(table, field) for table in MODELS for field, rule in getattr(wire, table).items() if "enum" in rule}
    assert choices == set(ENUMS) | FLAGS, "name the enum (or flag) each choice of openapi.yaml is read into"
    for (table, field), enum in ENUMS.items():
        want = getattr(wire, table)[field]["enum"]
        assert _mismatches(enum.__name__, tuple(enum), f"{table} {field}", want, "add the member") == []


@pytest.mark.parametrize("table", sorted(MODELS))
def test_each_request_model_has_a_field_per_rule_in_order(table: str) -> None:
    model = MODELS[table]
    fields = tuple(inspect.signature(model).parameters)
    fix = f"add it to {model.__name__} and read it in parse()"
    assert _mismatches(f"{model.__module__}.{model.__name__}", fields, table, tuple(getattr(wire, table)), fix) == []


def as_sent(value: object, table: str = "") -> object:
    """A model's value as a request sends it: an enum as its value, a query's flag as `true` or `false` (a body's
    boolean as itself)."""
    if isinstance(value, bool):
        return value if not table.endswith("_QUERY") else ("true" if value else "false")
    return value.value if isinstance(value, StrEnum) else value


@pytest.mark.parametrize(
    ("table", "field"),
    [(table, field) for table in MODELS for field, rule in getattr(wire, table).items() if "default" in rule],
)
def test_each_request_model_defaults_a_field_as_its_rule_does(table: str, field: str) -> None:
    default = inspect.signature(MODELS[table]).parameters[field].default
    assert as_sent(default, table) == getattr(wire, table)[field]["default"]


def test_every_table_of_request_rules_has_its_model() -> None:
    tables = {constant.name for constant in contract(load()) if constant.typed and constant.name != "HEADERS"}
    assert tables == set(MODELS), "name the model that reads each request's rules in MODELS"


def test_the_stored_form_of_an_acquire_names_every_field_of_the_body() -> None:
    assert tuple(LeaseRequest.parse({"kind": "renderer"}).as_json()) == tuple(wire.LEASE_REQUEST)


def test_the_ttl_stream_passes_the_ttl_deletions_of_exactly_the_live_statuses() -> None:
    (mapping,) = [m for m in SamTemplate.load().stream_mappings if m.function == "TtlStreamFunction"]
    deletions = [pattern for pattern in mapping.filter_patterns if pattern.get("eventName") == ["REMOVE"]]
    statuses = [pattern["dynamodb"]["OldImage"]["status"]["S"] for pattern in deletions]
    live = [status.value for status in LeaseStatus if status in LIVE]
    assert statuses == [live], "template.yaml's TtlDeletions FilterCriteria must name lifecycle.LIVE, in its order"


def test_the_ttl_stream_passes_the_ends_of_leases_that_held_capacity_and_new_queued_leases() -> None:
    (mapping,) = [m for m in SamTemplate.load().stream_mappings if m.function == "TtlStreamFunction"]
    ends = [pattern for pattern in mapping.filter_patterns if pattern.get("eventName") == ["MODIFY"]]
    inserts = [pattern for pattern in mapping.filter_patterns if pattern.get("eventName") == ["INSERT"]]
    holding = [status.value for status in LeaseStatus if status in HOLDING]
    ended = [status.value for status in LeaseStatus if status in ENDED]
    assert [pattern["dynamodb"]["OldImage"]["status"]["S"] for pattern in ends] == [holding]
    assert [pattern["dynamodb"]["NewImage"]["status"]["S"] for pattern in ends] == [ended]
    assert [pattern["dynamodb"]["NewImage"]["status"]["S"] for pattern in inserts] == [[LeaseStatus.QUEUED.value]]


def test_the_acquire_body_s_owner_is_an_owner_query_s_or_absent() -> None:
    # The body's refusal quotes an owner's pattern (request_models._NOT_AN_OWNER): they must be the same rule.
    owner = wire.LIST_LEASES_QUERY["owner_id"]["pattern"]
    assert wire.LEASE_REQUEST["owner_id"]["pattern"] == f"({owner})?"
    assert (
        wire.RELEASE_OWNER_LEASES_QUERY["owner_id"]["pattern"] == wire.GET_USAGE_QUERY["owner_id"]["pattern"] == owner
    )
