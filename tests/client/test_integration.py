"""The client library and `leasectl` against the real local stack (`make run`) on the TLS Docker host."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from openalice_scheduler_client import (
    Forbidden,
    InvalidRequest,
    NotFound,
    SchedulerClient,
    Unauthorized,
)

from tests.client.test_cli import cli_env
from tests.support.stack import RunningStack


@pytest.fixture
def scheduler(stack: RunningStack) -> Iterator[SchedulerClient]:
    """A client of the local stack."""
    with SchedulerClient(stack.url, stack.secret, timeout=60.0) as client:
        yield client


def leasectl(stack: RunningStack, *argv: str, url: str | None = None) -> subprocess.CompletedProcess[str]:
    """`leasectl` as a process, configured through the environment as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "openalice_scheduler_client.cli", *argv],
        env=cli_env(SCHEDULER_URL=url or stack.url, INTERNAL_SECRET=stack.secret),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _containers_of(docker_client: Any, lease_id: str) -> list[Any]:
    return docker_client.containers.list(all=True, filters={"label": f"openalice.scheduler/lease-id={lease_id}"})


def test_acquire_get_list_renew_release_through_the_client(scheduler: SchedulerClient, docker_client: Any) -> None:
    lease = scheduler.acquire("renderer", ttl_seconds=600, owner_id="client-it", env={"SCENE": "intro"})
    (container,) = _containers_of(docker_client, lease.lease_id)
    assert container.id == lease.provider_token

    assert lease.status == "active" and lease.provider == "local-docker" and lease.provider_token
    assert lease.kind == "renderer" and lease.gpu == "none" and lease.ttl_seconds == 600
    assert timedelta(seconds=590) < lease.expires_at - datetime.now(UTC) <= timedelta(seconds=601)
    assert scheduler.get(lease.lease_id).lease_id == lease.lease_id
    assert lease.lease_id in {item.lease_id for item in scheduler.list(owner_id="client-it")}
    assert lease.lease_id not in {item.lease_id for item in scheduler.list(kind="anim")}

    renewed = scheduler.renew(lease.lease_id, ttl_seconds=1200, owner_id="client-it")
    assert renewed.ttl_seconds == 1200 and renewed.expires_at > lease.expires_at

    scheduler.release(lease.lease_id, owner_id="client-it")
    ended = scheduler.get(lease.lease_id)
    assert ended.status == "released" and ended.released_at is not None
    assert _containers_of(docker_client, lease.lease_id) == []
    assert lease.lease_id not in {item.lease_id for item in scheduler.list()}
    with pytest.raises(NotFound):
        scheduler.release(lease.lease_id, owner_id="client-it")


def test_errors_from_the_real_service_map_to_their_classes(stack: RunningStack, scheduler: SchedulerClient) -> None:
    lease = scheduler.acquire("anim", ttl_seconds=120, owner_id="owner-a")
    try:
        with pytest.raises(Forbidden) as not_owner:
            scheduler.renew(lease.lease_id, owner_id="owner-b")
        assert not_owner.value.code == "forbidden"
        with pytest.raises(InvalidRequest) as bad_ttl:
            scheduler.renew(lease.lease_id, ttl_seconds=999_999, owner_id="owner-a")
        assert bad_ttl.value.details["problems"]
    finally:
        scheduler.release(lease.lease_id, owner_id="owner-a")
    with pytest.raises(NotFound):
        scheduler.get("00000000-0000-4000-8000-000000000000")
    with SchedulerClient(stack.url, "") as anonymous, pytest.raises(Unauthorized) as unauthorized:
        anonymous.list()
    assert (unauthorized.value.status, unauthorized.value.message) == (401, "Unauthorized")
    with SchedulerClient(stack.url, "wrong-secret") as stranger, pytest.raises(Forbidden) as forbidden:
        stranger.list()
    assert (forbidden.value.status, forbidden.value.message) == (403, "Forbidden")


def test_lease_context_manager_renews_and_releases_on_the_real_service(scheduler: SchedulerClient) -> None:
    with scheduler.lease(kind="renderer", ttl_seconds=30, owner_id="ctx", renew_every=0.5) as held:
        first_expiry = held.expires_at
        deadline = time.monotonic() + 10
        while held.renewals < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert held.renewals >= 2 and not held.lost
        assert scheduler.get(held.lease_id).status == "active"

    assert held.expires_at >= first_expiry
    assert scheduler.get(held.lease_id).status == "released"


def test_a_repeated_idempotency_key_returns_the_same_lease(scheduler: SchedulerClient) -> None:
    first = scheduler.acquire("renderer", ttl_seconds=60, idempotency_key="client-it-key-1")
    try:
        again = scheduler.acquire("renderer", ttl_seconds=60, idempotency_key="client-it-key-1")
        assert again.lease_id == first.lease_id
    finally:
        for lease in scheduler.list():
            if lease.ttl_seconds == 60:
                scheduler.release(lease.lease_id)


def test_leasectl_round_trip_with_json(stack: RunningStack) -> None:
    acquired = leasectl(stack, "--json", "acquire", "--kind", "anim", "--ttl", "300", "--owner", "cli", "--env", "A=1")
    assert acquired.returncode == 0, acquired.stderr
    body = json.loads(acquired.stdout)
    lease_id = body["lease"]["lease_id"]
    assert body["provider"] == "local-docker" and body["lease"]["status"] == "active"

    listed = leasectl(stack, "--json", "list", "--owner", "cli")
    assert listed.returncode == 0 and [item["lease_id"] for item in json.loads(listed.stdout)["leases"]] == [lease_id]
    got = leasectl(stack, "--json", "get", lease_id)
    assert got.returncode == 0 and json.loads(got.stdout)["lease"]["lease_id"] == lease_id
    renewed = leasectl(stack, "--json", "renew", lease_id, "--ttl", "600", "--owner", "cli")
    assert renewed.returncode == 0 and json.loads(renewed.stdout)["lease"]["ttl_seconds"] == 600

    wrong_owner = leasectl(stack, "release", lease_id, "--owner", "not-cli")
    assert wrong_owner.returncode == 1 and wrong_owner.stderr.startswith("leasectl: forbidden: ")

    released = leasectl(stack, "--json", "release", lease_id, "--owner", "cli")
    assert released.returncode == 0 and json.loads(released.stdout) == {}
    again = leasectl(stack, "--json", "release", lease_id, "--owner", "cli")
    assert again.returncode == 1 and json.loads(again.stdout)["error"]["code"] == "not_found"
    assert "not_found" in again.stderr


def test_leasectl_table_and_watch_once_show_live_leases(stack: RunningStack, scheduler: SchedulerClient) -> None:
    lease = scheduler.acquire("renderer", ttl_seconds=900, owner_id="table")
    try:
        table = leasectl(stack, "list", "--owner", "table")
        assert table.returncode == 0
        header, row = table.stdout.splitlines()
        assert header.split()[:3] == ["ID", "KIND", "GPU"] and row.split()[:6] == [
            lease.lease_id, "renderer", "none", "local-docker", "active", "table",
        ]  # fmt: skip
        watch = leasectl(stack, "watch", "--once")
        assert watch.returncode == 0 and lease.lease_id in watch.stdout and "\x1b" not in watch.stdout
    finally:
        scheduler.release(lease.lease_id, owner_id="table")


def test_leasectl_exit_codes_against_the_stack(stack: RunningStack) -> None:
    assert leasectl(stack, "get", "no-such-lease").returncode == 1
    assert leasectl(stack, "acquire", "--kind", "renderer", "--ttl", "nope").returncode == 2
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    unreachable = leasectl(stack, "list", url=closed)
    assert unreachable.returncode == 3 and "cannot reach the scheduler" in unreachable.stderr
