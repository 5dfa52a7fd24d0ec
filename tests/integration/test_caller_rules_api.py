"""Who may do what, through the local stack (`make run`) on a real Docker host: in AUTH_MODE=token (bearer tokens
the bootstrap operator `admin` hands out) and AUTH_MODE=iam (requests signed by botocore's SigV4Auth). A `service`
caller is refused every operation on another owner's lease, owners and usage — and that lease stays as it was,
its container running; a `viewer` reads everything and changes nothing; an `operator` does each of them.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple
from urllib.parse import urlencode

import pytest
import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from devstack.auth import principals_json
from devstack.sigv4 import Principal
from tests.support.stack import RunningStack, start_stack

LEASE_LABEL = "openalice.scheduler/lease-id"
STACK_ENV = {"RECONCILE_INTERVAL_SECONDS": "3600", "LOCAL_DOCKER_COST_PER_HOUR": "0.5", "AUTH_CACHE_SECONDS": "2"}


class Caller(NamedTuple):
    """Sends requests as one caller: with its bearer token, or signed as its IAM principal."""

    stack: RunningStack
    token: str | None = None
    principal: Principal | None = None

    def __call__(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: dict[str, str] | None = None,
        **query: str,
    ) -> requests.Response:
        url = self.stack.url + path + (f"?{urlencode(query)}" if query else "")
        data = json.dumps(body).encode() if body is not None else b""
        sent = {"Content-Type": "application/json", **(headers or {})}
        if self.token is not None:
            sent["Authorization"] = f"Bearer {self.token}"
        if self.principal is not None:
            request = AWSRequest(method=method, url=url, data=data, headers=sent)
            key = self.principal
            SigV4Auth(
                Credentials(key.access_key_id, key.secret_access_key, key.session_token), "execute-api", "us-east-1"
            ).add_auth(request)
            sent = dict(request.headers.items())
        return requests.request(method, url, data=data, headers=sent, timeout=60)


class Callers(NamedTuple):
    service: Caller  # "anim", owner anim-service
    other: Caller  # "live", owner live-control: whose leases the service must never reach
    viewer: Caller
    operator: Caller


def acquire(caller: Caller, key: str | None = None, **body: Any) -> dict[str, Any]:
    headers = {"Idempotency-Key": key} if key else None
    response = caller("POST", "/v1/lease", {"kind": "renderer", "ttl_seconds": 900, **body}, headers)
    assert response.status_code == 201, response.text
    return dict(response.json()["lease"])


def containers(docker_client: Any, lease_id: str) -> list[Any]:
    return docker_client.containers.list(filters={"label": f"{LEASE_LABEL}={lease_id}", "status": "running"})


def untouched(callers: Callers, docker_client: Any, lease: dict[str, Any]) -> bool:
    """The other owner's lease reads as it was (its owner asking), and its container still runs."""
    now = callers.other("GET", f"/v1/lease/{lease['lease_id']}").json()["lease"]
    same = {name: now[name] for name in ("status", "expires_at", "ended_by")} == {
        "status": "active",
        "expires_at": lease["expires_at"],
        "ended_by": None,
    }
    return same and len(containers(docker_client, lease["lease_id"])) == 1


def as_if_absent(response: requests.Response, lease_id: str, missing: requests.Response, nobodys: str) -> bool:
    """Whether `response` is word for word the answer about a lease that does not exist."""
    return (response.status_code, response.text.replace(lease_id, "<id>"), response.headers.get("Content-Type")) == (
        missing.status_code,
        missing.text.replace(nobodys, "<id>"),
        missing.headers.get("Content-Type"),
    )


# What a service may not do to another owner (`live-control`) and its lease `{L}`, and how it is refused.
REFUSED: dict[str, tuple[int, Callable[[Caller, str], requests.Response]]] = {
    "list its leases": (403, lambda c, _: c("GET", "/v1/leases", owner_id="live-control")),
    "read its lease": (404, lambda c, lease: c("GET", f"/v1/lease/{lease}")),
    "read its logs": (404, lambda c, lease: c("GET", f"/v1/lease/{lease}/logs")),
    "renew its lease": (404, lambda c, lease: c("POST", f"/v1/lease/{lease}/renew", {"ttl_seconds": 1200})),
    "release its lease": (404, lambda c, lease: c("DELETE", f"/v1/lease/{lease}")),
    "release as it": (
        403,
        lambda c, lease: c("DELETE", f"/v1/lease/{lease}", headers={"X-Lease-Owner": "live-control"}),
    ),
    "bulk release its leases": (403, lambda c, _: c("DELETE", "/v1/leases", owner_id="live-control")),
    "read its usage": (403, lambda c, _: c("GET", "/v1/usage", owner_id="live-control")),
    "acquire under it": (403, lambda c, _: c("POST", "/v1/lease", {"kind": "renderer", "owner_id": "live-control"})),
}
CHANGES: dict[str, Callable[[Caller, str], requests.Response]] = {
    "acquire": lambda c, _: c("POST", "/v1/lease", {"kind": "renderer", "owner_id": "live-control"}),
    "renew": lambda c, lease: c("POST", f"/v1/lease/{lease}/renew", {}),
    "release": lambda c, lease: c("DELETE", f"/v1/lease/{lease}"),
    "bulk release": lambda c, _: c("DELETE", "/v1/leases", owner_id="live-control"),
}


def check_refusals(callers: Callers, docker_client: Any, operation: str) -> None:
    lease = acquire(callers.other)
    status, attempt = REFUSED[operation]
    response = attempt(callers.service, lease["lease_id"])
    assert response.status_code == status, response.text
    if status == 404:
        nobodys = str(uuid.uuid4())
        assert as_if_absent(response, lease["lease_id"], attempt(callers.service, nobodys), nobodys)
    assert untouched(callers, docker_client, lease)


def check_what_a_service_sees_of_its_own(callers: Callers, docker_client: Any) -> None:
    """Without owner_id a list, a bulk release and a usage report cover its own owners; another caller's
    Idempotency-Key makes a lease of its own."""
    others = acquire(callers.other, key="job-7")
    ended = acquire(callers.other)
    assert callers.other("DELETE", f"/v1/lease/{ended['lease_id']}").status_code == 204  # live-control has usage
    own = acquire(callers.service)
    listed = [lease["lease_id"] for lease in callers.service("GET", "/v1/leases").json()["leases"]]
    assert own["lease_id"] in listed and others["lease_id"] not in listed
    usage = callers.service("GET", "/v1/usage").json()["usage"]
    assert {row["owner_id"] for row in usage} <= {"anim-service"}
    replayed = acquire(callers.service, key="job-7")
    assert replayed["lease_id"] != others["lease_id"] and replayed["owner_id"] == "anim-service"
    refused = callers.service(
        "POST",
        "/v1/lease",
        {"kind": "renderer", "ttl_seconds": 900, "owner_id": "live-control"},
        {"Idempotency-Key": "job-7"},
    )
    assert refused.status_code == 403
    released = callers.service("DELETE", "/v1/leases").json()
    assert sorted(lease["lease_id"] for lease in released["released"]) == sorted(
        [own["lease_id"], replayed["lease_id"]]
    )
    assert {lease["ended_by"] for lease in released["released"]} == {own["created_by"]}
    assert untouched(callers, docker_client, others)


def check_a_viewer(callers: Callers, docker_client: Any) -> None:
    lease = acquire(callers.other)
    lease_id = lease["lease_id"]
    assert lease_id in [listed["lease_id"] for listed in callers.viewer("GET", "/v1/leases").json()["leases"]]
    for path in (f"/v1/lease/{lease_id}", f"/v1/lease/{lease_id}/logs", "/v1/usage"):
        assert callers.viewer("GET", path).status_code == 200, path
    for name, change in CHANGES.items():
        response = change(callers.viewer, lease_id)
        assert (response.status_code, response.json()["error"]["code"]) == (403, "forbidden"), name
    assert untouched(callers, docker_client, lease)


def check_an_operator(callers: Callers, docker_client: Any, operator_name: str) -> None:
    lease = acquire(callers.other)
    lease_id = lease["lease_id"]
    operator = callers.operator
    assert lease_id in [
        listed["lease_id"] for listed in operator("GET", "/v1/leases", owner_id="live-control").json()["leases"]
    ]
    for path in (f"/v1/lease/{lease_id}", f"/v1/lease/{lease_id}/logs"):
        assert operator("GET", path).status_code == 200, path
    assert operator("GET", "/v1/usage", owner_id="live-control").status_code == 200
    assert operator("POST", f"/v1/lease/{lease_id}/renew", {"ttl_seconds": 1200}).json()["lease"]["ttl_seconds"] == 1200
    made = acquire(operator, owner_id="live-control")
    assert (made["owner_id"], made["created_by"]) == ("live-control", operator_name)
    assert operator("DELETE", f"/v1/lease/{made['lease_id']}").status_code == 204
    released = operator("DELETE", "/v1/leases", owner_id="live-control").json()["released"]
    assert lease_id in [item["lease_id"] for item in released]  # with what earlier tests left of live-control's
    assert {item["ended_by"] for item in released} == {operator_name}
    assert containers(docker_client, lease_id) == []


# --- token mode ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def token_stack(docker_host: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    running = start_stack(
        tmp_path_factory.mktemp("token-rules"),
        docker_env=docker_host.env(),
        extra_env={"AUTH_MODE": "token", **STACK_ENV},
    )
    yield running
    running.stop()


@pytest.fixture(scope="module")
def by_token(token_stack: RunningStack) -> Callers:
    admin = Caller(token_stack, (token_stack.state_dir / "admin-token").read_text().strip())

    def added(name: str, role: str, owners: list[str]) -> Caller:
        response = admin("POST", "/v1/callers", {"name": name, "role": role, "owners": owners})
        assert response.status_code == 201, response.text
        return Caller(token_stack, response.json()["token"])

    return Callers(
        service=added("anim", "service", ["anim-service"]),
        other=added("live", "service", ["live-control"]),
        viewer=added("audit", "viewer", []),
        operator=added("ops", "operator", []),
    )


@pytest.mark.parametrize("operation", list(REFUSED))
def test_a_service_is_refused_each_cross_owner_operation_and_the_lease_stays_as_it_was(
    by_token: Callers, docker_client: Any, operation: str
) -> None:
    check_refusals(by_token, docker_client, operation)


def test_a_services_list_bulk_release_usage_and_idempotency_keys_cover_its_own_owners_only(
    by_token: Callers, docker_client: Any
) -> None:
    check_what_a_service_sees_of_its_own(by_token, docker_client)


def test_a_viewer_reads_every_owners_leases_and_changes_nothing(by_token: Callers, docker_client: Any) -> None:
    check_a_viewer(by_token, docker_client)


def test_an_operator_reads_and_changes_any_owners_leases(by_token: Callers, docker_client: Any) -> None:
    check_an_operator(by_token, docker_client, "ops")


def test_the_bootstrap_operator_releases_any_owners_lease_in_its_own_name(
    token_stack: RunningStack, by_token: Callers
) -> None:
    admin = Caller(token_stack, (token_stack.state_dir / "admin-token").read_text().strip())
    lease = acquire(by_token.other)
    assert admin("DELETE", f"/v1/lease/{lease['lease_id']}").status_code == 204
    ended = by_token.other("GET", f"/v1/lease/{lease['lease_id']}").json()["lease"]
    assert (ended["status"], ended["created_by"], ended["ended_by"]) == ("released", "live", "admin")


# --- iam mode --------------------------------------------------------------------------------------------------

ACCOUNT = "000000000000"
OPERATOR = Principal("AKIALOCALRULESOPS001", "rules-operator-secret-0123", f"arn:aws:iam::{ACCOUNT}:user/ops")
SESSIONS = {
    name: Principal(
        f"ASIALOCAL{name.upper():0<11}",
        f"{name}-role-secret-key-0123",
        f"arn:aws:sts::{ACCOUNT}:assumed-role/{name}/i-0abc",
        session_token=f"{name}-session-token",
    )
    for name in ("anim", "live", "audit")
}


@pytest.fixture(scope="module")
def iam_stack(docker_host: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    principals = {principal.access_key_id: principal for principal in (OPERATOR, *SESSIONS.values())}
    running = start_stack(
        tmp_path_factory.mktemp("iam-rules"),
        docker_env=docker_host.env(),
        extra_env={
            "AUTH_MODE": "iam",
            "LOCAL_IAM_PRINCIPALS": principals_json(principals),
            "OPERATOR_PRINCIPALS": OPERATOR.arn,
            **STACK_ENV,
        },
    )
    yield running
    running.stop()


@pytest.fixture(scope="module")
def by_signature(iam_stack: RunningStack) -> Callers:
    operator = Caller(iam_stack, principal=OPERATOR)
    for name, role, owners in (
        ("anim", "service", ["anim-service"]),
        ("live", "service", ["live-control"]),
        ("audit", "viewer", []),
    ):
        body = {"name": name, "role": role, "owners": owners, "principal_arn": f"arn:aws:iam::{ACCOUNT}:role/{name}"}
        response = operator("POST", "/v1/callers", body)
        assert response.status_code == 201, response.text
    return Callers(
        service=Caller(iam_stack, principal=SESSIONS["anim"]),
        other=Caller(iam_stack, principal=SESSIONS["live"]),
        viewer=Caller(iam_stack, principal=SESSIONS["audit"]),
        operator=operator,
    )


@pytest.mark.parametrize("operation", list(REFUSED))
def test_a_signed_service_is_refused_each_cross_owner_operation_and_the_lease_stays_as_it_was(
    by_signature: Callers, docker_client: Any, operation: str
) -> None:
    check_refusals(by_signature, docker_client, operation)


def test_a_signed_services_list_bulk_release_usage_and_idempotency_keys_cover_its_own_owners_only(
    by_signature: Callers, docker_client: Any
) -> None:
    check_what_a_service_sees_of_its_own(by_signature, docker_client)


def test_a_signed_viewer_reads_every_owners_leases_and_changes_nothing(
    by_signature: Callers, docker_client: Any
) -> None:
    check_a_viewer(by_signature, docker_client)


def test_an_operator_principal_reads_and_changes_any_owners_leases_in_its_own_name(
    by_signature: Callers, docker_client: Any
) -> None:
    check_an_operator(by_signature, docker_client, OPERATOR.arn)
