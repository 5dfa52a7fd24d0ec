"""`leasectl`'s credential options against the fake lease API: --token, --secret, --auth iam [--region] [--profile],
their variables, what disagrees (exit 2), and a refused credential (exit 1 with the service's message)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.client.fake_callers import ADMIN_TOKEN, UNAUTHORIZED
from tests.client.fake_scheduler import FakeScheduler
from tests.client.test_auth import OPERATOR, ROLE_SESSION, credentials_file
from tests.client.test_cli import leasectl, run


@pytest.fixture
def token_fake(fake: FakeScheduler) -> FakeScheduler:
    fake.auth.mode = "token"
    return fake


@pytest.fixture
def iam_fake(fake: FakeScheduler, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeScheduler:
    """AUTH_MODE=iam; OPERATOR in the default profile of a credentials file, ROLE_SESSION in profile `anim`."""
    fake.auth.mode = "iam"
    fake.auth.principals = {OPERATOR.access_key_id: OPERATOR, ROLE_SESSION.access_key_id: ROLE_SESSION}
    fake.auth.operator_arns = {OPERATOR.arn, ROLE_SESSION.arn}
    path = credentials_file(tmp_path / "credentials", default=OPERATOR, anim=ROLE_SESSION)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(path))
    return fake


def test_token_is_sent_as_bearer(token_fake: FakeScheduler) -> None:
    code, out, err = run(None, "--url", token_fake.url, "--token", ADMIN_TOKEN, "list")

    assert (code, out) == (0, "No live leases.\n"), err
    assert token_fake.requests[-1].header("Authorization") == f"Bearer {ADMIN_TOKEN}"


def test_the_process_reads_its_token_from_openalice_scheduler_token(token_fake: FakeScheduler) -> None:
    result = leasectl("--json", "list", SCHEDULER_URL=token_fake.url, OPENALICE_SCHEDULER_TOKEN=ADMIN_TOKEN)

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"leases": [], "next_token": None}


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (["--token", "oas_never-echoed", "--secret", "never-echoed-either"], "not both"),
        (["--auth", "iam", "--token", "oas_never-echoed"], "disagree"),
        (["--region", "eu-west-1"], "auth='iam'"),
        (["--token", "oas_never-echoed", "--profile", "ops"], "auth='iam'"),
    ],
)
def test_credential_options_that_disagree_are_a_usage_error(fake: FakeScheduler, options: list[str], says: str) -> None:
    code, _, err = run(None, "--url", fake.url, *options, "list")

    assert code == 2 and "leasectl: error: " in err and says in err and fake.requests == []
    assert "never-echoed" not in err


def test_an_unknown_auth_variable_is_a_usage_error(fake: FakeScheduler, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENALICE_SCHEDULER_AUTH", "kerberos")

    code, _, err = run(None, "--url", fake.url, "list")

    assert code == 2 and "$OPENALICE_SCHEDULER_AUTH must be one of secret, token, iam" in err


def test_a_revoked_token_exits_1_with_the_services_message(token_fake: FakeScheduler) -> None:
    code, out, err = run(None, "--url", token_fake.url, "--json", "--token", "oas_" + "x" * 43, "list")

    assert code == 1
    assert json.loads(out) == {"error": {"code": "unauthorized", "message": UNAUTHORIZED}}
    assert err == f"leasectl: unauthorized: {UNAUTHORIZED}\n"


def test_no_credential_at_all_hints_at_every_way_to_give_one(token_fake: FakeScheduler) -> None:
    code, _, err = run(None, "--url", token_fake.url, "list")

    assert code == 1 and "leasectl: unauthorized: Unauthorized" in err
    assert "pass --token or --secret, or set OPENALICE_SCHEDULER_TOKEN or INTERNAL_SECRET" in err


def test_auth_iam_signs_with_the_credentials_file(iam_fake: FakeScheduler) -> None:
    code, out, err = run(None, "--url", iam_fake.url, "--auth", "iam", "--region", "us-east-1", "list")

    assert (code, out) == (0, "No live leases.\n"), err
    assert OPERATOR.access_key_id in iam_fake.requests[-1].header("Authorization")


def test_auth_iam_profile_and_region_from_the_environment(
    iam_fake: FakeScheduler, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_REGION", "us-east-1")

    code, _, err = run(None, "--url", iam_fake.url, "--auth", "iam", "--profile", "anim", "list")

    assert code == 0, err
    assert ROLE_SESSION.access_key_id in iam_fake.requests[-1].header("Authorization")


def test_the_process_signs_when_openalice_scheduler_auth_is_iam(iam_fake: FakeScheduler) -> None:
    result = leasectl(
        "list", SCHEDULER_URL=iam_fake.url, OPENALICE_SCHEDULER_AUTH="iam", AWS_REGION="us-east-1", AWS_PROFILE="anim"
    )

    assert result.returncode == 0, result.stderr
    assert ROLE_SESSION.access_key_id in iam_fake.requests[-1].header("Authorization")


def test_auth_iam_signed_in_the_wrong_region_is_refused_in_the_gateways_words(iam_fake: FakeScheduler) -> None:
    code, _, err = run(None, "--url", iam_fake.url, "--auth", "iam", "--region", "eu-west-1", "list")

    assert code == 1 and err == "leasectl: forbidden: Credential should be scoped to a valid region.\n"


def test_auth_iam_without_a_region_is_a_usage_error_saying_where_to_give_one(iam_fake: FakeScheduler) -> None:
    code, _, err = run(None, "--url", iam_fake.url, "--auth", "iam", "list")

    assert code == 2 and "needs the API's region" in err and "--region" in err and iam_fake.requests == []


def test_auth_iam_without_botocore_exits_2_naming_the_extra(
    fake: FakeScheduler, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [name for name in sys.modules if name == "botocore" or name.startswith("botocore.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "botocore", None)
    monkeypatch.delitem(sys.modules, "openalice_scheduler_client.auth_iam", raising=False)

    code, _, err = run(None, "--url", fake.url, "--auth", "iam", "--region", "us-east-1", "list")

    assert code == 2 and "pip install './client[iam]'" in err and fake.requests == []


def test_health_needs_no_credential_in_any_mode(token_fake: FakeScheduler) -> None:
    assert run(None, "--url", token_fake.url, "health")[0] == 0
