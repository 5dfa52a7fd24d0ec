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
