"""The local gateway authorizes each route as the template says for the AUTH_MODE, as API Gateway does: the token
authorizer's answer cached AUTH_CACHE_SECONDS per token (so a cached authorization reads no registry), SigV4
verified and the principal handed on, the shared secret's authorizer unchanged."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from devstack.gateway import LocalHttpApi
from devstack.sigv4 import Principal
from devstack.template import SamTemplate

ANIM = Principal("AKIALOCALANIM0000001", "anim-secret-key-0123456789", "arn:aws:iam::000000000000:user/anim")


class FakeLambdas:
    """Every function answers with the authorizer context it was handed; the authorizer lets everyone through."""

    def __init__(self) -> None:
        self.authorizations: list[dict[str, Any]] = []
        self.invoked: list[str] = []

    def invoke(self, function: str, event: dict[str, Any], request_id: str | None = None) -> Any:
        self.invoked.append(function)
        if function == "AuthorizerFunction":
            self.authorizations.append(event)
            return {"isAuthorized": True, "context": {"caller": "anim", "role": "service", "owners": "[]"}}
        return {"statusCode": 200, "body": json.dumps(event["requestContext"].get("authorizer"))}


def serve(monkeypatch: pytest.MonkeyPatch, **environment: str) -> Iterator[tuple[str, FakeLambdas]]:
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    lambdas = FakeLambdas()
    api = LocalHttpApi(("127.0.0.1", 0), SamTemplate.load(), lambdas, {ANIM.access_key_id: ANIM})  # type: ignore[arg-type]
    thread = threading.Thread(target=api.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{api.server_port}", lambdas
    finally:
        api.shutdown()
        api.server_close()


@pytest.fixture
def token_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, FakeLambdas]]:
    yield from serve(monkeypatch, AUTH_MODE="token", AUTH_CACHE_SECONDS="60")


@pytest.fixture
def uncached_token_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, FakeLambdas]]:
    yield from serve(monkeypatch, AUTH_MODE="token", AUTH_CACHE_SECONDS="0")


@pytest.fixture
def iam_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, FakeLambdas]]:
    yield from serve(monkeypatch, AUTH_MODE="iam")


def test_a_tokens_authorization_is_cached_for_auth_cache_seconds(token_api: tuple[str, FakeLambdas]) -> None:
    url, lambdas = token_api
    for _ in range(3):
        answer = requests.get(url + "/v1/leases", headers={"Authorization": "Bearer t1"}, timeout=10)
        assert answer.json() == {"lambda": {"caller": "anim", "role": "service", "owners": "[]"}}
    requests.get(url + "/v1/leases", headers={"Authorization": "Bearer t2"}, timeout=10)
    assert [event["identitySource"] for event in lambdas.authorizations] == [["Bearer t1"], ["Bearer t2"]]


def test_without_a_cache_every_request_is_authorized_again(uncached_token_api: tuple[str, FakeLambdas]) -> None:
    url, lambdas = uncached_token_api
    for _ in range(3):
        requests.get(url + "/v1/leases", headers={"Authorization": "Bearer t1"}, timeout=10)
    assert len(lambdas.authorizations) == 3


def test_token_mode_without_authorization_is_api_gateways_401(token_api: tuple[str, FakeLambdas]) -> None:
    url, lambdas = token_api
    answer = requests.get(url + "/v1/leases", headers={"X-Internal-Secret": "s"}, timeout=10)
    assert (answer.status_code, answer.json(), lambdas.invoked) == (401, {"message": "Unauthorized"}, [])


def test_a_signed_request_hands_the_function_its_principal(iam_api: tuple[str, FakeLambdas]) -> None:
    url, lambdas = iam_api
    request = AWSRequest(method="GET", url=url + "/v1/usage?since=2026-12-01")
    SigV4Auth(Credentials(ANIM.access_key_id, ANIM.secret_access_key), "execute-api", "us-east-1").add_auth(request)
    answer = requests.get(url + "/v1/usage?since=2026-12-01", headers=dict(request.headers.items()), timeout=10)
    assert answer.status_code == 200
    iam = answer.json()["iam"]
    assert (iam["userArn"], iam["accessKey"], iam["accountId"]) == (ANIM.arn, ANIM.access_key_id, "000000000000")
    assert lambdas.authorizations == []


def test_an_unsigned_request_never_reaches_a_function(iam_api: tuple[str, FakeLambdas]) -> None:
    url, lambdas = iam_api
    answer = requests.get(url + "/v1/leases", headers={"Authorization": "Bearer t1"}, timeout=10)
    assert answer.status_code == 403 and lambdas.invoked == []


def test_health_stays_open_in_iam_mode(iam_api: tuple[str, FakeLambdas]) -> None:
    url, lambdas = iam_api
    assert requests.get(url + "/health", timeout=10).status_code == 200
    assert lambdas.invoked == ["HealthFunction"]
