"""Who the client says it is: the shared secret, a caller's bearer token, or SigV4 from the AWS credential chain
(verified by the local stack's own verifier, as `make run` and API Gateway verify it); which one is chosen, and
that no credential ever shows in a repr, a message or a log line."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from openalice_scheduler_client import (
    CredentialError,
    Forbidden,
    SchedulerClient,
    Unauthorized,
)
from openalice_scheduler_client.auth_iam import region_in_url

from devstack.sigv4 import MISMATCH, Principal
from tests.client.conftest import CLIENT_SRC
from tests.client.fake_callers import ADMIN_TOKEN, UNAUTHORIZED
from tests.client.fake_scheduler import FakeScheduler
from tests.support.waiting import wait_for

OPERATOR = Principal("AKIAFAKEOPERATOR0001", "operator-secret-key-0123", "arn:aws:iam::000000000000:user/ops")
ROLE_SESSION = Principal(
    "ASIAFAKEANIMROLE0001",
    "anim-role-secret-key-0123",
    "arn:aws:iam::000000000000:role/anim",
    session_token="anim-session-token-0123",
)
STRANGER = Principal("AKIAFAKESTRANGER0001", "stranger-secret-key-0123", "arn:aws:iam::000000000000:user/who")


def fast(url: str, **settings: object) -> SchedulerClient:
    return SchedulerClient(url, timeout=5.0, backoff=0.01, max_backoff=0.05, **settings)  # type: ignore[arg-type]


@pytest.fixture
def token_fake(fake: FakeScheduler) -> FakeScheduler:
    fake.auth.mode = "token"
    return fake


@pytest.fixture
def iam_fake(fake: FakeScheduler) -> FakeScheduler:
    fake.auth.mode = "iam"
    fake.auth.principals = {principal.access_key_id: principal for principal in (OPERATOR, ROLE_SESSION, STRANGER)}
    fake.auth.operator_arns = {OPERATOR.arn}
    fake.auth.callers["anim"] = {
        "name": "anim",
        "role": "service",
        "owners": ["anim-service"],
        "principal_arn": ROLE_SESSION.arn,
        "created_at": "2026-12-01T00:00:00Z",
        "created_by": OPERATOR.arn,
    }
    return fake


def credentials_file(path: Path, **profiles: Principal) -> Path:
    """An AWS shared credentials file with one section per profile."""
    sections = []
    for name, principal in profiles.items():
        lines = [f"[{name}]", f"aws_access_key_id = {principal.access_key_id}"]
        lines.append(f"aws_secret_access_key = {principal.secret_access_key}")
        if principal.session_token:
            lines.append(f"aws_session_token = {principal.session_token}")
        sections.append("\n".join(lines))
    path.write_text("\n\n".join(sections) + "\n")
    return path


@pytest.fixture
def signing_as(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """The default profile of a shared credentials file is OPERATOR; no key in the environment; region us-east-1."""
    path = credentials_file(tmp_path / "credentials", default=OPERATOR, anim=ROLE_SESSION, stranger=STRANGER)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(path))
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    yield path


# --- the bearer token --------------------------------------------------------------------------------


def test_a_token_is_sent_as_bearer_authorization_and_no_secret(token_fake: FakeScheduler) -> None:
    with fast(token_fake.url, token=ADMIN_TOKEN) as client:
        assert client.list() == []

    (request,) = token_fake.calls("GET", "/v1/leases")
    assert request.header("Authorization") == f"Bearer {ADMIN_TOKEN}"
    assert request.header("X-Internal-Secret") is None


def test_the_token_defaults_to_openalice_scheduler_token(
    token_fake: FakeScheduler, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENALICE_SCHEDULER_TOKEN", ADMIN_TOKEN)
    monkeypatch.setenv("INTERNAL_SECRET", "a-secret-also-set")

    with fast(token_fake.url) as client:
        client.list()

    assert token_fake.requests[-1].header("Authorization") == f"Bearer {ADMIN_TOKEN}"
    assert token_fake.requests[-1].header("X-Internal-Secret") is None


def test_an_explicit_secret_beats_a_token_in_the_environment(
    fake: FakeScheduler, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENALICE_SCHEDULER_TOKEN", ADMIN_TOKEN)

    with fast(fake.url, secret=fake.secret) as client:
        client.list()

    assert fake.requests[-1].header("X-Internal-Secret") == fake.secret
    assert fake.requests[-1].header("Authorization") is None


def test_openalice_scheduler_auth_chooses_the_kind_over_the_variables_present(
    fake: FakeScheduler, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENALICE_SCHEDULER_AUTH", "secret")
    monkeypatch.setenv("OPENALICE_SCHEDULER_TOKEN", ADMIN_TOKEN)
    monkeypatch.setenv("INTERNAL_SECRET", fake.secret)

    with fast(fake.url) as client:
        client.list()

    assert fake.requests[-1].header("X-Internal-Secret") == fake.secret
    assert fake.requests[-1].header("Authorization") is None


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"secret": "s", "token": "t"}, "not both"),
        ({"auth": "iam", "token": "t"}, "disagree"),
        ({"auth": "token", "secret": "s"}, "disagree"),
        ({"auth": "secret", "token": "t"}, "disagree"),
        ({"token": "t", "region": "eu-west-1"}, "auth='iam'"),
        ({"profile": "ops"}, "auth='iam'"),
        ({"auth": "password"}, "one of secret, token, iam"),
    ],
)
def test_explicit_choices_that_disagree_are_an_error(settings: dict[str, str], says: str) -> None:
    with pytest.raises(CredentialError, match=says):
        SchedulerClient("http://127.0.0.1:9", **settings)  # type: ignore[arg-type]


def test_an_unknown_kind_in_the_environment_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENALICE_SCHEDULER_AUTH", "sigv4")

    with pytest.raises(CredentialError, match=r"\$OPENALICE_SCHEDULER_AUTH must be one of secret, token, iam"):
        SchedulerClient("http://127.0.0.1:9")


def test_a_revoked_token_is_unauthorized_with_the_services_message(token_fake: FakeScheduler) -> None:
    with fast(token_fake.url, token=ADMIN_TOKEN) as admin:
        token = admin.callers.add("gone", role="service", owners=["o"]).token
        admin.callers.remove("gone")

    with fast(token_fake.url, token=token) as revoked, pytest.raises(Unauthorized) as refused:
        revoked.list()

    assert (refused.value.status, refused.value.code, refused.value.message) == (401, "unauthorized", UNAUTHORIZED)


def test_no_repr_or_message_shows_the_token_or_the_secret(token_fake: FakeScheduler) -> None:
    with fast(token_fake.url, token=ADMIN_TOKEN) as client:
        added = client.callers.add("svc", role="service", owners=["o"])
        seen = [repr(client), str(client.credential), repr(client.copy()), repr(added), repr(client.callers)]
    with fast(token_fake.url, secret="the-shared-secret-0123") as with_secret:
        seen += [repr(with_secret), repr(with_secret.credential)]

    assert added.token and added.token.startswith("oas_")
    assert not [text for text in seen if ADMIN_TOKEN in text or added.token in text or "the-shared-secret" in text]
    assert "BearerToken(set)" in repr(client)


def test_no_token_reaches_a_log_line_even_through_retries(
    token_fake: FakeScheduler, caplog: pytest.LogCaptureFixture
) -> None:
    token_fake.fail("GET", "/v1/leases", status=503, code="no_capacity", times=2)
    caplog.set_level(logging.DEBUG)

    with fast(token_fake.url, token=ADMIN_TOKEN) as client:
        client.list()

    assert len(token_fake.calls("GET", "/v1/leases")) == 3
    assert "retry 2/4" in caplog.text and ADMIN_TOKEN not in caplog.text and ADMIN_TOKEN[4:20] not in caplog.text


@pytest.mark.parametrize("value", ["oas_abc\r\nX-Injected: 1", "oas_é"])
def test_a_token_no_header_can_carry_is_refused_without_showing_it(value: str) -> None:
    with pytest.raises(CredentialError) as refused:
        SchedulerClient("http://127.0.0.1:9", token=value)

    assert "oas_" not in str(refused.value)


def test_a_token_read_from_a_file_loses_its_newline(token_fake: FakeScheduler) -> None:
    with fast(token_fake.url, token=ADMIN_TOKEN + "\n") as client:
        client.list()

    assert token_fake.requests[-1].header("Authorization") == f"Bearer {ADMIN_TOKEN}"


def test_a_copy_and_the_renewal_thread_keep_the_token(token_fake: FakeScheduler) -> None:
    with fast(token_fake.url, token=ADMIN_TOKEN) as client:
        with client.lease("renderer", ttl_seconds=30, renew_every=0.05) as held:
            wait_for(lambda: held.renewals >= 1, timeout=10)
        client.copy().list()

    assert {request.header("Authorization") for request in token_fake.requests} == {f"Bearer {ADMIN_TOKEN}"}


# --- SigV4 -------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("signing_as")
def test_iam_signs_every_request_as_the_gateway_verifies_it(iam_fake: FakeScheduler) -> None:
    with fast(iam_fake.url, auth="iam") as client:
        lease = client.acquire("renderer", owner_id="anim service", env={"SCENE": "a b"})
        client.get(lease.lease_id, wait_ready=0)
        client.list(owner_id="anim service")
        client.usage(owner_id="anim service", since="2026-11-01", group_by="kind")
        client.logs(lease.lease_id, since="2026-11-30T00:00:00Z", owner_id="anim service")
        client.renew(lease.lease_id, ttl_seconds=60, owner_id="anim service")
        client.release(lease.lease_id, owner_id="anim service")
        assert client.health()["status"] == "ok"

    signed = [request for request in iam_fake.requests if request.path != "/health"]
    assert len(signed) == 7 and all(
        request.header("Authorization").startswith("AWS4-HMAC-SHA256 ") for request in signed
    )
    assert all("/us-east-1/execute-api/aws4_request" in request.header("Authorization") for request in signed)
    (logs,) = iam_fake.calls("GET", ".*/logs")
    assert "x-lease-owner" in logs.header("Authorization") and logs.raw_query.startswith("since=2026-11-30T00%3A00")


def test_iam_reads_a_named_profile_with_its_session_token(
    iam_fake: FakeScheduler, signing_as: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with fast(iam_fake.url, auth="iam", profile="anim") as client:
        assert client.list() == []

    request = iam_fake.requests[-1]
    assert request.header("X-Amz-Security-Token") == ROLE_SESSION.session_token
    assert "x-amz-security-token" in request.header("Authorization")
    assert ROLE_SESSION.access_key_id in request.header("Authorization")


@pytest.mark.usefixtures("signing_as")
def test_iam_takes_keys_from_the_environment_before_the_file(
    iam_fake: FakeScheduler, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", STRANGER.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", STRANGER.secret_access_key)

    with fast(iam_fake.url, auth="iam") as client, pytest.raises(Forbidden) as unmapped:
        client.list()

    assert unmapped.value.code == "forbidden" and STRANGER.arn in unmapped.value.message


@pytest.mark.usefixtures("signing_as")
def test_an_iam_client_shows_no_key_in_its_repr(iam_fake: FakeScheduler) -> None:
    with fast(iam_fake.url, auth="iam") as client:
        seen = repr(client) + repr(client.copy()) + repr(client.credential)

    assert "SigV4Signer(region='us-east-1', profile=None)" in seen
    assert OPERATOR.access_key_id not in seen and OPERATOR.secret_access_key not in seen


@pytest.mark.usefixtures("signing_as")
def test_each_retry_is_signed_again_with_its_own_time(iam_fake: FakeScheduler) -> None:
    # The first attempt is answered 503 asking for 1.1 s: the retry is signed in a later second.
    iam_fake.fail("GET", "/v1/leases", status=503, code="no_capacity", headers={"Retry-After": "1.1"})

    with SchedulerClient(iam_fake.url, auth="iam", backoff=0.01, max_backoff=2.0) as client:
        assert client.list() == []

    first, second = iam_fake.calls("GET", "/v1/leases")
    assert first.header("X-Amz-Date") != second.header("X-Amz-Date")
    assert first.header("Authorization") != second.header("Authorization")


def test_a_wrong_secret_key_is_refused_in_the_gateways_words(
    iam_fake: FakeScheduler, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    forged = OPERATOR._replace(secret_access_key="not-the-operators-key")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials_file(tmp_path / "c", default=forged)))

    with fast(iam_fake.url, auth="iam", region="us-east-1") as client, pytest.raises(Forbidden) as refused:
        client.list()

    assert (refused.value.status, refused.value.message) == (403, MISMATCH)


def test_iam_without_credentials_says_where_it_looked() -> None:
    with pytest.raises(CredentialError, match="found no AWS credentials") as refused:
        SchedulerClient("http://127.0.0.1:9", auth="iam", region="us-east-1")

    assert "shared credentials file" in str(refused.value)


@pytest.mark.usefixtures("signing_as")
def test_an_unknown_profile_is_a_credential_error() -> None:
    with pytest.raises(CredentialError, match="nobody"):
        SchedulerClient("http://127.0.0.1:9", auth="iam", profile="nobody")


@pytest.mark.usefixtures("signing_as")
def test_the_region_is_the_argument_then_the_urls_then_the_environments(monkeypatch: pytest.MonkeyPatch) -> None:
    api = "https://a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com"
    monkeypatch.setenv("AWS_REGION", "us-east-2")

    assert SchedulerClient(api, auth="iam", region="ap-south-1").credential.region == "ap-south-1"  # type: ignore[attr-defined]
    assert SchedulerClient(api, auth="iam").credential.region == "eu-west-1"  # type: ignore[attr-defined]
    assert SchedulerClient("http://127.0.0.1:9", auth="iam").credential.region == "us-east-2"  # type: ignore[attr-defined]
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ca-central-1")
    assert SchedulerClient("http://127.0.0.1:9", auth="iam").credential.region == "ca-central-1"  # type: ignore[attr-defined]
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    with pytest.raises(CredentialError, match="needs the API's region"):
        SchedulerClient("http://127.0.0.1:9", auth="iam")


@pytest.mark.parametrize(
    ("url", "region"),
    [
        ("https://a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com", "eu-west-1"),
        ("https://a1b2c3d4e5.execute-api.cn-north-1.amazonaws.com.cn/prod", "cn-north-1"),
        ("https://a1b2c3d4e5-vpce-0123.execute-api.us-gov-west-1.vpce.amazonaws.com", None),
        ("https://scheduler.example.com", None),
        ("http://127.0.0.1:3000", None),
    ],
)
def test_an_api_gateway_url_names_its_region(url: str, region: str | None) -> None:
    assert region_in_url(url) == region


@pytest.mark.usefixtures("signing_as")
def test_iam_is_chosen_by_openalice_scheduler_auth(iam_fake: FakeScheduler, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENALICE_SCHEDULER_AUTH", "iam")
    monkeypatch.setenv("INTERNAL_SECRET", "ignored-in-iam-mode")

    with fast(iam_fake.url) as client:
        assert client.list() == []

    assert iam_fake.requests[-1].header("X-Internal-Secret") is None


def test_iam_without_botocore_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in sys.modules if name == "botocore" or name.startswith("botocore.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "botocore", None)
    monkeypatch.delitem(sys.modules, "openalice_scheduler_client.auth_iam", raising=False)

    with pytest.raises(CredentialError, match=r"botocore.*pip install './client\[iam\]'"):
        SchedulerClient("http://127.0.0.1:9", auth="iam", region="us-east-1")


def test_a_token_or_secret_client_never_imports_botocore() -> None:
    probe = (
        "import sys; from openalice_scheduler_client import SchedulerClient; "
        "from openalice_scheduler_client.cli import main; "
        "SchedulerClient('http://127.0.0.1:9', token='t'); SchedulerClient('http://127.0.0.1:9', secret='s'); "
        "print(sorted(name for name in sys.modules if name.split('.')[0] in ('botocore', 'boto3')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], env={"PYTHONPATH": str(CLIENT_SRC)}, capture_output=True, text=True, timeout=60
    )

    assert (result.returncode, result.stdout.strip()) == (0, "[]"), result.stderr
