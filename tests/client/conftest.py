"""The client package (client/src) importable without installation, and a fake lease API per test."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

CLIENT_SRC = Path(__file__).resolve().parents[2] / "client" / "src"
if str(CLIENT_SRC) not in sys.path:
    sys.path.insert(0, str(CLIENT_SRC))

from openalice_scheduler_client import SchedulerClient  # noqa: E402

from tests.client.fake_scheduler import FakeScheduler  # noqa: E402


@pytest.fixture
def fake() -> Iterator[FakeScheduler]:
    """A fresh in-memory lease API on a loopback port."""
    server = FakeScheduler().start()
    yield server
    server.stop()


@pytest.fixture
def client(fake: FakeScheduler) -> Iterator[SchedulerClient]:
    """A client of the fake with fast backoff (retries still happen, just quickly)."""
    with SchedulerClient(fake.url, fake.secret, timeout=5.0, backoff=0.01, max_backoff=0.05) as scheduler:
        yield scheduler


@pytest.fixture
def capped(fake: FakeScheduler) -> FakeScheduler:
    """The fake with a cap of 1 (`fake_queue`), taken by a lease of owner `holder`."""
    fake.cap = 1
    fake.add_lease(owner_id="holder")
    return fake


# The client's own variables and every way botocore could find AWS credentials or a region outside a test's
# control: the developer's, a CI role, an instance's metadata service (no traffic off this machine).
AWS_VARIABLES = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
)


@pytest.fixture(autouse=True)
def no_credential_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test meets a token, an auth choice or AWS credentials it did not set itself."""
    for name in ("OPENALICE_SCHEDULER_TOKEN", "OPENALICE_SCHEDULER_AUTH", *AWS_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
