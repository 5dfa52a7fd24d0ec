"""`leasectl` with a caller's token and with SigV4 against the real local stack (`make run`) in AUTH_MODE=token and
AUTH_MODE=iam: the callers round trip, a revoked or rotated-out token refused, a list signed from a credentials
file (no key in the environment), and the gateway's refusals in its own words."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devstack.auth import principals_json
from devstack.sigv4 import MISMATCH, Principal
from scheduler.api.identity import UNAUTHORIZED
from tests.client.test_auth import credentials_file
from tests.client.test_cli import cli_env
from tests.support.stack import RunningStack, start_stack
from tests.support.waiting import wait_for

CACHE_SECONDS = 2
OPERATOR = Principal("AKIALOCALCLIENTOPS01", "client-operator-secret-0123", "arn:aws:iam::000000000000:user/cli-ops")
ANIM = Principal("AKIALOCALCLIENTANIM1", "client-anim-secret-0123", "arn:aws:iam::000000000000:user/cli-anim")
STRANGER = Principal("AKIALOCALCLIENTWHO01", "client-stranger-secret-0123", "arn:aws:iam::000000000000:user/who")


def leasectl(stack: RunningStack, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`leasectl` as a process on the stack, its credential given through the environment as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "openalice_scheduler_client.cli", *argv],
        env=cli_env(SCHEDULER_URL=stack.url, **env),
        capture_output=True,
        text=True,
        timeout=120,
    )


# --- token mode ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def token_stack(docker_host: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    running = start_stack(
        tmp_path_factory.mktemp("client-token-stack"),
        docker_env=docker_host.env(),
        extra_env={
            "AUTH_MODE": "token",
            "AUTH_CACHE_SECONDS": str(CACHE_SECONDS),
            "RECONCILE_INTERVAL_SECONDS": "3600",
        },
    )
    yield running
    running.stop()


def as_admin(stack: RunningStack, *argv: str) -> subprocess.CompletedProcess[str]:
    """As the bootstrap operator, whose token `make run` wrote to .local/admin-token."""
    return leasectl(stack, *argv, OPENALICE_SCHEDULER_TOKEN=(stack.state_dir / "admin-token").read_text().strip())


def test_leasectl_adds_lists_rotates_and_removes_a_caller(token_stack: RunningStack) -> None:
    added = as_admin(
        token_stack, "--json", "callers", "add", "cli-anim", "--owner", "anim-service", "--role", "service"
    )
    assert added.returncode == 0, added.stderr
    body = json.loads(added.stdout)
    first = body["token"]
    assert body["caller"]["owners"] == ["anim-service"] and body["caller"]["created_by"] == "admin"
    assert "the token is shown this once and never again" in added.stderr and first not in added.stderr

    listed = as_admin(token_stack, "callers", "list")
    assert listed.returncode == 0 and "cli-anim" in listed.stdout and first not in listed.stdout
    assert leasectl(token_stack, "list", OPENALICE_SCHEDULER_TOKEN=first).returncode == 0

    rotated = as_admin(token_stack, "callers", "rotate", "cli-anim", "--grace", "0")
    assert rotated.returncode == 0 and "stop working now" in rotated.stderr
    second = rotated.stdout.split()[1]
    assert second.startswith("oas_") and second != first
    time.sleep(CACHE_SECONDS + 0.5)  # the authorizer's cached answer for the first token runs out
    refused = leasectl(token_stack, "list", OPENALICE_SCHEDULER_TOKEN=first)
    assert (refused.returncode, refused.stderr) == (1, f"leasectl: unauthorized: {UNAUTHORIZED}\n")
    assert leasectl(token_stack, "list", OPENALICE_SCHEDULER_TOKEN=second).returncode == 0

    removed = as_admin(token_stack, "callers", "remove", "cli-anim")
    assert removed.returncode == 0 and removed.stdout.startswith("removed caller cli-anim")
    revoked = wait_for(
        lambda: (answer := leasectl(token_stack, "--token", second, "--json", "list")).returncode == 1 and answer,
        timeout=CACHE_SECONDS + 5,
    )
    assert json.loads(revoked.stdout)["error"] == {"code": "unauthorized", "message": UNAUTHORIZED}
    assert revoked.stderr == f"leasectl: unauthorized: {UNAUTHORIZED}\n"
    assert "cli-anim" not in as_admin(token_stack, "callers", "list").stdout


def test_a_service_callers_token_may_not_manage_callers(token_stack: RunningStack) -> None:
    added = as_admin(token_stack, "--json", "callers", "add", "cli-svc", "--owner", "svc", "--role", "service")
    token = json.loads(added.stdout)["token"]

    refused = leasectl(token_stack, "callers", "list", OPENALICE_SCHEDULER_TOKEN=token)

    assert refused.returncode == 1 and refused.stderr.startswith("leasectl: forbidden: ")


def test_no_token_at_all_is_api_gateways_401_with_the_hint(token_stack: RunningStack) -> None:
    refused = leasectl(token_stack, "list")

    assert refused.returncode == 1 and refused.stderr.startswith("leasectl: unauthorized: Unauthorized\n")
    assert "OPENALICE_SCHEDULER_TOKEN" in refused.stderr


# --- iam mode ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def iam_stack(docker_host: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    principals = {principal.access_key_id: principal for principal in (OPERATOR, ANIM, STRANGER)}
    running = start_stack(
        tmp_path_factory.mktemp("client-iam-stack"),
        docker_env=docker_host.env(),
        extra_env={
            "AUTH_MODE": "iam",
            "AUTH_CACHE_SECONDS": str(CACHE_SECONDS),
            "LOCAL_IAM_PRINCIPALS": principals_json(principals),
            "OPERATOR_PRINCIPALS": OPERATOR.arn,
            "RECONCILE_INTERVAL_SECONDS": "3600",
        },
    )
    yield running
    running.stop()


@pytest.fixture
def aws_credentials(tmp_path: Path) -> dict[str, str]:
    """A shared credentials file (OPERATOR by default, ANIM and STRANGER by profile, a forged key) as the only
    source of AWS credentials: no key in the environment (tests/client/conftest.py removes them)."""
    forged = OPERATOR._replace(secret_access_key="not-the-operators-secret-key")
    path = credentials_file(tmp_path / "credentials", default=OPERATOR, anim=ANIM, who=STRANGER, forged=forged)
    return {"AWS_SHARED_CREDENTIALS_FILE": str(path)}


def test_leasectl_auth_iam_lists_signed_from_a_credentials_file(
    iam_stack: RunningStack, aws_credentials: dict[str, str]
) -> None:
    listed = leasectl(iam_stack, "--json", "--auth", "iam", "--region", "us-east-1", "list", **aws_credentials)

    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout) == {"leases": [], "next_token": None}


def test_an_operator_adds_a_principals_caller_which_then_signs_as_it(
    iam_stack: RunningStack, aws_credentials: dict[str, str]
) -> None:
    signing = {**aws_credentials, "OPENALICE_SCHEDULER_AUTH": "iam", "AWS_REGION": "us-east-1"}
    added = leasectl(
        iam_stack, "callers", "add", "cli-anim", "--owner", "anim-service", "--role", "service",
        "--principal-arn", ANIM.arn, **signing,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert "token" not in added.stdout and added.stderr == ""  # iam mode: the principal is the credential

    assert leasectl(iam_stack, "list", "--owner", "anim-service", AWS_PROFILE="anim", **signing).returncode == 0
    refused = leasectl(iam_stack, "callers", "list", AWS_PROFILE="anim", **signing)
    assert refused.returncode == 1 and refused.stderr.startswith("leasectl: forbidden: ")


def test_a_signature_with_the_wrong_key_exits_1_in_the_gateways_words(
    iam_stack: RunningStack, aws_credentials: dict[str, str]
) -> None:
    refused = leasectl(
        iam_stack, "--auth", "iam", "--region", "us-east-1", "--profile", "forged", "list", **aws_credentials
    )

    assert (refused.returncode, refused.stderr) == (1, f"leasectl: forbidden: {MISMATCH}\n")


def test_an_unmapped_principal_exits_1_forbidden(iam_stack: RunningStack, aws_credentials: dict[str, str]) -> None:
    refused = leasectl(
        iam_stack, "--auth", "iam", "--region", "us-east-1", "--profile", "who", "list", **aws_credentials
    )

    assert (
        refused.returncode == 1
        and refused.stderr.startswith("leasectl: forbidden: ")
        and STRANGER.arn in refused.stderr
    )


def test_make_runs_own_operator_signs_from_its_iam_credentials_file(
    docker_host: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # Without LOCAL_IAM_PRINCIPALS `make run` makes an operator and writes its keys to .local/iam-credentials, the
    # profile `openalice-local` of a shared credentials file: what README tells a user to point leasectl at.
    stack = start_stack(
        tmp_path_factory.mktemp("client-iam-default"),
        docker_env=docker_host.env(),
        extra_env={"AUTH_MODE": "iam", "RECONCILE_INTERVAL_SECONDS": "3600"},
    )
    try:
        signing = {"AWS_SHARED_CREDENTIALS_FILE": str(stack.state_dir / "iam-credentials"), "AWS_REGION": "us-east-1"}
        listed = leasectl(stack, "--auth", "iam", "--profile", "openalice-local", "callers", "list", **signing)
    finally:
        stack.stop()

    assert (listed.returncode, listed.stdout) == (0, "No callers.\n"), listed.stderr
