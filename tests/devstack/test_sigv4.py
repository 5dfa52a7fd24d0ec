"""The local stack's SigV4 verifier (`devstack/sigv4.py`) against requests signed by botocore's SigV4Auth, an
independent implementation: what it signs passes, and each change API Gateway refuses is refused."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from devstack.sigv4 import INVALID_TOKEN, MISMATCH, Principal, Refusal, SignedRequest, parse_principals, verify
from scheduler.errors import ConfigurationError

REGION = "us-east-1"
ANIM = Principal("AKIALOCALANIM0000001", "anim-secret-key-0123456789", "arn:aws:iam::000000000000:user/anim")
ROLE = Principal(
    "ASIALOCALROLE0000001",
    "role-secret-key-0123456789",
    "arn:aws:sts::000000000000:assumed-role/renderer/i-0abc",
    session_token="session-token-0123",
)
PRINCIPALS = {principal.access_key_id: principal for principal in (ANIM, ROLE)}
URL = "http://127.0.0.1:3000/v1/leases?owner_id=anim-service&limit=50"


def signed(
    method: str = "GET",
    url: str = URL,
    body: bytes = b"",
    principal: Principal = ANIM,
    service: str = "execute-api",
    region: str = REGION,
    headers: dict[str, str] | None = None,
) -> SignedRequest:
    """A request as botocore signs it, as the gateway would receive it."""
    request = AWSRequest(
        method=method, url=url, data=body, headers={"Content-Type": "application/json", **(headers or {})}
    )
    credentials = Credentials(principal.access_key_id, principal.secret_access_key, principal.session_token)
    SigV4Auth(credentials, service, region).add_auth(request)
    parts = urlsplit(url)
    received = [(name, str(value)) for name, value in request.headers.items()]
    received.append(("Host", parts.netloc))
    return SignedRequest(method, parts.path, parts.query, received, body)


def replaced(request: SignedRequest, name: str, value: str) -> SignedRequest:
    headers = [(key, value if key.lower() == name.lower() else old) for key, old in request.headers]
    return request._replace(headers=headers)


def refusal(request: SignedRequest, **kwargs: Any) -> str:
    with pytest.raises(Refusal) as refused:
        verify(request, PRINCIPALS, REGION, **kwargs)
    return refused.value.message


def test_a_request_botocore_signed_is_verified_as_its_principal() -> None:
    assert verify(signed(), PRINCIPALS, REGION) == ANIM


def test_a_signed_body_is_verified() -> None:
    body = json.dumps({"kind": "renderer", "ttl_seconds": 60}).encode()
    assert verify(signed("POST", "http://127.0.0.1:3000/v1/lease", body), PRINCIPALS, REGION) == ANIM


def test_a_path_parameter_and_no_query_are_verified() -> None:
    request = signed("DELETE", "http://127.0.0.1:3000/v1/lease/3f2b8c1e-6d4a-4f7b-9c2e-1a5d7e9b0c42")
    assert verify(request, PRINCIPALS, REGION) == ANIM


def test_an_assumed_role_session_signs_with_its_session_token() -> None:
    assert verify(signed(principal=ROLE), PRINCIPALS, REGION) == ROLE


def test_a_tampered_signature_is_refused() -> None:
    request = signed()
    authorization = dict((key.lower(), value) for key, value in request.headers)["authorization"]
    last = authorization[-1]
    tampered = authorization[:-1] + ("0" if last != "0" else "1")
    assert refusal(replaced(request, "Authorization", tampered)) == MISMATCH


def test_a_tampered_body_is_refused() -> None:
    request = signed("POST", "http://127.0.0.1:3000/v1/lease", b'{"kind":"renderer"}')
    assert refusal(request._replace(body=b'{"kind":"anim"}')) == MISMATCH


def test_a_tampered_query_is_refused() -> None:
    request = signed()
    assert refusal(request._replace(query="owner_id=live-control&limit=50")) == MISMATCH


def test_a_tampered_path_is_refused() -> None:
    request = signed("DELETE", "http://127.0.0.1:3000/v1/lease/3f2b8c1e-6d4a-4f7b-9c2e-1a5d7e9b0c42")
    assert refusal(request._replace(path="/v1/lease/00000000-6d4a-4f7b-9c2e-1a5d7e9b0c42")) == MISMATCH


def test_a_changed_signed_header_is_refused() -> None:
    assert refusal(replaced(signed(), "Content-Type", "text/plain")) == MISMATCH


def test_a_changed_unsigned_header_is_accepted() -> None:
    request = signed()
    request = request._replace(headers=[*request.headers, ("User-Agent", "something/else"), ("X-Lease-Owner", "x")])
    assert verify(request, PRINCIPALS, REGION) == ANIM


def test_a_stale_timestamp_is_refused() -> None:
    message = refusal(signed(), now=lambda: datetime.now(UTC) + timedelta(minutes=5, seconds=2))
    assert message.startswith("Signature expired:")


def test_a_timestamp_from_the_future_is_refused() -> None:
    message = refusal(signed(), now=lambda: datetime.now(UTC) - timedelta(minutes=6))
    assert message.startswith("Signature expired:")


def test_a_timestamp_within_five_minutes_is_accepted() -> None:
    assert verify(signed(), PRINCIPALS, REGION, now=lambda: datetime.now(UTC) + timedelta(minutes=4)) == ANIM


def test_another_service_is_refused() -> None:
    assert "correct service" in refusal(signed(service="lambda"))


def test_another_region_is_refused() -> None:
    assert "valid region" in refusal(signed(region="eu-west-1"))


def test_an_unknown_access_key_is_refused() -> None:
    stranger = Principal("AKIASTRANGER00000001", "whatever", "arn:aws:iam::000000000000:user/stranger")
    assert refusal(signed(principal=stranger)) == INVALID_TOKEN


def test_a_known_key_with_the_wrong_secret_is_refused() -> None:
    assert refusal(signed(principal=ANIM._replace(secret_access_key="guessed"))) == MISMATCH


def test_a_session_key_without_its_token_is_refused() -> None:
    assert refusal(signed(principal=ROLE._replace(session_token=None))) == INVALID_TOKEN


def test_an_unsigned_request_is_api_gateways_plain_forbidden() -> None:
    request = signed()
    unsigned = request._replace(headers=[(key, value) for key, value in request.headers if key != "Authorization"])
    assert refusal(unsigned) == "Forbidden"


def test_a_bearer_token_is_no_signature() -> None:
    assert "Credential" in refusal(replaced(signed(), "Authorization", "Bearer oas_abc"))


def test_the_principal_is_handed_on_as_api_gateway_does() -> None:
    context = ROLE.context()
    assert (context["userArn"], context["accessKey"], context["accountId"]) == (
        ROLE.arn,
        ROLE.access_key_id,
        "000000000000",
    )
    assert context["callerId"].endswith(":i-0abc")


def test_local_principals_are_a_json_list_of_keys_and_arns() -> None:
    raw = json.dumps([{"access_key_id": "AK1", "secret_access_key": "s", "arn": "arn:aws:iam::000000000000:user/a"}])
    assert parse_principals(raw) == {"AK1": Principal("AK1", "s", "arn:aws:iam::000000000000:user/a")}


@pytest.mark.parametrize(
    "raw",
    ["{}", "[1]", '[{"access_key_id": "AK1", "arn": "arn:aws:iam::000000000000:user/a"}]', "not json"],
)
def test_bad_local_principals_refuse_to_start_naming_the_variable(raw: str) -> None:
    with pytest.raises(ConfigurationError, match="LOCAL_IAM_PRINCIPALS"):
        parse_principals(raw)
