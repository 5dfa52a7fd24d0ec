"""No worker outlives its lease: the sweep, renew, the TTL stream handler and the reconciler, end to end."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.support.stack import RunningStack, start_stack
from tests.support.waiting import wait_for

LEASE_LABEL = "openalice.scheduler/lease-id"


def _containers_of(docker_client: Any, lease_id: str) -> list[Any]:
    return docker_client.containers.list(all=True, filters={"label": f"{LEASE_LABEL}={lease_id}"})


def _status(stack: RunningStack, lease_id: str) -> str:
    return str(stack.request("GET", f"/v1/lease/{lease_id}").json()["lease"]["status"])


@pytest.fixture(scope="module")
def reconciling_stack(docker_host: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    """A stack that reconciles every second with a 4 s orphan grace and a 5 s pending deadline.

    Not 1 s: an acquire on a loaded machine can take seconds, and must not be judged stuck.
    """
    running = start_stack(
        tmp_path_factory.mktemp("reconcile"),
        docker_env=docker_host.env(),
        extra_env={
            "SWEEP_INTERVAL_SECONDS": "1",
            "RECONCILE_INTERVAL_SECONDS": "1",
            "ORPHAN_GRACE_SECONDS": "4",
            "PENDING_DEADLINE_SECONDS": "5",
        },
    )
    yield running
    running.stop()


@pytest.fixture(scope="module")
def ttl_stack(docker_host: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    """A stack where TTL deletes at once and the sweep never runs in a test's lifetime."""
    running = start_stack(
        tmp_path_factory.mktemp("ttl"),
        docker_env=docker_host.env(),
        extra_env={"SWEEP_INTERVAL_SECONDS": "3600", "RECONCILE_INTERVAL_SECONDS": "3600"},
        ttl_lag_seconds=0,
    )
    yield running
    running.stop()


def _orphan_container(docker_client: Any) -> Any:
    lease_id = str(uuid.uuid4())
    return docker_client.containers.run(
        "openalice/renderer:dev",
        detach=True,
        network_mode="none",
        name=f"lease-{lease_id}",
        labels={"openalice.scheduler/managed": "true", LEASE_LABEL: lease_id, "openalice.scheduler/kind": "renderer"},
    )


# --- the sweep ----------------------------------------------------------------------------------


def test_expired_lease_has_its_container_removed_by_the_sweep(stack: RunningStack, docker_client: Any) -> None:
    lease = stack.acquire(ttl_seconds=3).json()["lease"]
    assert len(_containers_of(docker_client, lease["lease_id"])) == 1

    wait_for(lambda: not _containers_of(docker_client, lease["lease_id"]), timeout=10, what="container removal")

    assert _status(stack, lease["lease_id"]) == "expired"


def test_expired_lease_reads_back_with_released_at(stack: RunningStack) -> None:
    lease = stack.acquire(ttl_seconds=1).json()["lease"]
    wait_for(lambda: _status(stack, lease["lease_id"]) == "expired", timeout=10, what="expiry")
    ended = stack.request("GET", f"/v1/lease/{lease['lease_id']}").json()["lease"]
    assert ended["released_at"] >= ended["expires_at"]


def test_expired_lease_release_is_not_found(stack: RunningStack) -> None:
    lease = stack.acquire(ttl_seconds=1).json()["lease"]
    wait_for(lambda: _status(stack, lease["lease_id"]) == "expired", timeout=10, what="expiry")
    assert stack.request("DELETE", f"/v1/lease/{lease['lease_id']}").status_code == 404


# --- renew --------------------------------------------------------------------------------------


def test_renew_keeps_the_container_alive_past_the_original_expiry(stack: RunningStack, docker_client: Any) -> None:
    lease = stack.acquire(ttl_seconds=3, owner_id="renewer").json()["lease"]

    renewed = stack.request("POST", f"/v1/lease/{lease['lease_id']}/renew", owner="renewer", json={"ttl_seconds": 60})
    time.sleep(5)

    assert renewed.status_code == 200
    assert renewed.json()["lease"]["ttl_seconds"] == 60
    assert _status(stack, lease["lease_id"]) == "active"
    assert len(_containers_of(docker_client, lease["lease_id"])) == 1


def test_renew_without_body_extends_by_the_lease_own_ttl(stack: RunningStack) -> None:
    lease = stack.acquire(ttl_seconds=100).json()["lease"]
    time.sleep(1.1)
    renewed = stack.request("POST", f"/v1/lease/{lease['lease_id']}/renew").json()["lease"]
    assert renewed["expires_at"] > lease["expires_at"]
    assert renewed["ttl_seconds"] == 100


def test_renew_by_other_owner_is_forbidden(stack: RunningStack) -> None:
    lease = stack.acquire(owner_id="owner-a").json()["lease"]
    response = stack.request("POST", f"/v1/lease/{lease['lease_id']}/renew", owner="owner-b", json={})
    assert response.status_code == 403


def test_renew_of_unknown_lease_is_not_found(stack: RunningStack) -> None:
    response = stack.request("POST", f"/v1/lease/{uuid.uuid4()}/renew", json={})
    assert response.status_code == 404


def test_renew_of_released_lease_is_not_found(stack: RunningStack) -> None:
    lease = stack.acquire().json()["lease"]
    stack.request("DELETE", f"/v1/lease/{lease['lease_id']}")
    assert stack.request("POST", f"/v1/lease/{lease['lease_id']}/renew", json={}).status_code == 404


def test_renew_of_expired_lease_is_not_found(stack: RunningStack) -> None:
    lease = stack.acquire(ttl_seconds=1).json()["lease"]
    time.sleep(2.2)  # past expires_at, which rounds up to the next whole second
    assert stack.request("POST", f"/v1/lease/{lease['lease_id']}/renew", json={}).status_code == 404


@pytest.mark.parametrize("body", [{"ttl_seconds": 0}, {"ttl_seconds": 28801}, {"ttl": 5}, {"ttl_seconds": "60"}])
def test_renew_with_invalid_body_is_rejected(stack: RunningStack, body: dict[str, Any]) -> None:
    lease = stack.acquire().json()["lease"]
    response = stack.request("POST", f"/v1/lease/{lease['lease_id']}/renew", json=body)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"


# --- concurrency --------------------------------------------------------------------------------


def test_twenty_concurrent_releases_give_one_204_and_one_container_removal(
    stack: RunningStack, docker_client: Any
) -> None:
    lease = stack.acquire().json()["lease"]
    since = datetime.now(UTC) - timedelta(seconds=1)

    with ThreadPoolExecutor(max_workers=20) as pool:
        statuses = list(
            pool.map(lambda _: stack.request("DELETE", f"/v1/lease/{lease['lease_id']}").status_code, range(20))
        )

    assert sorted(statuses) == [204] + [404] * 19
    destroys = docker_client.api.events(
        since=since,
        until=datetime.now(UTC) + timedelta(seconds=1),
        filters={"container": lease["provider_token"], "event": "destroy"},
        decode=True,
    )
    assert len(list(destroys)) == 1


# --- the TTL stream handler ---------------------------------------------------------------------


def test_ttl_deletion_of_a_live_lease_removes_its_container(ttl_stack: RunningStack, docker_client: Any) -> None:
    lease = ttl_stack.acquire(ttl_seconds=2).json()["lease"]

    wait_for(lambda: not _containers_of(docker_client, lease["lease_id"]), timeout=15, what="container removal")

    assert _status(ttl_stack, lease["lease_id"]) == "expired"


def test_user_deletion_of_a_live_lease_does_not_release_its_worker(ttl_stack: RunningStack, docker_client: Any) -> None:
    lease = ttl_stack.acquire(ttl_seconds=600).json()["lease"]
    ttl_stack.dynamodb().delete_item(
        TableName=ttl_stack.functions_env()["LEASES_TABLE"], Key={"lease_id": {"S": lease["lease_id"]}}
    )
    time.sleep(3)
    assert len(_containers_of(docker_client, lease["lease_id"])) == 1
    docker_client.api.remove_container(lease["provider_token"], force=True)


# --- the reconciler -----------------------------------------------------------------------------


def test_orphan_container_older_than_grace_is_removed(reconciling_stack: RunningStack, docker_client: Any) -> None:
    orphan = _orphan_container(docker_client)
    wait_for(
        lambda: not docker_client.containers.list(all=True, filters={"id": orphan.id}),
        timeout=15,
        what="orphan removal",
    )


def test_orphan_container_younger_than_grace_is_kept(reconciling_stack: RunningStack, docker_client: Any) -> None:
    orphan = _orphan_container(docker_client)
    time.sleep(2.5)  # at least two reconcile passes, still inside the 4 s grace
    assert docker_client.containers.list(all=True, filters={"id": orphan.id})


def test_leased_container_is_not_an_orphan(reconciling_stack: RunningStack, docker_client: Any) -> None:
    lease = reconciling_stack.acquire(ttl_seconds=600).json()["lease"]
    time.sleep(6)  # past the grace period, several reconcile passes
    assert len(_containers_of(docker_client, lease["lease_id"])) == 1
    assert _status(reconciling_stack, lease["lease_id"]) == "active"


def test_lease_whose_container_vanished_is_marked_failed(reconciling_stack: RunningStack, docker_client: Any) -> None:
    lease = reconciling_stack.acquire(ttl_seconds=600).json()["lease"]
    docker_client.api.remove_container(lease["provider_token"], force=True)

    wait_for(lambda: _status(reconciling_stack, lease["lease_id"]) == "failed", timeout=30, what="ghost lease failed")


def test_crash_between_provision_and_activation_leaves_nothing_behind(
    reconciling_stack: RunningStack, docker_client: Any
) -> None:
    """A pending row plus its container, as an acquire killed right after the create leaves them."""
    from scheduler.lifecycle import LeaseStatus
    from scheduler.models import GpuClass, Lease, WorkerKind

    store = reconciling_stack.lease_store()
    lease_id = str(uuid.uuid4())
    # The container first: until its row exists it is an orphan within its 4 s grace, so the reconciler
    # (every second, 1 s pending deadline) cannot remove it while run() is still reading it back.
    docker_client.containers.run(
        "openalice/renderer:dev",
        detach=True,
        network_mode="none",
        name=f"lease-{lease_id}",
        labels={"openalice.scheduler/managed": "true", LEASE_LABEL: lease_id, "openalice.scheduler/kind": "renderer"},
    )
    now = datetime.now(UTC).replace(microsecond=0)
    store.create_pending(
        Lease(
            lease_id=lease_id,
            provider="local-docker",
            kind=WorkerKind.RENDERER,
            gpu=GpuClass.NONE,
            status=LeaseStatus.PENDING,
            created_at=now,
            expires_at=now + timedelta(hours=1),
            ttl_seconds=3600,
        )
    )

    wait_for(lambda: not _containers_of(docker_client, lease_id), timeout=30, what="crashed acquire cleaned up")
    assert _status(reconciling_stack, lease_id) == "failed"
