"""What the devstack tests share: one embedded DynamoDB (moto's server on loopback) per test module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devstack.dynamodb import EmbeddedDynamoDB


@pytest.fixture(scope="module")
def server() -> Iterator[EmbeddedDynamoDB]:
    running = EmbeddedDynamoDB.start()
    yield running
    running.stop()
