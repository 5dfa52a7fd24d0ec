"""Who is calling, through the local stack (`make run`) as API Gateway and Lambda run it: AUTH_MODE=token (bearer
tokens from the registry, the bootstrap operator's in `.local/admin-token`) and AUTH_MODE=iam (SigV4 signed by
botocore, verified by the local gateway as API Gateway verifies it)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from devstack.auth import principals_json
from devstack.sigv4 import INVALID_TOKEN, MISMATCH, Principal
from tests.support.stack import RunningStack, start_stack
from tests.support.waiting import wait_for

CACHE_SECONDS = 2
ANIM = {"name": "anim", "owners": ["anim-service"], "role": "service"}
OPERATOR = Principal("AKIALOCALOPERATOR001", "operator-secret-key-0123", "arn:aws:iam::000000000000:user/ops")
ANIM_ROLE = Principal(
    "ASIALOCALANIMROLE001",
    "anim-role-secret-key-0123",
    "arn:aws:sts::000000000000:assumed-role/anim/i-0abc",
    session_token="anim-session-token",
)
STRANGER = Principal("AKIALOCALSTRANGER001", "stranger-secret-key-0123", "arn:aws:iam::000000000000:user/stranger")


# --- token mode ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def token_stack(docker_host: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    running = start_stack(
        tmp_path_factory.mktemp("token-stack"),
        docker_env=docker_host.env(),
        extra_env={
            "AUTH_MODE": "token",
            "AUTH_CACHE_SECONDS": str(CACHE_SECONDS),
            "RECONCILE_INTERVAL_SECONDS": "3600",
        },
    )
    yield running
    running.stop()


def bearer(stack: RunningStack, method: str, path: str, token: str | None, **kwargs: Any) -> requests.Response:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return stack.request(method, path, secret="", headers=headers, **kwargs)


def admin(stack: RunningStack) -> str:
    return (stack.state_dir / "admin-token").read_text().strip()


def added(stack: RunningStack, **caller: Any) -> str:
    response = bearer(stack, "POST", "/v1/callers", admin(stack), json={**ANIM, **caller})
    assert response.status_code == 201, response.text
    return str(response.json()["token"])


def test_make_run_keeps_the_bootstrap_token_private(token_stack: RunningStack) -> None:
    path = token_stack.state_dir / "admin-token"
    assert path.stat().st_mode & 0o777 == 0o600
    assert bearer(token_stack, "GET", "/v1/callers", admin(token_stack)).status_code == 200


def test_an_unknown_a_revoked_and_a_malformed_token_get_one_answer(token_stack: RunningStack) -> None:
    revoked = added(token_stack, name="revoked-one")
    assert bearer(token_stack, "DELETE", "/v1/callers/revoked-one", admin(token_stack)).status_code == 204
    time.sleep(CACHE_SECONDS + 0.5)
    answers = [
        bearer(token_stack, "GET", "/v1/leases", token)
        for token in ("oas_" + "A" * 43, revoked, "oas_short", "not even a token")
    ]
    assert {answer.status_code for answer in answers} == {401}
    assert len({answer.text for answer in answers}) == 1
    assert answers[0].json()["error"]["code"] == "unauthorized"


def test_no_authorization_header_is_api_gateways_401(token_stack: RunningStack) -> None:
    response = bearer(token_stack, "GET", "/v1/leases", None)
    assert (response.status_code, response.json()) == (401, {"message": "Unauthorized"})


def test_an_operator_adds_a_service_caller_which_then_calls(token_stack: RunningStack) -> None:
    token = added(token_stack, name="anim-svc")
    assert bearer(token_stack, "GET", "/v1/leases", token).status_code == 200
    refused = bearer(token_stack, "GET", "/v1/callers", token)
    assert (refused.status_code, refused.json()["error"]["code"]) == (403, "forbidden")
    listed = bearer(token_stack, "GET", "/v1/callers", admin(token_stack)).json()["callers"]
    assert "anim-svc" in [caller["name"] for caller in listed] and token not in json.dumps(listed)


def test_a_removed_callers_token_is_refused_within_the_cache_period(token_stack: RunningStack) -> None:
    token = added(token_stack, name="short-lived")
    assert bearer(token_stack, "GET", "/v1/leases", token).status_code == 200
    removed_at = time.monotonic()
    assert bearer(token_stack, "DELETE", "/v1/callers/short-lived", admin(token_stack)).status_code == 204
    wait_for(lambda: bearer(token_stack, "GET", "/v1/leases", token).status_code == 401, timeout=CACHE_SECONDS + 3)
    assert time.monotonic() - removed_at <= CACHE_SECONDS + 1


def test_a_rotated_token_works_until_its_grace_ends(token_stack: RunningStack) -> None:
    old = added(token_stack, name="rotating")
    rotated = bearer(token_stack, "POST", "/v1/callers/rotating/rotate", admin(token_stack), json={"grace_seconds": 5})
    assert rotated.status_code == 201
    rotated_at = time.monotonic()
    new = rotated.json()["token"]
    time.sleep(CACHE_SECONDS + 0.5)  # past the authorizer's cache: the registry is asked again
    assert bearer(token_stack, "GET", "/v1/leases", old).status_code == 200
    assert bearer(token_stack, "GET", "/v1/leases", new).status_code == 200
    time.sleep(max(0.0, 5 + CACHE_SECONDS + 0.5 - (time.monotonic() - rotated_at)))
    assert bearer(token_stack, "GET", "/v1/leases", old).status_code == 401
    assert bearer(token_stack, "GET", "/v1/leases", new).status_code == 200


def test_no_token_reaches_a_log_line(token_stack: RunningStack) -> None:
    token = added(token_stack, name="quiet")
    bearer(token_stack, "GET", "/v1/leases", token)
    bearer(token_stack, "GET", "/v1/leases", token[:-1] + "x")  # refused: logged, but never the credential
    logs = token_stack.logs()
    assert "authorization refused" in logs
    assert token[4:20] not in logs and admin(token_stack)[:16] not in logs


# --- iam mode ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def iam_stack(docker_host: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    principals = {principal.access_key_id: principal for principal in (OPERATOR, ANIM_ROLE, STRANGER)}
    running = start_stack(
        tmp_path_factory.mktemp("iam-stack"),
        docker_env=docker_host.env(),
        extra_env={
            "AUTH_MODE": "iam",
            "AUTH_CACHE_SECONDS": str(CACHE_SECONDS),
            "LOCAL_IAM_PRINCIPALS": principals_json(principals),
            "OPERATOR_PRINCIPALS": OPERATOR.arn,
            "RECONCILE_INTERVAL_SECONDS": "3600",
        },
    )
    response = signed(
        running, "POST", "/v1/callers", OPERATOR, {**ANIM, "principal_arn": "arn:aws:iam::000000000000:role/anim"}
    )
    assert response.status_code == 201, response.text
    yield running
    running.stop()


def signed(
    stack: RunningStack, method: str, path: str, principal: Principal, body: Any = None, tamper: bool = False
) -> requests.Response:
    """A request signed by botocore's SigV4Auth as `principal`, sent as signed (or with its signature changed)."""
    data = json.dumps(body).encode() if body is not None else b""
    request = AWSRequest(method=method, url=stack.url + path, data=data, headers={"Content-Type": "application/json"})
    credentials = Credentials(principal.access_key_id, principal.secret_access_key, principal.session_token)
    SigV4Auth(credentials, "execute-api", "us-east-1").add_auth(request)
    headers = dict(request.headers.items())
    if tamper:
        headers["Authorization"] = headers["Authorization"][:-4] + "0000"
    return requests.request(method, stack.url + path, data=data, headers=headers, timeout=60)


def test_a_signed_request_is_its_principals_caller(iam_stack: RunningStack) -> None:
    assert signed(iam_stack, "GET", "/v1/leases", ANIM_ROLE).status_code == 200
    assert signed(iam_stack, "GET", "/v1/callers", OPERATOR).status_code == 200


def test_a_tampered_signature_is_refused_by_the_gateway(iam_stack: RunningStack) -> None:
    response = signed(iam_stack, "GET", "/v1/leases", ANIM_ROLE, tamper=True)
    assert (response.status_code, response.json()) == (403, {"message": MISMATCH})


def test_a_stale_signature_is_refused_by_the_gateway(iam_stack: RunningStack, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("botocore.auth.get_current_datetime", lambda: datetime.now(UTC) - timedelta(minutes=6))
    response = signed(iam_stack, "GET", "/v1/leases", ANIM_ROLE)
    assert response.status_code == 403 and response.json()["message"].startswith("Signature expired")


def test_a_refusal_by_the_gateway_is_one_log_line_and_a_gateway_auth_refused_metric(iam_stack: RunningStack) -> None:
    response = signed(iam_stack, "GET", "/v1/leases", ANIM_ROLE, tamper=True)
    request_id = response.headers["apigw-requestid"]

    def recorded() -> list[dict[str, object]]:
        found = []
        for line in iam_stack.logs().splitlines():
            if line.startswith("[gateway] ") and request_id in line:
                found.append(json.loads(line.removeprefix("[gateway] ")))
        return found

    wait_for(lambda: recorded(), timeout=5, what="the gateway's refusal line")
    (refusal,) = recorded()
    assert refusal["message"] == "authorization refused at the gateway"
    assert (refusal["route"], refusal["status"], refusal["reason"]) == ("GET /v1/leases", 403, MISMATCH)
    assert '"GatewayAuthRefused": 1' in iam_stack.logs()


def test_an_unknown_key_is_refused_by_the_gateway(iam_stack: RunningStack) -> None:
    unknown = Principal("AKIALOCALUNKNOWN0001", "whatever", "arn:aws:iam::000000000000:user/nobody")
    response = signed(iam_stack, "GET", "/v1/leases", unknown)
    assert (response.status_code, response.json()) == (403, {"message": INVALID_TOKEN})


def test_an_unsigned_request_is_refused_by_the_gateway(iam_stack: RunningStack) -> None:
    response = iam_stack.request("GET", "/v1/leases", secret="")
    assert (response.status_code, response.json()) == (403, {"message": "Forbidden"})


def test_an_unmapped_principal_is_forbidden_by_the_service(iam_stack: RunningStack) -> None:
    response = signed(iam_stack, "GET", "/v1/leases", STRANGER)
    assert (response.status_code, response.json()["error"]["code"]) == (403, "forbidden")


def test_health_needs_no_signature(iam_stack: RunningStack) -> None:
    assert iam_stack.request("GET", "/health", secret="").status_code == 200
